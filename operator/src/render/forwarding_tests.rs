//! What backends are told: a proxy's request headers and the proxies in front, from the
//! CRD to the server's config and its validator.

use super::tests::vs;
use super::*;
use serde_json::json;

#[test]
fn request_headers_for_a_backend_reach_the_server_and_are_checked() {
    let spec = |set_name: &str| {
        vs(json!({
            "hosts": ["a.example"], "content": { "configMap": "s" },
            "rules": [
                { "match": { "prefix": "/api/" },
                  "action": { "proxy": { "pool": "api", "requestHeaders": {
                      "set": { set_name: "$remote_addr" }, "add": { "X-Via": "edge" }, "remove": ["Cookie"]
                  } } } }
            ],
            "pools": [{ "name": "api", "protocol": "http", "endpoints": ["api:80"] }]
        }))
    };
    let r = server_config(&spec("X-Client")).unwrap();
    let cfg = skiff_config::parse_yaml(&r.yaml).unwrap();
    let config::Action::Proxy(p) = &cfg.virtual_servers[0].rules[0].action else {
        panic!("a proxy action");
    };
    assert_eq!(
        p.request_headers,
        Some(config::RequestHeaders {
            remove: vec!["Cookie".into()],
            set: [("X-Client".to_owned(), "$remote_addr".to_owned())].into(),
            add: [("X-Via".to_owned(), "edge".to_owned())].into(),
        })
    );
    let e = server_config(&spec("X-Forwarded-For")).unwrap_err();
    assert!(
        e.0.contains("rules[0].action.proxy.request_headers.set.X-Forwarded-For: Skiff appends"),
        "{e}"
    );
}

#[test]
fn trusted_proxies_reach_the_server_and_bad_ones_are_refused() {
    let spec = |proxies: serde_json::Value| {
        vs(json!({
            "hosts": ["a.example"], "content": { "configMap": "s" },
            "trustedProxies": proxies, "useForwardedHeaders": true
        }))
    };
    let r = server_config(&spec(json!(["10.0.0.0/8", "192.0.2.7"]))).unwrap();
    let cfg = skiff_config::parse_yaml(&r.yaml).unwrap();
    assert_eq!(cfg.trusted_proxies, ["10.0.0.0/8", "192.0.2.7"]);
    assert!(cfg.use_forwarded_headers);
    let e = server_config(&spec(json!(["10.0.0.0/33"]))).unwrap_err();
    assert!(
        e.0.contains("trusted_proxies[0]: \"10.0.0.0/33\" is not a CIDR"),
        "{e}"
    );
    // An object from before the CEL rule, or one it let through, is still refused.
    let e = server_config(&spec(json!([]))).unwrap_err();
    assert!(
        e.0.contains("use_forwarded_headers: names no proxy to believe"),
        "{e}"
    );
}
