//! Operations through the real binary: metrics, sendfile use, the access log, cache
//! freshness, a file truncated mid-send, graceful shutdown with a request in flight, and the
//! serving threads' CPU scheduling policy.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn metrics_are_exposed_with_bounded_labels() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    curl(&[&srv.url("/a.txt")]);
    curl(&[&srv.url("/a.txt")]);
    curl(&[&srv.url("/nope/random-path-123")]);
    curl(&["-X", "BREW", &srv.url("/a.txt")]);
    let (st, body) = srv.admin_get("/metrics");
    assert_eq!(st, 200);
    for name in [
        "skiff_http_requests_total",
        "skiff_http_request_duration_seconds_bucket",
        "skiff_http_response_bytes_total",
        "skiff_connections_open",
        "skiff_cache_hits_total",
        "skiff_cache_misses_total",
        "skiff_cache_bytes",
        "skiff_sendfile_bytes_total",
        "skiff_build_info{version=\"",
    ] {
        assert!(body.contains(name), "missing {name}:\n{body}");
    }
    assert_eq!(
        srv.metric("skiff_http_requests_total{vhost=\"default\",method=\"GET\",code=\"200\"}"),
        Some(2.0)
    );
    assert_eq!(
        srv.metric("skiff_http_requests_total{vhost=\"default\",method=\"GET\",code=\"404\"}"),
        Some(1.0)
    );
    assert_eq!(
        srv.metric("skiff_http_requests_total{vhost=\"default\",method=\"OTHER\",code=\"405\"}"),
        Some(1.0)
    );
    assert!(
        !body.contains("random-path") && !body.contains("BREW"),
        "request data leaked into labels"
    );
    assert!(srv.metric("skiff_cache_hits_total").unwrap() >= 1.0);
    assert!(srv.metric("skiff_cache_bytes").unwrap() > 0.0);
    assert_eq!(srv.admin_get("/healthz").0, 200);
    assert_eq!(srv.admin_get("/readyz").0, 200);
}

#[test]
fn sendfile_path_carries_large_bodies() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let out = curl(&[&srv.url("/big.bin")]);
    assert_eq!(out.stdout, big_bin_bytes());
    let sent = srv.metric("skiff_sendfile_bytes_total").unwrap();
    assert!(
        sent >= (2 * 1024 * 1024) as f64,
        "sendfile carried {sent} bytes"
    );
    // h2c does not use sendfile: the counter must not move.
    let client = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let body = client
        .get(srv.url("/big.bin"))
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    assert_eq!(body.len(), 2 * 1024 * 1024);
    assert_eq!(srv.metric("skiff_sendfile_bytes_total").unwrap(), sent);

    // With sendfile disabled by threshold, the pread path serves the same bytes.
    let srv2 = Server::start(site.path(), &["--sendfile-min-bytes", "100000000"]);
    let out = curl(&[&srv2.url("/big.bin")]);
    assert_eq!(out.stdout, big_bin_bytes());
    assert_eq!(srv2.metric("skiff_sendfile_bytes_total"), Some(0.0));
}

/// Needs strace; run with `cargo test -- --ignored`.
#[test]
#[ignore]
fn strace_shows_sendfile_and_no_file_syscalls_on_cache_hits() {
    let site = sample_site();
    let srv = Server::start(site.path(), &["--threads", "1"]);
    curl(&[&srv.url("/a.txt")]); // warm the cache
    let trace = tempfile::NamedTempFile::new().unwrap();
    let mut strace = std::process::Command::new("strace")
        .args([
            "-f",
            "-e",
            "trace=sendfile,openat,openat2,statx,newfstatat,fstat,read,pread64",
            "-o",
        ])
        .arg(trace.path())
        .args(["-p", &srv.child.id().to_string()])
        .spawn()
        .expect("strace");
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..5 {
        curl(&[&srv.url("/a.txt")]);
    }
    curl(&[&srv.url("/big.bin")]);
    std::thread::sleep(Duration::from_millis(300));
    let _ = strace.kill();
    let _ = strace.wait();
    let log = std::fs::read_to_string(trace.path()).unwrap();
    assert!(log.contains("sendfile("), "{log}");
    let fs_calls: Vec<&str> = log
        .lines()
        .filter(|l| {
            ["openat", "statx", "newfstatat", "fstat("]
                .iter()
                .any(|c| l.contains(c))
                && l.contains("a.txt")
        })
        .collect();
    assert!(
        fs_calls.is_empty(),
        "a cache hit touched the file system:\n{fs_calls:?}"
    );
}

