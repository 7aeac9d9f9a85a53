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

{{/* http(s)://<coordinator service>:<port>, as the workers reach it. */}}
{{- define "codesweep.coordinatorUrl" -}}
{{- printf "%s://%s:%d" (.Values.tls.enabled | ternary "https" "http") (include "codesweep.coordinatorName" .) (int .Values.coordinator.port) -}}
{{- end -}}

{{/* The name the workers check the coordinator's certificate against. */}}
{{- define "codesweep.tlsDomain" -}}
{{- .Values.tls.domain | default (include "codesweep.coordinatorName" .) -}}
{{- end -}}

{{/*
The worker pools, as a YAML list of {name, models, values}: `values` is `worker` with the
pool's own keys laid over it. No `pools`: one pool named "default" made of `worker` alone.
*/}}
{{- define "codesweep.pools" -}}
{{- $pools := list -}}
{{- $given := .Values.pools | default list -}}
{{- if not $given -}}
{{- $given = list (dict "name" "default") -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $given -}}
{{- $name := required "pools[].name is required" .name -}}
{{- if hasKey $seen $name -}}
{{- fail (printf "pools: the pool name %q is used twice" $name) -}}
{{- end -}}
{{- $_ := set $seen $name true -}}
{{- $values := mergeOverwrite (deepCopy $.Values.worker) (omit (deepCopy .) "name" "models") -}}
{{- $pools = append $pools (dict "name" $name "models" (.models | default list) "values" $values) -}}
{{- end -}}
{{- toYaml $pools -}}
{{- end -}}

{{/*
Checks that every model of the spec is served by a pool, and every model a pool lists is in
the spec and in that pool; fails the render otherwise. Returns the spec's models as a YAML list
of {name, pool, path}.
*/}}
{{- define "codesweep.checkPools" -}}
{{- $spec := fromToml .Values.spec -}}
{{- if hasKey $spec "Error" -}}
{{- fail (printf "spec: not a TOML sweep spec: %s" $spec.Error) -}}
{{- end -}}
{{- $pools := include "codesweep.pools" . | fromYamlArray -}}
{{- $byName := dict -}}
{{- range $pools -}}
{{- $_ := set $byName .name . -}}
{{- end -}}
{{- $models := list -}}
{{- range $spec.models | default list -}}
{{- $pool := .pool | default "default" -}}
{{- $served := get $byName $pool -}}
{{- if not $served -}}
{{- fail (printf "spec: model %q runs in pool %q, but no pool of that name is in `pools` (%s): add one, or set the model's `pool` to one of them" .name $pool (keys $byName | sortAlpha | join ", ")) -}}
{{- end -}}
{{- if and $served.models (not (has .name $served.models)) -}}
{{- fail (printf "spec: model %q runs in pool %q, but that pool's `models` list (%s) leaves it out, so no worker would run it" .name $pool (join ", " $served.models)) -}}
{{- end -}}
{{- $models = append $models (dict "name" .name "pool" $pool "path" (.path | default "")) -}}
{{- end -}}
{{- range $pools -}}
{{- $pool := .name -}}
{{- range .models -}}
{{- $name := . -}}
{{- $found := false -}}
{{- range $models -}}
{{- if and (eq .name $name) (eq .pool $pool) -}}
{{- $found = true -}}
{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "pools: pool %q lists model %q, which is not a spec model with `pool = %q`" $pool $name $pool) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $models -}}
{{- end -}}

{{/* The Job of one pool: "<release>-worker" for the default pool alone, else "<release>-worker-<pool>". */}}
{{- define "codesweep.poolJobName" -}}
{{- $root := .root -}}
{{- $name := include "codesweep.workerName" $root -}}
{{- if $root.Values.pools -}}
{{- $name = printf "%s-%s" $name .pool -}}
{{- end -}}
{{- if gt (len $name) 63 -}}
{{- fail (printf "the worker Job name %q is longer than 63 characters: shorten the pool name or set fullnameOverride" $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* A pool's worker image: the CUDA build ("<tag>-cuda") when its workers compute on GPUs themselves. */}}
{{- define "codesweep.poolImage" -}}
{{- $root := .root -}}
{{- $w := .values -}}
{{- $repository := default $root.Values.image.repository $w.image.repository -}}
{{- $tag := $w.image.tag -}}
{{- $sidecar := $w.sidecar | default dict -}}
{{- if not $tag -}}
{{- $tag = include "codesweep.imageTag" $root -}}
{{- if and (gt (int $w.gpus) 0) (not $sidecar.enabled) -}}
{{- $tag = printf "%s-cuda" $tag -}}
{{- end -}}
{{- end -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}

{{/* The model-cache volume of a worker pod (`worker.modelCache`). */}}
{{- define "codesweep.modelCacheVolume" -}}
- name: model-cache
{{- if eq .type "claim" }}
  # Shared by every worker on the claim: one download per model, under a lock file.
  persistentVolumeClaim:
    claimName: {{ required "modelCache.claimName: an existing ReadWriteMany claim is required for type claim" .claimName }}
{{- else if eq .type "ephemeral" }}
  # A volume of its own per pod, provisioned with a storage request.
  ephemeral:
    volumeClaimTemplate:
      spec:
        accessModes: [ReadWriteOnce]
        {{- with .storageClassName }}
        storageClassName: {{ . }}
        {{- end }}
        resources:
          requests:
            storage: {{ .sizeLimit | default "100Gi" }}
{{- else }}
  # Downloaded models, once per pod.
  emptyDir:
    {{- with .medium }}
    medium: {{ . }}
    {{- end }}
    {{- with .sizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
{{- end }}
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
