//! Every PromQL expression the project ships, ready to send to Prometheus: the dashboards'
//! panel targets and template-variable queries (dashboards/*.json) and the rules'
//! expressions (the chart's PrometheusRule, see [`crate::prometheus::chart_rules`]).

use serde_json::Value;
use std::path::Path;

/// One expression and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// E.g. `skiff-overview.json: panel "Error ratio" A` or `rule SkiffPoolNoEndpointUp`.
    pub source: String,
    pub expr: String,
}

/// What Grafana's built-in interval variables become: the test scrapes every 5 s, so
/// `$__rate_interval` (at least four scrape intervals) is 1m.
const BUILTINS: [(&str, &str); 6] = [
    ("__rate_interval", "1m"),
    ("__interval_ms", "30000"),
    ("__interval", "30s"),
    ("__range_s", "600"),
    ("__range_ms", "600000"),
    ("__range", "10m"),
];

/// Replaces the dashboard's template variables (`$name`, `${name}`, `${name:fmt}`,
/// `[[name]]`) with `.+` (every value; the dashboards match them with `=~`) and Grafana's
/// interval variables with fixed durations. Anything else starting with `$` (a regex
/// replacement such as `${1}` in label_replace) is left as it is.
pub fn substitute(expr: &str, variables: &[String]) -> String {
    let mut out = expr.to_string();
    for (name, value) in BUILTINS {
        out = out
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("[[{name}]]"), value);
        out = replace_dollar_word(&out, name, value);
    }
    for name in variables {
        out = out.replace(&format!("[[{name}]]"), ".+");
        // ${name} and ${name:format}
        while let Some(start) = out.find(&format!("${{{name}")) {
            let rest = &out[start + name.len() + 2..];
            let end = match rest.chars().next() {
                Some('}') => start + name.len() + 3,
                Some(':') => start + name.len() + 2 + rest.find('}').expect("closing }") + 1,
                _ => break,
            };
            out.replace_range(start..end, ".+");
        }
        out = replace_dollar_word(&out, name, ".+");
    }
    out
}

/// Replaces `$name` where the next character cannot continue the name.
fn replace_dollar_word(text: &str, name: &str, value: &str) -> String {
    let needle = format!("${name}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(&needle) {
        let after = &rest[i + needle.len()..];
        let continues = after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(&rest[..i]);
        out.push_str(if continues { &needle } else { value });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A template variable's query as PromQL: `label_values(SELECTOR, LABEL)` becomes
/// `count by (LABEL) (SELECTOR)` (non-empty exactly when Grafana would list values),
/// `label_values(LABEL)` becomes `count by (LABEL) ({LABEL=~".+"})` and
/// `query_result(EXPR)` becomes EXPR.
pub fn variable_query(query: &str) -> Option<String> {
    let q = query.trim();
    if let Some(inner) = q
        .strip_prefix("label_values(")
        .and_then(|s| s.strip_suffix(')'))
    {
        return Some(match inner.rsplit_once(',') {
            Some((selector, label)) => {
                format!("count by ({}) ({})", label.trim(), selector.trim())
            }
            None => format!("count by ({0}) ({{{0}=~\".+\"}})", inner.trim()),
        });
    }
    if let Some(inner) = q
        .strip_prefix("query_result(")
        .and_then(|s| s.strip_suffix(')'))
    {
        return Some(inner.to_string());
    }
    None
}

fn collect_panels<'a>(panels: &'a [Value], out: &mut Vec<&'a Value>) {
    for p in panels {
        out.push(p);
        if let Some(children) = p["panels"].as_array() {
            collect_panels(children, out);
        }
    }
}

/// Every expression of one dashboard (its JSON), with its variables substituted.
pub fn dashboard_queries(file: &str, dashboard: &Value) -> Vec<Query> {
    let templating = dashboard["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let variables: Vec<String> = templating
        .iter()
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect();
    let mut out = Vec::new();
    for v in &templating {
        if v["type"] != "query" {
            continue;
        }
        let query = match &v["query"] {
            Value::String(s) => s.clone(),
            q => q["query"].as_str().unwrap_or_default().to_string(),
        };
        let expr = variable_query(&query).unwrap_or_else(|| {
            panic!(
                "{file}: variable {}: cannot turn {query:?} into PromQL",
                v["name"]
            )
        });
        out.push(Query {
            source: format!("{file}: variable {}", v["name"].as_str().unwrap_or("?")),
            expr: substitute(&expr, &variables),
        });
    }
    let mut panels = Vec::new();
    collect_panels(
        dashboard["panels"]
            .as_array()
            .map_or(&[][..], Vec::as_slice),
        &mut panels,
    );
    for p in panels {
        for t in p["targets"].as_array().into_iter().flatten() {
            let Some(expr) = t["expr"].as_str() else {
                continue;
            };
            out.push(Query {
                source: format!(
                    "{file}: panel {:?} {}",
                    p["title"].as_str().unwrap_or(""),
                    t["refId"].as_str().unwrap_or("")
                ),
                expr: substitute(expr, &variables),
            });
        }
    }
    out
}

/// Every expression of every dashboard in `dir` (dashboards/*.json), sorted by file.
pub fn all_dashboard_queries(dir: &Path) -> Vec<Query> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no dashboards in {}", dir.display());
    files
        .iter()
        .flat_map(|f| {
            let d: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            dashboard_queries(&f.file_name().unwrap().to_string_lossy(), &d)
        })
        .collect()
}

/// Every rule of a rule file's `groups` (recording rules by `record`, alerts by `alert`
/// and their position among alerts of the same name).
pub fn rule_queries(rules: &Value) -> Vec<Query> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for g in rules["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            let expr = r["expr"].as_str().expect("expr").trim().to_string();
            let source = if let Some(record) = r["record"].as_str() {
                format!("record {record}")
            } else {
                let alert = r["alert"].as_str().expect("record or alert");
                let n = seen.entry(alert.to_string()).or_default();
                *n += 1;
                // Not firing is the healthy answer: its comparisons made `bool` still
                // return a sample for every series they compare.
                out.push(Query {
                    source: format!("alert {alert} #{n} (comparisons as bool)"),
                    expr: unfiltered(&expr),
                });
                format!("alert {alert} #{n}")
            };
            out.push(Query { source, expr });
        }
    }
    out
}

