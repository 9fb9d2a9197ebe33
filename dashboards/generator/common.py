"""What every Skiff dashboard shares: the datasource and label variables, the selectors
that use them, and panel builders that always set a datasource, a unit and a query.

Every query goes through the `${datasource}` variable, so the same JSON works on any
Grafana whatever its Prometheus is called. Edge series carry the target labels
`namespace` and `virtualserver` that the operator's ServiceMonitor adds; the operator's
own VirtualServer-scoped series carry the same names (scraped with honorLabels).
"""

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.builders import stat as stat_panel
from grafana_foundation_sdk.builders import table as table_panel
from grafana_foundation_sdk.builders import timeseries as ts
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import prometheus as pm
from grafana_foundation_sdk.models import dashboard as dm

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

# The uids other dashboards link to; stable, since users bookmark /d/<uid>.
UID_OVERVIEW = "skiff-overview"
UID_POOLS = "skiff-backend-pools"
UID_SLO = "skiff-slo"
UID_OPERATOR = "skiff-operator"

# Multi-value variables are rendered by Grafana as a regex alternation, so every
# selector matches them with =~.
VS = 'namespace=~"$namespace", virtualserver=~"$virtualserver"'
POOL = VS + ', pool=~"$pool"'

# Raw counters use Grafana's $__rate_interval (at least four scrapes); the recording
# rules are fixed 5m windows and need no interval.
RATE = "$__rate_interval"


def datasource_variable():
    return (
        dash.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .regex("")
    )


def _label_variable(name, label, query):
    # `All` is `.*` rather than the list of values, so a VirtualServer created after the
    # dashboard loaded is still matched.
    return (
        dash.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query({"query": query, "refId": name, "qryType": 1})
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )


def namespace_variable():
    # skiff_build_info is exported by every edge pod from its start, whatever it serves.
    return _label_variable("namespace", "Namespace", "label_values(skiff_build_info, namespace)")


def virtualserver_variable():
    return _label_variable(
        "virtualserver",
        "VirtualServer",
        'label_values(skiff_build_info{namespace=~"$namespace"}, virtualserver)',
    )


def pool_variable():
    # Endpoint gauges exist as soon as a pool is configured, before any request.
    return _label_variable(
        "pool", "Pool", f"label_values(skiff_upstream_endpoints{{{VS}}}, pool)"
    )


def edge_variables():
    return [datasource_variable(), namespace_variable(), virtualserver_variable()]


def query(expr, legend="", instant=False):
    q = prom.Dataquery().expr(expr).datasource(DATASOURCE)
    if legend:
        q = q.legend_format(legend)
    if instant:
        q = q.instant().format(pm.PromQueryFormat.TABLE)
    else:
        q = q.range()
    return q


def _with_queries(panel, queries):
    # refIds are set here (A, B, ...) so a panel's queries can never collide.
    for i, q in enumerate(queries):
        panel = panel.with_target(q.ref_id(chr(ord("A") + i)))
    return panel


def timeseries(title, description, unit, queries, span=12, height=8, stack=False, min_val=None, max_val=None):
    p = (
        ts.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(span)
        .height(height)
        .fill_opacity(10)
        .legend(
            cb.VizLegendOptions()
            .display_mode(cm.LegendDisplayMode.TABLE)
            .placement(cm.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["mean", "max", "lastNotNull"])
        )
        .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
    )
    if stack:
        p = p.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
    if min_val is not None:
        p = p.min(min_val)
    if max_val is not None:
        p = p.max(max_val)
    return _with_queries(p, queries)


def stat(title, description, unit, queries, span=6, height=4, decimals=None):
    p = (
        stat_panel.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(span)
        .height(height)
        .graph_mode(cm.BigValueGraphMode.AREA)
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]))
    )
    if decimals is not None:
        p = p.decimals(decimals)
    return _with_queries(p, queries)


def table(title, description, unit, queries, span=24, height=8, links=()):
    p = (
        table_panel.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(span)
        .height(height)
        # Instant queries come back as one frame per query; merged, each label set is a row.
        .with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            dm.DataTransformerConfig(
                id_val="organize",
                options={"excludeByName": {"Time": True}, "renameByName": {}},
            )
        )
    )
    if links:
        p = p.data_links(list(links))
    return _with_queries(p, queries)


def link_to(uid, title, tooltip):
    """A dashboard link that carries the time range and every variable (datasource,
    namespace, virtualserver) to the other dashboard."""
    return (
        dash.DashboardLink(title)
        .type(dm.DashboardLinkType.LINK)
        .url(f"/d/{uid}")
        .tooltip(tooltip)
        .include_vars(True)
        .keep_time(True)
        .icon("dashboard")
    )


def skiff_dashboards_link():
    # Every Skiff dashboard is tagged `skiff`: one dropdown reaches the others.
    return (
        dash.DashboardLink("Skiff")
        .type(dm.DashboardLinkType.DASHBOARDS)
        .tags(["skiff"])
        .as_dropdown(True)
        .include_vars(True)
        .keep_time(True)
    )


def dashboard(uid, title, description, variables, rows, links=()):
    """rows: [(row title, [panels])]. Panels are laid out left to right, wrapping at 24
    columns, by the SDK; ids are numbered here so they are unique and stable."""
    d = (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["skiff"])
        .time("now-3h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .editable()
    )
    for v in variables:
        d = d.with_variable(v)
    for link in [skiff_dashboards_link(), *links]:
        d = d.link(link)
    for row_title, panels in rows:
        d = d.with_row(dash.Row(row_title))
        for p in panels:
            d = d.with_panel(p)
    built = d.build()
    for i, p in enumerate(built.panels or [], start=1):
        p.id_val = i
    return built
