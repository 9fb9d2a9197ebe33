//! `cargo xtask h2spec`: the HTTP/2 conformance suite against a real `skiff serve`.
//!
//! h2spec (installed by scripts/install-deps.sh) speaks h2c with prior knowledge to a
//! `skiff serve` started on a free loopback port over a one-page site, in strict mode
//! (every case, including the ones h2spec marks strict). The target fails unless every
//! case passes: none failed and none skipped.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cmd::{cmd, output, run, step, Failed, Outcome};

/// The whole suite takes well under a second against a healthy server; the bound is for
/// one that stops answering (h2spec's own per-case timeout is 2 s, and it has ~150 cases).
const SUITE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the server may take to start listening (a debug build, a loaded machine).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// h2spec's closing line, "147 tests, 146 passed, 0 skipped, 1 failed".
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub tests: u64,
    pub passed: u64,
    pub skipped: u64,
    pub failed: u64,
}

impl Summary {
    /// The last summary line in h2spec's output, if there is one.
    pub fn parse(text: &str) -> Option<Self> {
        text.lines().rev().find_map(|line| {
            let mut counts = [None; 4];
            for part in line.trim().split(", ") {
                let (n, word) = part.split_once(' ')?;
                let n: u64 = n.parse().ok()?;
                let slot = ["tests", "passed", "skipped", "failed"]
                    .iter()
                    .position(|w| *w == word)?;
                counts[slot] = Some(n);
            }
            Some(Self {
                tests: counts[0]?,
                passed: counts[1]?,
                skipped: counts[2]?,
                failed: counts[3]?,
            })
        })
    }

    /// Sums the counts of several runs.
    fn add(&mut self, other: &Self) {
        self.tests += other.tests;
        self.passed += other.passed;
        self.skipped += other.skipped;
        self.failed += other.failed;
    }

    /// Every case ran and passed (a skipped case is not a pass: strict mode runs them all).
    pub fn all_passed(&self) -> bool {
        self.tests > 0 && self.passed == self.tests && self.skipped == 0 && self.failed == 0
    }

    /// A cargo-style line, so `cargo xtask ci`'s closing "N passed, M failed" counts the
    /// cases with the tests (cmd::summary reads `test result:` lines).
    pub fn test_result_line(&self) -> String {
        format!(
            "test result: {}. {} passed; {} failed; {} ignored; 0 measured; 0 filtered out (h2spec --strict)",
            if self.all_passed() { "ok" } else { "FAILED" },
            self.passed,
            self.failed,
            self.skipped,
        )
    }
}

/// The part of h2spec's report worth showing: from "Failures:" to the end (the per-case
/// progress before it is long and, without a terminal, interleaved), else the last line.
fn report(text: &str) -> &str {
    match text.find("\nFailures:") {
        Some(at) => &text[at + 1..],
        None => text.trim_end().rsplit('\n').next().unwrap_or(text),
    }
}

/// A server process that is killed (by its PID) and reaped however the run ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory under the temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> io::Result<Self> {
        let base = std::env::temp_dir();
        for n in 0..100u32 {
            let path = base.join(format!("skiff-xtask-h2spec.{}.{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("no free temporary directory name"))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback port nothing listens on now. Another process could take it before skiff
/// binds it; skiff then fails to start and the target says so.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// cargo's target directory as cargo itself resolves it (CARGO_TARGET_DIR, config files,
/// CI's `target` symlink), from `cargo metadata`; xtask has no JSON parser, and the field
/// is a plain string.
fn target_dir() -> Result<PathBuf, Failed> {
    let json = output(cmd(
        "cargo",
        ["metadata", "--format-version", "1", "--no-deps"],
    ))?;
    let json = String::from_utf8_lossy(&json);
    let key = "\"target_directory\":\"";
    let start = json.find(key).map(|i| i + key.len());
    let path = start.and_then(|s| json[s..].find('"').map(|e| &json[s..s + e]));
    match path {
        Some(p) if !p.contains('\\') => Ok(PathBuf::from(p)),
        _ => {
            eprintln!("xtask: cannot read target_directory from `cargo metadata`");
            Err(Failed(1))
        }
    }
}

/// `h2spec` from $H2SPEC, else from the PATH (scripts/install-deps.sh links it there).
fn h2spec_program() -> Result<PathBuf, Failed> {
    if let Some(p) = std::env::var_os("H2SPEC").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("h2spec"))
            .find(|p| p.is_file())
    });
    found.ok_or_else(|| {
        eprintln!("xtask: h2spec is not on the PATH: run scripts/install-deps.sh (or set H2SPEC)");
        Failed(127)
    })
}

