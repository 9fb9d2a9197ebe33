use super::*;
use serde_json::{json, Value};

/// A VirtualServer `shop` in namespace `web` with `spec`.
pub(super) fn vs(spec: Value) -> VirtualServer {
    serde_json::from_value(json!({
        "apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
        "metadata": { "name": "shop", "namespace": "web" },
        "spec": spec,
    }))
    .unwrap()
}

#[test]
fn renders_rules_and_pools_into_a_config_the_server_accepts() {
    let r = server_config(&vs(json!({
        "hosts": ["shop.example.com"],
        "content": { "configMap": "shop-site" },
        "compression": { "encodings": ["br", "gzip"], "minSize": 512 },
        "rules": [
            { "name": "php", "match": { "extensions": ["php"] }, "action": { "fastcgi": { "pool": "php", "splitPathInfo": true } } },
            { "match": { "prefix": "/old/" }, "action": { "redirect": { "to": "/new/", "status": 301 } } },
            { "match": { "prefix": "/assets/" }, "action": { "static": {} }, "cache": { "maxAge": 86400, "visibility": "public", "immutable": true } },
            { "match": { "prefix": "/admin/" }, "action": { "static": {} }, "basicAuth": { "realm": "Admin", "secretName": "admins" },
              "cors": { "allowOrigins": ["https://app.example.com"], "allowHeaders": ["Content-Type"], "maxAge": 600 } }
        ],
        "pools": [
            { "name": "php", "protocol": "fastcgi", "image": "php-fpm:8", "port": 9000, "placement": "pool" },
            { "name": "app", "protocol": "uwsgi", "image": "django", "socket": "app.sock", "placement": "sidecar" }
        ]
    })))
    .unwrap();
    let cfg = skiff_config::parse_yaml(&r.yaml).unwrap();
    assert_eq!(
        cfg.pools[0].endpoints,
        ["shop-php.web.svc.cluster.local:9000"]
    );
    assert_eq!(cfg.pools[1].endpoints, ["unix:/run/skiff/pools/app.sock"]);
    let rules = &cfg.virtual_servers[0].rules;
    assert_eq!(rules.len(), 4);
    assert_eq!(
        rules[3].basic_auth.as_ref().unwrap().htpasswd,
        "/etc/skiff/auth/admins/htpasswd"
    );
    assert!(
        rules[3].basic_auth.as_ref().unwrap().optional,
        "a Secret created after the pods denies until it is mounted, not a refused reload"
    );
    let cors = rules[3].cors.as_ref().unwrap();
    assert_eq!(cors.allow_origins, ["https://app.example.com"]);
    assert_eq!(cors.max_age, Some(600));
    let compression = cfg.virtual_servers[0].compression.as_ref().unwrap();
    assert_eq!(
        compression.encodings,
        [skiff_config::Coding::Brotli, skiff_config::Coding::Gzip]
    );
    assert_eq!(compression.min_size, 512);
    assert_eq!(r.hash, skiff_config::config_hash(&r.yaml));
}

/// A PHP rule that leaves splitPathInfo out gets the server's PHP-style split: php-fpm
/// refuses a SCRIPT_FILENAME that is only the document root (found by the e2e test
/// with php-fpm in the cluster).
#[test]
fn fastcgi_rules_split_the_path_info_unless_told_not_to() {
    let split = |action: Value| {
        let r = server_config(&vs(json!({
            "hosts": ["a.example"], "content": { "configMap": "s" },
            "rules": [{ "match": { "extensions": ["php"] }, "action": { "fastcgi": action } }],
            "pools": [{ "name": "php", "protocol": "fastcgi", "endpoints": ["php:9000"] }]
        })))
        .unwrap();
        let cfg = skiff_config::parse_yaml(&r.yaml).unwrap();
        match &cfg.virtual_servers[0].rules[0].action {
            skiff_config::Action::Fastcgi(t) => t.split_path_info,
            other => panic!("{other:?}"),
        }
    };
    assert!(split(json!({ "pool": "php" })));
    assert!(!split(json!({ "pool": "php", "splitPathInfo": false })));
}

