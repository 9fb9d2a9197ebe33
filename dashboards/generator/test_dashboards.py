"""Structure tests of the committed dashboards (dashboards/*.json), standard library only,
so they need neither the SDK nor Grafana (which no registry this machine reaches ships):

    python3 -m unittest discover -s dashboards/generator -p 'test_*.py'   (cargo xtask check)

Unique uids, the datasource variable behind every panel and query, a query and a unit on
every panel, grid positions inside 24 columns that do not overlap, and every PromQL
expression lexed and checked: brackets balance, functions are PromQL's, range durations
are durations, and every metric and label name exists in server/src/metrics/,
operator/src/metrics.rs or the recording rules. This is not a PromQL parser; e2e sends
every query to a real Prometheus.
"""

import json
import re
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
CHART_COPIES = ROOT / "charts/skiff/files/dashboards"
RULES_DIR = ROOT / "dashboards/rules"

# Labels every edge and operator series gets from its scrape target (the operator's
# ServiceMonitor relabeling) and Prometheus itself.
TARGET_LABELS = {"namespace", "virtualserver", "pod", "job", "instance", "service", "endpoint", "container"}

# What the `rules` branch adds (contract17.md), accepted only while that branch is not
# merged (no dashboards/rules/). Once it is, the names must come from the sources.
PENDING_RECORDING_RULES = {
    f"namespace_virtualserver:skiff_slo_{sli}:ratio_rate{w}"
    for sli in ("errors", "slow")
    for w in ("5m", "30m", "1h", "2h", "6h", "1d", "3d", "30d")
} | {
    "namespace_virtualserver:skiff_http_requests:rate5m",
    "namespace_virtualserver:skiff_http_request_duration_seconds_bucket:rate5m",
    "namespace_pool:skiff_upstream_requests:rate5m",
}
PENDING_OPERATOR_METRICS = {
    "skiff_operator_virtualserver_slo_objective",
    "skiff_operator_virtualserver_slo_latency_threshold_seconds",
}
PENDING_LABELS = {"slo"}

FUNCTIONS = set(
    """abs absent absent_over_time avg_over_time ceil changes clamp clamp_max clamp_min
    count_over_time day_of_month day_of_week day_of_year days_in_month delta deriv exp
    floor histogram_quantile histogram_count histogram_sum histogram_fraction holt_winters
    hour idelta increase irate label_join label_replace last_over_time ln log10 log2
    max_over_time min_over_time minute month predict_linear present_over_time
    quantile_over_time rate resets round scalar sgn sort sort_desc sqrt stddev_over_time
    stdvar_over_time sum_over_time time timestamp vector year""".split()
)
AGGREGATIONS = set("sum min max avg group stddev stdvar count count_values bottomk topk quantile".split())
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
OPERATOR_KEYWORDS = {"and", "or", "unless", "bool", "offset"}
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}

TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<duration>\d+(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)
      | (?P<number>\d+(?:\.\d+)?(?:e[+-]?\d+)?)
      | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
      | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^=<>,:])
      | (?P<bracket>[(){}\[\]])""",
    re.X,
)


# The server registers its metrics in metrics/mod.rs and declares their labels in
# metrics/labels.rs.
SERVER_METRICS = ROOT / "server/src/metrics/mod.rs"
SERVER_LABELS = ROOT / "server/src/metrics/labels.rs"


def metric_names(path):
    """The names prometheus-client exposes for each metric a metrics.rs registers:
    counters get _total, histograms _bucket/_sum/_count, infos _info."""
    text = path.read_text()
    prefix = re.search(r'Registry::with_prefix\("([a-z_]+)"\)', text).group(1)
    # The type of each field or local: `name: Family<Labels, Counter>`, `name: Histogram`,
    # `let name = Family::<Labels, Counter>::default()`, `let name = Counter::default()`.
    kinds = {}
    # A FloatGauge is exposed as a gauge, a SummedCounter (per-worker cells) as a counter.
    for name, kind in re.findall(r"(\w+): (?:Family<\w+,\s*)?(?:Float|Summed)?(Counter|Gauge|Histogram)\b", text):
        kinds[name] = kind
    for name, kind in re.findall(r"let (\w+)\s*=\s*(?:Family::<\w+,\s*)?(?:Float|Summed)?(Counter|Gauge|Histogram)\b", text):
        kinds[name] = kind
    names = set()
    for metric, arg in re.findall(r'\.register\(\s*"(\w+)",\s*"(?:[^"\\]|\\.)*",\s*([^,;]+?),?\s*\)', text, re.S):
        full = f"{prefix}_{metric}"
        if arg.startswith("Info::new"):
            names.add(f"{full}_info")
            continue
        var = re.match(r"(\w+)", arg).group(1)
        kind = kinds.get(var)
        if kind is None:
            raise AssertionError(f"{path}: cannot tell the type of {metric} ({arg}); teach test_dashboards.py")
        names |= {
            "Counter": {f"{full}_total"},
            "Gauge": {full},
            "Histogram": {f"{full}_bucket", f"{full}_sum", f"{full}_count"},
        }[kind]
    return names


def label_names(path):
    """Every field of the EncodeLabelSet structs of a metrics.rs."""
    labels = set()
    for body in re.findall(r"EncodeLabelSet\)\]\s*(?:pub )?struct \w+ \{(.*?)\}", path.read_text(), re.S):
        labels |= set(re.findall(r"^\s*(?:pub )?(\w+):", body, re.M))
    return labels


def recording_rules():
    names = set()
    for path in sorted(RULES_DIR.glob("*.y*ml")) if RULES_DIR.exists() else []:
        names |= set(re.findall(r"^\s*-?\s*record:\s*['\"]?([A-Za-z_:][A-Za-z0-9_:]*)", path.read_text(), re.M))
    return names


def known_names():
    metrics = metric_names(SERVER_METRICS) | metric_names(ROOT / "operator/src/metrics.rs")
    labels = label_names(SERVER_LABELS) | label_names(ROOT / "operator/src/metrics.rs")
    labels |= TARGET_LABELS | {"le", "__name__"}
    metrics |= recording_rules()
    if not RULES_DIR.exists():
        metrics |= PENDING_RECORDING_RULES | PENDING_OPERATOR_METRICS
        labels |= PENDING_LABELS
    return metrics, labels


def check_promql(expr, metrics, labels):
    """Returns the problems found in one expression (empty: it passed)."""
    problems = []
    # Grafana's interval variables stand for durations; any other $variable may only
    # appear inside a string (a label matcher), since the lexer knows no `$` otherwise.
    for var, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(var, value)
    tokens, pos = [], 0
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            return [f"cannot lex at {expr[pos:pos + 20]!r}"]
        if m.lastgroup != "space":
            tokens.append((m.lastgroup, m.group()))
        pos = m.end()
    # label_replace and friends make labels of their own: accept their target names.
    made = {s.strip("\"'") for k, s in tokens if k == "string"}
    stack, label_list_depth = [], None
    for i, (kind, text) in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else (None, None)
        prev = tokens[i - 1] if i else (None, None)
        if kind == "bracket":
            if text in "({[":
                stack.append(text)
                if text == "(" and prev[1] in LABEL_LIST_KEYWORDS:
                    label_list_depth = len(stack)
            else:
                want = {")": "(", "}": "{", "]": "["}[text]
                if not stack or stack.pop() != want:
                    return problems + [f"unbalanced {text!r}"]
                if label_list_depth is not None and len(stack) < label_list_depth:
                    label_list_depth = None
            continue
        inside = stack[-1] if stack else None
        if inside == "[":
            # A range or a subquery's [range:step].
            if kind not in ("duration", "op"):
                problems.append(f"{text!r} in a range is not a duration")
        elif kind == "ident":
            if inside == "{" or label_list_depth is not None:
                if inside == "{" and nxt[1] not in ("=", "!=", "=~", "!~"):
                    problems.append(f"label {text} has no matcher")
                if text not in labels and text not in made:
                    problems.append(f"unknown label {text}")
            elif text in LABEL_LIST_KEYWORDS:
                if nxt[1] != "(":
                    problems.append(f"{text} without a label list")
            elif text in OPERATOR_KEYWORDS:
                pass
            elif nxt[1] == "(":
                if text not in FUNCTIONS and text not in AGGREGATIONS:
                    problems.append(f"unknown function {text}")
            elif text in AGGREGATIONS and nxt[1] in LABEL_LIST_KEYWORDS:
                pass
            elif text not in metrics:
                problems.append(f"unknown metric {text}")
        elif kind == "duration" and prev[1] != "offset":
            problems.append(f"duration {text} outside a range")
    if stack:
        problems.append(f"unclosed {''.join(stack)!r}")
    return problems


def queries(dash):
    """(where, expression) for every panel target and query variable."""
    for p in panels(dash):
        for t in p.get("targets", []):
            yield f"panel {p.get('title')!r}", t.get("expr", "")
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q)
            assert m, f"variable {v['name']}: {q}"
            yield f"variable {v['name']}", m.group(1)


def panels(dash):
    """Every panel but rows, including those inside collapsed rows."""
    for p in dash.get("panels", []):
        if p.get("type") == "row":
            yield from p.get("panels", [])
        else:
            yield p


def overlaps(grid_positions):
    """Pairs of (name, gridPos) that share a cell, or lie outside the 24 columns."""
    bad = []
    for i, (a_name, a) in enumerate(grid_positions):
        if a["w"] <= 0 or a["h"] <= 0 or a["x"] < 0 or a["x"] + a["w"] > 24:
            bad.append((a_name, a_name))
        for b_name, b in grid_positions[i + 1:]:
            if a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]:
                bad.append((a_name, b_name))
    return bad


class Dashboards(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dashboards = {p.name: json.loads(p.read_text()) for p in DASHBOARDS}
        cls.metrics, cls.labels = known_names()

    def test_the_four_dashboards_exist(self):
        titles = {d["title"] for d in self.dashboards.values()}
        for t in ("Skiff / Overview", "Skiff / Backend pools", "Skiff / SLO", "Skiff / Operator"):
            self.assertIn(t, titles)

    def test_uids_are_unique_and_valid(self):
        uids = [d.get("uid") for d in self.dashboards.values()]
        self.assertEqual(len(uids), len(set(uids)), uids)
        for uid in uids:
            # Grafana refuses uids over 40 characters or outside this alphabet.
            self.assertRegex(uid or "", r"^[A-Za-z0-9_-]{1,40}$")
        for name, d in self.dashboards.items():
            ids = [p["id"] for p in d["panels"]] + [p["id"] for p in panels(d) if p not in d["panels"]]
            self.assertEqual(len(ids), len(set(ids)), f"{name}: panel ids repeat")

    def test_every_panel_and_query_uses_the_datasource_variable(self):
        for name, d in self.dashboards.items():
            variables = {v["name"]: v for v in d["templating"]["list"]}
            ds = variables.get("datasource")
            self.assertIsNotNone(ds, f"{name}: no datasource variable")
            self.assertEqual((ds["type"], ds["query"]), ("datasource", "prometheus"), name)
            for p in panels(d):
                self.assertEqual(p.get("datasource", {}).get("uid"), "${datasource}", f"{name}: {p.get('title')}")
                for t in p.get("targets", []):
                    self.assertEqual(t.get("datasource", {}).get("uid"), "${datasource}", f"{name}: {p.get('title')}")
            for v in variables.values():
                if v["type"] == "query":
                    self.assertEqual(v["datasource"]["uid"], "${datasource}", f"{name}: variable {v['name']}")

    def test_edge_dashboards_have_namespace_and_virtualserver_variables(self):
        for name, d in self.dashboards.items():
            if d["uid"] == "skiff-operator":
                continue
            variables = {v["name"] for v in d["templating"]["list"]}
            self.assertLessEqual({"namespace", "virtualserver"}, variables, name)

    def test_variables_used_are_defined(self):
        for name, d in self.dashboards.items():
            defined = {v["name"] for v in d["templating"]["list"]}
            for where, expr in queries(d):
                for var in re.findall(r"\$\{?([A-Za-z_]\w*)", expr):
                    if not var.startswith("__"):
                        self.assertIn(var, defined, f"{name}: {where} uses ${var}")

    def test_every_panel_has_a_query_and_a_unit(self):
        for name, d in self.dashboards.items():
            found = list(panels(d))
            self.assertTrue(found, f"{name}: no panels")
            for p in found:
                targets = p.get("targets", [])
                self.assertTrue(targets, f"{name}: {p.get('title')} has no query")
                for t in targets:
                    self.assertTrue(t.get("expr", "").strip(), f"{name}: {p.get('title')} has an empty query")
                    self.assertTrue(t.get("refId"), f"{name}: {p.get('title')} has a query without refId")
                unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
                self.assertTrue(unit, f"{name}: {p.get('title')} has no unit")
                self.assertTrue(p.get("title") and p.get("description"), f"{name}: panel {p.get('id')} lacks a title or description")

    def test_grid_positions_do_not_overlap(self):
        for name, d in self.dashboards.items():
            grid = [(p.get("title"), p["gridPos"]) for p in d["panels"]]
            self.assertEqual(overlaps(grid), [], name)

    def test_every_query_checks_and_names_existing_metrics(self):
        count = 0
        for name, d in self.dashboards.items():
            for where, expr in queries(d):
                count += 1
                self.assertEqual(check_promql(expr, self.metrics, self.labels), [], f"{name}: {where}: {expr}")
        self.assertGreater(count, 40)

    def test_overview_links_to_the_pools_with_the_variables(self):
        overview = next(d for d in self.dashboards.values() if d["uid"] == "skiff-overview")
        pools = [link for link in overview["links"] if link.get("url") == "/d/skiff-backend-pools"]
        self.assertTrue(pools and pools[0]["includeVars"] and pools[0]["keepTime"], overview["links"])
        row_links = [link["url"] for p in panels(overview) for link in p["fieldConfig"]["defaults"].get("links", [])]
        self.assertTrue(
            any(
                u.startswith("/d/skiff-backend-pools?")
                and "var-namespace=" in u
                and "var-virtualserver=" in u
                and "${datasource:queryparam}" in u
                for u in row_links
            ),
            row_links,
        )

    def test_the_chart_carries_the_same_dashboards(self):
        copies = sorted(p.name for p in CHART_COPIES.glob("*.json"))
        self.assertEqual(copies, [p.name for p in DASHBOARDS])
        for p in DASHBOARDS:
            self.assertEqual((CHART_COPIES / p.name).read_bytes(), p.read_bytes(), p.name)


class Checker(unittest.TestCase):
    """The checks above must be able to fail: each catches what it is meant to."""

    metrics = {"skiff_http_requests_total", "skiff_connections_open"}
    labels = {"namespace", "code"}

    def problems(self, expr):
        return check_promql(expr, self.metrics, self.labels)

    def test_accepts_a_good_expression(self):
        expr = 'sum by (namespace, class) (label_replace(rate(skiff_http_requests_total{code=~"5.."}[$__rate_interval]), "class", "$1", "code", "(.)"))'
        self.assertEqual(self.problems(expr), [])

    def test_refuses_mistakes(self):
        for expr, problem in [
            ("sum(rate(skiff_http_requests_total[5m])", "unclosed '('"),
            ("sum(rate(skiff_http_requests_total[5m])))", "unbalanced ')'"),
            ("rate(skiff_http_request_total[5m])", "unknown metric skiff_http_request_total"),
            ('skiff_connections_open{namspace="a"}', "unknown label namspace"),
            ("sum by (cod) (skiff_connections_open)", "unknown label cod"),
            ("rates(skiff_http_requests_total[5m])", "unknown function rates"),
            ("rate(skiff_http_requests_total[five])", "'five' in a range is not a duration"),
            ("skiff_connections_open{$namespace}", "cannot lex at '$namespace}'"),
        ]:
            self.assertIn(problem, self.problems(expr), expr)

    def test_finds_overlaps(self):
        a = {"x": 0, "y": 0, "w": 12, "h": 8}
        self.assertEqual(overlaps([("a", a), ("b", {"x": 12, "y": 0, "w": 12, "h": 8})]), [])
        self.assertEqual(overlaps([("a", a), ("b", {"x": 11, "y": 7, "w": 4, "h": 4})]), [("a", "b")])
        self.assertEqual(overlaps([("a", {"x": 20, "y": 0, "w": 8, "h": 1})]), [("a", "a")])

    def test_reads_the_metric_types(self):
        names = metric_names(SERVER_METRICS)
        for n in ("skiff_http_requests_total", "skiff_http_request_duration_seconds_bucket", "skiff_connections_open", "skiff_build_info", "skiff_config_info"):
            self.assertIn(n, names)
        self.assertNotIn("skiff_http_requests", names)
        self.assertIn("skiff_operator_reconcile_duration_seconds_count", metric_names(ROOT / "operator/src/metrics.rs"))


if __name__ == "__main__":
    unittest.main()
