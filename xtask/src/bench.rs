//! `cargo xtask bench`: the benchmark entry points. With no name it lists them with their
//! commands; with a name it builds what that benchmark needs and runs it, passing the
//! remaining arguments on. BENCHMARKS.md has the latest figures of each.

use std::path::Path;

use crate::cmd::{cmd, run, step, Failed, Outcome};

/// (name, what it measures, the command it runs).
const BENCHES: &[(&str, &str, &str)] = &[
    (
        "static",
        "static files, one pinned worker each, against nginx, lighttpd, Apache and h2o (+ limit)",
        "scripts/bench.sh [--only nginx,lighttpd] [--seconds 5] [--h2] [--idle-conns N] ...",
    ),
    (
        "dynamic",
        "PHP (php-fpm) and Django (uWSGI) pages behind Skiff and behind nginx, alternating rounds",
        "python3 bench/dynamic_bench.py [--workers 2] [--keepalive 1] [--rounds 5] [--seconds 8] ...",
    ),
    (
        "ab",
        "two or more skiff configurations or builds (or lighttpd) side by side, rounds interleaved",
        "python3 bench/ab.py --variant 'A=FLAGS' --variant 'B=FLAGS' --file NAME:SIZE:CONNS ...",
    ),
    (
        "floor",
        "skiff serve beside the limit responder and a bare tokio task per connection (1 KiB)",
        "python3 bench/floor.py [--size 1024] [--conns 10] [--rounds 5] [--seconds 4]",
    ),
    (
        "reload",
        "config reloads under wrk load: every request must succeed",
        "python3 bench/reload_under_load.py [--seconds 10] [--reloads 25] [--connections 50]",
    ),
    (
        "attack",
        "slowloris, slow bodies, non-reading and idle h2c clients while a client measures latency",
        "python3 bench/attack.py [--duration 40] [--slowloris 500] [--limit body_timeout=20s] [--json out.json]",
    ),
    (
        "operator",
        "300 VirtualServers reconciled by the operator on the local cluster (needs e2e/cluster up)",
        "python3 bench/operator_scale.py [--count 300]",
    ),
];

/// The operator binary bench/operator_scale.py runs by default; images/build.sh builds it.
const OPERATOR_BINARY: &str = "target/operator/x86_64-unknown-linux-gnu/release/skiff-operator";

fn list() {
    println!("usage: cargo xtask bench NAME [ARGS...]   (ARGS go to the benchmark)\n");
    for (name, what, command) in BENCHES {
        println!("  {name:<9} {what}\n            {command}");
    }
    println!(
        "\nstatic installs the peers (scripts/install-deps.sh --bench) and builds the release\n\
         binary itself; dynamic, ab, floor, reload and attack build target/release/skiff first (dynamic\n\
         also installs nginx and the backends; attack needs php-fpm, which\n\
         scripts/install-deps.sh installs); operator needs e2e/cluster up and\n\
         {OPERATOR_BINARY} (cargo xtask images). Figures and conditions: BENCHMARKS.md."
    );
}

fn release_build() -> Outcome {
    step("cargo build --release -p skiff");
    run(cmd("cargo", ["build", "--release", "-p", "skiff"]))
}

pub fn bench(args: &[String]) -> Outcome {
    let Some((name, rest)) = args.split_first() else {
        list();
        return Ok(());
    };
    let python = |script: &str| {
        let mut c = cmd("python3", [script]);
        c.args(rest);
        c
    };
    match name.as_str() {
        "static" => {
            step("static bench: scripts/bench.sh");
            run(cmd("scripts/bench.sh", rest))
        }
        "dynamic" => {
            step("scripts/install-deps.sh --bench");
            run(cmd("scripts/install-deps.sh", ["--bench"]))?;
            release_build()?;
            step("dynamic bench: bench/dynamic_bench.py");
            run(python("bench/dynamic_bench.py"))
        }
        "ab" => {
            release_build()?;
            step("A/B bench: bench/ab.py");
            run(python("bench/ab.py"))
        }
        "floor" => {
            release_build()?;
            step("cargo build --release -p skiff --example tokio_floor");
            run(cmd(
                "cargo",
                [
                    "build",
                    "--release",
                    "-p",
                    "skiff",
                    "--example",
                    "tokio_floor",
                ],
            ))?;
            step("where a small file's CPU goes: bench/floor.py");
            run(python("bench/floor.py"))
        }
        "reload" => {
            release_build()?;
            step("reloads under load: bench/reload_under_load.py");
            run(python("bench/reload_under_load.py"))
        }
        "attack" => {
            release_build()?;
            step("attacks under load: bench/attack.py");
            run(python("bench/attack.py"))
        }
        "operator" => {
            if !Path::new(OPERATOR_BINARY).exists()
                && !rest.iter().any(|a| a.starts_with("--binary"))
            {
                eprintln!("xtask: {OPERATOR_BINARY} is missing: run `cargo xtask images` first (or pass --binary)");
                return Err(Failed(1));
            }
            step("operator at scale: bench/operator_scale.py");
            run(python("bench/operator_scale.py"))
        }
        other => {
            eprintln!("xtask: no benchmark `{other}`\n");
            list();
            Err(Failed(2))
        }
    }
}
