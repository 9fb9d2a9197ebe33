//! A VirtualServer's spec rendered into the skiff server config the edge pods load, and
//! validated with the server's own config crate before anything is applied: an invalid
//! config is never rolled out.

use crate::crd::{Placement, Pool, PoolProtocol, Rule, RuleAction, VirtualServer};
use kube::ResourceExt;
use serde_json::{json, Map, Value};

/// Where the edge pods find things; the Deployment mounts them at these paths.
pub const SITE_ROOT: &str = "/srv/site";
pub const CONFIG_DIR: &str = "/etc/skiff";
pub const CONFIG_FILE: &str = "skiff.yaml";
pub const AUTH_DIR: &str = "/etc/skiff/auth";
pub const SOCKET_DIR: &str = "/run/skiff/pools";
pub const HTTP_PORT: u16 = 8080;
pub const ADMIN_PORT: u16 = 9145;

/// The rendered config and its hash (the value pods report and status shows).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub yaml: String,
    pub hash: String,
}

/// Why a spec cannot become a config: the validator's message, for `Accepted=False`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

pub fn server_config(vs: &VirtualServer) -> Result<Rendered, Invalid> {
    let spec = &vs.spec;
    let ns = vs.namespace().unwrap_or_else(|| "default".into());
    let name = vs.name_any();
    for rule in &spec.rules {
        if let Some(pool) = pool_of(&rule.action) {
            if !spec.pools.iter().any(|p| p.name == pool) {
                return Err(Invalid(format!(
                    "rule {}: pool {pool:?} is not among spec.pools",
                    rule.name.as_deref().unwrap_or("(unnamed)")
                )));
            }
        }
    }
    let mut config = json!({
        "listen": format!("0.0.0.0:{HTTP_PORT}"),
        "admin_listen": format!("0.0.0.0:{ADMIN_PORT}"),
        "access_log": { "format": match spec.log_format {
            Some(crate::crd::LogFormat::Json) => "json",
            Some(crate::crd::LogFormat::Off) => "off",
            _ => "combined",
        }},
        "virtual_servers": [{
            "name": name,
            "hosts": spec.hosts,
            "default": true,
            "root": SITE_ROOT,
            "rules": spec.rules.iter().map(rule).collect::<Vec<_>>(),
        }],
        "pools": spec.pools.iter().map(|p| pool(p, &name, &ns)).collect::<Vec<_>>(),
    });
    if let Some(c) = &spec.compression {
        let mut m = Map::new();
        if !c.encodings.is_empty() {
            m.insert(
                "encodings".into(),
                serde_json::to_value(&c.encodings).unwrap(),
            );
        }
        if let Some(n) = c.min_size {
            m.insert("min_size".into(), n.into());
        }
        if !c.types.is_empty() {
            m.insert("types".into(), json!(c.types));
        }
        config["virtual_servers"][0]["compression"] = Value::Object(m);
    }
    if let Some(cache) = &spec.cache {
        let mut c = Map::new();
        if let Some(b) = cache.max_bytes {
            c.insert("max_bytes".into(), b.into());
        }
        if let Some(b) = cache.max_file_size {
            c.insert("max_file_size".into(), b.into());
        }
        config["cache"] = Value::Object(c);
    }
    // JSON is YAML; the server's parser reads it with its own error messages.
    let yaml = serde_json::to_string_pretty(&config).expect("JSON serializes");
    skiff_config::parse_yaml(&yaml).map_err(|e| Invalid(e.to_string()))?;
    let hash = skiff_config::config_hash(&yaml);
    Ok(Rendered { yaml, hash })
}

fn pool_of(action: &RuleAction) -> Option<&str> {
    action
        .proxy
        .as_ref()
        .map(|p| p.pool.as_str())
        .or(action.fastcgi.as_ref().map(|c| c.pool.as_str()))
        .or(action.uwsgi.as_ref().map(|c| c.pool.as_str()))
        .or(action.scgi.as_ref().map(|c| c.pool.as_str()))
}

fn drop_empty(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.retain(|_, x| !(x.is_null() || x.as_array().is_some_and(Vec::is_empty)));
    }
    v
}

