#!/usr/bin/env bash
# README's first command: Skiff as its users run it, on the project's own local Kubernetes
# cluster (e2e/cluster, the way kind or k3d serve other operators' quickstarts): the
# chart with the operator, its dashboards and alert rules, the cluster's Prometheus
# scraping what the chart and the operator declare, and the example VirtualServers of
# examples/quickstart/ (a static site from a ConfigMap, a PHP site on a php-fpm pool, a
# Django site through uWSGI).
#
#   scripts/quickstart.sh         set it all up, then print how to reach each site; a
#                                 second run is a quick no-op that prints the same
#   scripts/quickstart.sh down    remove what it created (the cluster too, when it was
#                                 the one to bring it up)
#
# Root only (the cluster creates bridges, iptables rules and mounts). Each step's output
# goes to e2e/.cluster/quickstart/logs/; a failing step prints the tail of its log and
# the script exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STATE=${SKIFF_E2E_DIR:-$ROOT/e2e/.cluster}
QS=$STATE/quickstart
LOGS=$QS/logs
SYSTEM_NS=skiff-system
SITES_NS=skiff-quickstart
RELEASE=skiff
SITES=(docs shop blog)
PROMETHEUS_URL=http://127.0.0.1:9090
T0=$SECONDS

[ "$(id -u)" = 0 ] || { echo "quickstart: run it as root (the local cluster needs it)" >&2; exit 1; }

# A step: its command's output goes to its log. On a terminal a spinner shows it running;
# otherwise (CI, a pipe) a line says it started. Either way a line with its time ends it,
# or the log's tail and exit 1 when it fails.
step() {
  local title=$1 slug=$2 s=$SECONDS rc=0
  shift 2
  local log=$LOGS/$slug.log
  mkdir -p "$LOGS" "$QS"
  if [ -t 1 ]; then
    "$@" >"$log" 2>&1 &
    local pid=$! i=0 spin='|/-\'
    while kill -0 "$pid" 2>/dev/null; do
      printf '\r  %s %s (%ds) ' "${spin:i++%4:1}" "$title" $((SECONDS - s))
      sleep 0.2
    done
    wait "$pid" || rc=$?
    printf '\r\033[K'
  else
    printf '  … %s\n' "$title"
    "$@" >"$log" 2>&1 || rc=$?
  fi
  if [ "$rc" -ne 0 ]; then
    printf '  ✗ %s failed after %ds (exit %d); the end of %s:\n' "$title" $((SECONDS - s)) "$rc" "$log"
    tail -n 40 "$log" | sed 's/^/    | /'
    exit 1
  fi
  local note=""
  [ -s "$QS/note" ] && note=" ($(cat "$QS/note"))" && rm -f "$QS/note"
  printf '  ✓ %-58s %4ds\n' "$title$note" $((SECONDS - s))
}
note() { echo "$*" >"$QS/note"; }

# Cargo builds in the shared cache CI uses when this clone has no target/ yet, so a fresh
# clone of a built commit rebuilds nothing heavy (images/build.sh caches the images too).
use_target_cache() {
  if [ ! -e target ]; then
    local cache=${SKIFF_CARGO_TARGET_CACHE:-$HOME/.cache/skiff-cargo-target}
    mkdir -p "$cache"
    ln -s "$cache" target
  fi
}

install_tools() {
  scripts/install-deps.sh
  e2e/scripts/install-tools.sh
  use_target_cache
  cargo build -p skiff-e2e --bin skiff-e2e-prometheus
}

cluster_up() {
  if e2e/cluster status >/dev/null 2>&1; then
    note "reused the running cluster"
  elif [ ! -f "$QS/created" ]; then
    # Remembered for `down`: purge state the quickstart created, stop a cluster that
    # had state already.
    local mode=stop
    [ -d "$STATE/run" ] || mode=purge
    mkdir -p "$QS" && echo "$mode" >"$QS/created"
  fi
  e2e/cluster up
}

build_images() {
  images/build.sh
  local image
  for image in php-fpm django; do
    [ -x "e2e/images/$image/build.sh" ] || continue
    # These only copy host files: rebuilt when their directory changed since the archive.
    if [ -f "target/images/$image.oci.tar" ] &&
      [ -z "$(find "e2e/images/$image" -newer "target/images/$image.oci.tar" | head -n 1)" ]; then
      continue
    fi
    "e2e/images/$image/build.sh"
  done
}

