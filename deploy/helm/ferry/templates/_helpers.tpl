{{/* Names: "ferry" for a release named ferry (or containing it), else "<release>-ferry". */}}
{{- define "ferry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ferry.fullname" -}}
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

{{- define "ferry.coordinatorName" -}}
{{- printf "%s-coordinator" (include "ferry.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ferry.agentName" -}}
{{- printf "%s-agent" (include "ferry.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels; callers add app.kubernetes.io/component. */}}
{{- define "ferry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ferry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ferry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ferry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ferry.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The coordinator's address for an agent of this release: the value, or this release's Service. */}}
{{- define "ferry.coordinatorAddress" -}}
{{- if .Values.agent.coordinatorAddress }}
{{- .Values.agent.coordinatorAddress }}
{{- else }}
{{- printf "https://%s.%s.svc:%v" (include "ferry.coordinatorName" .) .Release.Namespace .Values.coordinator.port }}
{{- end }}
{{- end }}

{{/* The coordinators' Lease (leader election). */}}
{{- define "ferry.leaseName" -}}
{{- .Values.coordinator.leaderElection.leaseName | default (include "ferry.coordinatorName" .) }}
{{- end }}

{{/* The trust domain of the agent certificate's URI SAN (cert-manager). */}}
{{- define "ferry.trustDomain" -}}
{{- $config := .Values.coordinator.config | default dict }}
{{- $section := get $config "coordinator" | default dict }}
{{- .Values.tls.certManager.trustDomain | default (get $section "trustDomain") | default "ferry.local" }}
{{- end }}

{{/* Whether the coordinator runs more than one replica (and so needs leader election). */}}
{{- define "ferry.coordinatorHA" -}}
{{- if gt (int .Values.coordinator.replicas) 1 }}true{{ end }}
{{- end }}