#[test]
fn names_the_children_could_not_take_are_refused_before_anything_is_applied() {
    let named = |name: &str, spec: Value| {
        let mut v = vs(spec);
        v.metadata.name = Some(name.into());
        server_config(&v).err().map(|e| e.0)
    };
    let plain = json!({ "hosts": ["a.example"], "content": { "configMap": "site" } });
    assert!(named("shop", plain.clone()).is_none());
    for bad in ["www.example.com", "1shop", &"a".repeat(56)] {
        let err = named(bad, plain.clone()).expect(bad);
        assert!(err.starts_with(&format!("metadata.name {bad:?}")), "{err}");
    }
    assert!(named(&"a".repeat(55), plain).is_none());
    let pooled = |pool: &str| {
        json!({ "hosts": ["a.example"], "content": { "configMap": "site" },
            "rules": [{ "match": { "prefix": "/" }, "action": { "fastcgi": { "pool": pool } } }],
            "pools": [{ "name": pool, "protocol": "fastcgi", "image": "php-fpm:8", "placement": "pool" }] })
    };
    let err = named("shop", pooled("metrics")).unwrap();
    assert!(
        err.contains("the metrics Service's name (shop-metrics)"),
        "{err}"
    );
    let err = named(&"s".repeat(40), pooled(&"p".repeat(30))).unwrap();
    assert!(
        err.contains("must be a DNS label of at most 63 characters"),
        "{err}"
    );
    assert!(named("shop", pooled("php")).is_none());
}

#[test]
fn an_unknown_pool_is_rejected_with_its_name() {
    let e = server_config(&vs(json!({
        "hosts": ["a.example"], "content": { "configMap": "s" },
        "rules": [{ "name": "api", "match": { "prefix": "/api/" }, "action": { "proxy": { "pool": "missing" } } }]
    })))
    .unwrap_err();
    assert_eq!(e.0, "rule api: pool \"missing\" is not among spec.pools");
}

#[test]
fn the_servers_validator_rejects_what_the_crd_schema_cannot_see() {
    let e = server_config(&vs(json!({
        "hosts": ["a.example"], "content": { "configMap": "s" },
        "rules": [{ "match": { "regex": "([unclosed" }, "action": { "static": {} } }]
    })))
    .unwrap_err();
    assert!(e.0.contains("regex"), "{e}");
}

#[test]
fn error_pages_and_listing_reach_the_server_and_a_bad_code_is_refused() {
    let spec = |code: &str| {
        vs(json!({
            "hosts": ["a.example"], "content": { "configMap": "s" },
            "errorPages": { code: "/oops.html" }, "listing": true
        }))
    };
    let r = server_config(&spec("404")).unwrap();
    let cfg = skiff_config::parse_yaml(&r.yaml).unwrap();
    let site = &cfg.virtual_servers[0];
    assert_eq!(site.error_pages[&404], "/oops.html");
    assert!(site.listing);
    let e = server_config(&spec("299")).unwrap_err();
    assert_eq!(
        e.0,
        "spec.errorPages: \"299\" is not a status code from 400 to 599"
    );
    assert!(server_config(&spec("four")).is_err());
}

#[test]
fn static_misses_reach_the_server_and_a_bad_fallback_is_refused() {
    let spec = |fallback: &str| {
        vs(json!({
            "hosts": ["a.example"], "content": { "configMap": "s" },
            "rules": [{ "match": { "prefix": "/app/" }, "action": { "static": { "fallback": fallback, "htmlExtension": true } } }]
        }))
    };
    let r = server_config(&spec("/app/index.html")).unwrap();
    let cfg = skiff_config::parse_yaml(&r.yaml).unwrap();
    assert_eq!(
        cfg.virtual_servers[0].rules[0].action,
        skiff_config::Action::Static {
            html_extension: true,
            fallback: Some("/app/index.html".into())
        }
    );
    let e = server_config(&spec("/app/../index.html")).unwrap_err();
    assert!(
        e.0.contains(
            "rules[0].action.static.fallback: \"/app/../index.html\" has a \"..\" segment"
        ),
        "{e}"
    );
}