fn rule(r: &Rule) -> Value {
    let m = &r.matches;
    let a = &r.action;
    let action = if a.static_files.is_some() {
        json!({ "static": {} })
    } else if let Some(x) = &a.redirect {
        json!({ "redirect": { "to": x.to, "status": x.status } })
    } else if let Some(x) = &a.respond {
        json!({ "return": { "status": x.status, "body": x.body } })
    } else if let Some(x) = &a.deny {
        json!({ "deny": drop_empty(json!({ "status": x.status })) })
    } else if let Some(x) = &a.proxy {
        json!({ "proxy": drop_empty(json!({ "pool": x.pool, "host": x.host })) })
    } else {
        let (kind, x) = match (&a.fastcgi, &a.uwsgi, &a.scgi) {
            (Some(x), _, _) => ("fastcgi", x),
            (_, Some(x), _) => ("uwsgi", x),
            (_, _, Some(x)) => ("scgi", x),
            // The CRD's CEL rule admits exactly one action; an object that got past it
            // anyway is answered with a clear 500 rather than a panic.
            _ => {
                return json!({ "match": {}, "action": { "return": { "status": 500, "body": "rule without action\n" } } })
            }
        };
        json!({ kind: drop_empty(json!({
            "pool": x.pool, "document_root": x.document_root, "index": x.index,
            "split_path_info": x.split_path_info, "params": x.params,
        })) })
    };
    let mut out = json!({
        "match": drop_empty(json!({
            "prefix": m.prefix, "path": m.path, "regex": m.regex,
            "extensions": m.extensions, "methods": m.methods,
        })),
        "action": action,
    });
    let o = out.as_object_mut().unwrap();
    if let Some(n) = &r.name {
        o.insert("name".into(), n.clone().into());
    }
    if let Some(h) = &r.headers {
        o.insert(
            "headers".into(),
            json!({ "set": h.set, "add": h.add, "remove": h.remove }),
        );
    }
    if let Some(c) = &r.cache {
        let vis = c.visibility.map(|v| serde_json::to_value(v).unwrap());
        o.insert(
            "cache".into(),
            drop_empty(
                json!({ "max_age": c.max_age, "visibility": vis, "immutable": c.immutable }),
            ),
        );
    }
    if let Some(c) = &r.cors {
        let mut cors = json!({
            "allow_origins": c.allow_origins, "allow_headers": c.allow_headers,
            "expose_headers": c.expose_headers, "allow_credentials": c.allow_credentials,
        });
        if !c.allow_methods.is_empty() {
            cors["allow_methods"] = json!(c.allow_methods);
        }
        if let Some(age) = c.max_age {
            cors["max_age"] = age.into();
        }
        o.insert("cors".into(), cors);
    }
    if let Some(b) = &r.basic_auth {
        let file = format!("{AUTH_DIR}/{}/htpasswd", b.secret_name);
        o.insert(
            "basic_auth".into(),
            json!({ "realm": b.realm, "htpasswd": file }),
        );
    }
    if let Some(x) = &r.access {
        o.insert("access".into(), json!({ "allow": x.allow, "deny": x.deny }));
    }
    if let Some(x) = &r.rate_limit {
        o.insert(
            "rate_limit".into(),
            json!({ "requests_per_second": x.requests_per_second, "burst": x.burst }),
        );
    }
    if let Some(x) = &r.bandwidth {
        o.insert(
            "bandwidth".into(),
            drop_empty(json!({ "per_connection": x.per_connection, "total": x.total })),
        );
    }
    out
}

/// The name of the Deployment and headless Service of a `pool` placement.
pub fn pool_workload_name(vs_name: &str, pool: &str) -> String {
    format!("{vs_name}-{pool}")
}

fn pool(p: &Pool, vs_name: &str, ns: &str) -> Value {
    let protocol = match p.protocol {
        PoolProtocol::Fastcgi => "fastcgi",
        PoolProtocol::Uwsgi => "uwsgi",
        PoolProtocol::Scgi => "scgi",
        PoolProtocol::Http => "http",
    };
    let endpoints: Vec<String> = if p.image.is_none() {
        p.endpoints.clone()
    } else {
        let port = p.port.unwrap_or(9000);
        match (p.placement, &p.socket) {
            (Placement::Sidecar, Some(socket)) => vec![format!("unix:{SOCKET_DIR}/{socket}")],
            (Placement::Sidecar, None) => vec![format!("127.0.0.1:{port}")],
            // The headless Service's name: re-resolved every few seconds, so pods the
            // pool's HPA adds get traffic without a config change.
            (Placement::Pool, _) => {
                vec![format!(
                    "{}.{ns}.svc.cluster.local:{port}",
                    pool_workload_name(vs_name, &p.name)
                )]
            }
        }
    };
    json!({ "name": p.name, "protocol": protocol, "endpoints": endpoints })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
