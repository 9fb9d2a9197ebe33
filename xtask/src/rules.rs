//! `cargo xtask rules`: the Prometheus rules in dashboards/rules/ and the metrics they read.
//!
//! - the rule file and its tests are what dashboards/rules/generator/ writes, and the
//!   chart's copy (charts/skiff/files/skiff-rules.yaml) is the same file;
//! - every alert's `runbook_url` names a section of docs/runbooks.md;
//! - `promtool check rules` and `promtool test rules` (dashboards/rules/tests/, and
//!   dashboards/adapter/tests/: the PromQL prometheus-adapter makes of its rules);
//! - `promtool check metrics` on the /metrics of a real `skiff serve` (served.rs) and of a
//!   real `skiff-operator`, which serves /metrics on `--listen` with no reachable cluster
//!   (its KUBECONFIG names a closed loopback port).
//!
//! promtool (Debian's prometheus 2.42, scripts/install-deps.sh) reads the exposition as the
//! classic text format, where an OpenMetrics counter's samples (`x_total`) do not match its
//! `# HELP x` line: exactly the "no help text" complaint is ignored, anything else fails.
//! That parser also refuses OpenMetrics' `info` type (`skiff_build_info`,
//! `skiff_config_info`), which Prometheus reads fine (skiff serves
//! `application/openmetrics-text`): those `# TYPE` lines, and nothing else, are shown to
//! promtool as `gauge`, the classic format's nearest type (an info sample is a gauge of 1).
//! Every check counts as one test in the `test result:` line it appends to CI's log.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cmd::{cmd, output, run, step, Failed, Outcome};
use crate::served::{free_ports, program, run_bounded, target_dir, KeyType, Served, TempDir};

pub const RULES: &str = "dashboards/rules/skiff-rules.yaml";
pub const CHART_COPY: &str = "charts/skiff/files/skiff-rules.yaml";
const TESTS: &str = "dashboards/rules/tests";
const ADAPTER_TESTS: &str = "dashboards/adapter/tests";
const RUNBOOKS: &str = "docs/runbooks.md";
/// The generators and the files they write.
pub const GENERATED: [(&str, &str); 2] = [
    ("dashboards/rules/generator/genrules.py", RULES),
    (
        "dashboards/rules/generator/genalerttests.py",
        "dashboards/rules/tests/alerts.yaml",
    ),
];
const PROMTOOL_TIMEOUT: Duration = Duration::from_secs(300);
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The checks, run one after the other; all of them run even when one fails.
pub fn rules(args: &[String], ci_log: Option<&Path>) -> Outcome {
    if !args.is_empty() {
        eprintln!("usage: cargo xtask rules");
        return Err(Failed(2));
    }
    let promtool = program("promtool", "PROMTOOL")?;
    let mut passed = 0u64;
    let mut failed = Vec::new();
    let mut judge = |what: &str, outcome: Outcome| match outcome {
        Ok(()) => passed += 1,
        Err(_) => {
            eprintln!("xtask: rules: {what} FAILED");
            failed.push(what.to_string());
        }
    };
    step("dashboards/rules: the generated files and the chart's copy are current");
    judge("generated files current", generated_are_current());
    step(format!("every runbook_url is a section of {RUNBOOKS}"));
    judge("runbook sections", runbooks_exist());
    step(format!("promtool check rules {RULES}"));
    judge(
        "promtool check rules",
        promtool_run(&promtool, &["check", "rules", RULES]),
    );
    for test in test_files() {
        let test = test.to_string_lossy().into_owned();
        step(format!("promtool test rules {test}"));
        judge(&test, promtool_run(&promtool, &["test", "rules", &test]));
    }
    step("promtool check metrics: skiff serve's /metrics");
    judge("check metrics (skiff)", skiff_metrics(&promtool));
    step("promtool check metrics: skiff-operator's /metrics");
    judge(
        "check metrics (skiff-operator)",
        operator_metrics(&promtool),
    );

    let line = format!(
        "test result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; 0 filtered out (promtool: rules, rule tests, metrics)\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len()
    );
    print!("{line}");
    if let Some(log) = ci_log {
        let appended = std::fs::File::options()
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            eprintln!("xtask: cannot append to the test log: {e}");
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        eprintln!("xtask: rules: failed: {}", failed.join(", "));
        Err(Failed(1))
    }
}

/// Runs each generator and compares its output with the committed file; the chart's copy
/// of the rules must equal the rules.
fn generated_are_current() -> Outcome {
    let mut stale = Vec::new();
    for (generator, file) in GENERATED {
        let fresh = output(cmd("python3", [generator]))?;
        if std::fs::read(file).ok().as_deref() != Some(&fresh[..]) {
            stale.push(file);
        }
    }
    if std::fs::read(RULES).ok() != std::fs::read(CHART_COPY).ok() {
        stale.push(CHART_COPY);
    }
    if stale.is_empty() {
        Ok(())
    } else {
        eprintln!(
            "xtask: stale: {} (run cargo xtask generate and commit)",
            stale.join(", ")
        );
        Err(Failed(1))
    }
}