# Imports only the archives whose image the cluster's containerd does not hold with the
# same manifest digest (a second run imports nothing). The images keep their `:dev` tag,
# so pods already running a replaced one (a rerun after a code change) are restarted:
# the operator's for its image, the example sites' for the others.
load_images() {
  local tar want have loaded=0 operator=0 sites=0
  for tar in target/images/{skiff,skiff-operator,php-fpm,django}.oci.tar; do
    [ -f "$tar" ] || continue
    want=$(tar -xOf "$tar" index.json | python3 -c 'import json,sys; m=json.load(sys.stdin)["manifests"][0]; print(m["annotations"]["io.containerd.image.name"], m["digest"])')
    have=$(ctr_images | awk -v n="${want% *}" '$1 == n { print $1, $3 }')
    if [ "$have" != "$want" ]; then
      e2e/cluster load "$tar"
      loaded=$((loaded + 1))
      case $tar in *skiff-operator*) operator=1 ;; *) sites=1 ;; esac
    fi
  done
  if [ "$operator" = 1 ] && kube get deployment -n "$SYSTEM_NS" -o name 2>/dev/null | grep -q .; then
    kube rollout restart deployment -n "$SYSTEM_NS"
  fi
  if [ "$sites" = 1 ] && kube get deployment -n "$SITES_NS" -o name 2>/dev/null | grep -q .; then
    kube rollout restart deployment -n "$SITES_NS"
  fi
  note "$loaded imported"
}
ctr_images() {
  ctr -a "$STATE/containerd/containerd.sock" -n k8s.io images ls
}

kube() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }
helm_() {
  HELM_CACHE_HOME=$STATE/helm/cache HELM_CONFIG_HOME=$STATE/helm/config HELM_DATA_HOME=$STATE/helm/data \
    helm --kubeconfig "$KUBECONFIG" "$@"
}

# The ServiceMonitor CRD (as install-tools.sh fetched it), so the chart and the operator
# declare what Prometheus scrapes; then the chart, installed or upgraded only when the
# chart or its values changed since the last run.
install_chart() {
  # CRDs this run adds are remembered, for `down` to delete (and only those).
  local crd
  for crd in servicemonitors.monitoring.coreos.com virtualservers.skiff.dev; do
    if ! kube get crd "$crd" >/dev/null 2>&1 && ! grep -qx "$crd" "$QS/crds" 2>/dev/null; then
      echo "$crd" >>"$QS/crds"
    fi
  done
  kube apply --server-side --field-manager skiff-quickstart \
    -f "$(e2e/scripts/install-tools.sh)/third-party-crds/servicemonitors.yaml"
  kube wait --for=condition=Established crd/servicemonitors.monitoring.coreos.com --timeout=60s
  local values=(--set operator.image.pullPolicy=Never --set dashboards.enabled=true
                --set prometheusRule.enabled=false --set operator.monitor.interval=10s)
  local want
  want=$( { tar -cf - --sort=name --mtime=@0 --owner=0 --group=0 charts/skiff; echo "${values[*]}"; } | sha256sum | cut -c1-16)
  if [ "$(helm_ status "$RELEASE" -n "$SYSTEM_NS" -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["info"]["status"])' 2>/dev/null)" = deployed ] \
    && [ "$(cat "$QS/chart" 2>/dev/null)" = "$want" ]; then
    note "already installed"
    return
  fi
  helm_ upgrade --install "$RELEASE" charts/skiff -n "$SYSTEM_NS" --create-namespace \
    "${values[@]}" --wait --timeout 180s
  echo "$want" >"$QS/chart"
}

