# Versions of everything the e2e cluster runs. Cache directories are keyed by these.
K8S_VERSION=v1.33.13
METRICS_SERVER_VERSION=v0.9.0
HELM_VERSION=v3.19.0
COREDNS_VERSION=v1.14.7