/// Waits until `addr` accepts a connection, or the server exits, or START_TIMEOUT.
fn wait_listening(server: &mut Server, addr: SocketAddr, log: &Path) -> Outcome {
    let start = Instant::now();
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        let exited = server.0.try_wait().ok().flatten();
        if exited.is_some() || start.elapsed() > START_TIMEOUT {
            match exited {
                Some(status) => eprintln!("xtask: skiff exited before listening ({status})"),
                None => {
                    eprintln!("xtask: skiff is not listening on {addr} after {START_TIMEOUT:?}")
                }
            }
            show_log(log);
            return Err(Failed(1));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn show_log(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(40).collect();
    for line in tail.into_iter().rev() {
        eprintln!("skiff: {line}");
    }
}

/// Runs `c` to completion with its stdout captured, killing it (by PID) after `limit`.
fn run_bounded(mut c: Command, limit: Duration) -> Result<(Option<i32>, String), Failed> {
    c.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = c.spawn().map_err(|e| {
        eprintln!("xtask: cannot run h2spec: {e}");
        Failed(127)
    })?;
    // Read stdout on a thread, so a full pipe never stalls h2spec while we poll its exit.
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stdout.read_to_end(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() > limit => {
                eprintln!("xtask: h2spec still running after {limit:?}: killed");
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                eprintln!("xtask: waiting for h2spec: {e}");
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = reader.join().unwrap_or_default();
    Ok((
        status.and_then(|s| s.code()),
        String::from_utf8_lossy(&text).into_owned(),
    ))
}

/// `cargo xtask h2spec [--release] [--runs N]`; with `ci_log`, the case counts also go to the log
/// `ci` sums into its closing line.
pub fn h2spec(args: &[String], ci_log: Option<&Path>) -> Outcome {
    let Some((release, runs)) = parse_args(args) else {
        eprintln!("usage: cargo xtask h2spec [--release] [--runs N]");
        return Err(Failed(2));
    };
    let program = h2spec_program()?;
    let profile = if release { "release" } else { "debug" };
    step(format!(
        "h2spec --strict against skiff serve ({profile} build)"
    ));
    let mut build = cmd(
        "cargo",
        ["build", "--quiet", "-p", "skiff", "--bin", "skiff"],
    );
    if release {
        build.arg("--release");
    }
    run(build)?;
    let skiff = target_dir()?.join(profile).join("skiff");

    let fail = |what: &str, e: io::Error| {
        eprintln!("xtask: {what}: {e}");
        Failed(1)
    };
    let dir = TempDir::new().map_err(|e| fail("cannot create a temporary directory", e))?;
    let site = dir.0.join("site");
    std::fs::create_dir(&site)
        .and_then(|()| {
            std::fs::write(
                site.join("index.html"),
                "<!doctype html>\n<title>h2spec</title>\n<p>HTTP/2 conformance.</p>\n",
            )
        })
        .map_err(|e| fail("cannot write the test site", e))?;
    let (port, admin_port) = free_port()
        .and_then(|p| Ok((p, free_port()?)))
        .map_err(|e| fail("no free loopback port", e))?;
    let log = dir.0.join("skiff.log");
    let log_file = std::fs::File::create(&log).map_err(|e| fail("cannot create the log", e))?;
    let log_err = log_file
        .try_clone()
        .map_err(|e| fail("cannot create the log", e))?;
    let listen = format!("127.0.0.1:{port}");
    let mut server = Command::new(&skiff);
    server
        .arg("serve")
        .arg(&site)
        .args(["--listen", &listen])
        .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
        .args(["--threads", "1", "--access-log", "off"])
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    let mut server = Server(
        server
            .spawn()
            .map_err(|e| fail(&format!("cannot start {}", skiff.display()), e))?,
    );
    let addr: SocketAddr = listen.parse().expect("a loopback address");
    wait_listening(&mut server, addr, &log)?;

    let port_arg = port.to_string();
    let mut total = Summary::default();
    let mut failed_runs = 0;
    for run in 1..=runs {
        let mut suite = Command::new(&program);
        suite.args(["--strict", "-h", "127.0.0.1", "-p", &port_arg]);
        let (code, text) = run_bounded(suite, SUITE_TIMEOUT)?;
        // A server that died mid-suite fails every later case; say so rather than leave
        // the reader to infer it from h2spec's report.
        if let Some(status) = server.0.try_wait().ok().flatten() {
            println!("{}", report(&text));
            eprintln!("xtask: skiff exited during h2spec ({status})");
            show_log(&log);
            return Err(Failed(1));
        }
        let Some(summary) = Summary::parse(&text) else {
            eprintln!("xtask: no summary line from h2spec (exit {code:?}); its output:\n{text}");
            show_log(&log);
            return Err(Failed(1));
        };
        if runs > 1 {
            print!("run {run}/{runs}: ");
        }
        println!("{}", report(&text));
        if !(summary.all_passed() && code == Some(0)) {
            failed_runs += 1;
        }
        total.add(&summary);
    }
    drop(server);

    if let Some(log) = ci_log {
        let line = format!("{}\n", total.test_result_line());
        let appended = std::fs::File::options()
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            eprintln!("xtask: cannot append to the test log: {e}");
        }
    }
    if failed_runs == 0 {
        println!(
            "h2spec: all {} cases passed ({runs} run(s))",
            total.tests / runs
        );
        Ok(())
    } else {
        eprintln!(
            "xtask: h2spec --strict: {failed_runs} of {runs} run(s) failed; {} of {} cases passed ({} failed, {} skipped)",
            total.passed, total.tests, total.failed, total.skipped
        );
        Err(Failed(1))
    }
}

/// `[--release] [--runs N]`: the build profile, and how many times the suite runs against
/// the same server (some failures are races, so one clean run proves little).
fn parse_args(args: &[String]) -> Option<(bool, u64)> {
    let (mut release, mut runs) = (false, 1);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--release" => release = true,
            "--runs" => runs = args.next()?.parse().ok().filter(|n| *n > 0)?,
            _ => return None,
        }
    }
    Some((release, runs))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAILING: &str = "  3. Starting HTTP/2\n    3.5. HTTP/2 Connection Preface\n\
        \u{20}     \u{d7} 2: Sends invalid connection preface\n\
        \nFailures: \n\nHypertext Transfer Protocol Version 2 (HTTP/2)\n\
        \u{20}     \u{d7} 2: Sends invalid connection preface\n\
        \u{20}       -> The endpoint MUST terminate the TCP connection.\n\
        \nFinished in 0.1252 seconds\n147 tests, 146 passed, 0 skipped, 1 failed\n";

    #[test]
    fn the_summary_line_is_read_and_judged() {
        let s = Summary::parse(FAILING).unwrap();
        assert_eq!(
            s,
            Summary {
                tests: 147,
                passed: 146,
                skipped: 0,
                failed: 1
            }
        );
        assert!(!s.all_passed());
        let ok =
            Summary::parse("Finished in 0.1 seconds\n147 tests, 147 passed, 0 skipped, 0 failed\n")
                .unwrap();
        assert!(ok.all_passed());
        // Skipped cases are not passes, and an empty run passes nothing.
        let skipped = Summary::parse("147 tests, 140 passed, 7 skipped, 0 failed").unwrap();
        assert!(!skipped.all_passed());
        assert!(!Summary::parse("0 tests, 0 passed, 0 skipped, 0 failed")
            .unwrap()
            .all_passed());
        assert_eq!(Summary::parse("Error: dial tcp: connection refused"), None);
        assert_eq!(Summary::parse("3 tests, 3 passed"), None);
    }

    #[test]
    fn the_counts_join_ci_s_closing_line() {
        let s = Summary::parse(FAILING).unwrap();
        let line = s.test_result_line();
        assert!(
            line.starts_with("test result: FAILED. 146 passed; 1 failed;"),
            "{line}"
        );
        assert_eq!(crate::cmd::summary(&line), "146 passed, 1 failed");
    }

    #[test]
    fn arguments() {
        let args = |a: &[&str]| parse_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(args(&[]), Some((false, 1)));
        assert_eq!(args(&["--runs", "20", "--release"]), Some((true, 20)));
        assert_eq!(args(&["--runs", "0"]), None);
        assert_eq!(args(&["--runs"]), None);
        assert_eq!(args(&["--strict"]), None);
    }

    #[test]
    fn the_report_is_the_failures_section_or_the_last_line() {
        assert!(report(FAILING).starts_with("Failures: \n"));
        assert!(report(FAILING).ends_with("0 skipped, 1 failed\n"));
        assert_eq!(
            report("1: a\n2: b\n2 tests, 2 passed, 0 skipped, 0 failed\n"),
            "2 tests, 2 passed, 0 skipped, 0 failed"
        );
    }
}
