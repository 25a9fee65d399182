{{/* Chart name, cut for label limits. */}}
{{- define "runnel.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name; the release name alone when it already contains the chart name. */}}
{{- define "runnel.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "runnel.headless" -}}
{{- printf "%s-headless" (include "runnel.fullname" .) -}}
{{- end -}}

{{- define "runnel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runnel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "runnel.labels" -}}
{{ include "runnel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Name of the Secret holding the cluster secret. */}}
{{- define "runnel.clusterSecretName" -}}
{{- default (printf "%s-cluster" (include "runnel.fullname" .)) .Values.clusterSecret.existingSecret -}}
{{- end -}}

{{- define "runnel.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Stable DNS name of a pod: (dict "root" $ "pod" "name-0"). */}}
{{- define "runnel.podHost" -}}
{{- $r := .root -}}
{{- printf "%s.%s.%s.svc.%s" .pod (include "runnel.headless" $r) $r.Release.Namespace $r.Values.clusterDomain -}}
{{- end -}}

{{/* --controllers: every controller pod, node id = ordinal + 1. */}}
{{- define "runnel.controllers" -}}
{{- $r := . -}}
{{- $n := int .Values.controllers.replicas -}}
{{- $out := list -}}
{{- range $i := until $n -}}
{{- $pod := printf "%s-controller-%d" (include "runnel.fullname" $r) $i -}}
{{- $out = append $out (printf "%d@%s:9093" (add1 $i) (include "runnel.podHost" (dict "root" $r "pod" $pod))) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{- define "runnel.rbac" -}}
{{- eq .Values.rack.source "nodeLabel" -}}
{{- end -}}
