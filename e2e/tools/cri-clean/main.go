// cri-clean is the smallest CRI client that teardown needs, because crictl (cri-tools) is
// not reachable through the Go module proxy here.
//
//	cri-clean -endpoint unix:///path/containerd.sock pods|ps|stop-all
//
// stop-all stops and removes every pod sandbox: StopPodSandbox runs CNI DEL, which frees
// the veth, the IPAM lease and the masquerade rules, so teardown leaves no network behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	endpoint := flag.String("endpoint", "", "CRI endpoint, unix:///path/to/containerd.sock")
	flag.Parse()
	if *endpoint == "" {
		fail(2, "cri-clean: -endpoint is required")
	}
	command := "pods"
	if flag.NArg() > 0 {
		command = flag.Arg(0)
	}
	conn, err := grpc.NewClient(*endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(1, "cri-clean: connect:", err)
	}
	defer conn.Close()
	client := runtime.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	pods, err := client.ListPodSandbox(ctx, &runtime.ListPodSandboxRequest{})
	if err != nil {
		fail(1, "cri-clean: list pod sandboxes:", err)
	}
	switch command {
	case "pods":
		for _, p := range pods.Items {
			fmt.Printf("%.13s %-10s %s/%s\n", p.Id, p.State, p.Metadata.Namespace, p.Metadata.Name)
		}
	case "ps":
		list, err := client.ListContainers(ctx, &runtime.ListContainersRequest{})
		if err != nil {
			fail(1, "cri-clean: list containers:", err)
		}
		for _, c := range list.Containers {
			fmt.Printf("%.13s %-18s %s pod=%.13s\n", c.Id, c.State, c.Metadata.Name, c.PodSandboxId)
		}
	case "stop-all":
		status := 0
		for _, p := range pods.Items {
			if _, err := client.StopPodSandbox(ctx, &runtime.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
				fmt.Fprintln(os.Stderr, "cri-clean: stop", p.Id, err)
				status = 1
			}
			if _, err := client.RemovePodSandbox(ctx, &runtime.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
				fmt.Fprintln(os.Stderr, "cri-clean: remove", p.Id, err)
				status = 1
			}
			fmt.Printf("removed %.13s %s/%s\n", p.Id, p.Metadata.Namespace, p.Metadata.Name)
		}
		os.Exit(status)
	default:
		fail(2, "cri-clean: unknown command", command)
	}
}

func fail(code int, args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(code)
}
