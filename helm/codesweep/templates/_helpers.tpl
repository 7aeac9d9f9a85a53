{{/* The chart name. */}}
{{- define "codesweep.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name; object names are this plus a suffix ("-coordinator", ...). */}}
{{- define "codesweep.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "codesweep.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select the release's pods. */}}
{{- define "codesweep.selectorLabels" -}}
app.kubernetes.io/name: {{ include "codesweep.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "codesweep.labels" -}}
helm.sh/chart: {{ include "codesweep.chart" . }}
{{ include "codesweep.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: codesweep
{{- end -}}

{{- define "codesweep.coordinatorName" -}}
{{- printf "%s-coordinator" (include "codesweep.fullname" .) -}}
{{- end -}}

{{- define "codesweep.workerName" -}}
{{- printf "%s-worker" (include "codesweep.fullname" .) -}}
{{- end -}}

{{- define "codesweep.specName" -}}
{{- printf "%s-spec" (include "codesweep.fullname" .) -}}
{{- end -}}

{{- define "codesweep.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "codesweep.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the bearer token, and its key. */}}
{{- define "codesweep.tokenSecretName" -}}
{{- default (printf "%s-token" (include "codesweep.fullname" .)) .Values.token.existingSecret -}}
{{- end -}}

{{- define "codesweep.tokenSecretKey" -}}
{{- if .Values.token.existingSecret -}}
{{- .Values.token.existingSecretKey -}}
{{- else -}}
token
{{- end -}}
{{- end -}}

{{/* The Secret of store credentials, if any. */}}
{{- define "codesweep.storeSecretName" -}}
{{- if .Values.store.credentialsSecret -}}
{{- .Values.store.credentialsSecret -}}
{{- else if .Values.store.credentials -}}
{{- printf "%s-s3" (include "codesweep.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "codesweep.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "codesweep.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "codesweep.imageTag" .) -}}
{{- end -}}

{{/* The workers' image: the CUDA build ("<tag>-cuda") when they have GPUs. */}}
{{- define "codesweep.workerImage" -}}
{{- $repository := default .Values.image.repository .Values.worker.image.repository -}}
{{- $tag := .Values.worker.image.tag -}}
{{- if not $tag -}}
{{- $tag = include "codesweep.imageTag" . -}}
{{- if gt (int .Values.worker.gpus) 0 -}}
{{- $tag = printf "%s-cuda" $tag -}}
{{- end -}}
{{- end -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}

{{/* http://<coordinator service>:<port>, as the workers reach it. */}}
{{- define "codesweep.coordinatorUrl" -}}
{{- printf "http://%s:%d" (include "codesweep.coordinatorName" .) (int .Values.coordinator.port) -}}
{{- end -}}

{{/* Environment shared by the coordinator and the workers. */}}
{{- define "codesweep.commonEnv" -}}
{{- if .Values.token.enabled }}
- name: CODESWEEP_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "codesweep.tokenSecretName" . }}
      key: {{ include "codesweep.tokenSecretKey" . }}
{{- end }}
- name: RUST_LOG
  value: {{ .Values.logLevel | quote }}
{{- with (.Values.telemetry | default dict).otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
# The root filesystem is read-only; HOME (CUDA's kernel cache) lives in /tmp.
- name: HOME
  value: /tmp
{{- end -}}
