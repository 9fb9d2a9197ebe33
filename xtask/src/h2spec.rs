//! `cargo xtask h2spec`: the HTTP/2 conformance suite against a real `skiff serve`.
//!
//! h2spec (installed by scripts/install-deps.sh) runs in strict mode (every case, including
//! the ones it marks strict) twice against one `skiff serve` (served.rs): h2c with prior
//! knowledge on the plain listener, and h2 by ALPN on the TLS listener. The target fails
//! unless every case passes both ways: none failed and none skipped.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::cmd::{step, Failed, Outcome};
use crate::served::{program, run_bounded, KeyType, Served};

/// The whole suite takes well under a second against a healthy server; the bound is for
/// one that stops answering (h2spec's own per-case timeout is 2 s, and it has ~150 cases).
const SUITE_TIMEOUT: Duration = Duration::from_secs(300);

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

/// The two ways h2spec reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// h2c with prior knowledge on the plain listener.
    H2c,
    /// h2 negotiated by ALPN on the TLS listener (the self-signed certificate accepted).
    Tls,
}

impl Transport {
    fn args(self, served: &Served) -> Vec<String> {
        let (addr, tls) = match self {
            Transport::H2c => (served.plain, &[][..]),
            Transport::Tls => (served.tls, &["--tls", "--insecure"][..]),
        };
        let mut args: Vec<String> = tls.iter().map(|a| a.to_string()).collect();
        args.extend(["--strict", "-h"].map(String::from));
        args.push(addr.ip().to_string());
        args.push("-p".into());
        args.push(addr.port().to_string());
        args
    }

    fn name(self) -> &'static str {
        match self {
            Transport::H2c => "h2c",
            Transport::Tls => "h2 over TLS",
        }
    }
}

/// `cargo xtask h2spec [--release] [--runs N]`; with `ci_log`, the case counts also go to the log
/// `ci` sums into its closing line.
pub fn h2spec(args: &[String], ci_log: Option<&Path>) -> Outcome {
    let Some((release, runs)) = parse_args(args) else {
        eprintln!("usage: cargo xtask h2spec [--release] [--runs N]");
        return Err(Failed(2));
    };
    let program = program("h2spec", "H2SPEC")?;
    let profile = if release { "release" } else { "debug" };
    step(format!(
        "h2spec --strict against skiff serve, h2c and h2 over TLS ({profile} build)"
    ));
    let mut served = Served::start(release, KeyType::Ecdsa)?;

    let mut total = Summary::default();
    let mut failed_runs = 0;
    let transports = [Transport::H2c, Transport::Tls];
    for transport in transports {
        for run in 1..=runs {
            let mut suite = Command::new(&program);
            suite.args(transport.args(&served));
            let (code, text) = run_bounded(suite, SUITE_TIMEOUT, "h2spec")?;
            // A server that died mid-suite fails every later case; say so rather than leave
            // the reader to infer it from h2spec's report.
            if let Some(status) = served.exited() {
                println!("{}", report(&text));
                eprintln!("xtask: skiff exited during h2spec ({status})");
                served.show_log();
                return Err(Failed(1));
            }
            let Some(summary) = Summary::parse(&text) else {
                eprintln!(
                    "xtask: no summary line from h2spec {} (exit {code:?}); its output:\n{text}",
                    transport.name()
                );
                served.show_log();
                return Err(Failed(1));
            };
            print!("{}", transport.name());
            if runs > 1 {
                print!(", run {run}/{runs}");
            }
            println!(": {}", report(&text));
            if !(summary.all_passed() && code == Some(0)) {
                failed_runs += 1;
            }
            total.add(&summary);
        }
    }
    drop(served);

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
            "h2spec: all {} cases passed ({runs} run(s) over h2c and over TLS)",
            total.tests / runs / transports.len() as u64
        );
        Ok(())
    } else {
        eprintln!(
            "xtask: h2spec --strict: {failed_runs} of {} run(s) failed; {} of {} cases passed ({} failed, {} skipped)",
            runs * transports.len() as u64,
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
