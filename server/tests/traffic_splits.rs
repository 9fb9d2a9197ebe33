//! Canary releases through the real binary: a weighted split between two Python HTTP
//! backends, testers pinned by a cookie or header, and the weights moved by a hot reload.

mod common;
use common::backends::*;
use common::*;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

fn config(root: &Path, stable: u16, next: u16, weights: (u32, u32)) -> String {
    format!(
        r#"listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
threads: 2
virtual_servers:
  - name: shop
    default: true
    root: {root}
    rules:
      - match: {{ prefix: /api/, cookies: [{{ name: canary, value: always }}] }}
        action: {{ proxy: {{ pool: next }} }}
      - match: {{ prefix: /api/, headers: [{{ name: X-Canary }}] }}
        action: {{ proxy: {{ pool: next }} }}
      - match: {{ prefix: /api/ }}
        action:
          split:
            - {{ weight: {w0}, action: {{ proxy: {{ pool: stable }} }} }}
            - {{ weight: {w1}, action: {{ proxy: {{ pool: next }} }} }}
        headers: {{ set: {{ X-Rule: api }} }}
      - match: {{ prefix: /moved/ }}
        action:
          split:
            - {{ weight: 50, action: {{ redirect: {{ to: "https://new.example$uri", status: 307 }} }} }}
            - {{ weight: 50, action: {{ static: {{}} }} }}
      - action: {{ static: {{}} }}
pools:
  - {{ name: stable, protocol: http, endpoints: ["127.0.0.1:{stable}"] }}
  - {{ name: next, protocol: http, endpoints: ["127.0.0.1:{next}"] }}
"#,
        root = root.display(),
        w0 = weights.0,
        w1 = weights.1,
    )
}

/// Which backend answered each of `n` requests for `path`, over one keep-alive
/// connection (curl reuses it for repeated URLs).
fn tally(srv: &Server, path: &str, n: usize, extra: &[&str]) -> HashMap<String, usize> {
    let url = srv.url(path);
    let mut args: Vec<&str> = extra.to_vec();
    args.extend(std::iter::repeat_n(url.as_str(), n));
    let out = curl(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut counts = HashMap::new();
    for name in text.lines().filter_map(|l| l.strip_prefix("name=")) {
        *counts.entry(name.to_owned()).or_insert(0) += 1;
    }
    assert_eq!(counts.values().sum::<usize>(), n, "{text}");
    counts
}

#[test]
fn a_canary_takes_its_share_testers_are_pinned_and_a_reload_moves_the_weights() {
    let dir = tempfile::tempdir().unwrap();
    let (_stable, stable) = echo_server(dir.path(), "stable");
    let (_next, next) = echo_server(dir.path(), "next");
    std::fs::create_dir(dir.path().join("moved")).unwrap();
    std::fs::write(dir.path().join("moved/page.html"), "static page\n").unwrap();
    let path = dir.path().join("skiff.yaml");
    std::fs::write(&path, config(dir.path(), stable, next, (80, 20))).unwrap();
    let srv = Server::run_config(&path);

    // 400 requests at 20 %: 80 expected, a standard deviation of 8.
    let counts = tally(&srv, "/api/items", 400, &[]);
    let to_next = counts.get("next").copied().unwrap_or(0);
    assert!((40..=120).contains(&to_next), "{counts:?}");
    assert_eq!(counts.len(), 2, "{counts:?}");

    // Testers reach the canary on every request, by cookie (among others) or header.
    let pinned = tally(
        &srv,
        "/api/items",
        20,
        &["-H", "Cookie: session=abc; canary=always; theme=dark"],
    );
    assert_eq!(pinned.get("next"), Some(&20), "{pinned:?}");
    let pinned = tally(&srv, "/api/items", 20, &["-H", "X-Canary: 1"]);
    assert_eq!(pinned.get("next"), Some(&20), "{pinned:?}");
    // A cookie with another value, or the name as a prefix of another, is not the tester's.
    let others = tally(
        &srv,
        "/api/items",
        200,
        &["-H", "Cookie: canary=never; xcanary=always"],
    );
    assert_eq!(others.len(), 2, "still split: {others:?}");

    // The rule's modifiers apply whichever target answers, over HTTP/2 as well.
    let (status, headers, body) = curl_i(&["--http2-prior-knowledge", &srv.url("/api/x")]);
    assert_eq!(status, 200);
    assert_eq!(get_header(&headers, "x-rule"), Some("api"));
    assert!(String::from_utf8_lossy(&body).contains("GET /api/x"));

    // A split between a redirect and the files: a site moving elsewhere in halves.
    let mut moved = 0;
    let mut served = 0;
    for _ in 0..60 {
        let (status, headers, body) = curl_i(&[&srv.url("/moved/page.html?x")]);
        match status {
            307 => {
                assert_eq!(
                    get_header(&headers, "location"),
                    Some("https://new.example/moved/page.html")
                );
                moved += 1;
            }
            200 => {
                assert_eq!(body, b"static page\n");
                served += 1;
            }
            other => panic!("{other}"),
        }
    }
    assert!(moved > 0 && served > 0, "{moved} moved, {served} served");

    // The rollout's last step, by a hot reload: everything to the new version.
    std::fs::write(&path, config(dir.path(), stable, next, (0, 100))).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while srv.metric("skiff_config_reloads_total{result=\"success\"}") != Some(1.0) {
        assert!(Instant::now() < end, "no reload: {}", srv.stderr_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = tally(&srv, "/api/items", 100, &[]);
    assert_eq!(after.get("next"), Some(&100), "{after:?}");

    // Weights that do not add up are refused by the reload, and the old split stays.
    std::fs::write(&path, config(dir.path(), stable, next, (50, 40))).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while srv.metric("skiff_config_reloads_total{result=\"failure\"}") != Some(1.0) {
        assert!(
            Instant::now() < end,
            "no failed reload: {}",
            srv.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        srv.stderr_text()
            .contains("rules[2].action.split: the weights add up to 90; they must add up to 100"),
        "{}",
        srv.stderr_text()
    );
    let kept = tally(&srv, "/api/items", 50, &[]);
    assert_eq!(kept.get("next"), Some(&50), "{kept:?}");
}
