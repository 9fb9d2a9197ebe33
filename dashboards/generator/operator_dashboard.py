"""Skiff / Operator: the skiff-operator's reconciliations, errors, duration,
VirtualServers by condition, and which replica leads. (Not operator.py, which would
shadow the standard library's module of that name.)

The operator's series are not per VirtualServer (but the SLO gauges, which the SLO
dashboard reads), so only the datasource is a variable here.
"""

from common import RATE, UID_OPERATOR, UID_OVERVIEW, dashboard, datasource_variable, link_to, query, stat, table, timeseries


def _quantile(q):
    return query(
        f"histogram_quantile({q}, sum by (le) (rate(skiff_operator_reconcile_duration_seconds_bucket[{RATE}])))",
        f"p{int(q * 100)}",
    )


def build():
    now = [
        stat(
            "Reconciles",
            "Reconciles per second, all replicas.",
            "ops",
            [query(f"sum(rate(skiff_operator_reconciliations_total[{RATE}]))")],
        ),
        stat(
            "Reconcile errors",
            "Failed reconciles per second, all reasons.",
            "ops",
            [query(f"sum(rate(skiff_operator_reconcile_errors_total[{RATE}]))")],
        ),
        stat(
            "VirtualServers Ready",
            "VirtualServers whose Ready condition is True.",
            "short",
            [query('sum(skiff_operator_virtualservers{condition="Ready", status="True"})')],
        ),
        table(
            "Leader",
            "The replica that runs the controller (skiff_operator_leader is 1 on it, 0 on standbys).",
            "short",
            [query("max by (namespace, pod) (skiff_operator_leader) == 1", instant=True)],
            span=6,
            height=4,
        ),
    ]
    history = [
        timeseries(
            "Reconciles per replica",
            "Reconciles per second by pod: a change of leader shows as the work moving.",
            "ops",
            [query(f"sum by (pod) (rate(skiff_operator_reconciliations_total[{RATE}]))", "{{pod}}")],
        ),
        timeseries(
            "Errors by reason",
            "Failed reconciles per second, by reason.",
            "ops",
            [query(f"sum by (reason) (rate(skiff_operator_reconcile_errors_total[{RATE}]))", "{{reason}}")],
            stack=True,
        ),
        timeseries(
            "Reconcile duration p50 / p90 / p99",
            "Time one reconcile took.",
            "s",
            [_quantile(0.5), _quantile(0.9), _quantile(0.99)],
        ),
        timeseries(
            "VirtualServers by condition",
            "VirtualServers per condition and status (Ready, Accepted, ConfigLive, CertificateReady...).",
            "short",
            [
                query(
                    "sum by (condition, status) (skiff_operator_virtualservers)",
                    "{{condition}}={{status}}",
                )
            ],
        ),
    ]
    return dashboard(
        UID_OPERATOR,
        "Skiff / Operator",
        "The skiff-operator: reconciliations, errors, duration, VirtualServers by condition, leader.",
        [datasource_variable()],
        [("Now", now), ("Over time", history)],
        links=[link_to(UID_OVERVIEW, "Overview", "The edge farms the operator runs")],
    )
