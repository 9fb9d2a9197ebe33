{{/* The release's full name, at most 63 characters. */}}
{{- define "skiff.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "skiff.labels" -}}
app.kubernetes.io/name: skiff-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The operator pods' selector. */}}
{{- define "skiff.selectorLabels" -}}
app.kubernetes.io/name: skiff-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "skiff.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "skiff.fullname" .) .Values.serviceAccount.name -}}
{{- else if .Values.rbac.create -}}
{{- /* Falling back to "default" would bind the operator's ClusterRole to every pod of
the namespace that names no ServiceAccount. */ -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false and rbac.create is true" .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* A label map as `key=value,...`, the form the operator's label flags take. */}}
{{- define "skiff.labelList" -}}
{{- $pairs := list -}}
{{- range $key, $value := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