#[test]
fn access_log_is_combined_by_default_and_json_on_request() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    curl(&[
        "-A",
        "test-agent/1.0",
        "-e",
        "http://ref.example/",
        &srv.url("/a.txt?q=1"),
    ]);
    let client = reqwest::blocking::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    client.get(srv.url("/docs/")).send().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut log = String::new();
    while Instant::now() < deadline {
        log = srv.access_log();
        if log.lines().count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let first = log.lines().find(|l| l.contains("/a.txt")).expect(&log);
    assert!(first.starts_with("127.0.0.1 - - ["), "{first}");
    assert!(
        first.ends_with(
            "] \"GET /a.txt?q=1 HTTP/1.1\" 200 36 \"http://ref.example/\" \"test-agent/1.0\""
        ),
        "{first}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("\"GET /docs/ HTTP/2.0\" 200")),
        "{log}"
    );

    let srv = Server::start(site.path(), &["--access-log", "json"]);
    curl(&[&srv.url("/a.txt")]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while srv.access_log().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let line = srv.access_log();
    assert!(
        line.starts_with("{\"time\":\"") && line.contains("\"status\":200,\"bytes\":36"),
        "{line}"
    );

    let srv = Server::start(site.path(), &["--access-log", "off"]);
    curl(&[&srv.url("/a.txt")]);
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(srv.access_log(), "");
}

