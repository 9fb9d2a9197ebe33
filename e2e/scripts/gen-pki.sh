#!/usr/bin/env bash
# Writes the cluster's PKI and kubeconfigs into $STATE/pki and $STATE/kubeconfigs.
# usage: gen-pki.sh STATE HOST_IP NODE    (idempotent: a complete PKI is kept as it is;
# certificates added to this script later are signed by its CA when they are missing)
set -euo pipefail
STATE=$1 HOST_IP=$2 NODE=$3
PKI=$STATE/pki
mkdir -p "$PKI" "$STATE/kubeconfigs"
cd "$PKI"

ca() { # NAME CN
  openssl genrsa -out "$1.key" 2048 2>/dev/null
  openssl req -x509 -new -nodes -key "$1.key" -subj "/CN=$2" -days 3650 -out "$1.crt"
}
# sign NAME CN ORG SANS USAGE(client|server|both) [CA]
sign() {
  local name=$1 cn=$2 org=$3 sans=$4 usage=$5 issuer=${6:-ca} subject
  subject="/CN=$cn"; [ -n "$org" ] && subject="/O=$org/CN=$cn"
  openssl genrsa -out "$name.key" 2048 2>/dev/null
  openssl req -new -key "$name.key" -subj "$subject" -out "$name.csr"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    case $usage in
      client) echo "extendedKeyUsage=clientAuth" ;;
      server) echo "extendedKeyUsage=serverAuth" ;;
      both) echo "extendedKeyUsage=serverAuth,clientAuth" ;;
    esac
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$issuer.crt" -CAkey "$issuer.key" -CAcreateserial \
    -days 3650 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

kubeconfig() { # NAME CERT
  cat > "$STATE/kubeconfigs/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: skiff-e2e
  cluster:
    certificate-authority: $PKI/ca.crt
    server: https://$HOST_IP:6443
users:
- name: $1
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
contexts:
- name: $1@skiff-e2e
  context: {cluster: skiff-e2e, user: $1}
current-context: $1@skiff-e2e
KC
}

if [ ! -f complete ]; then
  rm -f ./*.crt ./*.key ./*.srl
  ca ca skiff-e2e-ca
  ca front-proxy-ca skiff-e2e-front-proxy-ca
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  api_sans="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  api_sans="$api_sans,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  api_sans="$api_sans,IP:10.96.0.1,IP:127.0.0.1,IP:$HOST_IP"
  sign apiserver kube-apiserver "" "$api_sans" server
  sign apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" client
  sign front-proxy-client front-proxy-client "" "" client front-proxy-ca
  sign admin kubernetes-admin system:masters "" client
  sign controller-manager system:kube-controller-manager "" "" client
  sign scheduler system:kube-scheduler "" "" client
  sign kube-proxy system:kube-proxy "" "" client
  sign kubelet-client "system:node:$NODE" system:nodes "" client
  sign kubelet-server "$NODE" "" "DNS:$NODE,DNS:localhost,IP:$HOST_IP,IP:127.0.0.1" server
  sign metrics-server-client metrics-server "" "" client
  sign metrics-server-serving metrics-server "" "DNS:metrics-server.kube-system.svc,IP:$HOST_IP" server
  sign coredns-client coredns "" "" client
  sign etcd-server etcd "" "DNS:localhost,IP:127.0.0.1" both
  sign etcd-client kube-apiserver-etcd-client "" "" client
  chmod 600 ./*.key

  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kube-proxy kube-proxy
  kubeconfig kubelet kubelet-client
  kubeconfig metrics-server metrics-server-client
  kubeconfig coredns coredns-client
  touch complete
fi

# Added after the first PKI: signed by its CA when missing, so the state of a cluster made
# before them gains them on its next `up`.
if [ ! -s prometheus-adapter-client.crt ] || [ ! -s prometheus-adapter-serving.crt ]; then
  sign prometheus-adapter-client prometheus-adapter "" "" client
  sign prometheus-adapter-serving prometheus-adapter "" \
    "DNS:prometheus-adapter.kube-system.svc,DNS:prometheus-adapter.kube-system.svc.cluster.local,IP:$HOST_IP" server
  chmod 600 prometheus-adapter-client.key prometheus-adapter-serving.key
fi
[ -s "$STATE/kubeconfigs/prometheus-adapter.kubeconfig" ] || kubeconfig prometheus-adapter prometheus-adapter-client
