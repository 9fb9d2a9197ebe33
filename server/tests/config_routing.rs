//! `skiff run --config`: virtual servers, rules, actions and modifiers through the real
//! binary, over HTTP/1.1 and h2c.

mod common;
use common::*;
use std::process::Command;

/// A test site: two roots, an htpasswd file and a config that uses them.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(config_tail: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        for (root, text) in [
            ("www", "www home"),
            ("docs", "docs home"),
            ("shop", "shop home"),
        ] {
            std::fs::create_dir_all(p.join(root)).unwrap();
            std::fs::write(p.join(root).join("index.html"), text).unwrap();
        }
        std::fs::write(p.join("www/style.css"), "body{}").unwrap();
        std::fs::write(p.join("www/404.html"), "<h1>custom not found</h1>").unwrap();
        std::fs::create_dir_all(p.join("www/admin")).unwrap();
        std::fs::write(p.join("www/admin/index.html"), "admin area").unwrap();
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        std::fs::write(p.join("htpasswd"), format!("alice:{hash}\n")).unwrap();
        let setup = Setup { dir };
        setup.write_config(config_tail);
        setup
    }

    fn config_path(&self) -> std::path::PathBuf {
        self.dir.path().join("skiff.yaml")
    }

    fn write_config(&self, tail: &str) {
        let text = format!("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nthreads: 1\n{tail}");
        std::fs::write(self.config_path(), text).unwrap();
    }
}

const SITES: &str = r#"trusted_proxies: [127.0.0.2/32]
virtual_servers:
  - name: www
    hosts: [www.example.com]
    default: true
    root: www
    error_pages: { 404: /404.html }
    rules:
      - match: { regex: "^/blog/(\\d+)/(\\w+)$" }
        action: { redirect: { to: "https://$host/posts/$1?slug=$2", status: 301 } }
      - match: { path: /ping }
        action: { return: { status: 200, body: "pong\n" } }
      - match: { prefix: /private/ }
        action: { deny: {} }
      - match: { extensions: [css] }
        action: { static: {} }
        cache: { max_age: 3600, visibility: public }
        headers: { set: { X-Frame-Options: DENY }, remove: [Accept-Ranges] }
      - match: { prefix: /api/ }
        action: { return: { status: 200, body: "{}", content_type: application/json } }
        cors: { allow_origins: ["https://app.example.com"], allow_headers: [Content-Type], max_age: 600 }
      - match: { prefix: /admin/ }
        action: { static: {} }
        basic_auth: { realm: Admin, htpasswd: htpasswd }
      - match: { prefix: /internal }
        action: { return: { status: 200, body: "inside" } }
        access: { allow: [10.0.0.0/8] }
      - match: { prefix: /limited }
        action: { return: { status: 200, body: "ok" } }
        rate_limit: { requests_per_second: 1, burst: 3 }
      - match: { prefix: /headered, headers: [{ name: X-Debug, value: "1" }] }
        action: { return: { status: 200, body: "debug" } }
  - name: docs
    hosts: ["*.docs.example.org"]
    root: docs
  - name: shop
    hosts: [shop.example.com]
    root: shop
"#;

fn get_host(
    srv: &Server,
    host: &str,
    path: &str,
    extra: &[&str],
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut args = vec!["-H", &*Box::leak(format!("Host: {host}").into_boxed_str())];
    args.extend_from_slice(extra);
    let url = srv.url(path);
    args.push(Box::leak(url.into_boxed_str()));
    curl_i(&args)
}

#[test]
fn virtual_hosts_exact_wildcard_default_and_unknown() {
    let setup = Setup::new(SITES);
    let srv = Server::run_config(&setup.config_path());
    assert_eq!(get_host(&srv, "www.example.com", "/", &[]).2, b"www home");
    assert_eq!(
        get_host(&srv, "SHOP.example.com:8080", "/", &[]).2,
        b"shop home"
    );
    assert_eq!(
        get_host(&srv, "a.docs.example.org", "/", &[]).2,
        b"docs home"
    );
    assert_eq!(
        get_host(&srv, "x.y.docs.example.org", "/", &[]).2,
        b"docs home"
    );
    // docs.example.org itself is not covered by *.docs.example.org: the default answers.
    assert_eq!(get_host(&srv, "docs.example.org", "/", &[]).2, b"www home");
    assert_eq!(get_host(&srv, "nobody.test", "/", &[]).2, b"www home");
    // Over h2c, curl sends the Host header as :authority.
    let out = curl(&[
        "--http2-prior-knowledge",
        "-H",
        "Host: shop.example.com",
        &srv.url("/"),
    ]);
    assert_eq!(out.stdout, b"shop home");
    let out = curl(&[
        "--http2-prior-knowledge",
        "-H",
        "Host: a.docs.example.org",
        &srv.url("/"),
    ]);
    assert_eq!(out.stdout, b"docs home");
    // Metrics are labelled by virtual server name.
    assert!(
        srv.metric("skiff_http_requests_total{vhost=\"shop\",method=\"GET\",code=\"200\"}")
            .unwrap()
            >= 2.0
    );
}

