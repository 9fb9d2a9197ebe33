//! Basic auth through the real binary: bcrypt runs on the verification pool, never on a
//! serving thread, on the fast path and on hyper; an unknown user costs a bcrypt like a
//! known one; verified credentials are remembered.

mod common;
use common::*;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A site with one worker thread, `/admin/` behind basic auth and `/limited/` behind basic
/// auth and a one-request rate limit, with `htpasswd` as given.
fn start(htpasswd: &str) -> (tempfile::TempDir, Server) {
    start_with(Some(htpasswd), "{ realm: Admin, htpasswd: htpasswd }")
}

/// The same site with `auth` as both rules' `basic_auth`, and `htpasswd` (if any) written
/// to `htpasswd` beside the config. A folder `secret/` exists, empty, as an optional Secret
/// volume whose Secret does not exist yet.
fn start_with(htpasswd: Option<&str>, auth: &str) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("www/admin")).unwrap();
    std::fs::create_dir_all(p.join("www/limited")).unwrap();
    std::fs::write(p.join("www/index.html"), "www home").unwrap();
    std::fs::write(p.join("www/admin/index.html"), "admin area").unwrap();
    std::fs::write(p.join("www/limited/index.html"), "limited area").unwrap();
    std::fs::create_dir_all(p.join("secret")).unwrap();
    if let Some(htpasswd) = htpasswd {
        std::fs::write(p.join("htpasswd"), htpasswd).unwrap();
    }
    let config = p.join("skiff.yaml");
    std::fs::write(
        &config,
        format!(
            r#"listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
threads: 1
virtual_servers:
  - name: www
    hosts: [www.example.com]
    default: true
    root: www
    rules:
      - match: {{ prefix: /admin/ }}
        action: {{ static: {{}} }}
        basic_auth: {auth}
      - match: {{ prefix: /limited/ }}
        action: {{ static: {{}} }}
        basic_auth: {auth}
        rate_limit: {{ requests_per_second: 0.001, burst: 1 }}
"#
        ),
    )
    .unwrap();
    let srv = Server::run_config(&config);
    (dir, srv)
}

fn alice() -> String {
    format!("alice:{}\n", bcrypt::hash("s3cret", 4).unwrap())
}

fn basic(user_password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(user_password)
}

fn get(path: &str, user_password: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: www.example.com\r\nAuthorization: Basic {}\r\nConnection: close\r\n\r\n",
        basic(user_password)
    )
}

fn verifications(srv: &Server, result: &str) -> f64 {
    srv.metric(&format!(
        "skiff_auth_verifications_total{{result=\"{result}\"}}"
    ))
    .unwrap_or(0.0)
}

fn status(response: &str) -> u16 {
    response[9..12].parse().unwrap()
}

#[test]
fn wrong_right_and_remembered_credentials_on_both_paths() {
    let (_dir, srv) = start(&alice());
    // The fast path (plain HTTP/1.1 GET).
    let resp = raw_exchange(srv.addr, &get("/admin/", "alice:wrong"));
    assert_eq!(status(&resp), 401, "{resp}");
    assert!(
        resp.contains("www-authenticate: Basic realm=\"Admin\", charset=\"UTF-8\"\r\n"),
        "{resp}"
    );
    assert_eq!(verifications(&srv, "wrong_password"), 1.0);
    let resp = raw_exchange(srv.addr, &get("/admin/", "alice:s3cret"));
    assert_eq!(status(&resp), 200, "{resp}");
    assert!(resp.ends_with("admin area"), "{resp}");
    assert_eq!(verifications(&srv, "success"), 1.0);
    // The same Authorization again, on the fast path and over h2c: remembered, no bcrypt.
    let resp = raw_exchange(srv.addr, &get("/admin/", "alice:s3cret"));
    assert_eq!(status(&resp), 200, "{resp}");
    let h2 = |user_password: &str| {
        curl(&[
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-u",
            user_password,
            "-H",
            "Host: www.example.com",
            &srv.url("/admin/"),
        ])
        .stdout
    };
    assert_eq!(h2("alice:s3cret"), b"200");
    assert_eq!(verifications(&srv, "success"), 1.0);
    assert_eq!(verifications(&srv, "wrong_password"), 1.0);
    // hyper verifies too: a wrong password there costs a bcrypt and is refused.
    assert_eq!(h2("alice:nope"), b"401");
    assert_eq!(verifications(&srv, "wrong_password"), 2.0);
    assert_eq!(srv.metric("skiff_auth_verifications_pending"), Some(0.0));
}

