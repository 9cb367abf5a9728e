{{/* Names and labels shared by every template. */}}

{{- define "brokergroup.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "brokergroup.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "brokergroup.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "brokergroup.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "brokergroup.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "brokergroup.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "brokergroup.selectorLabels" -}}
app.kubernetes.io/name: {{ include "brokergroup.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "brokergroup.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "brokergroup.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: brokergroup
{{- end -}}

{{/* repository:tag, or repository@digest when a digest is given; the tag defaults to appVersion. */}}
{{- define "brokergroup.imageRef" -}}
{{- $image := index . 0 -}}
{{- $chart := index . 1 -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default $chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "brokergroup.image" -}}
{{- include "brokergroup.imageRef" (list .Values.image .Chart) -}}
{{- end -}}

{{/* The namespaces the operator watches: none (every namespace) in Cluster scope. */}}
{{- define "brokergroup.watchNamespaces" -}}
{{- if eq .Values.watch.scope "Namespaced" -}}
{{- if .Values.watch.namespaces -}}
{{- join "," (uniq .Values.watch.namespaces) -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Restricted pod security, as on every pod the operator creates (operator/builders/pods.py). */}}
{{- define "brokergroup.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "brokergroup.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
