use super::*;
use crate::model::Rule;

/// Rules from a YAML list, as they appear in a virtual server.
fn rules(yaml: &str) -> Vec<Rule> {
    serde_saphyr::from_str(yaml).unwrap()
}

/// (earlier, later, sample) of every shadowing.
fn found(yaml: &str) -> Vec<(usize, usize, Option<String>)> {
    shadowed_rules(&rules(yaml))
        .into_iter()
        .map(|s| (s.earlier, s.later, s.sample))
        .collect()
}

fn sample(earlier: usize, later: usize, path: &str) -> (usize, usize, Option<String>) {
    (earlier, later, Some(path.to_string()))
}

const AUTH: &str = "basic_auth: { htpasswd: /etc/skiff/admins }";

#[test]
fn an_extension_rule_above_protected_prefixes_is_named_with_a_sample_path() {
    let shadows = shadowed_rules(&rules(
        "
- name: php
  match: { extensions: [php] }
  action: { fastcgi: { pool: php } }
- name: admin
  match: { prefix: /admin/ }
  action: { fastcgi: { pool: php } }
  basic_auth: { realm: Admin, htpasswd: /etc/skiff/admins }
  access: { allow: [10.0.0.0/8] }
- name: api
  match: { prefix: /api/ }
  action: { fastcgi: { pool: php } }
  rate_limit: { requests_per_second: 20, burst: 40 }
",
    ));
    let messages: Vec<&str> = shadows.iter().map(|s| s.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "rule \"php\" (index 0) matches /admin/x.php before rule \"admin\" (index 1), which \
             requires basic auth and an address allow list; move \"admin\" above \"php\" or give \
             \"php\" the same modifiers",
            "rule \"php\" (index 0) matches /api/x.php before rule \"api\" (index 2), which \
             requires a rate limit; move \"api\" above \"php\" or give \"php\" the same modifiers",
        ]
    );
}

#[test]
fn protected_prefixes_first_shadow_nothing() {
    let yaml = format!(
        "
- {{ name: admin, match: {{ prefix: /admin/ }}, action: {{ static: {{}} }}, {AUTH} }}
- name: api
  match: {{ prefix: /api/ }}
  action: {{ static: {{}} }}
  rate_limit: {{ requests_per_second: 20, burst: 40 }}
- {{ name: php, match: {{ extensions: [php] }}, action: {{ static: {{}} }} }}
- {{ name: rest, match: {{ prefix: / }}, action: {{ static: {{}} }} }}
"
    );
    assert_eq!(found(&yaml), []);
}

#[test]
fn prefixes_overlap_when_one_extends_the_other() {
    let yaml = |earlier: &str| {
        format!(
            "
- {{ match: {{ prefix: {earlier} }}, action: {{ static: {{}} }} }}
- {{ match: {{ prefix: /admin/ }}, action: {{ static: {{}} }}, {AUTH} }}
"
        )
    };
    assert_eq!(found(&yaml("/")), [sample(0, 1, "/admin/")]);
    assert_eq!(found(&yaml("/adm")), [sample(0, 1, "/admin/")]);
    assert_eq!(
        found(&yaml("/admin/public/")),
        [sample(0, 1, "/admin/public/")]
    );
    assert_eq!(found(&yaml("/api/")), []);
    assert_eq!(found(&yaml("/administrator")), []);
}

#[test]
fn extensions_overlap_without_case_and_only_when_they_share_one() {
    let yaml = |earlier: &str, later: &str| {
        format!(
            "
- {{ match: {{ extensions: [{earlier}] }}, action: {{ static: {{}} }} }}
- {{ match: {{ extensions: [{later}] }}, action: {{ static: {{}} }}, {AUTH} }}
"
        )
    };
    assert_eq!(found(&yaml("css, js", "php")), []);
    assert_eq!(found(&yaml("CSS, js", "css")), [sample(0, 1, "/x.css")]);
    // A prefix with an extension: one segment more, with a file name.
    let yaml = "
- { match: { extensions: [php] }, action: { static: {} } }
- { match: { prefix: /adm, extensions: [php, inc] }, action: { static: {} }, basic_auth: { htpasswd: a } }
";
    assert_eq!(found(yaml), [sample(0, 1, "/adm/x.php")]);
}

#[test]
fn an_exact_path_is_the_only_candidate() {
    let yaml = |earlier: &str| {
        format!(
            "
- {{ match: {{ {earlier} }}, action: {{ static: {{}} }} }}
- {{ match: {{ prefix: /admin/, extensions: [html] }}, action: {{ static: {{}} }}, {AUTH} }}
"
        )
    };
    assert_eq!(
        found(&yaml("path: /admin/index.html")),
        [sample(0, 1, "/admin/index.html")]
    );
    assert_eq!(found(&yaml("path: /admin/login")), [], "no extension");
    assert_eq!(found(&yaml("path: /healthz")), []);
    assert_eq!(
        found(&yaml(
            "path: /admin/a.html, regex: \"^/admin/[a-z]\\\\.html$\""
        )),
        [sample(0, 1, "/admin/a.html")]
    );
    assert_eq!(
        found(&yaml(
            "path: /admin/ab.html, regex: \"^/admin/[a-z]\\\\.html$\""
        )),
        [],
        "a regex is decided exactly on an exact path"
    );
}

