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
