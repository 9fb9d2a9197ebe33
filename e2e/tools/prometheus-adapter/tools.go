//go:build tools

// Wrapper module that builds prometheus-adapter for the local e2e cluster from the Go
// module proxy: sigs.k8s.io/prometheus-adapter v0.12.0's cmd/adapter, with the versions
// its own go.mod pins (this module adds nothing to them). The wrapper exists so go.sum
// here pins every module of the build and the binary gets its name, prometheus-adapter
// (`go install ...@v0.12.0` would name it `adapter`). ./render prints the PromQL the
// adapter makes of a rules file, without a cluster. Keep the version equal to
// PROMETHEUS_ADAPTER_VERSION in e2e/scripts/versions.sh. Built by
// e2e/scripts/install-tools.sh; e2e/cluster runs it as a host process.
package tools

import _ "sigs.k8s.io/prometheus-adapter/cmd/adapter"
