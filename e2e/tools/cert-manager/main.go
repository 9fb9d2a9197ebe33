// cert-manager's controller for the local e2e cluster, built from the main module
// github.com/cert-manager/cert-manager (its cmd/controller module is not on the Go module
// proxy). It does what cmd/controller/app.Run of the same version does, cut down to what
// the e2e tests use: the Certificate controllers, Issuers and ClusterIssuers, and the
// CertificateRequest approver and signers of the SelfSigned and CA issuers. No leader
// election (one instance), no webhook, no cainjector, no ACME, Vault or Venafi.
//
//	cert-manager-controller --kubeconfig FILE [--cluster-resource-namespace cert-manager]
//	                        [--readyz-listen 127.0.0.1:9403] [-v 2]
//
// GET /readyz on --readyz-listen answers 200 once every informer has synced.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// The issuer types the Issuers and ClusterIssuers controllers can set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// The controllers to run; each registers itself with controller.Register on import.
var enabled = []string{
	trigger.ControllerName, issuing.ControllerName, keymanager.ControllerName,
	requestmanager.ControllerName, readiness.ControllerName, revisionmanager.ControllerName,
	issuers.ControllerName, clusterissuers.ControllerName,
	// Signers wait for the Approved condition; without a policy engine cert-manager's
	// own approver approves every request for its issuers.
	approver.ControllerName, crca.CRControllerName, crselfsigned.CRControllerName,
}

func main() {
	fs := pflag.NewFlagSet("cert-manager-controller", pflag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	clusterNS := fs.String("cluster-resource-namespace", "cert-manager", "where ClusterIssuers' Secrets live")
	readyz := fs.String("readyz-listen", "127.0.0.1:9403", "address of GET /readyz")
	workers := fs.Int("workers", 5, "workers per controller")
	minBackoff := fs.Duration("certificate-request-minimum-backoff-duration", time.Hour, "first back-off after a failed request")
	maxBackoff := fs.Duration("certificate-request-maximum-backoff-duration", 32*time.Hour, "longest back-off after failed requests")
	logging := logsapi.NewLoggingConfiguration()
	logf.AddFlags(logging, fs)
	_ = fs.Parse(os.Args[1:])
	logf.InitLogs()
	defer logf.FlushLogs()
	if err := logf.ValidateAndApply(logging); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *clusterNS, *readyz, *workers, *minBackoff, *maxBackoff); err != nil {
		logf.Log.Error(err, "cert-manager controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterNS, readyz string, workers int, minBackoff, maxBackoff time.Duration) error {
	log := logf.FromContext(ctx)
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controller.CertificateOptions{
			// cmd/controller's defaults: copy every annotation but these tools'.
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: minBackoff,
			CertificateRequestMaximumBackoffDuration: maxBackoff,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	known := controller.Known()
	for _, name := range enabled {
		constructor, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %s is not registered", name)
		}
		iface, err := constructor(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		log.Info("starting controller", "controller", name)
		g.Go(func() error { return iface.Run(workers, ctx) })
	}
	// The controllers asked for their informers while being built; start them all.
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())

	var synced atomic.Bool
	server := &http.Server{Addr: readyz, ReadHeaderTimeout: 5 * time.Second}
	server.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && synced.Load() {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		http.Error(w, "informers not synced", http.StatusServiceUnavailable)
	})
	g.Go(func() error {
		ok := allSynced(base.SharedInformerFactory.WaitForCacheSync(ctx.Done()))
		ok = allSynced(base.KubeSharedInformerFactory.WaitForCacheSync(ctx.Done())) && ok
		synced.Store(ok)
		log.Info("informers synced", "ok", ok)
		return nil
	})
	g.Go(func() error {
		if err := server.ListenAndServe(); err != http.ErrServerClosed {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return server.Shutdown(shutdown)
	})
	err = g.Wait()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	log.Info("control loops exited")
	return err
}

func allSynced[K comparable](m map[K]bool) bool {
	for _, ok := range m {
		if !ok {
			return false
		}
	}
	return true
}
