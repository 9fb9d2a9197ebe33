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
  dashboards.label.value=-1 dashboards.namespace=Monitoring; do
  if "$helm" template skiff "$chart" --set "$bad" >/dev/null 2>&1; then
    echo "chart-check: values.schema.json accepted $bad" >&2
    exit 1
  fi
done
render() { "$helm" template skiff "$chart" --namespace skiff "$@"; }
status=0
for case in default example dashboards; do
  args=()
  # The example case also names metrics namespaces, to render the operator's flags.
  [ "$case" = example ] && args=(--set example.enabled=true --set crds.enabled=false
    --set 'networkPolicy.metricsNamespaces={monitoring,prometheus}'
    --set networkPolicy.metricsNamespaceSelector.team=observability)
  # The dashboards case: every value of the `dashboards` block away from its default.
  [ "$case" = dashboards ] && args=(--set dashboards.enabled=true --set dashboards.label.value=skiff
    --set dashboards.annotations.grafana_folder=Skiff --set dashboards.namespace=monitoring
    --set crds.enabled=false)
  if [ "${1:-}" = --bless ]; then
    render "${args[@]}" >"$golden/$case.yaml"
  elif ! diff -u "$golden/$case.yaml" <(render "${args[@]}"); then
    echo "chart-check: $golden/$case.yaml is stale (scripts/chart-check.sh --bless)" >&2
    status=1
  fi
done
[ $status = 0 ] && echo "chart: lint, schema and golden renderings ok"
exit $status
