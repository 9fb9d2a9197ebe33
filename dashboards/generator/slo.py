"""Skiff / SLO: per VirtualServer, its availability and latency objectives, the error
budget left over 30 days and the burn rates the alerts watch (1h, 6h, 3d).

The objectives are the operator's skiff_operator_virtualserver_slo_objective gauges (from
the CRD's spec.slo, or the defaults), so each VirtualServer is judged on its own target.
The error and slow ratios are the `rules` branch's recording rules. Every operator
series goes through max by (namespace, virtualserver): its other target labels (pod,
instance) must not stop the join, and a standby replica may export the same gauge.
"""

from common import (
    UID_OVERVIEW,
    UID_SLO,
    VS,
    dashboard,
    edge_variables,
    link_to,
    query,
    stat,
    timeseries,
)

BY_VS = "namespace, virtualserver"
LEGEND_VS = "{{namespace}}/{{virtualserver}}"
# The SLI each objective is about, as the recording rules name it.
RATIO = {"availability": "skiff_slo_errors", "latency": "skiff_slo_slow"}


def objective(slo):
    return f'max by ({BY_VS}) (skiff_operator_virtualserver_slo_objective{{{VS}, slo="{slo}"}})'


def bad_ratio(slo, window):
    return f"namespace_virtualserver:{RATIO[slo]}:ratio_rate{window}{{{VS}}}"


def burn_rate(slo, window):
    # How fast the budget goes: 1 spends exactly the budget in 30 days; the alerts page
    # at 14.4 (1h) and 6 (6h) and open a ticket at 1 (3d).
    return f"{bad_ratio(slo, window)} / on ({BY_VS}) (1 - {objective(slo)})"


def budget_left(slo):
    return f"1 - {bad_ratio(slo, '30d')} / on ({BY_VS}) (1 - {objective(slo)})"


def build():
    objectives = [
        stat(
            "Availability objective",
            "Share of requests that must not be answered 5xx (spec.slo, default 99.9%).",
            "percentunit",
            [query(objective("availability"), LEGEND_VS)],
            decimals=3,
        ),
        stat(
            "Latency objective",
            "Share of requests that must be faster than the threshold (spec.slo, default 99%).",
            "percentunit",
            [query(objective("latency"), LEGEND_VS)],
            decimals=3,
        ),
        stat(
            "Latency threshold",
            "The latency objective's threshold, one of the request-duration histogram's bounds.",
            "s",
            [
                query(
                    f"max by ({BY_VS}) (skiff_operator_virtualserver_slo_latency_threshold_seconds{{{VS}}})",
                    LEGEND_VS,
                )
            ],
        ),
        stat(
            "Availability, 30 days",
            "Share of requests not answered 5xx over the last 30 days.",
            "percentunit",
            [query(f"1 - {bad_ratio('availability', '30d')}", LEGEND_VS)],
            decimals=3,
        ),
    ]
    budget = [
        stat(
            "Error budget left (availability, 30 days)",
            "1 is the whole budget; 0 spent; below 0 the objective is missed.",
            "percentunit",
            [query(budget_left("availability"), LEGEND_VS)],
            span=12,
            decimals=1,
        ),
        stat(
            "Error budget left (latency, 30 days)",
            "1 is the whole budget; 0 spent; below 0 the objective is missed.",
            "percentunit",
            [query(budget_left("latency"), LEGEND_VS)],
            span=12,
            decimals=1,
        ),
        timeseries(
            "Error budget left over time (availability)",
            "The 30-day budget left, as it moves.",
            "percentunit",
            [query(budget_left("availability"), LEGEND_VS)],
        ),
        timeseries(
            "Error budget left over time (latency)",
            "The 30-day budget left, as it moves.",
            "percentunit",
            [query(budget_left("latency"), LEGEND_VS)],
        ),
    ]
    burn = [
        timeseries(
            f"Burn rate ({slo})",
            "Budget spent per unit of time against the objective: 1 spends it in exactly 30 days. "
            "The SLO alerts fire at 14.4 over 1h, 6 over 6h and 1 over 3d (Google SRE workbook).",
            "x",
            [query(burn_rate(slo, w), f"{w} {LEGEND_VS}") for w in ("1h", "6h", "3d")],
            min_val=0,
        )
        for slo in ("availability", "latency")
    ]
    return dashboard(
        UID_SLO,
        "Skiff / SLO",
        "Skiff service level objectives per VirtualServer: objectives, 30-day error budget and burn rates.",
        edge_variables(),
        [("Objectives", objectives), ("Error budget", budget), ("Burn rates", burn)],
        links=[link_to(UID_OVERVIEW, "Overview", "Traffic, errors and latency of the same VirtualServers")],
    )
