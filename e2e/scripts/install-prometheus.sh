#!/usr/bin/env bash
# Prometheus for the e2e cluster (e2e/cluster runs it as a host process), linked into the
# directory given as $1 (install-tools.sh's bin). Prints nothing on success.
#
# Not Debian's prometheus package (2.42, the one scripts/install-deps.sh takes promtool
# from): Debian builds it without the Kubernetes service discovery (no client-go in
# Debian), so its `kubernetes_sd_configs` is "field not found". Instead Prometheus v3 is
# built from the Go module proxy by the wrapper module e2e/tools/prometheus (module
# version v0.316.0 = Prometheus v3.16.0), with `-tags remove_all_sd,enable_kubernetes_sd`
# so only the Kubernetes discovery is compiled in. Cold: about 4 minutes on 2 cores; cached
# under $SKIFF_E2E_CACHE keyed by Go's version and a hash of the wrapper's files.
set -euo pipefail
E2E=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:?usage: install-prometheus.sh BIN_DIR}
CACHE=${SKIFF_E2E_CACHE:-$HOME/.cache/skiff-e2e}
export PATH=/usr/local/go/bin:$PATH
dir=$E2E/tools/prometheus
module_version=$(sed -n 's/^require github.com\/prometheus\/prometheus \(v[0-9.]*\)$/\1/p' "$dir/go.mod")
[ -n "$module_version" ] || { echo "install-prometheus: no prometheus version in $dir/go.mod" >&2; exit 1; }
# v0.3XX.Y is Prometheus v3.XX.Y.
minor=${module_version#v0.}; patch=${minor#*.}; minor=${minor%%.*}
version=3.$((10#${minor:1})).$patch
out=$CACHE/prometheus-$version-$( (go env GOVERSION; cat "$dir"/go.mod "$dir"/go.sum "$dir"/*.go) | sha256sum | cut -c1-12)
if [ ! -x "$out/prometheus" ]; then
  echo "install-prometheus: building Prometheus $version with Kubernetes discovery only (cold: ~4 min on 2 cores)" >&2
  mkdir -p "$out.tmp"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd,enable_kubernetes_sd \
     -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version -X github.com/prometheus/common/version.Branch=$module_version" \
     -o "$out.tmp/prometheus" github.com/prometheus/prometheus/cmd/prometheus)
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
mkdir -p "$BIN"
ln -sfn "$out/prometheus" "$BIN/prometheus"
