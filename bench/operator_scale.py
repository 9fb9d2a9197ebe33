#!/usr/bin/env python3
"""Operator scale benchmark on the real local cluster: N VirtualServers in one namespace
(replicas 0, so no pods run), then the operator (the release binary, on the host) is
started and timed until every one is Accepted with its children created. Reports the
time and the operator's peak RSS (VmHWM).

usage: bench/operator_scale.py [--count 300] [--binary PATH]
Needs `e2e/cluster up`; builds nothing (run images/build.sh first for the binary).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kubectl(*args, input=None):
    out = subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"kubectl {' '.join(args)}: {out.stderr}")
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/operator/x86_64-unknown-linux-gnu/release/skiff-operator"))
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()

    env_line = subprocess.run([os.path.join(ROOT, "e2e/cluster"), "env"], capture_output=True, text=True, check=True).stdout
    for part in env_line.replace("export ", "").split():
        k, v = part.split("=", 1)
        os.environ[k] = v.replace("$PATH", os.environ["PATH"])

    crd = subprocess.run(["cargo", "run", "-q", "-p", "skiff-operator", "--bin", "crdgen"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=crd)
    kubectl("wait", "--for=condition=Established", "crd/virtualservers.skiff.dev", "--timeout=30s")
    ns = f"scale-{os.getpid()}"
    kubectl("create", "namespace", ns)
    try:
        docs = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site", "namespace": ns},
                 "data": {"index.html": "scale\n"}}]
        for i in range(args.count):
            docs.append({"apiVersion": "skiff.dev/v1alpha1", "kind": "VirtualServer",
                         "metadata": {"name": f"vs{i}", "namespace": ns},
                         "spec": {"hosts": [f"vs{i}.example"], "content": {"configMap": "site"}, "replicas": 0,
                                  "rules": [{"match": {"prefix": "/old/"}, "action": {"redirect": {"to": "/"}}}]}})
        kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))

        log = tempfile.NamedTemporaryFile(prefix="operator-", suffix=".log", delete=False)
        start = time.monotonic()
        op = subprocess.Popen([args.binary, "--listen", "127.0.0.1:18081", "--leader-election=false"],
                              stdout=log, stderr=subprocess.STDOUT)
        accepted = children = 0
        peak = 0
        try:
            while time.monotonic() - start < args.timeout:
                items = json.loads(kubectl("get", "virtualservers", "-n", ns, "-o", "json"))["items"]
                accepted = sum(
                    1 for vs in items
                    if any(c["type"] == "Accepted" and c["status"] == "True" for c in vs.get("status", {}).get("conditions", []))
                )
                if accepted == args.count:
                    deployments = kubectl("get", "deployments", "-n", ns, "-o", "name").split()
                    configs = kubectl("get", "configmaps", "-n", ns, "-o", "name", "-l",
                                      "app.kubernetes.io/managed-by=skiff-operator").split()
                    children = min(len(deployments), len(configs))
                    if children == args.count:
                        break
                # Polling 300 objects through kubectl costs CPU the apiserver needs: not too often.
                time.sleep(2)
            took = time.monotonic() - start
            with open(f"/proc/{op.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = int(line.split()[1]) // 1024
        finally:
            op.send_signal(signal.SIGTERM)
            op.wait(timeout=30)
        ok = accepted == args.count and children == args.count
        print(f"{args.count} VirtualServers: {accepted} Accepted, {children} with children, "
              f"in {took:.1f} s; operator peak RSS {peak} MiB; log {log.name}")
        if not ok:
            sys.exit("not every VirtualServer was reconciled in time")
    finally:
        kubectl("delete", "namespace", ns, "--wait=false")


if __name__ == "__main__":
    main()
