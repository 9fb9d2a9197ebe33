//go:build tools

// Wrapper module that builds Prometheus for the local e2e cluster from the Go module proxy
// (Debian's prometheus 2.42 has no Kubernetes service discovery: Debian builds it without
// client-go). github.com/prometheus/prometheus v0.316.0 is Prometheus v3.16.0 (its Go
// module versions are v0.3XX.Y for v3.XX.Y). Built by e2e/scripts/install-prometheus.sh
// with `-tags builtinassets,remove_all_sd,enable_kubernetes_sd`, through a temporary
// -modfile that replaces the module by a copy where the web UI was built (ui.patch is
// applied to that copy): only the Kubernetes discovery, and the UI embedded.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
