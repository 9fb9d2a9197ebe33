#!/usr/bin/env bash
# Installs everything the local e2e cluster needs, idempotently, on a fresh Debian machine:
#   - Debian packages: etcd, containerd, runc, CNI plugins, iptables, conntrack, openssl, gcc,
#     patch;
#   - Kubernetes v1.33 binaries built from the Go module proxy (wrapper module in
#     e2e/tools/k8s) with version ldflags, so `kubectl version` and helm's kubeVersion work;
#   - metrics-server, helm, CoreDNS (go install) and the small CRI client used by teardown;
#   - cert-manager's controller (wrapper module in e2e/tools/cert-manager) and the CRDs of
#     cert-manager and the Prometheus Operator;
#   - prometheus-adapter (wrapper module in e2e/tools/prometheus-adapter);
#   - Prometheus v3 with only the Kubernetes service discovery and its web UI
#     (install-prometheus.sh; the UI is built with a pinned Node and pnpm from the npm
#     registry, fetched with npm: Debian's npm is installed when there is no npm).
# Go outputs are cached under $SKIFF_E2E_CACHE (default ~/.cache/skiff-e2e), keyed by version
# (cert-manager's and prometheus-adapter's also by a hash of their wrappers), so a second run
# takes seconds. Prints the directory holding the binaries.
set -euo pipefail
E2E=$(cd "$(dirname "$0")/.." && pwd)
source "$E2E/scripts/versions.sh"
CACHE=${SKIFF_E2E_CACHE:-$HOME/.cache/skiff-e2e}
BIN=$CACHE/bin
mkdir -p "$BIN"
export PATH=/usr/local/go/bin:$PATH
log() { echo "install-tools: $*" >&2; }

# --- Debian packages -------------------------------------------------------------------
need=()
for pair in etcd:etcd-server containerd:containerd runc:runc iptables:iptables conntrack:conntrack \
            openssl:openssl gcc:gcc ip:iproute2 curl:curl patch:patch; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
