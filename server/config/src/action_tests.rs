//! The validator's messages for what actions and rule headers may hold: fallbacks,
//! framing fields, splits, rewrites, cookie conditions and request headers for backends.

use crate::tests::{minimal, problems};

/// `found` holds exactly these messages, each at `virtual_servers[0].` and in any order.
fn assert_messages(found: &[String], expected: &[&str]) {
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for want in expected {
        let want = format!("virtual_servers[0].{want}");
        assert!(
            found.iter().any(|got| got.ends_with(&want)),
            "{want} not in {found:#?}"
        );
    }
}

/// The problems of a minimal config with `rules` (rule lines) and an HTTP pool `a`.
fn problems_beside_pool_a(rules: &str) -> Vec<String> {
    let pools = "pools:\n  - { name: a, protocol: http, endpoints: [\"a:80\"] }\n";
    problems(&format!(
        "{}{pools}",
        minimal(&format!("    rules:\n{rules}"))
    ))
}

#[test]
fn a_fallback_must_name_a_file_under_the_root_as_it_is_on_disk() {
    let rule = |f: &str| format!("      - action: {{ static: {{ fallback: \"{f}\" }} }}\n");
    let good = [
        "/index.html",
        "/",
        "/app/",
        "/.well-known/shell.html",
        "/a b/ü.html",
    ];
    for f in good {
        assert_eq!(
            problems(&minimal(&format!("    rules:\n{}", rule(f)))),
            Vec::<String>::new(),
            "{f}"
        );
    }
    let bad: String = [
        "index.html",
        "/index.html?v=1",
        "/%69ndex.html",
        "/app/../index.html",
        "/./index.html",
        "/.git/config",
        "/a\\\\b",
        "/..;x/index.html",
    ]
    .iter()
    .map(|f| rule(f))
    .collect();
    let found = problems(&minimal(&format!("    rules:\n{bad}")));
    let expected = [
        "\"index.html\" must be a path starting with '/'",
        "\"/index.html?v=1\" holds '?'; give the file's path under the root as it is on disk, without a query or escapes",
        "\"/%69ndex.html\" holds '%'",
        "\"/app/../index.html\" has a \"..\" segment; give the path from the root",
        "\"/./index.html\" has a \".\" segment",
        "\"/.git/config\" names a hidden file or folder (\".git\"), which is never served as a fallback",
        "\"/a\\\\b\" holds '\\\\', which no request path can name",
        "\"/..;x/index.html\" has a dot segment with parameters (\"..;x\"), which no request path can name",
    ];
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for (i, (got, want)) in found.iter().zip(expected).enumerate() {
        assert!(
            got.contains(&format!(
                "virtual_servers[0].rules[{i}].action.static.fallback: {want}"
            )),
            "{got}"
        );
    }
}

#[test]
fn a_rule_cannot_change_the_fields_that_frame_a_response() {
    let yaml = minimal(
        "    rules:\n      - action: { static: {} }\n        headers: { set: { Content-Length: \"0\" }, add: { transfer-encoding: chunked }, remove: [Connection] }\n",
    );
    let found = problems(&yaml);
    for (at, name) in [
        ("set.Content-Length", "Content-Length"),
        ("add.transfer-encoding", "transfer-encoding"),
        ("remove[0]", "Connection"),
    ] {
        let want = format!("virtual_servers[0].rules[0].headers.{at}: {name:?} frames the response or the connection, which the server manages itself; a rule cannot change it");
        assert!(
            found.iter().any(|f| f.ends_with(&want)),
            "{want} not in {found:#?}"
        );
    }
    assert_eq!(found.len(), 3, "{found:#?}");
}

