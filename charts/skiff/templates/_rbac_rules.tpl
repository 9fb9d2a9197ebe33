{{/*
What the operator does in the namespaces it reconciles: every namespace (a ClusterRole), or
those of operator.watchNamespaces (a Role in each).
*/}}
{{- define "skiff.namespacedRules" }}
  # Only verbs the operator uses: children are written by server-side apply (create and
  # patch, never update) and deleted only where a spec change can drop them (Deployments,
  # Services, HPAs, NetworkPolicies; the rest go with their owner, by garbage collection).
  # The resource it reconciles, and its status.
  - apiGroups: [skiff.dev]
    resources: [virtualservers]
    verbs: [get, list, watch]
  - apiGroups: [skiff.dev]
    resources: [virtualservers/status]
    verbs: [get, patch]
  # The children it owns.
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list, watch, create, patch]
  - apiGroups: [""]
    resources: [services]
    verbs: [get, list, watch, create, patch, delete]
  - apiGroups: [apps]
    resources: [deployments]
    verbs: [get, list, watch, create, patch, delete]
  - apiGroups: [autoscaling]
    resources: [horizontalpodautoscalers]
    verbs: [get, list, watch, create, patch, delete]
  - apiGroups: [policy]
    resources: [poddisruptionbudgets]
    verbs: [get, list, watch, create, patch]
  # Watched even with networkPolicy.enabled=false, so the ones left are deleted.
  - apiGroups: [networking.k8s.io]
    resources: [networkpolicies]
    verbs: [get, list, watch, create, patch, delete]
  # Edge pods, listed to read back the config and certificates each one serves (its admin
  # /config-hash and /certificates).
  - apiGroups: [""]
    resources: [pods]
    verbs: [list]
  # Objects it only checks for (content, htpasswd and TLS Secrets).
  - apiGroups: [""]
    resources: [secrets, persistentvolumeclaims]
    verbs: [get]
  # Certificates for spec.tls.issuerRef (listed to delete the ones no longer asked for);
  # issuers read to refuse an ACME issuer that only solves HTTP-01, which the edge cannot
  # route (its TLS Secrets are only checked for, by metadata: see secrets above).
  # ClusterIssuers are with the cluster-wide rules.
  - apiGroups: [cert-manager.io]
    resources: [certificates]
    verbs: [get, list, create, patch, delete]
  - apiGroups: [cert-manager.io]
    resources: [issuers]
    verbs: [get]
  - apiGroups: [monitoring.coreos.com]
    resources: [servicemonitors]
    verbs: [create, patch]
  - apiGroups: [events.k8s.io]
    resources: [events]
    verbs: [create, patch]
{{- end }}

{{/*
What the operator reads cluster-wide whatever it watches: CRDs (to find the optional
integrations, cert-manager and the Prometheus Operator, installed before or after it) and
cert-manager's ClusterIssuers (to refuse an ACME one that only solves HTTP-01).
*/}}
{{- define "skiff.clusterRules" }}
  - apiGroups: [apiextensions.k8s.io]
    resources: [customresourcedefinitions]
    verbs: [get, list, watch]
  - apiGroups: [cert-manager.io]
    resources: [clusterissuers]
    verbs: [get]
{{- end }}
