//! What an HTTP backend is told: a proxy rule's `request_headers` (remove, set, add,
//! with variables), X-Real-IP, X-Forwarded-Prefix for a stripped prefix, the forwarding
//! fields removed from clients, and the scheme and port a believed balancer passes on.
//! Against a Python HTTP backend that echoes the request it got, over HTTP/1.1 (the fast
//! path and hyper's) and h2c.

mod common;
use common::backends::*;
use common::*;

/// The request line and each `name: value` line (names lower-cased) the backend got.
fn echoed(args: &[&str]) -> (String, Vec<(String, String)>) {
    let out = curl(args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default().to_owned();
    let fields = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    (first, fields)
}

fn values<'a>(fields: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    fields
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

fn site(trusted: &str, port: u16) -> String {
    format!(
        r#"{trusted}virtual_servers:
  - name: site
    default: true
    root: .
    rules:
      - match: {{ regex: "^/users/([0-9]+)" }}
        action:
          proxy:
            pool: api
            request_headers:
              remove: [Cookie, X-Drop]
              set: {{ X-User: "$1", X-Client: "$remote_addr", X-Origin-Uri: "$request_uri", X-Site: "$scheme://$host" }}
              add: {{ X-Tag: "edge" }}
      - match: {{ prefix: /api/ }}
        action: {{ proxy: {{ pool: api, rewrite_path: / }} }}
      - match: {{ prefix: /v1/ }}
        action: {{ proxy: {{ pool: api, rewrite_path: /v2/ }} }}
      - action:
          proxy:
            pool: api
            request_headers: {{ set: {{ X-Forwarded-Proto: https }} }}
pools:
  - {{ name: api, protocol: http, endpoints: ["127.0.0.1:{port}"] }}
"#
    )
}

#[test]
fn a_rule_changes_what_its_backend_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let (_backend, port) = echo_server(dir.path(), "api");
    let srv = Server::run_config(&write_config(dir.path(), &site("", port)));
    // Without a body (the HTTP/1.1 fast path), with one (hyper's), and over h2c.
    for args in [
        vec!["--http1.1"],
        vec!["--http1.1", "--data", "x"],
        vec!["--http2-prior-knowledge"],
    ] {
        let url = srv.url("/users/42/posts?page=2");
        let mut all = args.clone();
        all.extend([
            "-H",
            "Host: shop.example:8080",
            "-H",
            "Cookie: session=secret",
            "-H",
            "X-Drop: 1",
            "-H",
            "X-User: forged",
            "-H",
            "X-Tag: client",
            url.as_str(),
        ]);
        let (first, f) = echoed(&all);
        assert!(
            first.ends_with(" /users/42/posts?page=2"),
            "{args:?}: {first}"
        );
        assert_eq!(values(&f, "cookie"), Vec::<&str>::new(), "{args:?}");
        assert_eq!(values(&f, "x-drop"), Vec::<&str>::new(), "{args:?}");
        assert_eq!(values(&f, "x-user"), ["42"], "set replaces: {args:?}");
        assert_eq!(values(&f, "x-client"), ["127.0.0.1"], "{args:?}");
        assert_eq!(values(&f, "x-real-ip"), ["127.0.0.1"], "{args:?}");
        assert_eq!(
            values(&f, "x-origin-uri"),
            ["/users/42/posts?page=2"],
            "{args:?}"
        );
        assert_eq!(values(&f, "x-site"), ["http://shop.example"], "{args:?}");
        assert_eq!(
            values(&f, "x-tag"),
            ["client", "edge"],
            "add keeps: {args:?}"
        );
    }
    // A rule may tell its backend the client came over HTTPS (a balancer ended TLS).
    let (_, f) = echoed(&[&srv.url("/other")]);
    assert_eq!(values(&f, "x-forwarded-proto"), ["https"]);
}

/// A client's say about the request, which only a believed proxy may give.
const FORGED: [&str; 24] = [
    "-H",
    "Forwarded: for=192.0.2.9;host=evil.example;proto=https",
    "-H",
    "X-Forwarded-Port: 8443",
    "-H",
    "X-Forwarded-Prefix: /evil",
    "-H",
    "X-Forwarded-Proto: https",
    "-H",
    "X-Forwarded-Host: evil.example",
    "-H",
    "X-Forwarded-Ssl: on",
    "-H",
    "X-Original-URL: /admin",
    "-H",
    "X-Scheme: https",
    "-H",
    "X-Real-IP: 192.0.2.9",
    "-H",
    "X-Forwarded-For: 203.0.113.7",
    "-H",
    "Connection: X-Forwarded-Host",
    "-H",
    "Host: shop.example",
];

/// Without a body (the HTTP/1.1 fast path), with one (hyper's), and over h2c.
const PATHS: [&[&str]; 3] = [
    &["--http1.1"],
    &["--http1.1", "--data", "x"],
    &["--http2-prior-knowledge"],
];

