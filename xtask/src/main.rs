//! The project's task runner: `cargo xtask <target>` (the alias is in .cargo/config.toml).
//!
//! Each target runs the project's existing commands (scripts/, images/, e2e/, bench/) from
//! the repository root, prints a `== step` header before each step, and stops at the first
//! failure with that command's exit code, as scripts/test.sh did with `set -euo pipefail`.
//! `ci` is what scripts/test.sh runs once it has installed the dependencies.

mod bench;
mod cmd;
mod generate;
mod h2spec;
mod rules;
mod served;
mod testssl;

use std::path::Path;
use std::process::{Command, ExitCode};

use cmd::{cmd, run, run_tee, step, Failed, Outcome};

/// Every target, with its one-line description for `cargo xtask help`.
const TARGETS: &[(&str, &str)] = &[
    ("check", "formatting, generated docs and dashboards, module cycles (if scripts/check-module-cycles.py exists), clippy"),
    ("unit", "unit tests: the lib and bin targets of the workspace (not e2e), ignored tests included"),
    ("integration", "integration (tests/) and doc tests of the workspace (not e2e), ignored tests included"),
    ("h2spec", "h2spec [--release] [--runs N]: HTTP/2 conformance (h2spec --strict, h2c and h2 over TLS) against skiff serve; every case must pass"),
    ("testssl", "testssl [--release]: testssl.sh against skiff serve's HTTPS listener, judged on the TLS policy (versions, suites, tickets, vulnerabilities)"),
    ("rules", "the Prometheus rules (dashboards/rules/): generated files current, runbook links, promtool check and test rules, promtool check metrics on skiff serve and skiff-operator"),
    ("images", "build the skiff and skiff-operator images without Docker (images/build.sh) and check them"),
    ("chart", "the Helm chart: lint, schema, golden renderings (scripts/chart-check.sh [--bless])"),
    ("e2e", "the e2e suite on a real local Kubernetes cluster, brought up and torn down (e2e/run.sh)"),
    ("fuzz", "fuzz [SECONDS [TARGET...]]: every fuzz target for a bounded time (scripts/fuzz.sh, 15 s)"),
    ("bench", "bench [NAME [ARGS...]]: list the benchmarks, or run one (static, dynamic, ab, reload, attack, operator)"),
    ("generate", "regenerate the CRD (crdgen), config.schema.json, server/CONFIG.md and the Grafana dashboards"),
    ("ci", "what scripts/test.sh runs after installing deps: check, images, chart, tests, h2spec, testssl, rules, fuzz, e2e"),
    ("help", "this list"),
];

fn help() {
    println!("usage: cargo xtask <target> [args]\n\ntargets:");
    for (name, what) in TARGETS {
        println!("  {name:<12} {what}");
    }
}

/// Environment `cargo run` gives the xtask binary itself; the commands it runs get the
/// environment they would get from a shell, as under scripts/test.sh.
fn forget_cargo_run_env() {
    // cargo run prepends the target dir (and its deps/) and the toolchain's lib dirs to
    // LD_LIBRARY_PATH; the rest is the caller's.
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    let toolchain = std::env::var_os("CARGO").map(std::path::PathBuf::from);
    let toolchain_lib = toolchain
        .as_deref()
        .and_then(Path::parent)
        .and_then(Path::parent);
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        let kept: Vec<_> = std::env::split_paths(&paths)
            .filter(|p| {
                let from_target = exe_dir
                    .as_ref()
                    .is_some_and(|d| p == d || *p == d.join("deps"));
                let from_toolchain = toolchain_lib.is_some_and(|t| p.starts_with(t.join("lib")));
                !from_target && !from_toolchain
            })
            .collect();
        if kept.is_empty() {
            std::env::remove_var("LD_LIBRARY_PATH");
        } else if let Ok(joined) = std::env::join_paths(kept) {
            std::env::set_var("LD_LIBRARY_PATH", joined);
        }
    }
    let own: Vec<_> = std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| {
            let k = k.to_string_lossy();
            k == "CARGO"
                || k.starts_with("CARGO_PKG_")
                || matches!(
                    &*k,
                    "CARGO_MANIFEST_DIR"
                        | "CARGO_MANIFEST_PATH"
                        | "CARGO_CRATE_NAME"
                        | "CARGO_BIN_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                )
        })
        .collect();
    for k in own {
        std::env::remove_var(k);
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ has a parent");
    if let Err(e) = std::env::set_current_dir(root) {
        eprintln!("xtask: cannot enter {}: {e}", root.display());
        return ExitCode::from(1);
    }
    forget_cargo_run_env();
    let (target, rest) = match args.split_first() {
        Some((t, rest)) => (t.as_str(), rest),
        None => ("help", &[][..]),
    };
    let outcome = match target {
        "help" | "-h" | "--help" => {
            help();
            Ok(())
        }
        "check" => check(),
        "unit" => unit(),
        "integration" => integration(),
        "h2spec" => h2spec::h2spec(rest, None),
        "testssl" => testssl::testssl(rest, None),
        "rules" => rules::rules(rest, None),
        "images" => images(),
        "chart" => chart(rest),
        "e2e" => e2e(),
        "fuzz" => fuzz(rest),
        "bench" => bench::bench(rest),
        "generate" => generate::generate(),
        "ci" => ci(),
        other => {
            eprintln!("xtask: no target `{other}`\n");
            help();
            Err(Failed(2))
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed(code)) => ExitCode::from(code),
    }
}