#[test]
fn splits_and_cookie_or_header_matches_reach_the_server() {
    let spec = |weights: (u32, u32), second_pool: &str| {
        vs(json!({
            "hosts": ["a.example"], "content": { "configMap": "s" },
            "rules": [
                { "match": { "prefix": "/api/", "cookies": [{ "name": "canary", "value": "always" }],
                             "headers": [{ "name": "X-Canary" }] },
                  "action": { "proxy": { "pool": "v2" } } },
                { "match": { "prefix": "/api/" },
                  "action": { "split": [
                      { "weight": weights.0, "action": { "proxy": { "pool": "v1", "rewritePath": "/" } } },
                      { "weight": weights.1, "action": { "proxy": { "pool": second_pool } } }
                  ] } }
            ],
            "pools": [
                { "name": "v1", "protocol": "http", "endpoints": ["v1:80"] },
                { "name": "v2", "protocol": "http", "endpoints": ["v2:80"] }
            ]
        }))
    };
    let r = server_config(&spec((90, 10), "v2")).unwrap();
    let cfg = skiff_config::parse_yaml(&r.yaml).unwrap();
    let rules = &cfg.virtual_servers[0].rules;
    assert_eq!(
        rules[0].matches.cookies,
        [config::CookieMatch {
            name: "canary".into(),
            value: Some("always".into())
        }]
    );
    assert_eq!(
        rules[0].matches.headers,
        [config::HeaderMatch {
            name: "X-Canary".into(),
            value: None
        }]
    );
    assert_eq!(
        rules[1].action,
        config::Action::Split(vec![
            config::SplitTarget {
                weight: 90,
                action: config::Action::Proxy(config::ProxyTarget {
                    rewrite_path: Some("/".into()),
                    ..config::ProxyTarget::new("v1")
                })
            },
            config::SplitTarget {
                weight: 10,
                action: config::Action::Proxy(config::ProxyTarget::new("v2"))
            },
        ])
    );
    let e = server_config(&spec((90, 10), "v3")).unwrap_err();
    assert!(e.0.contains("pool \"v3\" is not among spec.pools"), "{e}");
    // Weights the CEL rule refuses at admission are refused here too (older objects).
    let e = server_config(&spec((90, 20), "v2")).unwrap_err();
    assert!(
        e.0.contains("rules[1].action.split: the weights add up to 110; they must add up to 100"),
        "{e}"
    );
}

