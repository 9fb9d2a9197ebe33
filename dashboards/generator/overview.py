"""Skiff / Overview: the edge farm per VirtualServer (namespace, name).

Heavy per-request panels read the `rules` branch's recording rules
(namespace_virtualserver:*:rate5m) rather than raw series: one series per VirtualServer
and code instead of one per pod, vhost, method and code.
"""

from common import (
    RATE,
    UID_OVERVIEW,
    UID_POOLS,
    UID_SLO,
    VS,
    dashboard,
    edge_variables,
    link_to,
    query,
    stat,
    table,
    timeseries,
)
from grafana_foundation_sdk.builders import dashboard as dash

REQUESTS = f"namespace_virtualserver:skiff_http_requests:rate5m{{{VS}}}"
BUCKETS = f"namespace_virtualserver:skiff_http_request_duration_seconds_bucket:rate5m{{{VS}}}"
BY_VS = "namespace, virtualserver"
LEGEND_VS = "{{namespace}}/{{virtualserver}}"


def _status_class(expr):
    # "code" is the status number; its first digit is the class (2xx, 3xx...).
    return f'label_replace({expr}, "class", "${{1}}xx", "code", "([1-5]).*")'


def _quantile(q):
    return query(
        f"histogram_quantile({q}, sum by ({BY_VS}, le) ({BUCKETS}))",
        f"p{int(q * 100)} {LEGEND_VS}",
    )


# A VirtualServer's row links to its pools: the clicked row's labels become the pools
# dashboard's variables, the datasource and time range come along.
POOLS_DATA_LINK = (
    dash.DashboardLink("Backend pools of ${__data.fields.namespace}/${__data.fields.virtualserver}")
    .url(
        f"/d/{UID_POOLS}?${{datasource:queryparam}}"
        "&var-namespace=${__data.fields.namespace}"
        "&var-virtualserver=${__data.fields.virtualserver}"
        "&${__url_time_range}"
    )
)