/// The expression with every comparison (`>`, `==`, ...) outside label matchers and
/// strings turned into a `bool` comparison, which returns 0 or 1 for every series it
/// compares instead of dropping those that fail: an alert that is not firing still
/// shows that every metric and label it reads has data.
pub fn unfiltered(expr: &str) -> String {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::with_capacity(expr.len() + 16);
    let (mut braces, mut quote) = (0usize, None::<char>);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            out.push(c);
            if c == '\\' && i + 1 < chars.len() {
                out.push(chars[i + 1]);
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            '"' | '\'' | '`' => quote = Some(c),
            '{' => braces += 1,
            '}' => braces = braces.saturating_sub(1),
            _ => {}
        }
        let next = chars.get(i + 1).copied();
        let op_len = match (c, next) {
            _ if braces > 0 => 0,
            ('=', Some('=')) | ('!', Some('=')) | ('>', Some('=')) | ('<', Some('=')) => 2,
            ('>', _) | ('<', _) => 1,
            _ => 0,
        };
        if op_len == 0 {
            out.push(c);
            i += 1;
            continue;
        }
        out.extend(&chars[i..i + op_len]);
        i += op_len;
        let rest: String = chars[i..].iter().collect();
        let already = rest.trim_start().strip_prefix("bool").is_some_and(|r| {
            !r.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        });
        if !already {
            out.push_str(" bool");
        }
    }
    out
}

/// The metric names an expression reads (identifiers outside strings, label matchers
/// and grouping lists, not followed by `(`): for telling an empty result that is
/// legitimate from a misspelled name.
pub fn metric_names(expr: &str) -> Vec<String> {
    // Binary operators and modifiers, and the aggregations (which may be followed by
    // `by (...)` rather than by their parenthesis).
    const KEYWORDS: [&str; 24] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "group",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let (mut i, mut after_grouping) = (0, false);
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '{' || c == '[' {
            let close = if c == '{' { '}' } else { ']' };
            while i < chars.len() && chars[i] != close {
                if chars[i] == '"' {
                    i += 1;
                    while i < chars.len() && chars[i] != '"' {
                        i += if chars[i] == '\\' { 2 } else { 1 };
                    }
                }
                i += 1;
            }
            i += 1;
        } else if c == '(' && after_grouping {
            // by (...), on (...), group_left (...): label names, not metrics.
            while i < chars.len() && chars[i] != ')' {
                i += 1;
            }
            i += 1;
            after_grouping = false;
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let is_call = j < chars.len() && chars[j] == '(';
            let lower = word.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "by" | "without" | "on" | "ignoring" | "group_left" | "group_right"
            ) {
                after_grouping = true;
            } else if !is_call && !KEYWORDS.contains(&lower.as_str()) && lower != "nan" {
                if !names.contains(&word) {
                    names.push(word);
                }
            } else {
                after_grouping = false;
            }
        } else {
            if !c.is_whitespace() {
                after_grouping = false;
            }
            i += 1;
        }
    }
    names
}