/// Formatting, generated docs, module cycles and lints: everything that needs no test run.
fn check() -> Outcome {
    step("cargo fmt --check");
    run(cmd("cargo", ["fmt", "--all", "--", "--check"]))?;
    run(cmd(
        "cargo",
        ["fmt", "--manifest-path", "fuzz/Cargo.toml", "--", "--check"],
    ))?;
    step("generated docs are current");
    run(cmd("python3", ["scripts/config-reference.py", "--check"]))?;
    generate::check_dashboards()?;
    let cycles = "scripts/check-module-cycles.py";
    if Path::new(cycles).exists() {
        step("module cycles");
        run(cmd("python3", [cycles]))?;
    } else {
        step(format!(
            "module cycles: skipped, {cycles} does not exist yet"
        ));
    }
    step("cargo clippy");
    run(cmd(
        "cargo",
        [
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    ))?;
    // The fuzz crate needs nightly-only flags, which the stable compiler accepts with
    // RUSTC_BOOTSTRAP=1 (scripts/fuzz.sh); its own target dir keeps them apart.
    let mut fuzz = cmd(
        "cargo",
        [
            "clippy",
            "--target-dir",
            "../target/fuzz-clippy",
            "--",
            "-D",
            "warnings",
        ],
    );
    fuzz.current_dir("fuzz").env("RUSTC_BOOTSTRAP", "1");
    run(fuzz)
}

/// `cargo test` over the workspace but e2e, with more arguments; `ci` runs it with
/// `-- --include-ignored` alone: every test, as one cargo invocation.
fn workspace_tests(extra: &[&str]) -> Command {
    let mut c = cmd("cargo", ["test", "--workspace", "--exclude", "skiff-e2e"]);
    c.args(extra);
    c
}

/// Unit tests: the tests inside the lib and bin targets.
fn unit() -> Outcome {
    step("cargo test: unit tests (lib and bin targets)");
    run(workspace_tests(&[
        "--lib",
        "--bins",
        "--",
        "--include-ignored",
    ]))
}

/// Everything else `cargo test --workspace --exclude skiff-e2e` runs: the integration
/// test targets (tests/*.rs) and the doc tests (cargo cannot mix --doc with other targets).
fn integration() -> Outcome {
    step("cargo test: integration tests (tests/)");
    run(workspace_tests(&["--test", "*", "--", "--include-ignored"]))?;
    step("cargo test: doc tests");
    run(workspace_tests(&["--doc", "--", "--include-ignored"]))
}

fn images() -> Outcome {
    step("the skiff image, built without Docker, checked");
    run(Command::new("images/build.sh"))?;
    run(cmd(
        "python3",
        ["images/check_image.py", "target/images/skiff.oci.tar"],
    ))?;
    run(cmd(
        "python3",
        [
            "images/check_image.py",
            "target/images/skiff-operator.oci.tar",
            "skiff-operator",
        ],
    ))
}

fn chart(args: &[String]) -> Outcome {
    step("the Helm chart");
    run(cmd("scripts/chart-check.sh", args))
}

fn e2e() -> Outcome {
    step("e2e on the local cluster");
    run(Command::new("e2e/run.sh"))
}

fn fuzz(args: &[String]) -> Outcome {
    step("fuzz the codecs and parsers (bounded)");
    run(cmd("scripts/fuzz.sh", args))
}

/// scripts/test.sh's sequence, once the dependencies are installed: the cargo tests' and
/// the e2e suite's output go to a log too, for the closing "N passed, M failed" line.
fn ci() -> Outcome {
    check()?;
    images()?;
    chart(&[])?;
    let log = TempLog::new().map_err(|e| {
        eprintln!("xtask: cannot create the test log: {e}");
        Failed(1)
    })?;
    step("cargo test");
    run_tee(workspace_tests(&["--", "--include-ignored"]), &log.0)?;
    // The binary the tests just built, against HTTP/2's conformance suite: after the tests
    // (a broken build fails there first, with a clearer message), before the long steps.
    h2spec::h2spec(&[], Some(&log.0))?;
    testssl::testssl(&[], Some(&log.0))?;
    rules::rules(&[], Some(&log.0))?;
    let seconds = std::env::var("SKIFF_FUZZ_SECONDS")
        .ok()
        .filter(|s| !s.is_empty());
    fuzz(&[seconds.unwrap_or_else(|| "15".into())])?;
    step("e2e on the local cluster");
    run_tee(Command::new("e2e/run.sh"), &log.0)?;
    // One closing line for the whole run (cargo prints one per test binary, the last often
    // being the doc tests' "0 passed").
    let text = std::fs::read(&log.0).unwrap_or_default();
    println!("{}", cmd::summary(&String::from_utf8_lossy(&text)));
    Ok(())
}

/// A log file in the temporary directory, removed when dropped (`mktemp` and `trap`).
struct TempLog(std::path::PathBuf);

impl TempLog {
    fn new() -> std::io::Result<Self> {
        let dir = std::env::temp_dir();
        let mut n = 0u32;
        loop {
            let path = dir.join(format!("skiff-xtask-ci.{}.{n}.log", std::process::id()));
            match std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Ok(Self(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for TempLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