apply_sites() {
  kube get namespace "$SITES_NS" >/dev/null 2>&1 || kube create namespace "$SITES_NS"
  local f sum applied=0
  mkdir -p "$QS/applied"
  for f in examples/quickstart/*.yaml; do
    # The Django site needs the uWSGI + Django image (e2e/images/django).
    if [ "$(basename "$f")" = blog.yaml ] && [ ! -f target/images/django.oci.tar ]; then continue; fi
    # A file applied before, unchanged, whose objects all exist, is not applied again: a
    # repeated server-side apply can still bump a resourceVersion (the apiserver reorders
    # managedFields once another manager, here the operator's status, has written).
    sum=$(sha256sum <"$f")
    if [ "$(cat "$QS/applied/$(basename "$f")" 2>/dev/null)" = "$sum" ] && kube get -f "$f" >/dev/null 2>&1; then
      continue
    fi
    kube apply --server-side --field-manager skiff-quickstart -f "$f"
    echo "$sum" >"$QS/applied/$(basename "$f")"
    applied=$((applied + 1))
  done
  [ "$applied" -gt 0 ] || note "unchanged"
}

# Which sites exist (blog only with its image).
sites() {
  local s
  for s in "${SITES[@]}"; do
    [ -f "examples/quickstart/$s.yaml" ] || continue
    if [ "$s" = blog ] && [ ! -f target/images/django.oci.tar ]; then continue; fi
    echo "$s"
  done
}

# Until every VirtualServer is Ready (its edge pods run the config the operator rendered),
# a line each time one's state changes; then until each answers through its Service.
wait_ready() {
  local s=$SECONDS last="" now site deadline=$((SECONDS + 300))
  while :; do
    now=""
    for site in $(sites); do
      now+="$site=$(kube get skiffvs "$site" -n "$SITES_NS" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null || echo '?') "
    done
    if [ "$now" != "$last" ]; then
      printf '  · [%3ds] Ready: %s\n' $((SECONDS - s)) "$now"
      last=$now
    fi
    # Every site's Ready status is True.
    if ! tr ' ' '\n' <<<"${now% }" | grep -qv '=True/'; then break; fi
    if [ $SECONDS -ge $deadline ]; then
      echo "  ✗ the VirtualServers were not Ready within 300 s"
      kube get skiffvs -n "$SITES_NS" -o wide || true
      kube get pods -n "$SITES_NS" -o wide || true
      exit 1
    fi
    sleep 2
  done
  printf '  ✓ %-58s %4ds\n' "every VirtualServer Ready" $((SECONDS - s))
}

# host, URL path and a string the answer must hold, for each site's printed command.
site_check() {
  case $1 in
    docs) echo "docs.skiff.test / Skiff quickstart: a static site" ;;
    shop) echo "shop.skiff.test / php-fpm in the cluster" ;;
    blog) echo "blog.skiff.test /login/ csrfmiddlewaretoken" ;;
  esac
}

# The ClusterIP the VirtualServer's status reports, and its Service's HTTP port.
site_address() {
  echo "$(kube get skiffvs "$1" -n "$SITES_NS" -o jsonpath='{.status.address}'):$(
    kube get service "$1" -n "$SITES_NS" -o jsonpath='{.spec.ports[?(@.name=="http")].port}')"
}

curl_command() {
  local host=$1 path=$2 address=$3
  local ip=${address%:*} port=${address##*:} url=http://$host
  [ "$port" = 80 ] || url+=":$port"
  echo "curl -sS --resolve $host:$port:$ip $url$path"
}

# Each site answers its printed command with 200 and its text (kube-proxy's rules for a
# new Service appear a moment after its endpoints, so this retries for a while).
check_sites() {
  local site host path want address cmd body deadline
  for site in $(sites); do
    read -r host path want <<<"$(site_check "$site")"
    address=$(site_address "$site")
    cmd=$(curl_command "$host" "$path" "$address")
    deadline=$((SECONDS + 120))
    until body=$(eval "$cmd --fail --max-time 5" 2>&1) && grep -qF "$want" <<<"$body"; do
      if [ $SECONDS -ge $deadline ]; then
        echo "$site: '$cmd' did not answer with '$want' within 120 s; last answer:"
        echo "$body" | head -n 20
        return 1
      fi
      sleep 1
    done
    echo "$site: $cmd → 200, holds '$want'"
  done
}

configure_prometheus() {
  if [ ! -d "$QS/prometheus-before" ] && [ ! -f "$QS/created" ]; then
    # The cluster was there before: keep its Prometheus config to put back on `down`.
    mkdir -p "$QS/prometheus-before"
    cp -a "$STATE/prometheus/prometheus.yml" "$QS/prometheus-before/" 2>/dev/null || true
    cp -a "$STATE/prometheus/rules" "$QS/prometheus-before/" 2>/dev/null || true
  fi
  target/debug/skiff-e2e-prometheus --namespace "$SYSTEM_NS" --namespace "$SITES_NS" \
    --release-namespace "$SYSTEM_NS" --wait 120
}

summary() {
  local site host path want address
  cat <<EOF

Skiff is running on the local cluster ($(($SECONDS - T0)) s). Try it:

  Reach the sites from this host (through each Service's ClusterIP):
EOF
  for site in $(sites); do
    read -r host path want <<<"$(site_check "$site")"
    address=$(site_address "$site")
    printf '    %s\n' "$(curl_command "$host" "$path" "$address")"
  done
  cat <<EOF

  Use kubectl and helm on it:
    eval "\$(e2e/cluster env)"
    kubectl get skiffvs -n $SITES_NS    # add -w to watch a change roll out
    kubectl get pods,hpa -n $SITES_NS
    kubectl get deploy -n $SYSTEM_NS        # the operator (helm release "$RELEASE")

  Prometheus, with the dashboards' recording rules and the alerts loaded (open in a
  browser on this machine; the HTTP API is under $PROMETHEUS_URL/api/v1/):
    $PROMETHEUS_URL/query?g0.expr=sum%20by%20(vhost)%20(rate(skiff_http_requests_total%5B1m%5D))&g0.tab=graph&g0.range_input=15m
    $PROMETHEUS_URL/targets
    $PROMETHEUS_URL/alerts
  (after adding a VirtualServer, run scripts/quickstart.sh again to scrape it too)

  The walk-through: docs/tutorial.md
  Tear it all down:
    scripts/quickstart.sh down
EOF
}

cmd_up() {
  echo "Skiff quickstart (logs in $LOGS)"
  step "installing tools (cached after the first run)" tools install_tools
  step "bringing the local cluster up" cluster cluster_up
  eval "$(e2e/cluster env)"
  step "building the images (cached by source)" images build_images
  step "loading the images into the cluster" load load_images
  step "installing charts/skiff into $SYSTEM_NS" chart install_chart
  step "applying examples/quickstart/ into $SITES_NS" sites apply_sites
  wait_ready
  step "checking each site answers through its Service" check check_sites
  step "pointing Prometheus at the ServiceMonitors and rules" prometheus configure_prometheus
  summary
}

cmd_down() {
  echo "Skiff quickstart: down"
  # Its logs live outside the state it removes, and go when it succeeds.
  LOGS=$(mktemp -d /tmp/skiff-quickstart-down.XXXXXX)
  if ! e2e/cluster status >/dev/null 2>&1; then
    if [ -f "$QS/created" ] && [ "$(cat "$QS/created")" = purge ]; then
      step "purging the cluster's state" cluster e2e/cluster down --purge
    fi
    rm -rf "$QS" "$LOGS"
    echo "  nothing else to remove"
    return
  fi
  eval "$(e2e/cluster env)"
  local mode
  mode=$(cat "$QS/created" 2>/dev/null || true)
  if [ "$mode" = purge ]; then
    # The cluster was the quickstart's own, from a clean host: all of it goes.
    step "taking the cluster down, purging its state" cluster e2e/cluster down --purge
    rm -rf "$QS" "$LOGS"
    return
  fi
  step "deleting the example sites" sites remove_sites
  step "uninstalling the chart" chart remove_chart
  step "restoring Prometheus's config" prometheus restore_prometheus
  if [ "$mode" = stop ]; then
    step "stopping the cluster (it had state before the quickstart)" cluster e2e/cluster down
  fi
  rm -rf "$QS" "$LOGS"
}

remove_sites() {
  kube delete namespace "$SITES_NS" --ignore-not-found --wait --timeout=120s
}
remove_chart() {
  if helm_ status "$RELEASE" -n "$SYSTEM_NS" >/dev/null 2>&1; then
    helm_ uninstall "$RELEASE" -n "$SYSTEM_NS" --wait --timeout 120s
  fi
  # The chart keeps its CRD on uninstall (crds.keep): the CRDs the quickstart added go.
  local crd
  for crd in $(cat "$QS/crds" 2>/dev/null); do kube delete crd "$crd" --ignore-not-found; done
  kube delete namespace "$SYSTEM_NS" --ignore-not-found --wait --timeout=120s
}
restore_prometheus() {
  if [ -d "$QS/prometheus-before" ]; then
    rm -rf "$STATE/prometheus/rules"
    cp -a "$QS/prometheus-before/." "$STATE/prometheus/"
    curl -sf -X POST "$PROMETHEUS_URL/-/reload"
  fi
}

case "${1:-up}" in
  up) cmd_up ;;
  down) cmd_down ;;
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
