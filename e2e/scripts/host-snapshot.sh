#!/usr/bin/env bash
# Prints what the cluster may touch on the host, in a stable form, so that a snapshot taken
# before `e2e/cluster up` and one taken after `e2e/cluster down --purge` can be diffed:
# links and addresses, iptables rules (both families, counters dropped), mounts, cluster
# processes, the sysctls it sets, the host paths the kubelet insists on, and cgroups.
set -uo pipefail
echo "== links"; ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | sort
echo "== addresses"; ip -o addr show | awk '{print $2, $3, $4}' | sort
for ipt in iptables ip6tables; do
  echo "== $ipt"
  $ipt-save 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//' | sort
done
echo "== nftables tables"; nft list tables 2>/dev/null | sort
echo "== mounts"; findmnt -rn -o TARGET,FSTYPE | sort
echo "== cluster processes"
ps -eo args= | grep -E '^(/[^ ]*/)?(etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|containerd|containerd-shim[^ ]*|coredns|metrics-server|cert-manager-controller|prometheus|prometheus-adapter|/pause|/skiff)( |$)' | sort
echo "== sysctls"
for s in net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables; do
  echo "$s=$(cat /proc/sys/$s 2>/dev/null || echo absent)"
done
echo "== host paths"
for p in /var/log/pods /var/log/containers /var/lib/kubelet /usr/libexec/kubernetes /run/containerd /var/lib/cni /run/netns; do
  [ -e "$p" ] && echo "$p"
done
echo "== cgroups"; ls -d /sys/fs/cgroup/*/kubepods 2>/dev/null
exit 0
