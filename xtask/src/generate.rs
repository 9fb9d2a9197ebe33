//! `cargo xtask generate`: the generated files, from the Rust types (and the Prometheus
//! rules from their Python generator), as the tests that
//! check them document (operator/tests/crd_is_current.rs, server/config/src/tests.rs,
//! scripts/config-reference.py), and the Grafana dashboards from their generator
//! (dashboards/generator/, checked by `cargo xtask check`).

use crate::cmd::{cmd, output, run, step, Failed, Outcome};

/// crdgen's output is committed twice: helm cannot read outside the chart.
const CRD_COPIES: [&str; 2] = [
    "crds/virtualserver.yaml",
    "charts/skiff/files/virtualserver.yaml",
];

pub fn generate() -> Outcome {
    step(format!("the CRD: crdgen > {}", CRD_COPIES.join(", ")));
    let yaml = output(cmd(
        "cargo",
        ["run", "--quiet", "-p", "skiff-operator", "--bin", "crdgen"],
    ))?;
    if yaml.is_empty() {
        eprintln!("xtask: crdgen printed nothing; the CRD files are left as they are");
        return Err(Failed(1));
    }
    for path in CRD_COPIES {
        std::fs::write(path, &yaml).map_err(|e| {
            eprintln!("xtask: cannot write {path}: {e}");
            Failed(1)
        })?;
    }
    // server/CONFIG.md is rendered from this schema, so it comes first.
    step("server/config/config.schema.json: SKIFF_BLESS=1 cargo test -p skiff-config committed_schema");
    let mut schema = cmd("cargo", ["test", "-p", "skiff-config", "committed_schema"]);
    schema.env("SKIFF_BLESS", "1");
    run(schema)?;
    step("server/CONFIG.md: scripts/config-reference.py");
    run(cmd("python3", ["scripts/config-reference.py"]))?;
    step(format!(
        "the Grafana dashboards: {DASHBOARDS} > dashboards/*.json, charts/skiff/files/dashboards/"
    ));
    run(cmd("python3", [DASHBOARDS]))?;
    rules()
}

/// The Prometheus rules and their alert tests from dashboards/rules/generator/, and the
/// chart's copy of the rules (`cargo xtask rules` checks all three are current).
fn rules() -> Outcome {
    use crate::rules::{CHART_COPY, GENERATED, RULES};
    for (generator, file) in GENERATED {
        step(format!("{file}: {generator}"));
        let text = output(cmd("python3", [generator]))?;
        std::fs::write(file, text).map_err(|e| {
            eprintln!("xtask: cannot write {file}: {e}");
            Failed(1)
        })?;
    }
    step(format!("{CHART_COPY}: a copy of {RULES}"));
    std::fs::copy(RULES, CHART_COPY).map(drop).map_err(|e| {
        eprintln!("xtask: cannot copy {RULES} to {CHART_COPY}: {e}");
        Failed(1)
    })
}

/// The dashboards' generator: it runs itself on the pinned grafana-foundation-sdk in the
/// venv scripts/install-deps.sh makes, and writes both copies (helm reads only the chart's).
pub const DASHBOARDS: &str = "dashboards/generator/generate.py";

/// `cargo xtask check`: the committed dashboards are what the generator writes, and pass
/// their structure tests (dashboards/generator/test_dashboards.py, standard library only).
pub fn check_dashboards() -> Outcome {
    step("dashboards are current, and their structure and queries check");
    run(cmd("python3", [DASHBOARDS, "--check"]))?;
    run(cmd(
        "python3",
        [
            "-B",
            "-m",
            "unittest",
            "discover",
            "-s",
            "dashboards/generator",
            "-p",
            "test_*.py",
        ],
    ))
}
