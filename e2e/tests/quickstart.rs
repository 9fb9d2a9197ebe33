//! README's first command end to end: `scripts/quickstart.sh`, then every command it
//! prints run in a shell, a second run that changes no object it installed, and `down`.
//! e2e/run.sh runs this first, on a host without a cluster, and diffs the host against its
//! snapshot afterwards; `cargo test -p skiff-e2e` skips it (Cargo.toml: `test = false`),
//! because the quickstart's operator would reconcile the other tests' VirtualServers.

use serde_json::Value;
use skiff_e2e::prometheus::Prometheus;
use skiff_e2e::repo_root;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

/// What each site's printed command must answer: its host and a text the body holds.
const SITES: [(&str, &str); 3] = [
    ("docs.skiff.test", "Skiff quickstart: a static site"),
    ("shop.skiff.test", "php-fpm in the cluster"),
    ("blog.skiff.test", "csrfmiddlewaretoken"),
];

/// Runs a command line with bash in the repository root, returning (success, stdout+stderr).
fn shell(line: &str) -> (bool, String) {
    let out = Command::new("bash")
        .args(["-c", line])
        .current_dir(repo_root())
        .output()
        .expect("run bash");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Runs the quickstart with `args`, printing its output; panics when it fails.
fn quickstart(args: &str) -> String {
    let t = Instant::now();
    let (ok, out) = shell(&format!("scripts/quickstart.sh {args}"));
    eprintln!(
        "---- scripts/quickstart.sh {args} ({:.0} s)\n{out}",
        t.elapsed().as_secs_f64()
    );
    assert!(ok, "scripts/quickstart.sh {args} failed:\n{out}");
    out
}

/// The lines of the summary a user would paste: the curl commands, in order.
fn printed_curls(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("curl "))
        .map(String::from)
        .collect()
}

/// The printed Prometheus URLs.
fn printed_prometheus_urls(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("http://127.0.0.1:9090/"))
        .map(String::from)
        .collect()
}

/// resourceVersion of every object the quickstart installed: the chart's (its release
/// manifest), the example manifests, the namespaces and helm's release records.
fn installed_versions() -> BTreeMap<String, String> {
    let env = r#"eval "$(e2e/cluster env)" && export HELM_CACHE_HOME=e2e/.cluster/helm/cache HELM_CONFIG_HOME=e2e/.cluster/helm/config HELM_DATA_HOME=e2e/.cluster/helm/data"#;
    let lists = [
        "helm get manifest skiff -n skiff-system | kubectl get -f - -o json",
        "kubectl get -f examples/quickstart/ -o json",
        "kubectl get namespace skiff-system skiff-quickstart -o json",
        "kubectl get secrets -n skiff-system -l owner=helm -o json",
    ];
    let mut versions = BTreeMap::new();
    for list in lists {
        let (ok, out) = shell(&format!("{env} && {list} 2>/dev/null"));
        assert!(ok, "{list}: {out}");
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{list}: {e}"));
        let items = match v["items"].as_array() {
            Some(items) => items.clone(),
            None => vec![v],
        };
        for o in items {
            let m = &o["metadata"];
            versions.insert(
                format!(
                    "{}/{}/{}",
                    o["kind"].as_str().unwrap_or(""),
                    m["namespace"].as_str().unwrap_or(""),
                    m["name"].as_str().unwrap_or("")
                ),
                m["resourceVersion"].as_str().unwrap_or("").to_string(),
            );
        }
    }
    versions
}

