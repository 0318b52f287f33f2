{{/* Names, labels and namespace lists shared by the templates. */}}

{{- define "kstretch-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kstretch-agent.fullname" -}}
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

{{- define "kstretch-agent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kstretch-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kstretch-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kstretch-agent.labels" -}}
helm.sh/chart: {{ include "kstretch-agent.chart" . }}
{{ include "kstretch-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: kstretch
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "kstretch-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kstretch-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespaces the agent manages (a JSON list): watchNamespaces, or the release namespace. */}}
{{- define "kstretch-agent.watchNamespaces" -}}
{{- $list := .Values.watchNamespaces | default (list .Release.Namespace) }}
{{- if ne (len $list) (len (uniq $list)) }}
{{- fail (printf "watchNamespaces names a namespace more than once: %s" (join "," $list)) }}
{{- end }}
{{- $list | toJson }}
{{- end }}

{{- define "kstretch-agent.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "kstretch-agent.fullname" .)) .Values.tls.secretName }}
{{- end }}

{{/* The alias this agent claims; it must be the identity in its certificate. */}}
{{- define "kstretch-agent.clusterAlias" -}}
{{- $alias := required "clusterAlias is required: the alias of this member cluster (the strimzi.io/stretch-cluster-alias of its node pools)" .Values.clusterAlias }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $alias) }}
{{- fail (printf "clusterAlias %q must be a DNS label (lower-case letters, digits, '-')" $alias) }}
{{- end }}
{{- $alias }}
{{- end }}
