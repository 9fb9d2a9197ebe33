// render prints the PromQL prometheus-adapter would send to Prometheus for the rules of a
// config file, using the adapter's own config and naming packages with a static REST mapper,
// so rules can be checked without a cluster. The requests are Skiff's: the custom metric for
// two edge pods, one pod and the namespace; the external metric with a selector and without.
//
//	cd e2e/tools/prometheus-adapter && go run ./render ../../../charts/skiff/files/prometheus-adapter-rules.yaml
//
// dashboards/adapter/tests/queries.yaml evaluates what it prints with promtool.
package main

import (
	"fmt"
	"os"

	pmodel "github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	prom "sigs.k8s.io/prometheus-adapter/pkg/client"
	"sigs.k8s.io/prometheus-adapter/pkg/config"
	"sigs.k8s.io/prometheus-adapter/pkg/naming"
)

func mapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), apimeta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Service"), apimeta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), apimeta.RESTScopeRoot)
	m.Add(corev1.SchemeGroupVersion.WithKind("Node"), apimeta.RESTScopeRoot)
	return m
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	return v
}

func series(name string, kv ...string) prom.Series {
	l := pmodel.LabelSet{}
	for i := 0; i < len(kv); i += 2 {
		l[pmodel.LabelName(kv[i])] = pmodel.LabelValue(kv[i+1])
	}
	return prom.Series{Name: name, Labels: l}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: render CONFIG.yaml")
		os.Exit(2)
	}
	cfg := must(config.FromFile(os.Args[1]))
	m := mapper()
	custom := must(naming.NamersFromConfig(cfg.Rules, m))
	external := must(naming.NamersFromConfig(cfg.ExternalRules, m))
	fmt.Printf("rules: %d custom, %d external\n", len(custom), len(external))

	target := []string{"namespace", "web", "pod", "web-abc", "service", "web-metrics", "job", "web-metrics",
		"container", "skiff", "endpoint", "admin", "virtualserver", "web", "instance", "10.244.0.5:9100"}
	req := series("skiff_http_requests_total", append(target, "vhost", "web", "method", "GET", "code", "200")...)
	for i, n := range custom {
		fmt.Printf("custom[%d] series query: %s\n", i, n.Selector())
		if len(n.FilterSeries([]prom.Series{req})) != 1 {
			fmt.Println("  does not keep skiff_http_requests_total")
			continue
		}
		name := must(n.MetricNameForSeries(req))
		res, namespaced := n.ResourcesForSeries(req)
		fmt.Printf("  API metric %s, resources %v (namespaced %v)\n", name, res, namespaced)
		pods := schema.GroupResource{Resource: "pods"}
		q := must(n.QueryForSeries(req.Name, pods, "web", labels.Everything(), "web-abc", "web-def"))
		fmt.Printf("  pods query: %s\n", q)
		q = must(n.QueryForSeries(req.Name, pods, "web", labels.Everything(), "web-abc"))
		fmt.Printf("  one pod query: %s\n", q)
		nsq := must(n.QueryForSeries(req.Name, naming.NsGroupResource, "", labels.Everything(), "web"))
		fmt.Printf("  namespace query: %s\n", nsq)
	}
	workers := series("skiff_upstream_workers", append(target, "pool", "php")...)
	active := series("skiff_upstream_active_requests", append(target, "pool", "php")...)
	for i, n := range external {
		fmt.Printf("external[%d] series query: %s\n", i, n.Selector())
		fmt.Printf("  keeps skiff_upstream_workers: %v, skiff_upstream_active_requests: %v\n",
			len(n.FilterSeries([]prom.Series{workers})) == 1, len(n.FilterSeries([]prom.Series{active})) == 1)
		name := must(n.MetricNameForSeries(workers))
		fmt.Printf("  API metric %s\n", name)
		sel := must(labels.Parse("virtualserver=web,pool=php"))
		q := must(n.QueryForExternalSeries(workers.Name, "web", sel))
		fmt.Printf("  query (virtualserver=web,pool=php in web):\n%s\n", q)
		q = must(n.QueryForExternalSeries(workers.Name, "web", labels.Everything()))
		fmt.Printf("  query (no selector, in web):\n%s\n", q)
	}
}