fn with_forged(path_args: &[&'static str], url: &str) -> (String, Vec<(String, String)>) {
    let mut args = path_args.to_vec();
    args.extend(FORGED);
    args.push(url);
    echoed(&args)
}

#[test]
fn what_a_client_says_of_the_request_is_replaced_or_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (_backend, port) = echo_server(dir.path(), "api");
    // Trusting a proxy for X-Forwarded-For alone changes none of this.
    for trusted in [
        "",
        "trusted_proxies: [10.0.0.0/8]\n",
        "trusted_proxies: [127.0.0.1/32]\n",
    ] {
        let srv = Server::run_config(&write_config(dir.path(), &site(trusted, port)));
        for path_args in PATHS {
            let (first, f) = with_forged(path_args, &srv.url("/api/items"));
            let at = format!("{trusted:?} {path_args:?}");
            assert!(first.ends_with(" /items"), "{at}: {first}");
            for dropped in [
                "forwarded",
                "x-forwarded-port",
                "x-forwarded-ssl",
                "x-original-url",
            ] {
                assert_eq!(values(&f, dropped), Vec::<&str>::new(), "{dropped} {at}");
            }
            assert_eq!(values(&f, "x-forwarded-prefix"), ["/api"], "{at}");
            assert_eq!(values(&f, "x-forwarded-proto"), ["http"], "{at}");
            assert_eq!(values(&f, "x-forwarded-host"), ["shop.example"], "{at}");
            assert_eq!(
                values(&f, "x-forwarded-for"),
                ["203.0.113.7, 127.0.0.1"],
                "{at}"
            );
            let client = if trusted.contains("127.0.0.1") {
                "203.0.113.7"
            } else {
                "127.0.0.1"
            };
            assert_eq!(values(&f, "x-real-ip"), [client], "{at}");
        }
        // A rewrite that does not strip a prefix names none.
        let (first, f) = with_forged(&[], &srv.url("/v1/x"));
        assert_eq!(first, "GET /v2/x");
        assert_eq!(values(&f, "x-forwarded-prefix"), Vec::<&str>::new());
    }
}

#[test]
fn a_believed_balancer_in_front_says_which_scheme_and_port_the_client_used() {
    let dir = tempfile::tempdir().unwrap();
    let (_backend, port) = echo_server(dir.path(), "api");
    let trusted = "trusted_proxies: [127.0.0.1/32]\nuse_forwarded_headers: true\n";
    let srv = Server::run_config(&write_config(dir.path(), &site(trusted, port)));
    for path_args in PATHS {
        let (_, f) = with_forged(path_args, &srv.url("/api/items"));
        let at = format!("{path_args:?}");
        assert_eq!(values(&f, "x-forwarded-proto"), ["https"], "{at}");
        assert_eq!(values(&f, "x-forwarded-port"), ["8443"], "{at}");
        assert_eq!(values(&f, "x-real-ip"), ["203.0.113.7"], "{at}");
        // What cloud balancers pass on from the client is never believed.
        for dropped in ["forwarded", "x-forwarded-ssl", "x-original-url", "x-scheme"] {
            assert_eq!(values(&f, dropped), Vec::<&str>::new(), "{dropped} {at}");
        }
        assert_eq!(values(&f, "x-forwarded-host"), ["shop.example"], "{at}");
        assert_eq!(values(&f, "x-forwarded-prefix"), ["/api"], "{at}");
    }
    // `$remote_addr` is the client the proxy names.
    let (_, f) = echoed(&["-H", "X-Forwarded-For: 203.0.113.7", &srv.url("/users/1")]);
    assert_eq!(values(&f, "x-client"), ["203.0.113.7"]);
    // Skiff's own view where the proxy sent none.
    let (_, f) = echoed(&["-H", "Host: shop.example", &srv.url("/api/items")]);
    assert_eq!(values(&f, "x-forwarded-proto"), ["http"]);
    assert_eq!(values(&f, "x-forwarded-port"), Vec::<&str>::new());
    assert_eq!(values(&f, "x-real-ip"), ["127.0.0.1"]);
}

/// A pool that passes names with `_` still drops the `_` spellings of the fields Skiff
/// sets: WSGI and Rack read `X_Forwarded_Host` as X-Forwarded-Host.
#[test]
fn underscore_spellings_of_forwarding_fields_never_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (_backend, port) = echo_server(dir.path(), "api");
    for trusted in [
        "",
        "trusted_proxies: [127.0.0.1/32]\nuse_forwarded_headers: true\n",
    ] {
        let config = site(trusted, port).replace(
            "endpoints: [\"127.0.0.1:",
            "underscores_in_headers: true, endpoints: [\"127.0.0.1:",
        );
        let srv = Server::run_config(&write_config(dir.path(), &config));
        for path_args in PATHS {
            let mut args = path_args.to_vec();
            args.extend([
                "-H",
                "X_Forwarded_Host: evil.example",
                "-H",
                "X_Real_IP: 192.0.2.9",
                "-H",
                "X_Forwarded_Prefix: /evil",
                "-H",
                "X_Forwarded_Proto: https",
                "-H",
                "X_Custom_Id: 7",
            ]);
            let url = srv.url("/api/items");
            args.push(&url);
            let (_, f) = echoed(&args);
            let at = format!("{trusted:?} {path_args:?}");
            for dropped in [
                "x_forwarded_host",
                "x_real_ip",
                "x_forwarded_prefix",
                "x_forwarded_proto",
            ] {
                assert_eq!(values(&f, dropped), Vec::<&str>::new(), "{dropped} {at}");
            }
            assert_eq!(values(&f, "x_custom_id"), ["7"], "{at}");
        }
    }
}

/// `skiff check` refuses what a rule may not tell a backend, each at its place.
#[test]
fn check_refuses_managed_and_malformed_request_headers() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        r#"virtual_servers:
  - name: site
    default: true
    root: .
    rules:
      - action:
          proxy:
            pool: api
            request_headers:
              remove: [Host]
              set: { X-Forwarded-For: "1.2.3.4", Content-Length: "0", X-A: "$2", X-B: "$hots" }
pools:
  - { name: api, protocol: http, endpoints: ["127.0.0.1:9"] }
"#,
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for expected in [
        "request_headers.remove[0]: a request needs a Host",
        "request_headers.set.X-Forwarded-For: Skiff appends the client's address",
        "request_headers.set.Content-Length: \"Content-Length\" frames",
        "request_headers.set.X-A: $2 refers to a capture group the rule's regex does not have (0 groups)",
        "request_headers.set.X-B: unknown variable $hots",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}
