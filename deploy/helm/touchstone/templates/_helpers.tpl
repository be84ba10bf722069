{{- define "touchstone.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "touchstone.fullname" -}}
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

{{- define "touchstone.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "touchstone.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: touchstone
{{- end }}

{{- define "touchstone.selectorLabels" -}}
app.kubernetes.io/name: {{ include "touchstone.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{- define "touchstone.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "touchstone.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "touchstone.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "touchstone.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* "true" when the server stores in PostgreSQL (an external database or the bundled one). */}}
{{- define "touchstone.postgres" -}}
{{- if or .Values.postgresql.external.existingSecret .Values.postgresql.bundled.enabled }}true{{ end }}
{{- end }}

{{- define "touchstone.postgresFullname" -}}
{{- printf "%s-postgresql" (include "touchstone.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret and key holding the bundled PostgreSQL's password. */}}
{{- define "touchstone.postgresPasswordSecret" -}}
{{- default (include "touchstone.postgresFullname" .) .Values.postgresql.bundled.existingSecret }}
{{- end }}

{{- define "touchstone.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "touchstone.dataDir" -}}/var/lib/touchstone{{- end }}

{{/*
The server's config file: server.config with the keys the chart owns set over it (where the pod
listens and keeps data, the store, and the chart's sources/credentials/webhooks keys).
*/}}
{{- define "touchstone.config" -}}
{{- $config := deepCopy (default dict .Values.server.config) }}
{{- $_ := set $config "listen" (printf "0.0.0.0:%d" (int .Values.server.port)) }}
{{- $_ = set $config "data_dir" (include "touchstone.dataDir" .) }}
{{- $store := deepCopy (default dict $config.store) }}
{{- if include "touchstone.postgres" . }}
{{- $_ = set $store "driver" "postgres" }}
{{- else }}
{{- $_ = set $store "driver" "sqlite" }}
{{- end }}
{{- $_ = unset $store "url" }}
{{- $_ = set $config "store" $store }}
{{- $sources := deepCopy (default dict $config.sources) }}
{{- $_ = set $sources "dir" .Values.sources.dir }}
{{- if .Values.sources.allowHosts }}
{{- $_ = set $sources "allow_hosts" .Values.sources.allowHosts }}
{{- end }}
{{- $_ = set $config "sources" $sources }}
{{- if .Values.credentials.grants }}
{{- $credentials := deepCopy (default dict $config.credentials) }}
{{- $_ = set $credentials "grants" .Values.credentials.grants }}
{{- $_ = set $config "credentials" $credentials }}
{{- end }}
{{- $webhooks := deepCopy (default dict $config.webhooks) }}
{{- with .Values.webhooks }}
{{- if .allowHosts }}{{ $_ = set $webhooks "allow_hosts" .allowHosts }}{{ end }}
{{- if .maxAttempts }}{{ $_ = set $webhooks "max_attempts" .maxAttempts }}{{ end }}
{{- if .timeout }}{{ $_ = set $webhooks "timeout" .timeout }}{{ end }}
{{- if .retention }}{{ $_ = set $webhooks "retention" .retention }}{{ end }}
{{- end }}
{{- if $webhooks }}
{{- $_ = set $config "webhooks" $webhooks }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* Refuses value combinations the schema cannot express, each with what to change. */}}
{{- define "touchstone.validate" -}}
{{- if and .Values.postgresql.external.existingSecret .Values.postgresql.bundled.enabled }}
{{- fail "postgresql.external.existingSecret and postgresql.bundled.enabled are exclusive: use one database" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not (include "touchstone.postgres" .)) }}
{{- fail "replicaCount > 1 needs PostgreSQL (postgresql.external.existingSecret or postgresql.bundled.enabled): SQLite serves one replica" }}
{{- end }}
{{- if and .Values.postgresql.bundled.enabled (not .Values.postgresql.bundled.password) (not .Values.postgresql.bundled.existingSecret) }}
{{- fail "postgresql.bundled needs password or existingSecret (a Secret with key password)" }}
{{- end }}
{{- if and .Values.operator.enabled (hasKey .Values.server.config "auth") (not .Values.operator.apiKey.secretName) }}
{{- fail "operator.enabled with auth on needs operator.apiKey.secretName: the operator calls the API with its own key" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (hasKey .Values.server.config "auth") (not .Values.serviceMonitor.authorization.secretName) }}
{{- fail "serviceMonitor.enabled with auth on needs serviceMonitor.authorization.secretName: /metrics takes an admin API key" }}
{{- end }}
{{- end }}