if ((${#need[@]})); then
  log "apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Debian starts containerd as a service on install; the cluster runs its own instance with
# its own socket and state, so the packaged one is left alone (it shares nothing with ours).
command -v go >/dev/null || { log "Go is required (/usr/local/go/bin/go)"; exit 1; }

# --- Kubernetes binaries ---------------------------------------------------------------
k8s_out=$CACHE/k8s-$K8S_VERSION
if [ ! -x "$k8s_out/kubectl" ] || [ "$("$k8s_out/kubectl" version --client -o json 2>/dev/null | grep -c "\"$K8S_VERSION\"")" = 0 ]; then
  log "building Kubernetes $K8S_VERSION from the Go module proxy (cold: ~15 min on 2 cores)"
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=2025-01-01T00:00:00Z"
  done
  mkdir -p "$k8s_out.tmp"
  (cd "$E2E/tools/k8s" && go build -trimpath -ldflags "$ld" -o "$k8s_out.tmp/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
     k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
     k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl)
  rm -rf "$k8s_out" && mv "$k8s_out.tmp" "$k8s_out"
fi
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  ln -sfn "$k8s_out/$b" "$BIN/$b"
done

# --- Tools installed with `go install`, each into its own versioned directory ------------
go_tool() { # NAME MODULE_PATH@VERSION [ldflags]
  local name=$1 pkg=$2 ld=${3:-} out
  # Keyed by version and build flags, so a change to either rebuilds.
  out=$CACHE/$1-${2##*@}-$(echo "$ld" | sha256sum | cut -c1-8)
  if [ ! -x "$out/$name" ]; then
    log "go install $pkg"
    mkdir -p "$out"
    (cd /tmp && CGO_ENABLED=0 GOBIN="$out" go install -trimpath -ldflags "-s -w $ld" "$pkg")
  fi
  ln -sfn "$out/$name" "$BIN/$name"
}
go_tool metrics-server "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION"
go_tool helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=33 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=33"
go_tool coredns "github.com/coredns/coredns@$COREDNS_VERSION"

# crictl is not reachable through the module proxy, so teardown uses a tiny CRI client.
cri_out=$CACHE/cri-clean-$K8S_VERSION-$(sha256sum "$E2E/tools/cri-clean/main.go" | cut -c1-12)
if [ ! -x "$cri_out/cri-clean" ]; then
  log "building cri-clean"
  mkdir -p "$cri_out"
  (cd "$E2E/tools/cri-clean" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$cri_out/cri-clean" .)
fi
ln -sfn "$cri_out/cri-clean" "$BIN/cri-clean"

# cert-manager's and the Prometheus Operator's CRDs, for the operator's discovery tests.
# `go mod download` verifies each module zip against sum.golang.org before we copy from it.
crd_out=$CACHE/crds-cm-$CERT_MANAGER_VERSION-po-$PROMETHEUS_OPERATOR_VERSION
if [ ! -s "$crd_out/servicemonitors.yaml" ]; then
  log "fetching cert-manager $CERT_MANAGER_VERSION and prometheus-operator $PROMETHEUS_OPERATOR_VERSION CRDs"
  mkdir -p "$crd_out.tmp"
  cm=$(cd /tmp && go mod download -json "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  po=$(cd /tmp && go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cat "$cm"/deploy/crds/cert-manager.io_{certificates,certificaterequests,issuers,clusterissuers}.yaml >"$crd_out.tmp/cert-manager.yaml"
  cp "$po/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" "$crd_out.tmp/servicemonitors.yaml"
  rm -rf "$crd_out" && mv "$crd_out.tmp" "$crd_out"
fi
ln -sfn "$crd_out" "$BIN/third-party-crds"

# A Go program built by the wrapper module e2e/tools/DIR, whose go.mod must require
# MODULE at VERSION (the pin in versions.sh). Cached as $CACHE/DIR-VERSION-<hash of Go's
# version and the wrapper's files>, so a new pin, an edit of the wrapper or a new Go
# rebuilds and nothing else does; linked into $BIN as NAME.
#   build_wrapped DIR MODULE VERSION NAME PACKAGE COLD_MINUTES
build_wrapped() {
  local dir=$E2E/tools/$1 module=$2 version=$3 name=$4 package=$5 minutes=$6 out
  grep -Eq "^(require |[[:space:]]+)$module $version\$" "$dir/go.mod" ||
    { log "$dir/go.mod does not require $module $version (versions.sh)"; exit 1; }
  out=$CACHE/$1-$version-$( (go env GOVERSION; cat "$dir"/go.mod "$dir"/go.sum "$dir"/*.go) | sha256sum | cut -c1-12)
  if [ ! -x "$out/$name" ]; then
    log "building $1 $version (cold: ~$minutes min on 2 cores)"
    mkdir -p "$out.tmp"
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.tmp/$name" "$package")
    rm -rf "$out" && mv "$out.tmp" "$out"
  fi
  ln -sfn "$out/$name" "$BIN/$name"
}

# cert-manager's controller, from its main module (its cmd/controller module is not on the
# module proxy).
build_wrapped cert-manager github.com/cert-manager/cert-manager "$CERT_MANAGER_VERSION" \
  cert-manager-controller . 4
# prometheus-adapter, which serves custom.metrics.k8s.io and external.metrics.k8s.io from
# Prometheus's queries (its go.sum pins every module of the build).
build_wrapped prometheus-adapter sigs.k8s.io/prometheus-adapter "$PROMETHEUS_ADAPTER_VERSION" \
  prometheus-adapter sigs.k8s.io/prometheus-adapter/cmd/adapter 6

# Prometheus, which scrapes the cluster through its Kubernetes service discovery.
"$E2E/scripts/install-prometheus.sh" "$BIN"

# The pause image's binary: static C, built once.
if [ ! -x "$CACHE/pause/pause" ] || [ "$E2E/images/pause.c" -nt "$CACHE/pause/pause" ]; then
  mkdir -p "$CACHE/pause"
  gcc -static -Os -s -o "$CACHE/pause/pause" "$E2E/images/pause.c"
fi
echo "$BIN"
