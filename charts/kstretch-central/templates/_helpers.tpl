{{/* Names, labels and namespace lists shared by the templates. */}}

{{- define "kstretch-central.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kstretch-central.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kstretch-central.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kstretch-central.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kstretch-central.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector of the Services that carry traffic (link, admin): with leader election only the
leader's pod, which central labels itself (kstretch.io/leader), so standbys can be ready. */}}
{{- define "kstretch-central.trafficSelectorLabels" -}}
{{ include "kstretch-central.selectorLabels" . }}
{{- if .Values.leaderElection.enabled }}
kstretch.io/leader: "true"
{{- end }}
{{- end }}

{{- define "kstretch-central.labels" -}}
helm.sh/chart: {{ include "kstretch-central.chart" . }}
{{ include "kstretch-central.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: central
app.kubernetes.io/part-of: kstretch
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "kstretch-central.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kstretch-central.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespaces central manages (a JSON list): watchNamespaces, or the release namespace. */}}
{{- define "kstretch-central.watchNamespaces" -}}
{{- $list := .Values.watchNamespaces | default (list .Release.Namespace) }}
{{- if ne (len $list) (len (uniq $list)) }}
{{- fail (printf "watchNamespaces names a namespace more than once: %s" (join "," $list)) }}
{{- end }}
{{- $list | toJson }}
{{- end }}

{{/* Every namespace that gets central's Role: the watched ones and the topic namespaces. */}}
{{- define "kstretch-central.roleNamespaces" -}}
{{- $list := include "kstretch-central.watchNamespaces" . | fromJsonArray }}
{{- range .Values.topicNamespaces }}{{ $list = append $list . }}{{ end }}
{{- $list | uniq | toJson }}
{{- end }}

{{- define "kstretch-central.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "kstretch-central.fullname" .)) .Values.tls.secretName }}
{{- end }}

{{- define "kstretch-central.linkServiceName" -}}
{{- printf "%s-link" (include "kstretch-central.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* DNS names of central's certificate: the link Service's in-cluster names and tls.dnsNames. */}}
{{- define "kstretch-central.dnsNames" -}}
{{- $svc := include "kstretch-central.linkServiceName" . }}
{{- $names := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) }}
{{- concat $names .Values.tls.dnsNames | uniq | toJson }}
{{- end }}