#[test]
fn an_unknown_user_costs_a_bcrypt_like_a_known_one() {
    let (_dir, srv) = start(&alice());
    let resp = raw_exchange(srv.addr, &get("/admin/", "mallory:s3cret"));
    assert_eq!(status(&resp), 401, "{resp}");
    assert!(resp.contains("www-authenticate: Basic"), "{resp}");
    assert_eq!(verifications(&srv, "unknown_user"), 1.0);
    // Garbled credentials name no user: refused with no bcrypt.
    let garbled = "GET /admin/ HTTP/1.1\r\nHost: www.example.com\r\nAuthorization: Basic !!\r\nConnection: close\r\n\r\n";
    assert_eq!(status(&raw_exchange(srv.addr, garbled)), 401);
    assert_eq!(verifications(&srv, "unknown_user"), 1.0);
    assert_eq!(verifications(&srv, "wrong_password"), 0.0);
}

/// Waits (without asserting any duration) until the admin endpoint reports `n`
/// verifications waiting or running.
fn wait_pending(srv: &Server, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while srv.metric("skiff_auth_verifications_pending") != Some(n) {
        assert!(
            Instant::now() < deadline,
            "{n} verifications never started: {:?}",
            srv.metric("skiff_auth_verifications_pending")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_slow_verification_does_not_hold_up_the_serving_thread() {
    // A cost-13 entry (bcrypt recomputes it at that cost, whatever the digest says): each
    // verification takes seconds, so ordering shows where it runs.
    let slow = bcrypt::hash("s3cret", 4)
        .unwrap()
        .replacen("$04$", "$13$", 1);
    let (_dir, srv) = start(&format!("alice:{slow}\n"));
    // One verification on the fast path, one through hyper (h2c).
    let mut fast = TcpStream::connect(srv.addr).unwrap();
    fast.write_all(get("/admin/", "alice:wrong").as_bytes())
        .unwrap();
    let mut h2c = Command::new("curl")
        .args([
            "-s",
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(["-u", "alice:wrong", "-H", "Host: www.example.com"])
        .arg(srv.url("/admin/"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_pending(&srv, 2.0);
    // The only serving thread answers another client meanwhile...
    let resp = raw_exchange(
        srv.addr,
        "GET /index.html HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&resp), 200, "{resp}");
    assert!(resp.ends_with("www home"), "{resp}");
    // ...before either verification has answered.
    fast.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(
        fast.read(&mut byte).map_err(|e| e.kind()).err(),
        Some(ErrorKind::WouldBlock),
        "the fast-path verification answered before the static GET"
    );
    assert!(
        h2c.try_wait().unwrap().is_none(),
        "the h2c verification answered before the static GET"
    );
    // Both end in 401.
    fast.set_nonblocking(false).unwrap();
    fast.set_read_timeout(Some(Duration::from_secs(600)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = fast.read_to_end(&mut rest);
    assert_eq!(status(&String::from_utf8_lossy(&rest)), 401);
    let out = h2c.wait_with_output().unwrap();
    assert_eq!(out.stdout, b"401");
    assert_eq!(verifications(&srv, "wrong_password"), 2.0);
}

#[test]
fn a_verified_request_takes_one_rate_limit_token() {
    // Routed again after its verification, a request is not charged twice: with a burst
    // of one, the first right password is served, and only the next one is limited.
    let (_dir, srv) = start(&alice());
    let resp = raw_exchange(srv.addr, &get("/limited/", "alice:s3cret"));
    assert_eq!(status(&resp), 200, "{resp}");
    assert_eq!(verifications(&srv, "success"), 1.0);
    let resp = raw_exchange(srv.addr, &get("/limited/", "alice:s3cret"));
    assert_eq!(status(&resp), 429, "{resp}");
}

/// Polls `/admin/` as `user_password` until it answers `want`, for up to 10 s.
fn wait_for_status(srv: &Server, user_password: &str, want: u16, what: &str) {
    let end = Instant::now() + Duration::from_secs(10);
    while status(&raw_exchange(srv.addr, &get("/admin/", user_password))) != want {
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// alice signs in, then the file is rewritten with bob only (a leaked password taken out).
fn replace_alice_with_bob(srv: &Server, dir: &std::path::Path) {
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "alice:s3cret"))),
        200
    );
    std::fs::write(
        dir.join("htpasswd"),
        format!("bob:{}\n", bcrypt::hash("other", 4).unwrap()),
    )
    .unwrap();
}

#[test]
fn sighup_reads_a_rewritten_htpasswd_even_when_the_config_is_unchanged() {
    // A leaked password is taken out of the file, then SIGHUP: the remembered credentials
    // go with the old generation, and the config's text alone says nothing changed.
    let (dir, srv) = start(&alice());
    replace_alice_with_bob(&srv, dir.path());
    srv.signal("HUP");
    wait_for_status(
        &srv,
        "alice:s3cret",
        401,
        "alice's removed password still works after SIGHUP",
    );
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "bob:other"))),
        200
    );
}

#[test]
fn a_rewritten_htpasswd_applies_without_a_signal() {
    // As nginx reads auth_basic_user_file per request: revoking a user in the file (or
    // its Secret) needs no SIGHUP and no restart.
    let (dir, srv) = start(&alice());
    replace_alice_with_bob(&srv, dir.path());
    wait_for_status(
        &srv,
        "alice:s3cret",
        401,
        "alice's removed password still works",
    );
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "bob:other"))),
        200
    );
    // Emptied: nobody gets in (a revocation must not fail the reload and keep the users).
    std::fs::write(dir.path().join("htpasswd"), "# nobody\n").unwrap();
    wait_for_status(
        &srv,
        "bob:other",
        401,
        "bob still gets in through an emptied file",
    );
    std::fs::write(
        dir.path().join("htpasswd"),
        format!("bob:{}\n", bcrypt::hash("other", 4).unwrap()),
    )
    .unwrap();
    wait_for_status(
        &srv,
        "bob:other",
        200,
        "bob's entry written back is not used",
    );
    // A line refused on a reload leaves only its user out (as nginx reads the file): an
    // edit that removes bob and adds carol with a plaintext mistake still removes bob.
    std::fs::write(
        dir.path().join("htpasswd"),
        format!("carol:plaintext\n{}", alice()),
    )
    .unwrap();
    wait_for_status(
        &srv,
        "bob:other",
        401,
        "bob, removed beside a bad line, still gets in",
    );
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "alice:s3cret"))),
        200
    );
    assert_eq!(
        srv.metric("skiff_config_reloads_total{result=\"failure\"}")
            .unwrap_or(0.0),
        0.0,
        "a bad line refused the whole reload"
    );
    // Seen without the log: carol's line is counted as left out, until it is fixed.
    let left_out = "skiff_basic_auth_entries_left_out";
    assert_eq!(srv.metric(left_out), Some(1.0));
    std::fs::write(dir.path().join("htpasswd"), alice()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while srv.metric(left_out) != Some(0.0) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(srv.metric(left_out), Some(0.0));
}

