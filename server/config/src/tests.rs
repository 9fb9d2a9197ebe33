use super::*;

const FULL: &str = include_str!("../fixtures/full.yaml");

pub(crate) fn problems(yaml: &str) -> Vec<String> {
    match parse_yaml(yaml) {
        Err(ConfigError::Invalid(ps)) => ps.iter().map(|p| p.to_string()).collect(),
        Err(ConfigError::Syntax(s)) => vec![format!("SYNTAX {s}")],
        Ok(_) => vec![],
    }
}

pub(crate) fn minimal(extra: &str) -> String {
    format!("virtual_servers:\n  - name: a\n    default: true\n    root: /srv\n{extra}")
}

#[test]
fn the_full_example_parses_with_defaults_filled_in() {
    let cfg = parse_yaml(FULL).unwrap();
    assert_eq!(cfg.virtual_servers.len(), 2);
    assert_eq!(cfg.virtual_servers[0].rules.len(), 10);
    assert_eq!(
        cfg.virtual_servers[1].index,
        vec!["index.html", "index.htm"]
    );
    assert_eq!(
        cfg.limits.header_timeout,
        std::time::Duration::from_secs(10)
    );
    assert!(matches!(
        cfg.virtual_servers[0].rules[4].action,
        Action::Deny { status: 403 }
    ));
    assert_eq!(
        cfg.virtual_servers[0].rules[9].action,
        Action::Static {
            html_extension: false,
            fallback: Some("/app/index.html".into())
        }
    );
    let Action::Split(targets) = &cfg.virtual_servers[0].rules[2].action else {
        panic!("{:?}", cfg.virtual_servers[0].rules[2].action)
    };
    assert_eq!(
        targets
            .iter()
            .map(|t| (t.weight, &t.action))
            .collect::<Vec<_>>(),
        [
            (90, &Action::Proxy(ProxyTarget::new("api"))),
            (10, &Action::Proxy(ProxyTarget::new("api-next")))
        ]
    );
    assert_eq!(
        cfg.virtual_servers[0].rules[1].matches.cookies,
        [CookieMatch {
            name: "canary".into(),
            value: Some("always".into())
        }]
    );
    assert_eq!(
        cfg.virtual_servers[1].rules[0].action,
        Action::Static {
            html_extension: true,
            fallback: None
        }
    );
}

#[test]
fn rendering_and_parsing_round_trips() {
    let cfg = parse_yaml(FULL).unwrap();
    let again = parse_yaml(&to_yaml(&cfg)).unwrap();
    assert_eq!(cfg, again);
}

