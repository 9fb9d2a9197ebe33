#!/usr/bin/env bash
# Checks the Helm chart: `helm lint --strict`, values.schema.json refusing bad values, and
# golden `helm template` renderings (charts/skiff/tests/golden/*.yaml) for the default
# values and for the example site. `--bless` rewrites the golden files.
set -euo pipefail
cd "$(dirname "$0")/.."
helm="$(e2e/scripts/install-tools.sh)/helm"
export HELM_CACHE_HOME=${TMPDIR:-/tmp}/skiff-helm HELM_CONFIG_HOME=${TMPDIR:-/tmp}/skiff-helm HELM_DATA_HOME=${TMPDIR:-/tmp}/skiff-helm
chart=charts/skiff
golden=$chart/tests/golden
"$helm" lint --strict "$chart" >/dev/null
# The schema must refuse what the chart cannot honour.
for bad in operator.logFormat=xml operator.image.pullPolicy=Sometimes operator.metricsPort=0 nonsense=1 \
  networkPolicy.enabled=maybe 'networkPolicy.metricsNamespaces={Not_A_Namespace}' \
  'networkPolicy.metricsNamespaceSelector.team=a\,b' dashboards.enabled=yes 'dashboards.label.name=not a label' \
  dashboards.label.value=-1 dashboards.namespace=Monitoring \
  prometheusRule.enabled=maybe prometheusRule.forAll=soon prometheusRule.forOverrides.NoSuchAlert=1m \
  operator.monitor.enabled=maybe operator.monitor.interval=often prometheusRule.runbookBaseUrl=wiki \
  prometheusAdapter.rules.enabled=yes prometheusAdapter.rules.namespace=Monitoring \
  'edge.monitor.labels.release=a\,b' serviceAccount.create=false 'operator.watchNamespaces={Shop}' \
  'operator.watchNamespaces={shop,shop}'; do
  if "$helm" template skiff "$chart" --set "$bad" >/dev/null 2>&1; then
    echo "chart-check: values.schema.json accepted $bad" >&2
    exit 1
  fi
done
render() { "$helm" template skiff "$chart" --namespace skiff "$@"; }
# The example VirtualServer goes into the release's namespace: one the operator does not
# watch is refused, not installed to wait for ever.
if render --set example.enabled=true --set 'operator.watchNamespaces={shop}' >/dev/null 2>&1; then
  echo "chart-check: an example outside operator.watchNamespaces was accepted" >&2
  exit 1
fi
status=0
for case in default example monitoring dashboards adapter namespaced; do
  args=()
  # The example case also names metrics namespaces, to render the operator's flags.
  [ "$case" = example ] && args=(--set example.enabled=true --set crds.enabled=false
    --set 'networkPolicy.metricsNamespaces={monitoring,prometheus}'
    --set networkPolicy.metricsNamespaceSelector.team=observability)
  # With the Prometheus Operator's CRDs: the PrometheusRule (short `for:` for tests, one
  # alert's own) and the operator's ServiceMonitor, both turned on by `auto`.
  [ "$case" = monitoring ] && args=(--api-versions monitoring.coreos.com/v1/PrometheusRule
    --api-versions monitoring.coreos.com/v1/ServiceMonitor --set crds.enabled=false --set prometheusRule.forAll=30s
    --set prometheusRule.forOverrides.SkiffPoolSaturated=2m --set prometheusRule.labels.release=kps
    --set prometheusRule.runbookBaseUrl=https://wiki.example/skiff-runbooks --set edge.monitor.labels.release=kps)
  # The dashboards case: every value of the `dashboards` block away from its default.
  [ "$case" = dashboards ] && args=(--set dashboards.enabled=true --set dashboards.label.value=skiff
    --set dashboards.annotations.grafana_folder=Skiff --set dashboards.namespace=monitoring
    --set crds.enabled=false)
  # The adapter case: prometheus-adapter's rules as a ConfigMap in the adapter's namespace.
  [ "$case" = adapter ] && args=(--set prometheusAdapter.rules.enabled=true
    --set prometheusAdapter.rules.namespace=monitoring --set crds.enabled=false)
  # The namespaced case: Roles in the watched namespaces, a ClusterRole that only reads.
  [ "$case" = namespaced ] && args=(--set 'operator.watchNamespaces={skiff,shop}'
    --set example.enabled=true --set crds.enabled=false)
  if [ "${1:-}" = --bless ]; then
    render "${args[@]}" >"$golden/$case.yaml"
  elif ! diff -u "$golden/$case.yaml" <(render "${args[@]}"); then
    echo "chart-check: $golden/$case.yaml is stale (scripts/chart-check.sh --bless)" >&2
    status=1
  fi
done
# The PrometheusRule holds files/skiff-rules.yaml's rules, expressions and all, whatever
# `for:` the values give the alerts.
render --api-versions monitoring.coreos.com/v1/PrometheusRule --set crds.enabled=false \
  --set prometheusRule.forAll=1s --show-only templates/prometheusrule.yaml | python3 -c '
import sys, yaml
rendered = yaml.safe_load(sys.stdin)["spec"]["groups"]
source = yaml.safe_load(open(sys.argv[1]))["groups"]
strip = lambda groups: [(g["name"], [{k: v for k, v in r.items() if k != "for"} for r in g["rules"]]) for g in groups]
assert strip(rendered) == strip(source), "the PrometheusRule differs from " + sys.argv[1]
assert all(r["for"] == "1s" for g in rendered for r in g["rules"] if "alert" in r), "forAll not applied"
' "$chart/files/skiff-rules.yaml" || { echo "chart-check: the PrometheusRule is not the rules file" >&2; status=1; }
# The adapter's ConfigMap holds the rules file as it is.
render --set prometheusAdapter.rules.enabled=true --show-only templates/prometheus-adapter-rules.yaml |
  python3 -c '
import sys, yaml
assert yaml.safe_load(yaml.safe_load(sys.stdin)["data"]["config.yaml"]) == yaml.safe_load(open(sys.argv[1]))
' "$chart/files/prometheus-adapter-rules.yaml" || { echo "chart-check: the adapter ConfigMap is not the rules file" >&2; status=1; }
[ $status = 0 ] && echo "chart: lint, schema and golden renderings ok"
exit $status