#[test]
fn a_split_needs_two_targets_weights_adding_up_to_100_and_no_split_inside() {
    let pools = "pools:\n  - { name: a, protocol: http, endpoints: [\"a:80\"] }\n  - { name: b, protocol: http, endpoints: [\"b:80\"] }\n";
    let rules = |actions: &[&str]| {
        let rules: String = actions
            .iter()
            .map(|a| format!("      - action: {{ split: [{a}] }}\n"))
            .collect();
        format!("{}{pools}", minimal(&format!("    rules:\n{rules}")))
    };
    let a = "{ proxy: { pool: a } }";
    let b = "{ proxy: { pool: b } }";
    assert_eq!(
        problems(&rules(&[
            &format!("{{ weight: 95, action: {a} }}, {{ weight: 5, action: {b} }}"),
            &format!("{{ weight: 0, action: {a} }}, {{ weight: 100, action: {{ static: {{}} }} }}"),
        ])),
        Vec::<String>::new()
    );
    let found = problems(&rules(&[
        &format!("{{ weight: 100, action: {a} }}"),
        &format!("{{ weight: 60, action: {a} }}, {{ weight: 30, action: {b} }}"),
        &format!("{{ weight: 150, action: {a} }}, {{ weight: 0, action: {b} }}"),
        &format!("{{ weight: 50, action: {a} }}, {{ weight: 50, action: {{ split: [{{ weight: 100, action: {b} }}] }} }}"),
        "{ weight: 50, action: { proxy: { pool: nope } } }, { weight: 50, action: { fastcgi: { pool: b } } }",
        "{ weight: 50, action: { static: { fallback: app.html } } }, { weight: 50, action: { deny: { status: 200 } } }",
    ]));
    let expected = [
        "rules[0].action.split: has 1 target(s); a split needs at least two (use the action itself for one)",
        "rules[1].action.split: the weights add up to 90; they must add up to 100",
        "rules[2].action.split[0].weight: 150 is a percentage; expected 0 to 100",
        "rules[2].action.split: the weights add up to 150; they must add up to 100",
        "rules[3].action.split[1].action.split: a split cannot hold another split; give its targets their share of this one",
        "rules[4].action.split[0].action.proxy.pool: no pool named \"nope\" (defined: a, b)",
        "rules[4].action.split[1].action.fastcgi.pool: pool \"b\" speaks http, but this action needs a fastcgi pool",
        "rules[5].action.split[0].action.static.fallback: \"app.html\" must be a path starting with '/'",
        "rules[5].action.split[1].action.deny.status: 200 is out of range; expected 400 to 599",
    ];
    assert_messages(&found, &expected);
}

#[test]
fn a_rewrite_replaces_a_prefix_or_path_with_a_plain_path() {
    let rule = |m: &str, to: &str| {
        format!("      - match: {{ {m} }}\n        action: {{ proxy: {{ pool: a, rewrite_path: \"{to}\" }} }}\n")
    };
    let good: String = [
        ("prefix: /api/", "/"),
        ("path: /old", "/new"),
        ("prefix: /v1/, methods: [GET]", "/v2/é x/"),
    ]
    .iter()
    .map(|(m, to)| rule(m, to))
    .collect();
    assert_eq!(problems_beside_pool_a(&good), Vec::<String>::new());
    let bad: String = [
        ("extensions: [php]", "/"),
        ("prefix: /api/", "api"),
        ("prefix: /api/", "/x?y=1"),
        ("prefix: /api/", "/a%2Fb"),
        ("prefix: /api/", "/a/../b"),
        ("prefix: /api/", "//evil/"),
        ("prefix: /api/", "/a/..;x/"),
        ("prefix: /api/", "/a#b"),
    ]
    .iter()
    .map(|(m, to)| rule(m, to))
    .collect();
    let found = problems_beside_pool_a(&bad);
    let expected = [
        "rules[0].action.proxy.rewrite_path: \"/\" replaces what match.prefix or match.path matched; give the rule one of them",
        "rules[1].action.proxy.rewrite_path: \"api\" must be a path starting with '/'",
        "rules[2].action.proxy.rewrite_path: \"/x?y=1\" holds '?', a query",
        "rules[3].action.proxy.rewrite_path: \"/a%2Fb\" holds '%', a percent escape (write the text: it is encoded for the backend)",
        "rules[4].action.proxy.rewrite_path: \"/a/../b\" has a dot segment (\"..\")",
        "rules[5].action.proxy.rewrite_path: \"//evil/\" has an empty segment; a backend may read `//name` as a host",
        "rules[6].action.proxy.rewrite_path: \"/a/..;x/\" has a dot segment (\"..;x\")",
        "rules[7].action.proxy.rewrite_path: \"/a#b\" holds '#', a fragment",
    ];
    assert_messages(&found, &expected);
}

