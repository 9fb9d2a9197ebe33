use super::*;
use serde_json::{json, Value};

fn vs(spec: Value) -> VirtualServer {
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