#[test]
fn methods_and_headers_narrow_the_overlap_and_show_in_the_sample() {
    let yaml = |earlier: &str, later: &str| {
        format!(
            "
- {{ match: {{ prefix: /, {earlier} }}, action: {{ static: {{}} }} }}
- {{ match: {{ prefix: /admin/, {later} }}, action: {{ static: {{}} }}, {AUTH} }}
"
        )
    };
    assert_eq!(found(&yaml("methods: [POST]", "methods: [GET, HEAD]")), []);
    assert_eq!(
        found(&yaml("methods: [POST, PUT]", "methods: [PUT]")),
        [sample(0, 1, "PUT /admin/")]
    );
    assert_eq!(
        found(&yaml("methods: [POST]", "headers: []")),
        [sample(0, 1, "POST /admin/")]
    );
    assert_eq!(
        found(&yaml("methods: [get]", "methods: [GET]")),
        [],
        "methods compare exactly"
    );
    assert_eq!(
        found(&yaml(
            "headers: [{ name: X-Debug, value: '1' }]",
            "headers: [{ name: x-debug, value: '2' }]"
        )),
        []
    );
    assert_eq!(
        found(&yaml(
            "headers: [{ name: X-Debug }]",
            "headers: [{ name: x-debug, value: '2' }, { name: Cookie }]"
        )),
        [sample(0, 1, "/admin/ with headers X-Debug: 2, Cookie")]
    );
}

#[test]
fn cookies_narrow_the_overlap_by_exact_name_and_show_in_the_sample() {
    let yaml = |earlier: &str, later: &str| {
        format!(
            "
- {{ match: {{ prefix: /, cookies: [{earlier}] }}, action: {{ static: {{}} }} }}
- {{ match: {{ prefix: /admin/, {later} }}, action: {{ static: {{}} }}, {AUTH} }}
"
        )
    };
    let pinned = "{ name: canary, value: always }";
    assert_eq!(
        found(&yaml(pinned, "cookies: [{ name: canary, value: never }]")),
        []
    );
    assert_eq!(
        found(&yaml(pinned, "cookies: [{ name: Canary, value: never }]")),
        [sample(
            0,
            1,
            "/admin/ with cookies canary=always; Canary=never"
        )],
        "names keep their case"
    );
    assert_eq!(
        found(&yaml(pinned, "headers: [{ name: X-A }]")),
        [sample(
            0,
            1,
            "/admin/ with header X-A and cookie canary=always"
        )]
    );
    assert_eq!(
        found(&yaml("{ name: session }", "methods: [GET]")),
        [sample(0, 1, "GET /admin/ with cookie session=…")]
    );
}

#[test]
fn an_earlier_rule_with_modifiers_at_least_as_strict_shadows_nothing() {
    let yaml = |earlier: &str| {
        format!(
            "
- {{ match: {{ prefix: / }}, action: {{ static: {{}} }}, {earlier} }}
- match: {{ prefix: /admin/ }}
  action: {{ static: {{}} }}
  basic_auth: {{ realm: Admin, htpasswd: /etc/admins }}
  access: {{ allow: [10.0.0.0/8], deny: [10.9.0.0/16] }}
  rate_limit: {{ requests_per_second: 5, burst: 10 }}
"
        )
    };
    let message = |earlier: &str| {
        shadowed_rules(&rules(&yaml(earlier)))
            .into_iter()
            .map(|s| s.message)
            .collect::<Vec<_>>()
    };
    let all = "basic_auth: { realm: Other, htpasswd: /etc/admins }, \
               access: { allow: [10.1.0.0/16], deny: [10.0.0.0/12] }, \
               rate_limit: { requests_per_second: 1, burst: 10 }";
    assert_eq!(message(all), Vec::<String>::new());
    assert_eq!(
        message("headers: { set: { X-A: b } }"),
        [
            "rule 0 matches /admin/ before rule 1, which requires basic auth, an address allow \
          list, an address deny list and a rate limit; move rule 1 above rule 0 or give rule 0 \
          the same modifiers"
        ]
    );
    let weaker = "basic_auth: { htpasswd: /etc/users }, \
                  access: { allow: [0.0.0.0/0], deny: [10.9.0.0/16] }, \
                  rate_limit: { requests_per_second: 50, burst: 10 }";
    assert_eq!(
        message(weaker),
        [
            "rule 0 matches /admin/ before rule 1, which requires basic auth, an address allow \
          list and a rate limit; move rule 1 above rule 0 or give rule 0 the same modifiers"
        ]
    );
}

