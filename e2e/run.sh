#!/usr/bin/env bash
# The e2e suite on the local cluster, as CI runs it (scripts/test.sh calls this):
#   1. install the tools (cached), snapshot the host; the quickstart and its `down` (the
#      host must match the snapshot after it);
#   2. `cluster up` cold, then again (must be a quick no-op keeping every process);
#   3. kill every component with SIGKILL, as a stopped session does, and check that `up`
#      cleans the leftovers and comes back;
#   4. the Rust e2e tests (cargo test -p skiff-e2e);
#   5. always, even on failure: `cluster down --purge`, then diff the host against step 1.
set -euo pipefail
E2E=$(cd "$(dirname "$0")" && pwd)
# One suite per host: a second run (another checkout, or CI beside a developer's run) waits
# here, up to 40 minutes, rather than sharing the host's bridges and ports. The lock lives
# on fd 9 of this script until it exits (after its `down`); `cluster` keeps the fd from the
# components it starts, so none holds the lock past the run.
exec 9>/run/lock/skiff-e2e.lock
if ! flock -n 9; then
  echo "== e2e: waiting for another e2e run on this host to finish"
  flock -w 2400 9 || { echo "another e2e run held this host for 40 minutes"; exit 75; }
fi

cd "$E2E/.."
CLUSTER=$E2E/cluster
STATE=${SKIFF_E2E_DIR:-$E2E/.cluster}
work=$(mktemp -d)
t0=$SECONDS
step() { echo "== e2e [$((SECONDS - t0))s] $*"; }

step "installing tools"
"$E2E/scripts/install-tools.sh" >/dev/null
# A run starts from a clean host: a cluster left by an earlier run is taken down first,
# also one from another checkout whose run was killed (a stopped session), found by the
# host's claim and taken down with its own state (mounts, rules). No other suite runs (the
# lock above), so a claimed cluster is such a leftover or a developer's: CI takes it down
# either way, a developer's run refuses to touch a running one.
claimed=$(cat /run/skiff-e2e-cluster 2>/dev/null || true)
if [ -n "$claimed" ] && [ "$claimed" != "$(realpath -m "$STATE")" ]; then
  if [ "${CI:-}" != true ] &&
    { SKIFF_E2E_DIR=$claimed "$CLUSTER" status 2>/dev/null || true; } | grep -q " running "; then
    echo "== e2e: another checkout's cluster runs on this host ($claimed); take it down first:"
    echo "   SKIFF_E2E_DIR=$claimed $CLUSTER down --purge"
    exit 1
  fi
  step "taking down the cluster another checkout left ($claimed)"
  SKIFF_E2E_DIR=$claimed "$CLUSTER" down --purge
fi
if [ -d "$STATE/run" ]; then
  step "taking down the cluster an earlier run left"
  "$CLUSTER" down --purge
fi
"$E2E/scripts/host-snapshot.sh" >"$work/before"

finish() {
  local rc=$?
  trap - EXIT
  if [ $rc -ne 0 ]; then
    echo "== e2e failed (exit $rc); component logs:"
    LINES=30 "$CLUSTER" logs 2>/dev/null || true
  fi
  step "cluster down --purge"
  "$CLUSTER" down --purge || rc=1
  "$E2E/scripts/host-snapshot.sh" >"$work/after"
  if diff -u "$work/before" "$work/after"; then
    step "host restored: links, addresses, iptables, mounts, processes, sysctls, paths and cgroups match"
  else
    echo "== e2e: the host differs after down --purge (diff above)"
    rc=1
  fi
  rm -rf "$work"
  exit $rc
}
trap finish EXIT

# README's first command on this clean host: the quickstart brings the cluster up, serves
# what it prints, reruns as a no-op, and its `down` must leave the host as it was.
step "the quickstart (scripts/quickstart.sh), then its down"
cargo test -p skiff-e2e --test quickstart -- --nocapture 2>&1 | tee "$work/cargo.log"
"$E2E/scripts/host-snapshot.sh" >"$work/after-quickstart"
if ! diff -u "$work/before" "$work/after-quickstart"; then
  echo "== e2e: the host differs after scripts/quickstart.sh down (diff above)"
  exit 1
fi
step "host restored after the quickstart's down"

step "cluster up (cold)"
s=$SECONDS; "$CLUSTER" up >/dev/null; step "cluster up took $((SECONDS - s))s"
pids_before=$(cat "$STATE"/run/*.pid | sort)
s=$SECONDS; "$CLUSTER" up >/dev/null; took=$((SECONDS - s))
pids_after=$(cat "$STATE"/run/*.pid | sort)
[ "$pids_before" = "$pids_after" ] || { echo "second 'up' replaced processes"; exit 1; }
[ "$took" -le 15 ] || { echo "second 'up' took ${took}s; it should be a quick no-op"; exit 1; }
step "second up: a no-op in ${took}s, same processes"

step "a pod running, then every component killed with SIGKILL (a session stopping without 'down')"
[ -f target/images/skiff.oci.tar ] || images/build.sh
"$CLUSTER" load target/images/skiff.oci.tar
eval "$("$CLUSTER" env)"
kubectl run leftover --image=localhost/skiff/skiff:dev --image-pull-policy=Never --restart=Never >/dev/null
kubectl wait --for=condition=Ready pod/leftover --timeout=90s >/dev/null

for f in "$STATE"/run/*.pid; do kill -KILL "$(cat "$f")" 2>/dev/null || true; done
sleep 1
s=$SECONDS; "$CLUSTER" up >/dev/null; step "recovered by 'up' in $((SECONDS - s))s"
"$CLUSTER" status
kubectl wait --for=condition=Ready "node/$(hostname | tr '[:upper:]' '[:lower:]')" --timeout=30s >/dev/null
if kubectl get pod leftover >/dev/null 2>&1; then
  echo "the recovered cluster still has the old pod"; exit 1
fi

step "memory of the running cluster"
"$CLUSTER" status | awk '/running/ { rss += $6; print } END { printf "total RSS %d MiB\n", rss }'

step "cargo test -p skiff-e2e"
# --nocapture: the tests print their figures (scale-up and -down times, requests and failures).
cargo test -p skiff-e2e -- --include-ignored --test-threads 1 --nocapture 2>&1 | tee -a "$work/cargo.log"
awk '/^test result:/ { p += $4; f += $6 } END { printf "e2e: %d passed, %d failed\n", p, f }' "$work/cargo.log"
"$CLUSTER" status | awk '/running/ { rss += $6 } END { printf "cluster RSS after the tests: %d MiB\n", rss }'