#[cfg(test)]
mod tests {
    #[test]
    fn unfiltered_makes_comparisons_bool_but_not_matchers_or_strings() {
        use super::unfiltered;
        assert_eq!(
            unfiltered(r#"sum(x{code=~"5..",a!="b"}) > 0"#),
            r#"sum(x{code=~"5..",a!="b"}) > bool 0"#
        );
        assert_eq!(
            unfiltered("a > on (ns) group_left () (14.4 * b) and on (ns) c >= 1"),
            "a > bool on (ns) group_left () (14.4 * b) and on (ns) c >= bool 1"
        );
        assert_eq!(unfiltered("x == 0"), "x == bool 0");
        assert_eq!(unfiltered("x != bool 0"), "x != bool 0");
        assert_eq!(
            unfiltered("x - time() < 14 * 86400"),
            "x - time() < bool 14 * 86400"
        );
        assert_eq!(
            unfiltered(r#"label_replace(x, "a", ">$1", "b", "(.*)")"#),
            r#"label_replace(x, "a", ">$1", "b", "(.*)")"#
        );
        // A metric whose name starts with "bool" is not the modifier.
        assert_eq!(unfiltered("x > boolean_metric"), "x > bool boolean_metric");
    }

    use super::*;
    use crate::repo_root;

    #[test]
    fn substitutes_variables_but_not_regex_references() {
        let vars = vec![
            "namespace".to_string(),
            "virtualserver".to_string(),
            "pool".to_string(),
        ];
        assert_eq!(
            substitute(
                r#"label_replace(rate(m{namespace=~"$namespace", virtualserver=~"${virtualserver}", pool=~"[[pool]]"}[$__rate_interval]), "class", "${1}xx", "code", "([1-5]).*")"#,
                &vars
            ),
            r#"label_replace(rate(m{namespace=~".+", virtualserver=~".+", pool=~".+"}[1m]), "class", "${1}xx", "code", "([1-5]).*")"#
        );
        assert_eq!(
            substitute("${pool:regex} $pools $__interval", &vars),
            ".+ $pools 30s"
        );
    }

    #[test]
    fn turns_variable_queries_into_promql() {
        assert_eq!(
            variable_query(
                r#"label_values(skiff_build_info{namespace=~"$namespace"}, virtualserver)"#
            )
            .unwrap(),
            r#"count by (virtualserver) (skiff_build_info{namespace=~"$namespace"})"#
        );
        assert_eq!(
            variable_query("label_values(namespace)").unwrap(),
            r#"count by (namespace) ({namespace=~".+"})"#
        );
        assert_eq!(variable_query("metrics(skiff_.*)"), None);
    }

    #[test]
    fn finds_metric_names() {
        assert_eq!(
            metric_names(
                r#"sum by (namespace, pool) (rate(skiff_upstream_failures_total{reason="queue_full", x=~"a{b}"}[5m])) > 0"#
            ),
            ["skiff_upstream_failures_total"]
        );
        assert_eq!(
            metric_names(
                "a:b:rate1h > on (namespace, virtualserver) group_left () (14.4 * (1 - c_max{slo=\"x\"})) and on (namespace) d - time() < 14 * 86400"
            ),
            ["a:b:rate1h", "c_max", "d"]
        );
    }

    /// The committed dashboards: every panel has a query, and once substituted no
    /// Grafana variable is left for Prometheus to choke on.
    #[test]
    fn every_dashboard_expression_is_plain_promql() {
        let queries = all_dashboard_queries(&repo_root().join("dashboards"));
        assert!(queries.len() >= 40, "{} queries", queries.len());
        for q in &queries {
            let mut rest = q.expr.as_str();
            while let Some(i) = rest.find('$') {
                rest = &rest[i + 1..];
                assert!(
                    rest.starts_with("{1}"),
                    "{}: a variable is left in {}",
                    q.source,
                    q.expr
                );
            }
            assert!(!q.expr.contains("[["), "{}: {}", q.source, q.expr);
            assert!(
                !metric_names(&q.expr).is_empty(),
                "{}: reads no metric: {}",
                q.source,
                q.expr
            );
        }
        assert!(queries.iter().any(|q| q.source.contains("variable pool")));
    }

    #[test]
    fn reads_every_rule_of_the_rule_file() {
        let rules: Value = serde_saphyr::from_str(
            &std::fs::read_to_string(repo_root().join("dashboards/rules/skiff-rules.yaml"))
                .unwrap(),
        )
        .unwrap();
        let queries = rule_queries(&rules);
        assert!(queries
            .iter()
            .any(|q| q.source == "alert SkiffAvailabilityBudgetBurn #3"));
        assert!(queries
            .iter()
            .any(|q| q.source == "record namespace_virtualserver:skiff_slo_errors:ratio_rate30d"));
        for q in &queries {
            assert!(
                !metric_names(&q.expr).is_empty(),
                "{}: {}",
                q.source,
                q.expr
            );
        }
    }
}