/// What the CRD leaves out keeps the config crate's defaults (its constructors and
/// `default_*` functions, which its own tests hold to what its parser fills in).
#[test]
fn unexposed_settings_keep_the_config_crates_defaults() {
    let cfg = server_config(&vs(json!({
        "hosts": ["a.example"], "content": { "configMap": "s" },
        "rules": [
            { "match": { "prefix": "/d/" }, "action": { "deny": {} },
              "cors": { "allowOrigins": ["*"] }, "access": { "deny": ["10.0.0.0/8"] } },
            { "match": { "prefix": "/r/" }, "action": { "respond": { "status": 200, "body": "x" } } }
        ],
        "pools": [{ "name": "php", "protocol": "fastcgi", "endpoints": ["127.0.0.1:9000"] }]
    })))
    .unwrap();
    let cfg = skiff_config::parse_yaml(&cfg.yaml).unwrap();
    let rules = &cfg.virtual_servers[0].rules;
    assert_eq!(rules[0].action, config::Action::Deny { status: 403 });
    assert_eq!(rules[0].access.as_ref().unwrap().status, 403);
    assert_eq!(
        rules[0].cors.as_ref().unwrap().allow_methods,
        ["GET", "HEAD", "POST"]
    );
    match &rules[1].action {
        config::Action::Return { content_type, .. } => {
            assert_eq!(content_type, "text/plain; charset=utf-8")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(cfg.virtual_servers[0].index, ["index.html", "index.htm"]);
    let pool = &cfg.pools[0];
    assert_eq!(pool.balance, config::Balance::RoundRobin);
    assert_eq!(
        (pool.max_fails, pool.max_active_requests),
        (
            config::Pool::new("x", config::PoolProtocol::Http, vec![]).max_fails,
            config::Pool::new("x", config::PoolProtocol::Http, vec![]).max_active_requests
        )
    );
}

/// Every kind of action and per-rule setting, written and read back through the server's
/// parser, is the model that was built: nothing is lost on the way to the pods.
#[test]
fn the_written_config_reads_back_as_the_model() {
    let v = vs(json!({
        "hosts": ["a.example", "*.a.example"], "content": { "configMap": "c" },
        "cache": { "maxBytes": 1000000 }, "logFormat": "json",
        "compression": { "types": ["text/*"] },
        "rules": [
            { "name": "h", "match": { "path": "/x", "methods": ["GET"], "regex": "^/x$" },
              "action": { "respond": { "status": 200, "body": "hi: $host" } },
              "headers": { "set": { "X-A": "1" }, "add": { "X-B": "2" }, "remove": ["Server"] },
              "cors": { "allowOrigins": ["*"], "exposeHeaders": ["X-A"] },
              "access": { "deny": ["10.0.0.0/8"] }, "bandwidth": { "total": 100000 } },
            { "match": { "prefix": "/d/" }, "action": { "deny": {} }, "cache": { "maxAge": 5 } },
            { "match": { "prefix": "/d2/" }, "action": { "deny": { "status": 404 } },
              "rateLimit": { "requestsPerSecond": 1.5, "burst": 3 } },
            { "match": { "prefix": "/api/" }, "action": { "proxy": { "pool": "api", "host": "api.internal" } } },
            { "match": { "prefix": "/s/" }, "action": { "scgi": { "pool": "sc", "params": { "A": "b" }, "splitPathInfo": false } },
              "basicAuth": { "realm": "R", "secretName": "s1" } },
            { "match": { "prefix": "/u/" }, "action": { "fastcgi": { "pool": "php", "index": "index.php" } } },
            { "match": { "prefix": "/r/" }, "action": { "redirect": { "to": "https://$host$request_uri" } } }
        ],
        "pools": [
            { "name": "api", "protocol": "http", "endpoints": ["api:80"] },
            { "name": "sc", "protocol": "scgi", "image": "scgi:1", "placement": "sidecar", "port": 4000 },
            { "name": "php", "protocol": "fastcgi", "image": "php:8" }
        ]
    }));
    let r = server_config(&v).unwrap();
    let model = config_model(&v).unwrap();
    assert_eq!(config::parse_yaml(&r.yaml).unwrap(), model);
    let rules = &model.virtual_servers[0].rules;
    assert_eq!(rules[1].action, config::Action::Deny { status: 403 });
    assert_eq!(
        rules[0].cors.as_ref().unwrap().allow_methods,
        ["GET", "HEAD", "POST"]
    );
    assert_eq!(model.pools[1].endpoints, ["127.0.0.1:4000"]);
    assert_eq!(
        model.pools[2].endpoints,
        ["shop-php.web.svc.cluster.local:9000"]
    );
    assert_eq!(model.access_log.format, config::AccessLogFormat::Json);
    assert_eq!(model.cache.max_bytes, 1000000);
    assert_eq!(
        model.cache.max_file_size,
        config::CacheConfig::default().max_file_size
    );
}

#[test]
fn rules_shadowing_protected_ones_are_warned_about_by_their_spec_index() {
    let spec = |rules: Value| {
        json!({
            "hosts": ["shop.example"], "content": { "configMap": "s" },
            "rules": rules,
            "pools": [{ "name": "php", "protocol": "fastcgi", "endpoints": ["php:9000"] }]
        })
    };
    let php = json!({ "name": "php", "match": { "extensions": ["php"] }, "action": { "fastcgi": { "pool": "php" } } });
    let admin = json!({ "name": "admin", "match": { "prefix": "/admin/" }, "action": { "fastcgi": { "pool": "php" } },
                        "basicAuth": { "realm": "Admin", "secretName": "admins" }, "access": { "allow": ["10.0.0.0/8"] } });
    let shadowed = server_config(&vs(spec(json!([php, admin])))).unwrap();
    assert_eq!(
        shadowed.warnings,
        [
            "spec.rules[1]: rule \"php\" (index 0) matches /admin/x.php before rule \"admin\" \
          (index 1), which requires basic auth and an address allow list; move \"admin\" above \
          \"php\" or give \"php\" the same modifiers"
        ]
    );
    let ordered = server_config(&vs(spec(json!([admin, php])))).unwrap();
    assert_eq!(ordered.warnings, Vec::<String>::new());
}

/// `spec.tls` becomes the TLS listener on 8443 with the Service's port as the public one,
/// and the virtual server's certificate files under the Secret's directory mount, HSTS and
/// the redirect; a rule may opt out of the redirect.
#[test]
fn tls_renders_the_listener_the_certificate_files_hsts_and_the_redirect() {
    let v = vs(json!({
        "hosts": ["shop.example.com"], "content": { "configMap": "s" },
        "tls": { "issuerRef": { "name": "le", "kind": "ClusterIssuer" }, "redirect": true,
                 "hsts": { "maxAge": "180d", "includeSubdomains": true } },
        "rules": [{ "name": "acme", "match": { "prefix": "/.well-known/" }, "action": { "static": {} },
                    "httpsRedirect": false }]
    }));
    let r = server_config(&v).unwrap();
    let model = config_model(&v).unwrap();
    assert_eq!(config::parse_yaml(&r.yaml).unwrap(), model, "nothing lost");
    let listener = model.tls.as_ref().unwrap();
    assert_eq!(listener.listen, "0.0.0.0:8443");
    assert_eq!(
        listener.public_port,
        Some(443),
        "the Service's default port"
    );
    assert!(
        listener.certificates.is_empty(),
        "certificates are per virtual server"
    );
    assert_eq!(
        listener.handshake_timeout,
        config::TlsConfig::new("x").handshake_timeout
    );
    assert_eq!(
        model.listen, "0.0.0.0:8080",
        "plain HTTP stays on, to redirect"
    );
    let shop = &model.virtual_servers[0];
    assert_eq!(
        shop.tls,
        Some(config::CertificateFiles {
            cert: "/etc/skiff/tls/shop-tls/tls.crt".into(),
            key: "/etc/skiff/tls/shop-tls/tls.key".into(),
            ocsp: None,
            optional: true,
        })
    );
    assert_eq!(
        shop.hsts,
        Some(config::Hsts {
            max_age: std::time::Duration::from_secs(180 * 24 * 3600),
            include_subdomains: true,
            preload: false,
        })
    );
    assert!(shop.https_redirect);
    assert_eq!(shop.rules[0].https_redirect, Some(false));
    assert!(shop.default);

    let with_port = vs(json!({
        "hosts": ["a.example"], "content": { "configMap": "s" },
        "tls": { "secretName": "a-cert", "port": 9443 }
    }));
    let model = config_model(&with_port).unwrap();
    assert_eq!(model.tls.unwrap().public_port, Some(9443));
    let a = &model.virtual_servers[0];
    assert_eq!(a.tls.as_ref().unwrap().key, "/etc/skiff/tls/a-cert/tls.key");
    assert!(!a.https_redirect);
    assert_eq!(a.hsts, None);
}

#[test]
fn without_tls_there_is_no_listener_and_a_rules_redirect_is_the_servers_to_refuse() {
    let model = config_model(&vs(
        json!({ "hosts": ["a.example"], "content": { "configMap": "s" } }),
    ))
    .unwrap();
    assert_eq!(model.tls, None);
    assert_eq!(model.virtual_servers[0].tls, None);
    // The CRD's CEL rule refuses this; if it got past, the server's validator does.
    let e = server_config(&vs(json!({
        "hosts": ["a.example"], "content": { "configMap": "s" },
        "rules": [{ "match": { "prefix": "/" }, "action": { "static": {} }, "httpsRedirect": true }]
    })))
    .unwrap_err();
    assert!(e.0.contains("https_redirect"), "{e}");
}

/// Per-host certificates are virtual servers of their own (a virtual server's certificate
/// is served for exactly its hosts): same root and rules, their hosts taken from the main
/// one, which stays the default. Warnings are the main one's only.
#[test]
fn per_host_certificates_become_virtual_servers_with_the_same_rules() {
    let v = vs(json!({
        "hosts": ["shop.example", "www.shop.example", "shop.example.org"],
        "content": { "configMap": "s" },
        "tls": { "secretName": "shop-cert", "redirect": true, "hsts": { "maxAge": "1y" },
                 "certificates": [{ "hosts": ["shop.example.org"], "secretName": "org-cert" }] },
        "rules": [
            { "name": "assets", "match": { "extensions": ["css"] }, "action": { "static": {} } },
            { "name": "internal", "match": { "prefix": "/internal/" }, "action": { "static": {} },
              "access": { "allow": ["10.0.0.0/8"] } }
        ]
    }));
    let r = server_config(&v).unwrap();
    let model = config_model(&v).unwrap();
    assert_eq!(config::parse_yaml(&r.yaml).unwrap(), model);
    let [main, org] = &model.virtual_servers[..] else {
        panic!("{:?}", model.virtual_servers)
    };
    assert_eq!(
        (main.name.as_str(), org.name.as_str()),
        ("shop", "shop-tls-1")
    );
    assert_eq!(main.hosts, ["shop.example", "www.shop.example"]);
    assert_eq!(org.hosts, ["shop.example.org"]);
    assert!(main.default && !org.default);
    assert_eq!(
        org.tls.as_ref().unwrap().cert,
        "/etc/skiff/tls/org-cert/tls.crt"
    );
    assert_eq!(
        main.tls.as_ref().unwrap().cert,
        "/etc/skiff/tls/shop-cert/tls.crt"
    );
    assert_eq!(org.rules, main.rules);
    assert_eq!(org.root, main.root);
    assert_eq!(org.hsts, main.hsts);
    assert!(org.https_redirect);
    assert_eq!(r.warnings.len(), 1, "once, by spec index: {:?}", r.warnings);
    assert!(r.warnings[0].starts_with("spec.rules[1]: "));
}

#[test]
fn tls_mistakes_are_refused_with_the_field_that_is_wrong() {
    let refused = |tls: Value| {
        server_config(&vs(json!({
            "hosts": ["a.example", "b.example", "c.example"], "content": { "configMap": "s" },
            "tls": tls
        })))
        .unwrap_err()
        .0
    };
    assert_eq!(
        refused(json!({ "secretName": "main", "certificates": [
            { "hosts": ["b.example"], "secretName": "b" },
            { "hosts": ["c.example", "b.example"], "secretName": "c" }
        ] })),
        "spec.tls.certificates[1]: host b.example is also in spec.tls.certificates[0]; a host has one certificate"
    );
    assert_eq!(
        refused(json!({ "secretName": "main", "certificates": [
            { "hosts": ["z.example"], "secretName": "z" }
        ] })),
        "spec.tls.certificates[0]: host z.example is not one of spec.hosts"
    );
    assert!(refused(json!({ "secretName": "main", "certificates": [
        { "hosts": ["a.example", "b.example", "c.example"], "secretName": "all" }
    ] }))
    .starts_with("spec.tls.certificates take every host"));
    assert_eq!(
        refused(json!({ "issuerRef": { "name": "le" }, "certificates": [
            { "hosts": ["b.example"], "secretName": "shop-tls" }
        ] })),
        "spec.tls.certificates[0]: Secret shop-tls is also spec.tls's; each certificate needs its own Secret"
    );
    assert_eq!(
        refused(json!({ "issuerRef": { "name": "le" }, "certificates": [
            { "hosts": ["b.example"], "secretName": "shop", "issuerRef": { "name": "le" } }
        ] })),
        "spec.tls.certificates[0]: its Certificate would be named shop, like spec.tls's; choose another secretName"
    );
    assert!(
        refused(json!({ "secretName": "m", "hsts": { "maxAge": "soon" } }))
            .starts_with("spec.tls.hsts.maxAge: \"soon\" is not a duration")
    );
    assert_eq!(
        refused(
            json!({ "secretName": "m", "hsts": { "maxAge": "30d", "preload": true, "includeSubdomains": true } })
        ),
        "spec.tls.hsts.preload needs includeSubdomains and a maxAge of at least 365d"
    );
    // A user's Secret may be named like the VirtualServer: no Certificate is made for it.
    server_config(&vs(json!({
        "hosts": ["a.example", "b.example"], "content": { "configMap": "s" },
        "tls": { "issuerRef": { "name": "le" },
                 "certificates": [{ "hosts": ["b.example"], "secretName": "shop" }] }
    })))
    .unwrap();
}

#[test]
fn the_virtual_servers_of_per_host_certificates_have_names_the_server_accepts() {
    assert_eq!(vhost_name("shop", 0), "shop");
    assert_eq!(vhost_name("shop", 3), "shop-tls-3");
    let long = "a".repeat(63);
    assert_eq!(vhost_name(&long, 0), long);
    let named = vhost_name(&long, 2);
    assert_eq!(named.len(), 63);
    assert!(named.ends_with("a-tls-2"));
}

#[test]
fn a_pools_workers_reach_the_server_config_and_busy_targets_need_them() {
    let spec = |autoscaling: Value, workers: Value| {
        json!({
            "hosts": ["a.example"], "content": { "configMap": "s" },
            "rules": [{ "match": { "prefix": "/" }, "action": { "fastcgi": { "pool": "php" } } }],
            "pools": [{ "name": "php", "protocol": "fastcgi", "image": "php-fpm:8",
                "workers": workers, "autoscaling": autoscaling }]
        })
    };
    let bounds = json!({ "minReplicas": 1, "maxReplicas": 3, "targetBusyRatio": 0.6 });
    let r = server_config(&vs(spec(bounds.clone(), json!(2)))).unwrap();
    let config = skiff_config::parse_yaml(&r.yaml).unwrap();
    assert_eq!(config.pools[0].workers, Some(2));
    let e = server_config(&vs(spec(bounds, Value::Null))).unwrap_err();
    assert_eq!(
        e.0,
        "pool php: autoscaling.targetBusyRatio needs the pool's workers (spec.pools[].workers)"
    );
    let e = server_config(&vs(spec(
        json!({ "minReplicas": 1, "maxReplicas": 3, "targetRequestsPerSecond": 100 }),
        json!(2),
    )))
    .unwrap_err();
    assert!(e.0.contains("applies to the edge farm"), "{}", e.0);
}