#[test]
fn an_optional_htpasswd_denies_until_it_exists_then_serves_its_users() {
    // An optional Secret volume whose Secret is created after the pod: the config loads,
    // the protected rules deny everyone meanwhile, and the file is used once it appears.
    let (dir, srv) = start_with(
        None,
        "{ realm: Admin, htpasswd: secret/htpasswd, optional: true }",
    );
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "alice:s3cret"))),
        401
    );
    let open = raw_exchange(
        srv.addr,
        "GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&open), 200, "the rest of the site serves: {open}");
    assert_eq!(
        verifications(&srv, "failure"),
        0.0,
        "nothing to verify against"
    );
    std::fs::write(dir.path().join("secret/htpasswd"), alice()).unwrap();
    wait_for_status(
        &srv,
        "alice:s3cret",
        200,
        "the htpasswd that appeared is not used",
    );
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "alice:wrong"))),
        401
    );
}

#[test]
fn a_rule_whose_htpasswd_folder_is_not_on_this_pod_keeps_its_users() {
    // The Secret renamed: a pod started before has no folder for the new name and keeps
    // the users the rule had; an empty folder (a new Secret not there yet) denies.
    let (dir, srv) = start_with(
        Some(&alice()),
        "{ realm: Admin, htpasswd: htpasswd, optional: true }",
    );
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "alice:s3cret"))),
        200
    );
    let config = dir.path().join("skiff.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let reloads = |srv: &Server| {
        srv.metric("skiff_config_reloads_total{result=\"success\"}")
            .unwrap_or(0.0)
    };
    let before = reloads(&srv);
    std::fs::write(
        &config,
        text.replace("htpasswd: htpasswd", "htpasswd: renamed/htpasswd"),
    )
    .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while reloads(&srv) <= before {
        assert!(Instant::now() < end, "the reload did not apply");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "alice:s3cret"))),
        200,
        "the rule lost its users on a pod that cannot have the new folder"
    );
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "alice:wrong"))),
        401
    );
    let before = reloads(&srv);
    std::fs::write(
        &config,
        text.replace("htpasswd: htpasswd", "htpasswd: secret/htpasswd"),
    )
    .unwrap();
    wait_for_status(&srv, "alice:s3cret", 401, "an empty folder let alice in");
    assert!(reloads(&srv) > before);
    // Back to a file that exists, then its folder removed (to revoke): the same file's
    // folder gone is no rename, and nobody keeps access.
    std::fs::create_dir_all(dir.path().join("auth")).unwrap();
    std::fs::write(dir.path().join("auth/htpasswd"), alice()).unwrap();
    std::fs::write(
        &config,
        text.replace("htpasswd: htpasswd", "htpasswd: auth/htpasswd"),
    )
    .unwrap();
    wait_for_status(&srv, "alice:s3cret", 200, "auth/htpasswd is not used");
    std::fs::remove_dir_all(dir.path().join("auth")).unwrap();
    srv.signal("HUP");
    wait_for_status(
        &srv,
        "alice:s3cret",
        401,
        "removing the folder did not revoke alice",
    );
}

#[test]
fn an_optional_htpasswd_with_a_refused_line_still_starts() {
    // A Secret's file: the running pods left the line out on a reload, so a pod started
    // later (a rollout, a scale-up) must not fail on it.
    let (_dir, srv) = start_with(
        Some(&format!("carol:plaintext\n{}", alice())),
        "{ realm: Admin, htpasswd: htpasswd, optional: true }",
    );
    assert_eq!(
        status(&raw_exchange(srv.addr, &get("/admin/", "alice:s3cret"))),
        200
    );
}

#[test]
fn a_missing_htpasswd_that_is_not_optional_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("www")).unwrap();
    let config = dir.path().join("skiff.yaml");
    std::fs::write(
        &config,
        r#"listen: 127.0.0.1:0
virtual_servers:
  - name: www
    hosts: [www.example.com]
    root: www
    rules:
      - match: { prefix: /admin/ }
        action: { static: {} }
        basic_auth: { htpasswd: missing/htpasswd }
"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a missing htpasswd passed: {stderr}");
    assert!(
        stderr.contains("rules[0].basic_auth.htpasswd: cannot read")
            && stderr.contains("missing/htpasswd"),
        "{stderr}"
    );
}