#[tokio::test]
async fn quickstart_serves_what_it_prints_reruns_as_a_no_op_and_goes_down() {
    if std::env::var("SKIFF_E2E").as_deref() == Ok("skip") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no skipping in CI"
        );
        eprintln!("SKIPPED: SKIFF_E2E=skip is set, so this e2e test did not run");
        return;
    }
    let first = quickstart("");
    // Whether the quickstart brought the cluster up (and how `down` is to take it away).
    let created = std::fs::read_to_string(skiff_e2e::state_dir().join("quickstart/created"))
        .unwrap_or_default();

    // Every printed curl command, pasted as printed, answers 200 with its site's text.
    let curls = printed_curls(&first);
    let mut want: Vec<&str> = vec!["docs.skiff.test", "shop.skiff.test"];
    if repo_root().join("e2e/images/django/build.sh").exists() {
        want.push("blog.skiff.test");
    }
    for host in &want {
        assert!(
            curls.iter().any(|c| c.contains(&format!("http://{host}"))),
            "no curl command printed for {host}:\n{first}"
        );
    }
    for cmd in &curls {
        let (host, text) = SITES
            .iter()
            .find(|(host, _)| cmd.contains(&format!("http://{host}")))
            .unwrap_or_else(|| panic!("a curl command for an unknown site: {cmd}"));
        let (ok, out) = shell(&format!("{cmd} -w '\\n%{{http_code}}'"));
        assert!(ok, "{cmd} failed: {out}");
        let (body, status) = out.trim_end().rsplit_once('\n').unwrap_or(("", &out));
        assert_eq!(status, "200", "{cmd} answered {status}: {body:.300}");
        assert!(
            body.contains(text),
            "{cmd}: the answer for {host} lacks {text:?}: {body:.300}"
        );
        eprintln!("{cmd} → 200, holds {text:?}");
    }

    // The printed Prometheus pages answer, and what the first one graphs has data.
    let urls = printed_prometheus_urls(&first);
    assert!(
        urls.len() >= 2,
        "the Prometheus URLs are not printed:\n{first}"
    );
    for url in &urls {
        let (ok, out) = shell(&format!(
            "curl -sS -o /dev/null -w '%{{http_code}}' '{url}'"
        ));
        assert!(ok && out == "200", "{url} answered {out}");
    }
    let prom = Prometheus::new();
    let expr = "sum by (vhost) (skiff_http_requests_total)";
    let samples = prom.query(expr).await.expect("query Prometheus");
    let vhosts: Vec<&str> = samples
        .iter()
        .filter_map(|s| s["metric"]["vhost"].as_str())
        .collect();
    for vhost in ["docs", "shop"] {
        assert!(
            vhosts.contains(&vhost),
            "{expr}: no series for {vhost} ({vhosts:?})"
        );
    }
    // And the kubectl command lists the sites, Ready.
    let (ok, out) =
        shell(r#"eval "$(e2e/cluster env)" && kubectl get skiffvs -n skiff-quickstart"#);
    assert!(ok, "kubectl get skiffvs: {out}");
    for site in ["docs", "shop"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(site) && l.contains("True")),
            "kubectl get skiffvs does not show {site} Ready:\n{out}"
        );
    }

    // A second run changes nothing it installed and prints the same commands.
    let before = installed_versions();
    assert!(
        before.len() >= 10,
        "too few installed objects found: {before:?}"
    );
    let second = quickstart("");
    assert_eq!(
        printed_curls(&second),
        curls,
        "the second run printed other commands"
    );
    let after = installed_versions();
    let changed: Vec<String> = before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: {v} → {:?}", after.get(k)))
        .chain(
            after
                .keys()
                .filter(|k| !before.contains_key(*k))
                .map(|k| format!("{k}: new")),
        )
        .collect();
    assert!(
        changed.is_empty(),
        "the second run changed installed objects: {changed:#?}"
    );
    eprintln!(
        "second run: none of the {} installed objects changed",
        before.len()
    );

    // `down` removes what the quickstart created: the whole cluster when it brought it
    // up (e2e/run.sh then checks the host), else its namespaces.
    quickstart("down");
    match created.trim() {
        "" => {
            let (_, out) = shell(
                r#"eval "$(e2e/cluster env)" && kubectl get namespace skiff-system skiff-quickstart --ignore-not-found -o name"#,
            );
            assert!(out.trim().is_empty(), "left after down: {out}");
        }
        mode => {
            let (up, out) = shell("e2e/cluster status");
            assert!(
                !up,
                "the cluster the quickstart brought up is still up:\n{out}"
            );
            assert_eq!(
                skiff_e2e::state_dir().exists(),
                mode == "stop",
                "down with the cluster created in {mode} mode"
            );
        }
    }
}