/// The `#anchor` of every runbook_url is a `## Heading` of docs/runbooks.md.
fn runbooks_exist() -> Outcome {
    let rules = std::fs::read_to_string(RULES).map_err(|e| {
        eprintln!("xtask: cannot read {RULES}: {e}");
        Failed(1)
    })?;
    let runbooks = std::fs::read_to_string(RUNBOOKS).map_err(|e| {
        eprintln!("xtask: cannot read {RUNBOOKS}: {e}");
        Failed(1)
    })?;
    let anchors: Vec<String> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(anchor)
        .collect();
    let mut missing = Vec::new();
    let mut seen = 0;
    for line in rules.lines() {
        if let Some(url) = line.trim().strip_prefix("runbook_url: ") {
            seen += 1;
            let target = url
                .trim_matches(['"', '\''])
                .rsplit_once('#')
                .map(|(_, a)| a);
            if !target.is_some_and(|a| anchors.iter().any(|b| b == a)) {
                missing.push(url.to_string());
            }
        }
    }
    if seen == 0 {
        eprintln!("xtask: no runbook_url in {RULES}");
        return Err(Failed(1));
    }
    if missing.is_empty() {
        println!("{seen} runbook_url(s), each a section of {RUNBOOKS}");
        Ok(())
    } else {
        eprintln!("xtask: runbook_url(s) with no section in {RUNBOOKS}: {missing:?}");
        Err(Failed(1))
    }
}

/// GitHub's anchor of a heading: lower case, spaces to dashes, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The rule tests: the alerts' and recording rules' (dashboards/rules/tests/), and the
/// PromQL prometheus-adapter makes of its rules (dashboards/adapter/tests/).
fn test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [TESTS, ADAPTER_TESTS]
        .iter()
        .flat_map(|dir| {
            std::fs::read_dir(dir)
                .map(|d| {
                    d.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect();
    files.sort();
    files
}

fn promtool_run(promtool: &Path, args: &[&str]) -> Outcome {
    let mut c = Command::new(promtool);
    c.args(args);
    let (code, text) = run_bounded(c, PROMTOOL_TIMEOUT, "promtool")?;
    print!("{text}");
    if code == Some(0) {
        Ok(())
    } else {
        Err(Failed(1))
    }
}

/// `promtool check metrics` on an exposition: its complaints, bar "no help text".
pub fn unexpected_complaints(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !is_no_help_text(l))
        .collect()
}

/// Exactly promtool's "<metric name> no help text" line.
fn is_no_help_text(line: &str) -> bool {
    line.strip_suffix(" no help text").is_some_and(|name| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    })
}

/// The exposition with each OpenMetrics `# TYPE <name> info` line read as `gauge`, and how
/// many there were.
pub fn classic_view(exposition: &str) -> (String, usize) {
    let mut n = 0;
    let text = exposition
        .lines()
        .map(|l| {
            match l
                .strip_prefix("# TYPE ")
                .and_then(|r| r.strip_suffix(" info"))
            {
                Some(name) if !name.contains(' ') => {
                    n += 1;
                    format!("# TYPE {name} gauge\n")
                }
                _ => format!("{l}\n"),
            }
        })
        .collect();
    (text, n)
}

fn check_metrics(promtool: &Path, exposition: &str, what: &str) -> Outcome {
    if exposition.trim().is_empty() {
        eprintln!("xtask: {what}: empty /metrics");
        return Err(Failed(1));
    }
    let (exposition, infos) = classic_view(exposition);
    let exposition = exposition.as_str();
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            eprintln!("xtask: cannot run promtool: {e}");
            Failed(127)
        })?;
    let mut stdin = child.stdin.take().expect("piped");
    let body = exposition.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(body.as_bytes());
    });
    let out = child.wait_with_output().map_err(|e| {
        eprintln!("xtask: promtool check metrics: {e}");
        Failed(1)
    })?;
    let _ = writer.join();
    // promtool 2.42 prints its lint problems on stderr (stdout in some versions): read both.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let unexpected = unexpected_complaints(&text);
    let ignored = text.lines().filter(|l| is_no_help_text(l)).count();
    let series = exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count();
    // Exit 0 (clean) or 3 (lint problems) are fine when every problem is the ignored one;
    // 1 is a parse failure.
    let code = out.status.code();
    if unexpected.is_empty() && matches!(code, Some(0) | Some(3)) {
        println!(
            "{what}: {series} samples, no problem (ignored {ignored} \"no help text\"; {infos} info type(s) read as gauge)"
        );
        Ok(())
    } else {
        eprintln!("xtask: {what}: promtool check metrics exited {code:?}:");
        for l in unexpected {
            eprintln!("  {l}");
        }
        Err(Failed(1))
    }
}