#[test]
fn unknown_host_without_default_gets_421() {
    let setup = Setup::new("virtual_servers:\n  - { name: only, hosts: [only.test], root: www }\n");
    let srv = Server::run_config(&setup.config_path());
    assert_eq!(get_host(&srv, "only.test", "/", &[]).0, 200);
    assert_eq!(get_host(&srv, "other.test", "/", &[]).0, 421);
}

#[test]
fn redirect_return_deny_and_error_pages() {
    let setup = Setup::new(SITES);
    let srv = Server::run_config(&setup.config_path());
    let (st, h, _) = get_host(&srv, "www.example.com", "/blog/42/hello", &[]);
    assert_eq!(st, 301);
    assert_eq!(
        get_header(&h, "location"),
        Some("https://www.example.com/posts/42?slug=hello")
    );
    let (st, h, body) = get_host(&srv, "www.example.com", "/ping", &[]);
    assert_eq!((st, body.as_slice()), (200, &b"pong\n"[..]));
    assert_eq!(
        get_header(&h, "content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(get_host(&srv, "www.example.com", "/private/x", &[]).0, 403);
    let (st, h, body) = get_host(&srv, "www.example.com", "/missing", &[]);
    assert_eq!(
        (st, body.as_slice()),
        (404, &b"<h1>custom not found</h1>"[..])
    );
    assert_eq!(
        get_header(&h, "content-type"),
        Some("text/html; charset=utf-8")
    );
}

#[test]
fn headers_cache_and_header_matches() {
    let setup = Setup::new(SITES);
    let srv = Server::run_config(&setup.config_path());
    let (st, h, _) = get_host(&srv, "www.example.com", "/style.css", &[]);
    assert_eq!(st, 200);
    assert_eq!(
        get_header(&h, "cache-control"),
        Some("public, max-age=3600")
    );
    assert!(httpdate::parse_http_date(get_header(&h, "expires").unwrap()).is_ok());
    assert_eq!(get_header(&h, "x-frame-options"), Some("DENY"));
    assert_eq!(get_header(&h, "accept-ranges"), None);
    assert!(
        get_header(&h, "etag").is_some(),
        "other shared headers survive"
    );
    assert_eq!(
        get_host(&srv, "www.example.com", "/headered", &["-H", "X-Debug: 1"]).2,
        b"debug"
    );
    assert_eq!(
        get_host(&srv, "www.example.com", "/headered", &["-H", "X-Debug: 2"]).0,
        404
    );
}

#[test]
fn cors_preflight_and_simple_requests() {
    let setup = Setup::new(SITES);
    let srv = Server::run_config(&setup.config_path());
    let (st, h, _) = get_host(
        &srv,
        "www.example.com",
        "/api/items",
        &[
            "-X",
            "OPTIONS",
            "-H",
            "Origin: https://app.example.com",
            "-H",
            "Access-Control-Request-Method: POST",
        ],
    );
    assert_eq!(st, 204);
    assert_eq!(
        get_header(&h, "access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert_eq!(
        get_header(&h, "access-control-allow-methods"),
        Some("GET, HEAD, POST")
    );
    assert_eq!(
        get_header(&h, "access-control-allow-headers"),
        Some("Content-Type")
    );
    assert_eq!(get_header(&h, "access-control-max-age"), Some("600"));
    assert_eq!(get_header(&h, "vary"), Some("Origin"));
    let (_, h, body) = get_host(
        &srv,
        "www.example.com",
        "/api/items",
        &["-H", "Origin: https://app.example.com"],
    );
    assert_eq!(body, b"{}");
    assert_eq!(
        get_header(&h, "access-control-allow-origin"),
        Some("https://app.example.com")
    );
    let (_, h, _) = get_host(
        &srv,
        "www.example.com",
        "/api/items",
        &["-H", "Origin: https://evil.example"],
    );
    assert_eq!(get_header(&h, "access-control-allow-origin"), None);
}

#[test]
fn basic_auth_right_and_wrong() {
    let setup = Setup::new(SITES);
    let srv = Server::run_config(&setup.config_path());
    let (st, h, _) = get_host(&srv, "www.example.com", "/admin/", &[]);
    assert_eq!(st, 401);
    assert_eq!(
        get_header(&h, "www-authenticate"),
        Some("Basic realm=\"Admin\", charset=\"UTF-8\"")
    );
    assert_eq!(
        get_host(&srv, "www.example.com", "/admin/", &["-u", "alice:wrong"]).0,
        401
    );
    assert_eq!(
        get_host(
            &srv,
            "www.example.com",
            "/admin/",
            &["-u", "mallory:s3cret"]
        )
        .0,
        401
    );
    let (st, _, body) = get_host(&srv, "www.example.com", "/admin/", &["-u", "alice:s3cret"]);
    assert_eq!((st, body.as_slice()), (200, &b"admin area"[..]));
}

#[test]
fn cidr_lists_with_trusted_and_untrusted_forwarded_for() {
    let setup = Setup::new(SITES);
    let srv = Server::run_config(&setup.config_path());
    // From 127.0.0.1 (not in the allow list, not a trusted proxy): refused, whatever XFF says.
    assert_eq!(get_host(&srv, "www.example.com", "/internal", &[]).0, 403);
    assert_eq!(
        get_host(
            &srv,
            "www.example.com",
            "/internal",
            &["-H", "X-Forwarded-For: 10.1.2.3"]
        )
        .0,
        403
    );
    // From 127.0.0.2, a trusted proxy: its X-Forwarded-For is believed.
    let via_proxy = |xff: &str| {
        let xff = format!("X-Forwarded-For: {xff}");
        get_host(
            &srv,
            "www.example.com",
            "/internal",
            &["--interface", "127.0.0.2", "-H", &xff],
        )
        .0
    };
    assert_eq!(via_proxy("10.1.2.3"), 200);
    assert_eq!(via_proxy("192.0.2.9"), 403);
    assert_eq!(
        via_proxy("10.1.2.3, 192.0.2.9"),
        403,
        "the right-most untrusted entry counts"
    );
}

#[test]
fn rate_limit_gives_429_with_retry_after_under_a_burst() {
    let setup = Setup::new(SITES);
    let srv = Server::run_config(&setup.config_path());
    let mut codes = Vec::new();
    let mut retry = None;
    for _ in 0..6 {
        let (st, h, _) = get_host(&srv, "www.example.com", "/limited", &[]);
        if st == 429 {
            retry = get_header(&h, "retry-after").map(str::to_owned);
        }
        codes.push(st);
    }
    assert_eq!(&codes[..3], &[200, 200, 200], "{codes:?}");
    assert!(codes[3..].contains(&429), "{codes:?}");
    assert_eq!(retry.as_deref(), Some("1"));
}

#[test]
fn check_command_accepts_good_and_rejects_bad_configs() {
    let setup = Setup::new(SITES);
    let skiff = env!("CARGO_BIN_EXE_skiff");
    let ok = Command::new(skiff)
        .args(["check", "--config"])
        .arg(setup.config_path())
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains(": ok (hash "));
    setup.write_config("virtual_servers:\n  - { name: a, default: true, root: www, rules: [ { action: { proxy: { pool: nope } } } ] }\n");
    let bad = Command::new(skiff)
        .args(["check", "--config"])
        .arg(setup.config_path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("line 5 column 78: virtual_servers[0].rules[0].action.proxy.pool: no pool named \"nope\""), "{err}");
    // A root that does not exist is caught by check too (not by validation alone).
    setup.write_config("virtual_servers:\n  - { name: a, default: true, root: nowhere }\n");
    let bad = Command::new(skiff)
        .args(["check", "--config"])
        .arg(setup.config_path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("cannot open"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn check_command_warns_about_rules_that_shadow_protected_ones_and_passes() {
    let rules = |first: &str, second: &str| {
        format!("virtual_servers:\n  - name: a\n    default: true\n    root: www\n    rules:\n{first}{second}")
    };
    let assets = "      - { name: assets, match: { extensions: [css] }, action: { static: {} } }\n";
    let admin = "      - { name: admin, match: { prefix: /admin/ }, action: { static: {} }, basic_auth: { htpasswd: htpasswd } }\n";
    let setup = Setup::new(&rules(assets, admin));
    let skiff = env!("CARGO_BIN_EXE_skiff");
    let check = || {
        Command::new(skiff)
            .args(["check", "--config"])
            .arg(setup.config_path())
            .output()
            .unwrap()
    };
    let out = check();
    assert!(out.status.success(), "a warning does not fail the check");
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok (hash "));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "skiff.yaml: warning: line 10 column 9: virtual_servers[0].rules[1]: rule \"assets\" \
             (index 0) matches /admin/x.css before rule \"admin\" (index 1), which requires basic \
             auth; move \"admin\" above \"assets\" or give \"assets\" the same modifiers"
        ),
        "{err}"
    );
    setup.write_config(&rules(admin, assets));
    let out = check();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("warning"), "{err}");
    // What only the disk can tell: a fallback that serves no file.
    let shell = "      - action: { static: { fallback: /app.html } }\n";
    setup.write_config(&rules(shell, ""));
    let out = check();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "skiff.yaml: warning: virtual_servers[0].rules[0].action.static.fallback: \
             \"/app.html\" names no file under the root"
        ),
        "{err}"
    );
    std::fs::write(setup.dir.path().join("www/app.html"), "app").unwrap();
    let out = check();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
}

/// Bandwidth limits are measured by timing real transfers.
#[test]
fn bandwidth_limits_shape_transfers() {
    let setup = Setup::new(
        "virtual_servers:\n  - name: site\n    default: true\n    root: www\n    rules:\n      - match: { prefix: /slow/ }\n        action: { static: {} }\n        bandwidth: { per_connection: 65536 }\n      - match: { prefix: /shared/ }\n        action: { static: {} }\n        bandwidth: { total: 65536 }\n",
    );
    let www = setup.dir.path().join("www");
    for d in ["slow", "shared", "fast"] {
        std::fs::create_dir_all(www.join(d)).unwrap();
    }
    let body: Vec<u8> = (0..200 * 1024u32).map(|i| (i % 251) as u8).collect();
    for d in ["slow", "fast"] {
        std::fs::write(www.join(d).join("f.bin"), &body).unwrap();
    }
    std::fs::write(www.join("shared/a.bin"), &body[..96 * 1024]).unwrap();
    std::fs::write(www.join("shared/b.bin"), &body[..96 * 1024]).unwrap();
    let srv = Server::run_config(&setup.config_path());
    let timed = |args: &[&str]| {
        let t = std::time::Instant::now();
        let out = curl(args);
        (t.elapsed(), out.stdout)
    };
    // 200 KiB at 64 KiB/s, the first second's worth at once: about 2.1 s.
    let (t, got) = timed(&[&srv.url("/slow/f.bin")]);
    assert_eq!(got, body);
    assert!(
        t >= std::time::Duration::from_millis(1600) && t < std::time::Duration::from_secs(8),
        "HTTP/1.1 took {t:?}"
    );
    let (t, got) = timed(&["--http2-prior-knowledge", &srv.url("/slow/f.bin")]);
    assert_eq!(got, body);
    assert!(
        t >= std::time::Duration::from_millis(1600),
        "h2c took {t:?}"
    );
    let (t, _) = timed(&[&srv.url("/fast/f.bin")]);
    assert!(
        t < std::time::Duration::from_millis(1000),
        "unlimited took {t:?}"
    );
    // Two 96 KiB downloads sharing 64 KiB/s: 192 KiB, 64 KiB free, so about 2 s for both.
    let start = std::time::Instant::now();
    let a = std::thread::spawn({
        let url = srv.url("/shared/a.bin");
        move || curl(&[&url]).stdout.len()
    });
    let b = curl(&[&srv.url("/shared/b.bin")]).stdout.len();
    assert_eq!((a.join().unwrap(), b), (96 * 1024, 96 * 1024));
    let t = start.elapsed();
    assert!(
        t >= std::time::Duration::from_millis(1500),
        "the shared limit took {t:?}"
    );
}

/// A rule cannot set Content-Length (or other framing fields): two lengths in one
/// response would be malformed (RFC 9112 §6.3, RFC 9113 §8.1.1), and a proxy in front may
/// split the stream differently from the client. The server refuses the file by name.
#[test]
fn a_rule_setting_content_length_is_refused_with_its_place() {
    let setup = Setup::new(
        r#"virtual_servers:
  - name: www
    default: true
    root: www
    rules:
      - match: { prefix: / }
        action: { static: {} }
        headers: { set: { Content-Length: "0", X-Set: "yes" } }
"#,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["check", "--config"])
        .arg(setup.config_path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 11 column 43: virtual_servers[0].rules[0].headers.set.Content-Length: \"Content-Length\" frames the response or the connection"),
        "{err}"
    );
}

/// A single-page app: its pages by their names without .html, its client-side routes get
/// the shell, over HTTP/1.1 (the fast path) and h2c, while files, other rules' misses and
/// other methods answer as before.
#[test]
fn a_single_page_apps_routes_get_its_shell_and_nothing_else_does() {
    let setup = Setup::new(
        r#"virtual_servers:
  - name: www
    default: true
    root: www
    error_pages: { 404: /404.html }
    rules:
      - match: { prefix: /assets/ }
        action: { static: {} }
      - action: { static: { html_extension: true, fallback: /index.html } }
"#,
    );
    std::fs::write(setup.dir.path().join("www/about.html"), "about page").unwrap();
    let srv = Server::run_config(&setup.config_path());
    // A static export's page by its name without .html, before the shell.
    let (st, _, body) = get_host(&srv, "www.example.com", "/about", &[]);
    assert_eq!((st, body.as_slice()), (200, &b"about page"[..]));
    let (st, h, body) = get_host(&srv, "www.example.com", "/dashboard/settings", &[]);
    assert_eq!((st, body.as_slice()), (200, &b"www home"[..]));
    let etag = get_header(&h, "etag").unwrap().to_owned();
    let (st, _, body) = get_host(
        &srv,
        "www.example.com",
        "/users/7",
        &["--http2-prior-knowledge"],
    );
    assert_eq!((st, body.as_slice()), (200, &b"www home"[..]));
    let inm = format!("If-None-Match: {etag}");
    assert_eq!(
        get_host(&srv, "www.example.com", "/orders", &["-H", &inm]).0,
        304
    );
    let (st, h, body) = get_host(&srv, "www.example.com", "/orders", &["-I"]);
    assert_eq!((st, body.len()), (200, 0));
    assert_eq!(get_header(&h, "content-length"), Some("8"));
    let (st, _, body) = get_host(&srv, "www.example.com", "/style.css", &[]);
    assert_eq!((st, body.as_slice()), (200, &b"body{}"[..]));
    // A missing asset is a real 404, so a broken build shows as one.
    let (st, _, body) = get_host(&srv, "www.example.com", "/assets/app.js", &[]);
    assert_eq!(
        (st, body.as_slice()),
        (404, &b"<h1>custom not found</h1>"[..])
    );
    let (st, _, _) = get_host(&srv, "www.example.com", "/orders", &["-X", "POST"]);
    assert_eq!(st, 405);
    // Paths refused before any rule stay refused: a hidden file is absent, not the shell.
    let (st, _, body) = get_host(&srv, "www.example.com", "/.env", &[]);
    assert_eq!(
        (st, body.as_slice()),
        (404, &b"<h1>custom not found</h1>"[..])
    );
}

/// `skiff serve` takes the same two settings as flags, and refuses a bad fallback by its
/// flag's name.
#[test]
fn serve_flags_give_the_fallback_and_pretty_urls() {
    let site = sample_site();
    std::fs::write(site.path().join("about.html"), "about page").unwrap();
    let srv = Server::start(
        site.path(),
        &["--fallback", "/index.html", "--html-extension"],
    );
    assert_eq!(curl(&[&srv.url("/about")]).stdout, b"about page");
    assert_eq!(curl(&[&srv.url("/cart/3")]).stdout, b"<h1>home</h1>\n");
    assert_eq!(curl(&[&srv.url("/docs/")]).stdout, b"<h1>docs</h1>\n");
    let out = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args([
            "serve",
            &site.path().to_string_lossy(),
            "--fallback",
            "index.html",
        ])
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--fallback: \"index.html\" must be a path starting with '/'"),
        "{stderr}"
    );
}
