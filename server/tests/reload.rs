//! Hot reload through the real binary: valid and invalid changes, the Kubernetes ConfigMap
//! symlink swap, and changes that need a restart.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

fn config(root: &Path, body: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nthreads: 1\nvirtual_servers:\n  - name: site\n    default: true\n    root: {}\n    rules:\n      - match: {{ path: /which }}\n        action: {{ return: {{ status: 200, body: \"{body}\" }} }}\n",
        root.display()
    )
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

fn which(srv: &Server) -> String {
    String::from_utf8(curl(&[&srv.url("/which")]).stdout).unwrap()
}

/// The served config's hash from `skiff_config_info`, checked against `/config-hash`
/// (what the operator reads back from each pod).
fn info_hash(srv: &Server) -> String {
    let (_, body) = srv.admin_get("/metrics");
    let hash = body
        .lines()
        .find_map(|l| l.strip_prefix("skiff_config_info{hash=\""))
        .and_then(|l| l.split('"').next())
        .map(str::to_owned)
        .expect("skiff_config_info present");
    let (_, text) = srv.admin_get("/config-hash");
    assert_eq!(
        text,
        format!("{hash}\n"),
        "/config-hash disagrees with the metric"
    );
    hash
}

/// Asks `/which` on a kept-alive connection and reads one response, up to `body`.
fn which_on(conn: &mut TcpStream, body: &str) -> String {
    conn.write_all(b"GET /which HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(body.len()).any(|w| w == body.as_bytes()) {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn valid_change_applies_and_invalid_change_keeps_the_old_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skiff.yaml");
    std::fs::write(&path, config(dir.path(), "one")).unwrap();
    let srv = Server::run_config(&path);
    assert_eq!(which(&srv), "one");
    let first_hash = info_hash(&srv);
    // A connection kept alive across the reload: its next request gets the new config
    // (the worker's cached copy of it is checked per request).
    let mut kept = TcpStream::connect(srv.addr).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(which_on(&mut kept, "one").ends_with("\r\n\r\none"));

    std::fs::write(&path, config(dir.path(), "two")).unwrap();
    wait_for("the new config", || which(&srv) == "two");
    let answer = which_on(&mut kept, "two");
    assert!(answer.ends_with("\r\n\r\ntwo"), "{answer}");
    assert_eq!(
        srv.metric("skiff_config_reloads_total{result=\"success\"}"),
        Some(1.0)
    );
    assert_ne!(info_hash(&srv), first_hash, "the hash follows the config");
    assert!(
        srv.metric("skiff_config_last_reload_success_timestamp_seconds")
            .unwrap()
            > 1.7e9
    );

    // Broken YAML, then a config that validates but cannot load: both refused, "two" stays.
    std::fs::write(&path, "virtual_servers: [\n").unwrap();
    wait_for("a failed reload", || {
        srv.metric("skiff_config_reloads_total{result=\"failure\"}") == Some(1.0)
    });
    assert_eq!(which(&srv), "two");
    std::fs::write(&path, config(&dir.path().join("missing-root"), "three")).unwrap();
    wait_for("a second failed reload", || {
        srv.metric("skiff_config_reloads_total{result=\"failure\"}") == Some(2.0)
    });
    assert_eq!(which(&srv), "two");
}

#[test]
fn listener_changes_need_a_restart_and_are_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skiff.yaml");
    std::fs::write(&path, config(dir.path(), "one")).unwrap();
    let srv = Server::run_config(&path);
    let changed = config(dir.path(), "two").replace("threads: 1", "threads: 2");
    std::fs::write(&path, changed).unwrap();
    wait_for("restart_required", || {
        srv.metric("skiff_config_reloads_total{result=\"restart_required\"}") == Some(1.0)
    });
    assert_eq!(which(&srv), "one", "never half-applied");
}

#[test]
fn configmap_symlink_swap_reloads() {
    // The kubelet's layout: skiff.yaml -> ..data/skiff.yaml, ..data -> ..<timestamp>, and an
    // update swaps ..data atomically with a rename.
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("config");
    let site = dir.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    let generation = |name: &str, body: &str| {
        let g = mount.join(name);
        std::fs::create_dir_all(&g).unwrap();
        std::fs::write(g.join("skiff.yaml"), config(&site, body)).unwrap();
    };
    std::fs::create_dir_all(&mount).unwrap();
    generation("..2026_11_21_01", "first");
    std::os::unix::fs::symlink("..2026_11_21_01", mount.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/skiff.yaml", mount.join("skiff.yaml")).unwrap();
    let srv = Server::run_config(&mount.join("skiff.yaml"));
    assert_eq!(which(&srv), "first");

    generation("..2026_11_21_02", "second");
    std::os::unix::fs::symlink("..2026_11_21_02", mount.join("..data_tmp")).unwrap();
    std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
    std::fs::remove_dir_all(mount.join("..2026_11_21_01")).unwrap();
    wait_for("the swapped config", || which(&srv) == "second");
}

#[test]
fn sighup_reloads_when_the_watcher_cannot_see_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let real = tempfile::tempdir().unwrap();
    // The config is reached through a symlinked folder whose target changes; the watched
    // folder itself sees no event, so SIGHUP is the way to reload.
    let a = real.path().join("a");
    let b = real.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("skiff.yaml"), config(dir.path(), "a")).unwrap();
    std::fs::write(b.join("skiff.yaml"), config(dir.path(), "b")).unwrap();
    let link = dir.path().join("current");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let srv = Server::run_config(&link.join("skiff.yaml"));
    assert_eq!(which(&srv), "a");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&b, &link).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    srv.signal("HUP");
    wait_for("the config after SIGHUP", || which(&srv) == "b");
}

/// The bar: 50 connections for 10 s on loopback, at least 20 reloads, and not one
/// failed or non-2xx request. The script prints the counts.
#[test]
fn reloads_under_load_drop_nothing() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/reload_under_load.py");
    let out = std::process::Command::new("python3")
        .args([
            script,
            "--seconds",
            "10",
            "--reloads",
            "25",
            "--connections",
            "50",
            "--skiff",
            env!("CARGO_BIN_EXE_skiff"),
        ])
        .output()
        .expect("python3 and wrk are installed by scripts/install-deps.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "reload under load failed: {text}");
    assert!(text.contains("errors=0 non2xx=0"), "{text}");
}

#[test]
fn sighup_to_skiff_serve_is_not_a_stop() {
    // No config file to reload: the default action of SIGHUP would end the server.
    let site = sample_site();
    let mut srv = Server::start(site.path(), &[]);
    srv.signal("HUP");
    wait_for("the SIGHUP warning", || {
        srv.stderr_text()
            .contains("SIGHUP: no configuration file to reload")
    });
    assert_eq!(srv.wait_exit(Duration::from_millis(300)), None, "it exited");
    assert!(raw_exchange(
        srv.addr,
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .starts_with("HTTP/1.1 200"));
}

#[test]
fn a_config_written_in_pieces_is_read_once_whole() {
    // Written in place in pieces 30 ms apart, each prefix a valid config with another
    // root (w, ww, ... eight w): only the whole file may ever serve.
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = std::iter::once("start".to_owned())
        .chain((1..=8).map(|n| "w".repeat(n)))
        .collect();
    for name in &names {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
        std::fs::write(dir.path().join(name).join("index.html"), name).unwrap();
    }
    let head = "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nthreads: 1\nvirtual_servers:\n  - name: site\n    default: true\n    root: ";
    let path = dir.path().join("skiff.yaml");
    std::fs::write(&path, format!("{head}{}/start\n", dir.path().display())).unwrap();
    let srv = Server::run_config(&path);
    let served = || String::from_utf8(curl(&[&srv.url("/")]).stdout).unwrap();
    assert_eq!(served(), "start");
    let writer = {
        let (path, root) = (path.clone(), dir.path().to_owned());
        std::thread::spawn(move || {
            let mut f = std::fs::File::create(&path).unwrap();
            f.write_all(format!("{head}{}/w", root.display()).as_bytes())
                .unwrap();
            for piece in ["w", "w", "w", "w", "w", "w", "w", "\n"] {
                std::thread::sleep(Duration::from_millis(30));
                f.write_all(piece.as_bytes()).unwrap();
            }
        })
    };
    let end = Instant::now() + Duration::from_secs(3);
    let mut seen = Vec::new();
    while Instant::now() < end {
        let now = served();
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    writer.join().unwrap();
    assert_eq!(
        seen,
        ["start", "wwwwwwww"],
        "what was served while the file was written"
    );
}