#[test]
fn a_cookie_condition_names_a_cookie_and_a_value_one_can_send() {
    let rule = |c: &str| {
        format!("      - match: {{ cookies: [{c}] }}\n        action: {{ static: {{}} }}\n")
    };
    let good: String = [
        "{ name: canary }",
        "{ name: canary, value: always }",
        "{ name: v, value: '\"q\"' }",
    ]
    .iter()
    .map(|c| rule(c))
    .collect();
    assert_eq!(
        problems(&minimal(&format!("    rules:\n{good}"))),
        Vec::<String>::new()
    );
    let bad: String = [
        "{ name: \"a b\" }",
        "{ name: c, value: \"x;y\" }",
        "{ name: c, value: \"a b\" }",
    ]
    .iter()
    .map(|c| rule(c))
    .collect();
    let found = problems(&minimal(&format!("    rules:\n{bad}")));
    let expected = [
        "rules[0].match.cookies[0].name: \"a b\" is not a cookie name",
        "rules[1].match.cookies[0].value: \"x;y\" holds ';', which a cookie value cannot",
        "rules[2].match.cookies[0].value: \"a b\" holds ' ', which a cookie value cannot",
    ];
    assert_messages(&found, &expected);
}

#[test]
fn what_basic_auth_protects_is_never_cached_for_everyone() {
    let rule = |visibility: &str| {
        minimal(&format!(
            "    rules:\n      - action: {{ static: {{}} }}\n        basic_auth: {{ htpasswd: /h }}\n        cache: {{ max_age: 60, visibility: {visibility} }}\n"
        ))
    };
    assert_eq!(problems(&rule("private")), Vec::<String>::new());
    let found = problems(&rule("public"));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].ends_with("virtual_servers[0].rules[0].cache.visibility: `public` would let a shared cache (a CDN, a proxy) serve what basic_auth protects to anyone; use `private` or leave it out"),
        "{found:#?}"
    );
}

#[test]
fn request_headers_for_a_backend_are_checked_name_by_name() {
    let rule = |m: &str, headers: &str| {
        format!("      - match: {{ {m} }}\n        action: {{ proxy: {{ pool: a, request_headers: {headers} }} }}\n")
    };
    let good: String = [
        (
            "regex: \"^/u/([0-9]+)\"",
            "{ set: { X-User: \"$1\", X-Real-IP: \"$remote_addr\", X-Forwarded-Proto: https }, add: { X-Via: \"edge $$1\" } }",
        ),
        ("prefix: /", "{ remove: [Cookie, Authorization, X-Forwarded-For] }"),
    ]
    .iter()
    .map(|(m, h)| rule(m, h))
    .collect();
    assert_eq!(problems_beside_pool_a(&good), Vec::<String>::new());
    let bad: String = [
        ("prefix: /", "{ remove: [Host, Connection, \"a b\"] }"),
        ("prefix: /", "{ set: { Host: x, X-Forwarded-For: \"$remote_addr\" } }"),
        ("prefix: /", "{ add: { Transfer-Encoding: chunked, X-A: \"a\\x01b\", X-B: \"$1\", X-C: \"${host\" } }"),
        ("prefix: /", "{ set: { X-Env: a }, add: { x-env: b, X-Forwarded-Proto: https } }"),
    ]
    .iter()
    .map(|(m, h)| rule(m, h))
    .collect();
    let found = problems_beside_pool_a(&bad);
    let expected = [
        "rules[0].action.proxy.request_headers.remove[0]: a request needs a Host; give the one the backend sees with the proxy's `host`",
        "rules[0].action.proxy.request_headers.remove[1]: \"Connection\" frames the response or the connection, which the server manages itself; a rule cannot change it",
        "rules[0].action.proxy.request_headers.remove[2]: \"a b\" is not a header name",
        "rules[1].action.proxy.request_headers.set.Host: give the Host the backend sees with the proxy's `host`",
        "rules[1].action.proxy.request_headers.set.X-Forwarded-For: Skiff appends the client's address to X-Forwarded-For; it may only be removed",
        "rules[2].action.proxy.request_headers.add.Transfer-Encoding: \"Transfer-Encoding\" frames the response or the connection, which the server manages itself; a rule cannot change it",
        "rules[2].action.proxy.request_headers.add.X-A: not a valid header value: it holds a control character",
        "rules[2].action.proxy.request_headers.add.X-B: $1 refers to a capture group the rule's regex does not have (0 groups)",
        "rules[2].action.proxy.request_headers.add.X-C: unclosed `${` in \"${host\"",
        "rules[3].action.proxy.request_headers.add.x-env: \"x-env\" is named twice (names are case-insensitive); give it once",
        "rules[3].action.proxy.request_headers.add.X-Forwarded-Proto: a backend reads one X-Forwarded-Proto; use `set`",
    ];
    assert_messages(&found, &expected);
}