/// The fast path reads the clock once per turn, and a batch of cache hits from memory
/// ends in the turn it was read in; a request that went to the disk is timed.
#[test]
fn a_request_that_reads_the_disk_is_timed_on_the_fast_path() {
    let site = sample_site();
    let srv = Server::start(site.path(), &["--access-log", "json", "--threads", "1"]);
    // The first request for the file opens and reads it (a cache miss).
    let resp = raw_exchange(
        srv.addr,
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(resp.starts_with("HTTP/1.1 200 OK"), "{resp}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while srv.access_log().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = srv.access_log();
    let line: serde_json::Value = serde_json::from_str(log.lines().next().expect(&log)).unwrap();
    assert_eq!(line["target"], "/a.txt", "{line}");
    assert!(
        line["duration_us"].as_u64().unwrap() > 0,
        "a miss read the file in no time: {line}"
    );
}

#[test]
fn changed_and_deleted_files_are_served_fresh_within_the_interval() {
    let site = sample_site();
    let srv = Server::start(site.path(), &["--cache-revalidate", "200ms"]);
    assert_eq!(
        curl(&[&srv.url("/a.txt")]).stdout,
        b"0123456789abcdefghijklmnopqrstuvwxyz"
    );
    assert_eq!(
        curl(&[&srv.url("/a.txt")]).stdout,
        b"0123456789abcdefghijklmnopqrstuvwxyz"
    );
    std::fs::write(site.path().join("a.txt"), "new content").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(curl(&[&srv.url("/a.txt")]).stdout, b"new content");
    std::fs::remove_file(site.path().join("a.txt")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (st, _, _) = curl_i(&[&srv.url("/a.txt")]);
    assert_eq!(st, 404);
}

#[test]
fn truncation_mid_sendfile_closes_only_that_connection() {
    truncation_mid_send(&["--sendfile-max-bytes", "0"]);
}

#[test]
fn truncation_mid_pread_closes_only_that_connection() {
    truncation_mid_send(&["--sendfile-min-bytes", "999999999999"]);
}

/// Cuts a file being served down to 1 KiB in place.
fn shrink_to_1k(path: &std::path::Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(1024)
        .unwrap();
}

fn truncation_mid_send(flags: &[&str]) {
    let site = sample_site();
    let path = site.path().join("huge.bin");
    std::fs::write(&path, vec![b'z'; 64 * 1024 * 1024]).unwrap();
    let srv = Server::start(site.path(), flags);
    let mut s = TcpStream::connect(srv.addr).unwrap();
    // A small receive buffer keeps most of the body on the server side.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let n = s.read(&mut buf).unwrap();
    assert!(n > 0);
    shrink_to_1k(&path);
    let mut total = n;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => total += k,
            Err(e) => panic!("expected a close, got {e}"),
        }
    }
    assert!(
        total < 64 * 1024 * 1024,
        "the connection was closed short of Content-Length"
    );
    // Other requests are unaffected.
    assert_eq!(
        curl(&[&srv.url("/a.txt")]).stdout,
        b"0123456789abcdefghijklmnopqrstuvwxyz"
    );
}

/// HTTP/2 reads a file into its write batches as frames are cut: a file cut short under
/// a download resets that stream (the client must not take it for a whole body) and
/// the server goes on serving.
#[test]
fn truncation_mid_http2_download_resets_that_stream() {
    let site = sample_site();
    let path = site.path().join("huge.bin");
    std::fs::write(&path, vec![b'z'; 64 * 1024 * 1024]).unwrap();
    let srv = Server::start(site.path(), &[]);
    let body = tempfile::NamedTempFile::new().unwrap();
    // Read slowly, so most of the file is still to be read when it shrinks.
    let mut download = std::process::Command::new("curl")
        .args([
            "-sS",
            "--http2-prior-knowledge",
            "--limit-rate",
            "20M",
            "-o",
        ])
        .arg(body.path())
        .arg(srv.url("/huge.bin"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    shrink_to_1k(&path);
    let end = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = download.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < end,
            "the download neither ended nor failed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    download
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "a cut-short body looked whole: {stderr}");
    assert!(stderr.contains("INTERNAL_ERROR"), "{stderr}");
    let got = std::fs::metadata(body.path()).unwrap().len();
    assert!(got < 64 * 1024 * 1024, "{got} bytes");
    // Other requests, over HTTP/2 too, are unaffected.
    assert_eq!(
        curl(&["--http2-prior-knowledge", &srv.url("/a.txt")]).stdout,
        b"0123456789abcdefghijklmnopqrstuvwxyz"
    );
}

#[test]
fn graceful_shutdown_finishes_in_flight_responses() {
    let site = sample_site();
    let path = site.path().join("huge.bin");
    std::fs::write(&path, vec![b'q'; 32 * 1024 * 1024]).unwrap();
    let mut srv = Server::start(
        site.path(),
        &["--shutdown-delay", "700ms", "--shutdown-grace", "20s"],
    );
    // An idle keep-alive connection, which must be closed by the drain.
    let mut idle = TcpStream::connect(srv.addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    idle.write_all(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    assert!(idle.read(&mut buf).unwrap() > 0);
    // A request in flight, read slowly.
    let mut busy = TcpStream::connect(srv.addr).unwrap();
    busy.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    busy.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut got = busy.read(&mut buf).unwrap();

    srv.signal("TERM");
    std::thread::sleep(Duration::from_millis(150));
    // 1. readiness fails at once, while the listener still serves.
    assert_eq!(srv.admin_get("/readyz").0, 503);
    assert_eq!(srv.admin_get("/healthz").0, 200);
    assert_eq!(curl(&[&srv.url("/a.txt")]).stdout.len(), 36);
    // 2. after the delay, listening stops and the idle keep-alive is closed.
    std::thread::sleep(Duration::from_millis(900));
    assert!(
        TcpStream::connect(srv.addr).is_err(),
        "still accepting after the delay"
    );
    assert_eq!(idle.read(&mut buf).unwrap(), 0, "idle keep-alive closed");
    // 3. the in-flight response completes in full.
    let mut head_end = None;
    let mut all = buf[..got].to_vec();
    loop {
        std::thread::sleep(Duration::from_millis(1));
        match busy.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                got += k;
                if all.len() < 4096 {
                    all.extend_from_slice(&buf[..k]);
                }
            }
            Err(e) => panic!("in-flight response cut: {e}"),
        }
        if head_end.is_none() {
            head_end = all.windows(4).position(|w| w == b"\r\n\r\n");
        }
    }
    let head_len = head_end.unwrap() + 4;
    assert_eq!(got - head_len, 32 * 1024 * 1024, "the whole body arrived");
    // (The loop ended on EOF: the server closed the connection after the full body.)
    // 4. the process exits cleanly.
    assert_eq!(srv.wait_exit(Duration::from_secs(10)), Some(0));
}

#[test]
fn access_log_can_go_to_a_file() {
    let site = sample_site();
    let logs = tempfile::tempdir().unwrap();
    let path = logs.path().join("access.log");
    let srv = Server::start(site.path(), &["--access-log-file", path.to_str().unwrap()]);
    curl(&[&srv.url("/a.txt")]);
    curl(&[&srv.url("/nope")]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut text = String::new();
    while Instant::now() < deadline {
        text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.lines().count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(text.contains("\"GET /a.txt HTTP/1.1\" 200 36"), "{text}");
    assert!(text.contains("\"GET /nope HTTP/1.1\" 404"), "{text}");
    assert_eq!(srv.access_log(), "", "nothing on stdout");
}

/// The scheduling policy of each `skiff-worker-*` thread of a running server, from the
/// kernel's view of it (`/proc/PID/task/TID/stat`, field 41: 0 is SCHED_OTHER, 3 SCHED_BATCH).
fn worker_policies(pid: u32) -> Vec<u32> {
    let mut policies = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with("skiff-worker-") {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
        // Fields after the parenthesised name start at field 3.
        let after_name = stat.rsplit_once(')').unwrap().1;
        let policy = after_name.split_whitespace().nth(41 - 3).unwrap();
        policies.push(policy.parse().unwrap());
    }
    policies
}

#[test]
fn serving_threads_run_under_sched_batch_unless_told_otherwise() {
    let site = sample_site();
    let batch = Server::start(site.path(), &[]);
    // Serve a request first: the policy must hold for threads that are actually serving.
    assert_eq!(curl_i(&[&batch.url("/a.txt")]).0, 200);
    assert_eq!(
        worker_policies(batch.child.id()),
        vec![3, 3],
        "two workers, SCHED_BATCH"
    );
    assert!(
        batch.stderr_text().contains("cpu_scheduling=Batch"),
        "{}",
        batch.stderr_text()
    );

    let normal = Server::start(site.path(), &["--cpu-scheduling", "normal"]);
    assert_eq!(curl_i(&[&normal.url("/a.txt")]).0, 200);
    assert_eq!(
        worker_policies(normal.child.id()),
        vec![0, 0],
        "two workers, SCHED_OTHER"
    );
}

/// On AMD x86-64, the serving process runs with glibc's `rep movsb` copies moved to vector
/// loops (`copy_tuning`), having executed itself once, and keeps the PID it was started
/// with and a tunable the environment already had; elsewhere it is left as started.
#[test]
fn the_server_runs_with_vector_copies_on_amd_and_executes_itself_once() {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let amd = cpuinfo.lines().any(|l| {
        l.starts_with("vendor_id") && (l.contains("AuthenticAMD") || l.contains("HygonGenuine"))
    });
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let environ = std::fs::read(format!("/proc/{}/environ", srv.child.id())).unwrap();
    let vars: Vec<String> = environ
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    let tunables = vars.iter().find_map(|v| v.strip_prefix("GLIBC_TUNABLES="));
    let done = vars.iter().any(|v| v == "SKIFF_COPY_TUNING_DONE=1");
    if amd && cfg!(target_env = "gnu") {
        assert_eq!(
            tunables,
            Some("glibc.cpu.x86_rep_movsb_threshold=1073741824"),
            "the tunable, on the PID the test started"
        );
        assert!(done, "marked as executed once");
    } else {
        assert!(tunables.is_none() && !done, "left as started: {tunables:?}");
    }
    assert_eq!(srv.admin_get("/healthz").0, 200, "serving after the exec");
}

#[test]
fn idle_admin_connections_cannot_keep_the_probes_out() {
    // Past the admin server's connection bounds, a new connection takes the place of an
    // old one: 70 silent connections (the probes' own address among them) do not make
    // /healthz fail, as they made the kubelet restart the pod.
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let held: Vec<TcpStream> = (0..70)
        .map(|_| TcpStream::connect(srv.admin).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        assert_eq!(srv.admin_get("/healthz"), (200, "ok\n".to_owned()));
    }
    drop(held);
}