#[test]
fn rules_that_serve_nothing_shadow_nothing() {
    for action in [
        "{ redirect: { to: /elsewhere } }",
        "{ return: { status: 200 } }",
        "{ deny: {} }",
        "{ split: [{ weight: 50, action: { deny: {} } }, { weight: 50, action: { redirect: { to: /b } } }] }",
    ] {
        let yaml = format!(
            "
- {{ match: {{ prefix: / }}, action: {action} }}
- {{ match: {{ prefix: /admin/ }}, action: {{ static: {{}} }}, {AUTH} }}
"
        );
        assert_eq!(found(&yaml), [], "{action}");
    }
    let unprotected = "
- { match: { prefix: / }, action: { static: {} } }
- { match: { prefix: /admin/ }, action: { static: {} }, cache: { max_age: 60 } }
";
    assert_eq!(found(unprotected), []);
    let half_served = "
- { match: { prefix: / }, action: { split: [{ weight: 99, action: { deny: {} } }, { weight: 1, action: { static: {} } }] } }
- { match: { prefix: /admin/ }, action: { static: {} }, basic_auth: { realm: A, htpasswd: /h } }
";
    assert_eq!(
        found(half_served).len(),
        1,
        "a split that may serve the files shadows"
    );
}

#[test]
fn regexes_are_tried_on_samples_built_from_their_literals() {
    let yaml = |earlier: &str, later: &str| {
        format!(
            "
- {{ match: {{ {earlier} }}, action: {{ static: {{}} }} }}
- {{ match: {{ {later} }}, action: {{ static: {{}} }}, {AUTH} }}
"
        )
    };
    let admin = "prefix: /admin/";
    assert_eq!(
        found(&yaml(r#"regex: '\.(jpg|png)$'"#, admin)),
        [sample(0, 1, "/admin/x.jpg")]
    );
    assert_eq!(
        found(&yaml(r#"regex: '^/[a-z]+/secret$'"#, admin)),
        [sample(0, 1, "/admin/secret")]
    );
    assert_eq!(
        found(&yaml("extensions: [php]", "regex: '^/(admin|staff)/'")),
        [sample(0, 1, "/admin/x.php")]
    );
    assert_eq!(
        found(&yaml("regex: 'secret'", admin)),
        [sample(0, 1, "/admin/secret")]
    );
}

#[test]
fn anchored_regex_literals_prove_rules_disjoint() {
    let yaml = |earlier: &str, later: &str| {
        format!(
            "
- {{ match: {{ {earlier} }}, action: {{ static: {{}} }} }}
- {{ match: {{ {later} }}, action: {{ static: {{}} }}, {AUTH} }}
"
        )
    };
    let admin = "prefix: /admin/";
    assert_eq!(found(&yaml(r#"regex: '^/blog/(\d+)$'"#, admin)), []);
    assert_eq!(found(&yaml("regex: '^/(blog|news)/'", admin)), []);
    assert_eq!(
        found(&yaml("regex: '^/(blog|news)/'", "regex: '^/admin'")),
        []
    );
    assert_eq!(
        found(&yaml("extensions: [php]", r#"regex: '\.(html|htm)$'"#)),
        []
    );
    assert_eq!(
        found(&yaml(r#"regex: '\.css$'"#, r#"regex: '/[a-z]+\.js$'"#)),
        []
    );
}

#[test]
fn an_undecided_regex_may_shadow() {
    let shadows = shadowed_rules(&rules(
        r#"
- { name: numbered, match: { regex: '^/[a-z]+/\d+$' }, action: { static: {} } }
- { name: admin, match: { prefix: /admin/ }, action: { static: {} }, basic_auth: { htpasswd: a } }
"#,
    ));
    assert_eq!(shadows.len(), 1);
    assert_eq!(shadows[0].sample, None);
    assert_eq!(
        shadows[0].message,
        "rule \"numbered\" (index 0) may shadow rule \"admin\" (index 1), which requires basic \
         auth: a regular expression may match the same requests (no sample was found, and \
         regular expressions cannot always be compared); move \"admin\" above \"numbered\" or \
         give \"numbered\" the same modifiers"
    );
}

#[test]
fn warnings_sit_at_the_protected_rule() {
    let cfg = crate::parse_yaml(
        "
virtual_servers:
  - name: a
    default: true
    root: /srv
  - name: b
    hosts: [b.example]
    root: /srv
    rules:
      - { match: { extensions: [php] }, action: { static: {} } }
      - { match: { prefix: /admin/ }, action: { static: {} }, basic_auth: { htpasswd: a } }
",
    )
    .unwrap();
    let issues = warnings(&cfg);
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].path, "virtual_servers[1].rules[1]");
    assert!(
        issues[0]
            .message
            .starts_with("rule 0 matches /admin/x.php before rule 1"),
        "{}",
        issues[0].message
    );
}