fn get(addr: SocketAddr, path: &str) -> Result<String, Failed> {
    let url = format!("http://{addr}{path}");
    let body = output(cmd("curl", ["-sSf", "--max-time", "10", url.as_str()]))?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// A `skiff serve` with its histogram filled by a few requests.
fn skiff_metrics(promtool: &Path) -> Outcome {
    let served = Served::start(false, KeyType::Ecdsa)?;
    for path in ["/", "/index.html", "/missing"] {
        let url = format!("http://{}{path}", served.plain);
        let _ = output(cmd("curl", ["-s", "-o", "/dev/null", url.as_str()]));
    }
    let text = get(served.admin, "/metrics")?;
    check_metrics(promtool, &text, "skiff serve")
}

/// A skiff-operator killed (by PID) when dropped.
struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn operator_metrics(promtool: &Path) -> Outcome {
    run(cmd(
        "cargo",
        [
            "build",
            "--quiet",
            "-p",
            "skiff-operator",
            "--bin",
            "skiff-operator",
        ],
    ))?;
    let binary = target_dir()?.join("debug").join("skiff-operator");
    let fail = |what: &str, e: std::io::Error| {
        eprintln!("xtask: {what}: {e}");
        Failed(1)
    };
    let dir = TempDir::new().map_err(|e| fail("cannot create a temporary directory", e))?;
    // Two free ports: /metrics, and one left closed for the "API server".
    let [listen, closed] = free_ports::<2>().map_err(|e| fail("no free loopback port", e))?;
    let kubeconfig = dir.0.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: none\n  cluster:\n    server: https://127.0.0.1:{closed}\n    insecure-skip-tls-verify: true\nusers:\n- name: none\n  user:\n    token: none\ncontexts:\n- name: none\n  context: {{cluster: none, user: none, namespace: default}}\ncurrent-context: none\n"
        ),
    )
    .map_err(|e| fail("cannot write the kubeconfig", e))?;
    let listen: SocketAddr = format!("127.0.0.1:{listen}").parse().expect("loopback");
    let log = dir.0.join("operator.log");
    let log_file = std::fs::File::create(&log).map_err(|e| fail("cannot create the log", e))?;
    let log_err = log_file
        .try_clone()
        .map_err(|e| fail("cannot create the log", e))?;
    let child = Command::new(&binary)
        .args([
            "--listen",
            &listen.to_string(),
            "--leader-election",
            "false",
        ])
        .args(["--log-format", "text"])
        .env("KUBECONFIG", &kubeconfig)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        .spawn()
        .map_err(|e| fail(&format!("cannot start {}", binary.display()), e))?;
    let mut operator = Operator(child);
    let start = Instant::now();
    while TcpStream::connect_timeout(&listen, Duration::from_millis(200)).is_err() {
        let exited = operator.0.try_wait().ok().flatten();
        if exited.is_some() || start.elapsed() > START_TIMEOUT {
            eprintln!("xtask: skiff-operator is not serving on {listen} ({exited:?}); its log:");
            eprintln!("{}", std::fs::read_to_string(&log).unwrap_or_default());
            return Err(Failed(1));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = get(listen, "/metrics")?;
    // With no cluster there is no VirtualServer, hence no SLO series (their unit tests
    // cover them): this checks the rest of the exposition.
    let outcome = check_metrics(promtool, &text, "skiff-operator");
    drop(operator);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_no_help_text_complaint_is_ignored() {
        let text = "skiff_http_requests_total no help text\nskiff_operator_reconciliations_total no help text\n";
        assert!(unexpected_complaints(text).is_empty());
        let text = "skiff_http_requests_total no help text\nskiff_cache_bytes counter metrics should have \"_total\" suffix\n";
        assert_eq!(
            unexpected_complaints(text),
            ["skiff_cache_bytes counter metrics should have \"_total\" suffix"]
        );
        assert_eq!(
            unexpected_complaints("error while linting: text format parsing error in line 3\n"),
            ["error while linting: text format parsing error in line 3"]
        );
        assert!(!is_no_help_text("a b no help text"));
    }

    #[test]
    fn only_info_types_are_translated() {
        let (text, n) = classic_view(
            "# HELP skiff_build Build information.\n# TYPE skiff_build info\nskiff_build_info{version=\"1\"} 1\n# TYPE skiff_cache_bytes gauge\n# EOF\n",
        );
        assert_eq!(n, 1);
        assert_eq!(
            text,
            "# HELP skiff_build Build information.\n# TYPE skiff_build gauge\nskiff_build_info{version=\"1\"} 1\n# TYPE skiff_cache_bytes gauge\n# EOF\n"
        );
    }

    #[test]
    fn anchors_are_github_s() {
        assert_eq!(anchor("SkiffPoolNoEndpointUp"), "skiffpoolnoendpointup");
        assert_eq!(anchor("A pool, saturated"), "a-pool-saturated");
    }
}
