"""Skiff / Backend pools: per pool of the selected VirtualServers (the Overview's rows
link here with namespace and virtualserver set).

The edge counts every pool request itself (skiff_upstream_*), so php-fpm, uWSGI or an
HTTP backend need no exporter of their own for this view.
"""

from common import (
    POOL,
    RATE,
    UID_OVERVIEW,
    UID_POOLS,
    VS,
    dashboard,
    edge_variables,
    link_to,
    pool_variable,
    query,
    stat,
    timeseries,
)

BY_POOL = "namespace, virtualserver, pool"
LEGEND_POOL = "{{namespace}}/{{virtualserver}} {{pool}}"
REQUESTS = f"namespace_pool:skiff_upstream_requests:rate5m{{{POOL}}}"


def _failures(reason_regex):
    return f'sum by ({BY_POOL}) (rate(skiff_upstream_failures_total{{{POOL}, reason=~"{reason_regex}"}}[{RATE}]))'


def _latency(phase, q):
    return query(
        f"histogram_quantile({q}, sum by ({BY_POOL}, le) "
        f'(rate(skiff_upstream_duration_seconds_bucket{{{POOL}, phase="{phase}"}}[{RATE}])))',
        f"p{int(q * 100)} {LEGEND_POOL}",
    )


def build():
    health = [
        stat(
            "Endpoints up",
            "Endpoints the passive health checks consider up, summed over the pods' views.",
            "short",
            [query(f'sum by ({BY_POOL}) (skiff_upstream_endpoints{{{POOL}, state="up"}})', LEGEND_POOL)],
            span=8,
        ),
        stat(
            "Endpoints down",
            "Endpoints marked down after max_fails failures.",
            "short",
            [query(f'sum by ({BY_POOL}) (skiff_upstream_endpoints{{{POOL}, state="down"}})', LEGEND_POOL)],
            span=8,
        ),
        stat(
            "Active requests",
            "Requests in flight to the pool now; at the pool's worker count, new ones queue.",
            "short",
            [query(f"sum by ({BY_POOL}) (skiff_upstream_active_requests{{{POOL}}})", LEGEND_POOL)],
            span=8,
        ),
    ]
    traffic = [
        timeseries(
            "Requests by status",
            "Pool responses per second, by status code.",
            "reqps",
            [query(f"sum by ({BY_POOL}, code) ({REQUESTS})", "{{code}} " + LEGEND_POOL)],
            stack=True,
        ),
        timeseries(
            "Failures by reason",
            "Every reason of skiff_upstream_failures_total, per second: connect, protocol, io and stale are 502, timeout 504, queue_full and body_memory 503, body_too_large 413, client_timeout 408, client_body 400, no_script 404, body_buffer 500, rewrite 400 (a dot segment in a rewritten path).",
            "reqps",
            [
                query(
                    f"sum by ({BY_POOL}, reason) (rate(skiff_upstream_failures_total{{{POOL}}}[{RATE}]))",
                    "{{reason}} " + LEGEND_POOL,
                )
            ],
            stack=True,
        ),
        timeseries(
            "Active requests (busy workers)",
            "Requests in flight per pool, over time: a flat top is the pool at its capacity.",
            "short",
            [query(f"sum by ({BY_POOL}) (skiff_upstream_active_requests{{{POOL}}})", LEGEND_POOL)],
            span=8,
        ),
        timeseries(
            "Queue rejections (503)",
            "Requests refused because the pool's queue was full.",
            "reqps",
            [query(_failures("queue_full"), LEGEND_POOL)],
            span=8,
        ),
        timeseries(
            "Timeouts (504)",
            "Requests the backend did not answer in time.",
            "reqps",
            [query(_failures("timeout"), LEGEND_POOL)],
            span=8,
        ),
    ]
    latency = [
        timeseries(
            "Latency to first byte",
            "From sending the request to the pool until its response head.",
            "s",
            [_latency("first_byte", 0.5), _latency("first_byte", 0.99)],
        ),
        timeseries(
            "Latency total",
            "From sending the request to the pool until its last body byte.",
            "s",
            [_latency("total", 0.5), _latency("total", 0.99)],
        ),
        timeseries(
            "Uploads buffered before a CGI worker takes them",
            "Request body bytes each edge pod holds in files for CGI pools (all pools together). "
            "At 1 GiB a pod streams further uploads with a length, and a slow one then holds a worker.",
            "bytes",
            [
                query(
                    f"max by (namespace, virtualserver, pod) (skiff_upstream_body_buffer_bytes{{{VS}}})",
                    "{{namespace}}/{{virtualserver}} {{pod}}",
                )
            ],
            min_val=0,
        ),
    ]
    return dashboard(
        UID_POOLS,
        "Skiff / Backend pools",
        "Skiff backend pools: requests, failures by reason, saturation, latency and endpoints.",
        [*edge_variables(), pool_variable()],
        [("Health", health), ("Traffic and failures", traffic), ("Latency", latency)],
        links=[link_to(UID_OVERVIEW, "Overview", "Back to the VirtualServers")],
    )