#[test]
fn syntax_and_type_errors_point_to_line_and_column() {
    let err = parse_yaml(&minimal("    listing: maybe\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("error: line 5 column 14: invalid boolean"),
        "{err}"
    );
    let err = parse_yaml(&minimal("    lisitng: true\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("line 5 column 5: unknown field `lisitng`, expected one of"),
        "{err}"
    );
    let err = parse_yaml("virtual_servers: [\n").unwrap_err().to_string();
    assert!(err.contains("line"), "{err}");
    let err = parse_yaml(&minimal(
        "    rules:\n      - action: { redirct: { to: / } }\n",
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("unknown variant `redirct`, expected one of static, redirect, return, deny, proxy, fastcgi, uwsgi, scgi"), "{err}");
}

#[test]
fn semantic_errors_are_precise_and_located() {
    let yaml = minimal(
        "    rules:\n      - match: { regex: \"^/u/(\\\\d+)$\" }\n        action: { redirect: { to: \"/users/$2\", status: 200 } }\n      - action: { proxy: { pool: api } }\n",
    );
    assert_eq!(
        problems(&yaml),
        vec![
            "line 7 column 35: virtual_servers[0].rules[0].action.redirect.to: $2 refers to a capture group the rule's regex does not have (1 groups)",
            "line 7 column 56: virtual_servers[0].rules[0].action.redirect.status: 200 is not a redirect; expected 301, 302, 303, 307 or 308",
            "line 8 column 34: virtual_servers[0].rules[1].action.proxy.pool: no pool named \"api\" (none are defined)",
        ]
    );
}

#[test]
fn pools_must_exist_and_speak_the_action_protocol() {
    let yaml = minimal("    rules:\n      - action: { fastcgi: { pool: web } }\npools:\n  - { name: web, protocol: http, endpoints: [\"x:80\", \"unix:rel.sock\", \"y:0\"] }\n");
    assert_eq!(
        problems(&yaml),
        vec![
            "line 6 column 36: virtual_servers[0].rules[0].action.fastcgi.pool: pool \"web\" speaks http, but this action needs a fastcgi pool",
            "line 8 column 54: pools[0].endpoints[1]: \"unix:rel.sock\": a unix socket path must be absolute",
            "line 8 column 71: pools[0].endpoints[2]: \"y:0\": expected host:port with a port from 1 to 65535",
        ]
    );
}

#[test]
fn virtual_server_mistakes() {
    let yaml = "virtual_servers:\n  - { name: a, default: true, root: /a, hosts: [x.com] }\n  - { name: a, default: true, root: /b, hosts: [X.com, \"a.*.com\"] }\n  - { name: c, root: \"\" }\n";
    assert_eq!(
        problems(yaml),
        vec![
            "line 3 column 13: virtual_servers[1].name: \"a\" is already the name of virtual_servers[0]",
            "line 3 column 25: virtual_servers[1].default: virtual_servers[0] is already the default",
            "line 3 column 49: virtual_servers[1].hosts[0]: \"X.com\" is also a host of virtual_servers[0]",
            "line 3 column 56: virtual_servers[1].hosts[1]: \"a.*.com\": a wildcard is only allowed as the first label (`*.example.com`)",
            "line 4 column 5: virtual_servers[2].hosts: name at least one host, or make this virtual server the default",
            "line 4 column 22: virtual_servers[2].root: must not be empty",
        ]
    );
}

#[test]
fn modifier_mistakes() {
    let yaml = minimal(
        "    rules:\n      - action: { static: {} }\n        access: { allow: [10.0.0.0/33], deny: [nonsense] }\n        rate_limit: { requests_per_second: 0, burst: 0 }\n        cors: { allow_origins: [\"*\"], allow_credentials: true }\n        headers: { set: { \"Bad Name\": x } }\n",
    );
    assert_eq!(
        problems(&yaml),
        vec![
            "line 7 column 27: virtual_servers[0].rules[0].access.allow[0]: \"10.0.0.0/33\" is not a CIDR such as 10.0.0.0/8 or an IP address",
            "line 7 column 48: virtual_servers[0].rules[0].access.deny[0]: \"nonsense\" is not a CIDR such as 10.0.0.0/8 or an IP address",
            "line 8 column 44: virtual_servers[0].rules[0].rate_limit.requests_per_second: must be a positive number",
            "line 8 column 54: virtual_servers[0].rules[0].rate_limit.burst: must be at least 1",
            "line 9 column 58: virtual_servers[0].rules[0].cors.allow_credentials: browsers refuse credentials with the origin `*`; list the origins",
            "line 10 column 39: virtual_servers[0].rules[0].headers.set.Bad Name: \"Bad Name\" is not a header name",
        ]
    );
}

#[test]
fn a_location_or_cors_header_that_cannot_be_sent_is_refused() {
    let yaml = minimal(
        "    rules:\n      - match: { prefix: /a }\n        action: { redirect: { to: \"/b\\r\\nSet-Cookie: x=1\" } }\n      - action: { static: {} }\n        cors: { allow_origins: [\"*\"], allow_headers: [\"X-Ok\", \"bad name\"], expose_headers: [\"\"] }\n",
    );
    assert_eq!(
        problems(&yaml),
        vec![
            "line 7 column 35: virtual_servers[0].rules[0].action.redirect.to: a Location cannot hold spaces or control characters; percent-encode them",
            "line 9 column 63: virtual_servers[0].rules[1].cors.allow_headers[1]: \"bad name\" is not a header name",
            "line 9 column 93: virtual_servers[0].rules[1].cors.expose_headers[0]: \"\" is not a header name",
        ]
    );
}

#[test]
fn values_past_what_can_be_served_are_refused() {
    let yaml = format!(
        "threads: 100000\nlimits: {{ max_connections: 100000000, header_timeout: 0s, send_timeout: 10ms }}\n{}",
        minimal("    rules:\n      - action: { static: {} }\n        cache: { max_age: 1000000000000 }\n")
    );
    assert_eq!(
        problems(&yaml),
        vec![
            "line 1 column 10: threads: must be at most 1024",
            "line 2 column 28: limits.max_connections: must be at most 10000000",
            "line 2 column 55: limits.header_timeout: must be at least 100ms",
            "line 2 column 73: limits.send_timeout: must be at least 100ms",
            "line 9 column 27: virtual_servers[0].rules[0].cache.max_age: must be at most 315360000 (ten years, nginx's `expires max`)",
        ]
    );
}

#[test]
fn global_mistakes() {
    let yaml = format!(
        "listen: localhost\nthreads: 0\ncache: {{ max_file_size: 100, max_bytes: 10 }}\n{}",
        &minimal("")[0..]
    );
    assert_eq!(
        problems(&yaml),
        vec![
            "line 1 column 9: listen: \"localhost\" is not an address; expected IP:PORT such as 0.0.0.0:8080",
            "line 2 column 10: threads: must be at least 1",
            "line 3 column 25: cache.max_file_size: is larger than cache.max_bytes, so such files could never be cached",
        ]
    );
    assert_eq!(
        problems(&format!("use_forwarded_headers: true\n{}", minimal(""))),
        vec!["line 1 column 24: use_forwarded_headers: names no proxy to believe; list the proxies in front in trusted_proxies"]
    );
    assert_eq!(
        problems("virtual_servers: []\n"),
        vec!["line 1 column 18: virtual_servers: at least one virtual server is needed"]
    );
}

#[test]
fn cidrs_accept_plain_addresses() {
    assert_eq!(parse_cidr("192.0.2.7").unwrap().to_string(), "192.0.2.7/32");
    assert_eq!(parse_cidr("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
    assert_eq!(parse_cidr("::1").unwrap().to_string(), "::1/128");
}

/// The committed schema must match the types. Regenerate with
/// `SKIFF_BLESS=1 cargo test -p skiff-config committed_schema`.
#[test]
fn committed_schema_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/config.schema.json");
    let fresh = json_schema();
    if std::env::var_os("SKIFF_BLESS").is_some() {
        std::fs::write(path, &fresh).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == fresh,
        "server/config/config.schema.json is stale: run SKIFF_BLESS=1 cargo test -p skiff-config committed_schema"
    );
}

#[test]
fn config_hash_is_stable() {
    assert_eq!(config_hash(""), "cbf29ce484222325");
    assert_eq!(config_hash("a"), "af63dc4c8601ec8c");
    assert_ne!(config_hash(FULL), config_hash(&FULL.replace("www", "web")));
}

#[test]
fn config_parser_survives_mutated_yaml() {
    // A fixed-seed xorshift generator: every run the same, any failure reproducible.
    let mut state: u64 = 0xfeed_face_cafe_beef;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let valid = FULL.as_bytes().to_vec();
    assert!(parse_yaml(std::str::from_utf8(&valid).unwrap()).is_ok());
    for _ in 0..500 {
        let mut m = valid.clone();
        for _ in 0..(next() % 3 + 1) {
            let i = next() as usize % m.len();
            const ALPHABET: &[u8] = b" :-[]{}\n\"'*&!x0";
            m[i] = ALPHABET[next() as usize % ALPHABET.len()];
        }
        if let Ok(text) = std::str::from_utf8(&m) {
            let _ = parse_yaml(text);
        }
    }
}

#[test]
fn constructed_models_match_what_the_parser_fills_in() {
    let cfg = parse_yaml(
        "virtual_servers:\n  - {name: v, hosts: [a.example], root: /srv, rules: [{action: {deny: {}}, access: {deny: [10.0.0.0/8]}, cors: {allow_origins: ['*']}}, {action: {return: {status: 200}}}]}\npools:\n  - {name: p, protocol: fastcgi, endpoints: ['127.0.0.1:9000']}\n",
    )
    .unwrap();
    let parsed_vs = VirtualServer {
        rules: vec![],
        ..cfg.virtual_servers[0].clone()
    };
    let built = VirtualServer {
        hosts: vec!["a.example".into()],
        ..VirtualServer::new("v", "/srv")
    };
    assert_eq!(built, parsed_vs);
    assert_eq!(
        Pool::new("p", PoolProtocol::Fastcgi, vec!["127.0.0.1:9000".into()]),
        cfg.pools[0]
    );
    let rules = &cfg.virtual_servers[0].rules;
    assert_eq!(
        rules[0].action,
        Action::Deny {
            status: default_deny_status()
        }
    );
    assert_eq!(
        rules[0].access.as_ref().unwrap().status,
        default_deny_status()
    );
    assert_eq!(
        rules[0].cors.as_ref().unwrap().allow_methods,
        default_cors_methods()
    );
    match &rules[1].action {
        Action::Return { content_type, .. } => assert_eq!(*content_type, default_return_type()),
        other => panic!("{other:?}"),
    }
    assert_eq!(rules[1], Rule::new(rules[1].action.clone()));
}

#[test]
fn the_full_example_orders_its_rules_so_none_is_shadowed() {
    let cfg = parse_yaml(FULL).unwrap();
    let warnings: Vec<String> = yaml_warnings(FULL, &cfg)
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert_eq!(warnings, Vec::<String>::new());
}

#[test]
fn warnings_point_to_the_protected_rule() {
    let text = minimal(
        "    rules:\n      - { match: { extensions: [css] }, action: { static: {} } }\n      - { match: { prefix: /admin/ }, action: { static: {} }, access: { allow: [10.0.0.0/8] } }\n",
    );
    let cfg = parse_yaml(&text).expect("a warning does not refuse the config");
    let warnings: Vec<String> = yaml_warnings(&text, &cfg)
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert_eq!(
        warnings,
        [
            "line 7 column 9: virtual_servers[0].rules[1]: rule 0 matches /admin/x.css before \
          rule 1, which requires an address allow list; move rule 1 above rule 0 or give rule 0 \
          the same modifiers"
        ]
    );
}

#[test]
fn https_settings_need_the_tls_listener_and_a_certificate() {
    let orphan = problems(&minimal(
        "    hsts: {max_age: 1d}\n    https_redirect: true\n    tls: {cert: a.crt, key: a.key}\n",
    ));
    for field in ["tls", "hsts", "https_redirect"] {
        assert!(
            orphan
                .iter()
                .any(|p| p.contains(&format!("virtual_servers[0].{field}"))
                    && p.contains("needs the TLS listener")),
            "{field}: {orphan:?}"
        );
    }
    let bare = problems(&format!("tls: {{listen: 0.0.0.0:8443}}\n{}", minimal("")));
    assert!(
        bare.iter()
            .any(|p| p.contains("the TLS listener has no certificate")),
        "{bare:?}"
    );
    let nothing = problems(&format!("listen: \"\"\n{}", minimal("")));
    assert!(
        nothing.iter().any(|p| p.contains("nothing is served")),
        "{nothing:?}"
    );
    let clash = problems(&format!(
        "listen: 0.0.0.0:8443\ntls: {{listen: 0.0.0.0:8443, certificates: [{{cert: a, key: b}}]}}\n{}",
        minimal("")
    ));
    assert!(
        clash.iter().any(|p| p.contains("same address as listen")),
        "{clash:?}"
    );
    let preload = problems(&format!(
        "tls: {{listen: 0.0.0.0:8443}}\n{}",
        minimal("    tls: {cert: a, key: b}\n    hsts: {max_age: 30d, preload: true}\n")
    ));
    assert!(
        preload
            .iter()
            .any(|p| p.contains("preload needs include_subdomains")),
        "{preload:?}"
    );
    let good = problems(&format!(
        "listen: \"\"\ntls: {{listen: 0.0.0.0:8443}}\n{}",
        minimal("    tls: {cert: a, key: b}\n    hsts: {max_age: 365d, include_subdomains: true, preload: true}\n    https_redirect: true\n")
    ));
    assert!(good.is_empty(), "{good:?}");
}