def build():
    summary = [
        table(
            "VirtualServers",
            "One row per VirtualServer: request rate over 5 minutes. Click a row for its backend pools.",
            "reqps",
            [query(f"sum by ({BY_VS}) ({REQUESTS})", instant=True)],
            links=[POOLS_DATA_LINK],
        ),
    ]
    traffic = [
        timeseries(
            "Requests by status class",
            "Requests per second answered by the edge, by status class.",
            "reqps",
            [query(f'sum by ({BY_VS}, class) ({_status_class(REQUESTS)})', f"{{{{class}}}} {LEGEND_VS}")],
            stack=True,
        ),
        timeseries(
            "Error ratio (5xx)",
            "Share of requests answered with a 5xx status.",
            "percentunit",
            [
                query(
                    f'sum by ({BY_VS}) (namespace_virtualserver:skiff_http_requests:rate5m{{{VS}, code=~"5.."}})'
                    f" / sum by ({BY_VS}) ({REQUESTS})",
                    LEGEND_VS,
                )
            ],
            min_val=0,
        ),
        timeseries(
            "Latency p50 / p90 / p99",
            "From a complete request head to the response handed to the kernel (skiff_http_request_duration_seconds).",
            "s",
            [_quantile(0.5), _quantile(0.9), _quantile(0.99)],
        ),
        timeseries(
            "Bytes out",
            "Response body bytes sent per second.",
            "Bps",
            [query(f"sum by ({BY_VS}) (rate(skiff_http_response_bytes_total{{{VS}}}[{RATE}]))", LEGEND_VS)],
        ),
    ]
    cache = [
        timeseries(
            "Cache hit ratio",
            "I/O cache lookups served from memory, against all lookups.",
            "percentunit",
            [
                query(
                    f"sum by ({BY_VS}) (rate(skiff_cache_hits_total{{{VS}}}[{RATE}]))"
                    f" / (sum by ({BY_VS}) (rate(skiff_cache_hits_total{{{VS}}}[{RATE}]))"
                    f" + sum by ({BY_VS}) (rate(skiff_cache_misses_total{{{VS}}}[{RATE}])))",
                    LEGEND_VS,
                )
            ],
            span=8,
            min_val=0,
            max_val=1,
        ),
        timeseries(
            "Cache bytes",
            "Bytes held by the I/O cache, summed over the pods.",
            "bytes",
            [query(f"sum by ({BY_VS}) (skiff_cache_bytes{{{VS}}})", LEGEND_VS)],
            span=8,
        ),
        timeseries(
            "Sendfile share",
            "Body bytes sent with sendfile(2), against all body bytes: large files bypass user space.",
            "percentunit",
            [
                query(
                    f"sum by ({BY_VS}) (rate(skiff_sendfile_bytes_total{{{VS}}}[{RATE}]))"
                    f" / sum by ({BY_VS}) (rate(skiff_http_response_bytes_total{{{VS}}}[{RATE}]))",
                    LEGEND_VS,
                )
            ],
            span=8,
            min_val=0,
        ),
    ]
    pods = [
        timeseries(
            "Open connections",
            "Client connections open, summed over the pods, of them the idle keep-alive "
            "ones parked out of their tasks (about 300 bytes each), and the pods' limit "
            "(max_connections each). At the limit a new connection takes an idle one's place.",
            "short",
            [
                query(f"sum by ({BY_VS}) (skiff_connections_open{{{VS}}})", LEGEND_VS),
                query(
                    f"sum by ({BY_VS}) (skiff_connections_parked{{{VS}}})",
                    LEGEND_VS + " parked",
                ),
                query(
                    f"sum by ({BY_VS}) (skiff_connections_max{{{VS}}})",
                    LEGEND_VS + " limit",
                ),
            ],
            span=8,
        ),
        timeseries(
            "Pods serving, against the replica bounds",
            "Edge pods scraped (each exports skiff_build_info), with the HPA's min and max "
            "replicas (or spec.replicas without autoscaling) as the operator reports them.",
            "short",
            [
                query(f"count by ({BY_VS}) (skiff_build_info{{{VS}}})", f"pods {LEGEND_VS}"),
                query(
                    f"max by ({BY_VS}, bound) (skiff_operator_virtualserver_replicas{{{VS}}})",
                    f"{{{{bound}}}} {LEGEND_VS}",
                ),
            ],
            span=8,
            min_val=0,
        ),
        timeseries(
            "Config reloads",
            "Configuration reloads per second by result; failure keeps the old config serving.",
            "ops",
            [
                query(
                    f"sum by ({BY_VS}, result) (rate(skiff_config_reloads_total{{{VS}}}[{RATE}]))",
                    f"{{{{result}}}} {LEGEND_VS}",
                )
            ],
            span=8,
        ),
        timeseries(
            "Pods per config hash",
            "How many pods serve each configuration: during a rollout two hashes, one once it converged.",
            "short",
            [
                query(
                    f"count by ({BY_VS}, hash) (skiff_config_info{{{VS}}} == 1)",
                    f"{{{{hash}}}} {LEGEND_VS}",
                )
            ],
            span=12,
            stack=True,
        ),
        table(
            "Config hash per pod",
            "The configuration each pod serves now, and how long ago it last loaded one.",
            "s",
            [
                query(
                    f"time() - max by ({BY_VS}, pod) (skiff_config_last_reload_success_timestamp_seconds{{{VS}}})"
                    f" * on ({BY_VS}, pod) group_left (hash) max by ({BY_VS}, pod, hash) (skiff_config_info{{{VS}}})",
                    instant=True,
                )
            ],
            span=12,
        ),
    ]
    return dashboard(
        UID_OVERVIEW,
        "Skiff / Overview",
        "Skiff edge farms per VirtualServer: traffic, errors, latency, cache, pods and config rollouts.",
        edge_variables(),
        [
            ("VirtualServers", summary),
            ("Traffic", traffic),
            ("I/O cache", cache),
            ("Pods and configuration", pods),
        ],
        links=[
            link_to(UID_POOLS, "Backend pools", "The backend pools of the selected VirtualServers"),
            link_to(UID_SLO, "SLO", "Objectives, error budget and burn rates"),
        ],
    )
