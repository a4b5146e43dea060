{{/* Named templates of the driftwood chart. */}}

{{/* The chart's name, or nameOverride (at most 63 characters, a DNS label). */}}
{{- define "driftwood.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The name of every object: fullnameOverride; else the release name when it already contains the
chart's name (release `driftwood` gives `driftwood`, the names deploy/ uses); else
`<release>-<name>`.
*/}}
{{- define "driftwood.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "driftwood.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* `driftwood-0.1.0`, for the helm.sh/chart label. */}}
{{- define "driftwood.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels that pick this release's pods (Deployment, PDB, Service, spread, anti-affinity). */}}
{{- define "driftwood.selectorLabels" -}}
app.kubernetes.io/name: {{ include "driftwood.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "driftwood.labels" -}}
helm.sh/chart: {{ include "driftwood.chart" . }}
{{ include "driftwood.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: driftwood
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The ServiceAccount the pod runs as. */}}
{{- define "driftwood.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "driftwood.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository:tag (the tag defaults to appVersion), with @digest when one is set. */}}
{{- define "driftwood.image" -}}
{{- $image := .Values.controller.image -}}
{{- $ref := printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- if $image.digest -}}
{{- $ref = printf "%s@%s" $ref $image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* The controller container's name. */}}
{{- define "driftwood.containerName" -}}
{{- default "controller" .Values.controller.containerName -}}
{{- end -}}

{{/*
`affinity` with this release's selector labels filled into every pod (anti-)affinity term that
has no labelSelector. Works on a copy: .Values stays as given.
*/}}
{{- define "driftwood.affinity" -}}
{{- $affinity := deepCopy .Values.affinity -}}
{{- $selector := dict "matchLabels" (include "driftwood.selectorLabels" . | fromYaml) -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- with get $affinity $kind -}}
{{- range get . "requiredDuringSchedulingIgnoredDuringExecution" | default list -}}
{{- if not (hasKey . "labelSelector") -}}
{{- $_ := set . "labelSelector" $selector -}}
{{- end -}}
{{- end -}}
{{- range get . "preferredDuringSchedulingIgnoredDuringExecution" | default list -}}
{{- with .podAffinityTerm -}}
{{- if not (hasKey . "labelSelector") -}}
{{- $_ := set . "labelSelector" $selector -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/* `topologySpreadConstraints` with the selector labels filled in where none is given. */}}
{{- define "driftwood.topologySpreadConstraints" -}}
{{- $constraints := deepCopy .Values.topologySpreadConstraints -}}
{{- $selector := dict "matchLabels" (include "driftwood.selectorLabels" . | fromYaml) -}}
{{- range $constraints -}}
{{- if not (hasKey . "labelSelector") -}}
{{- $_ := set . "labelSelector" $selector -}}
{{- end -}}
{{- end -}}
{{- toYaml $constraints -}}
{{- end -}}

{{/*
Fails `helm install`, `helm upgrade` and `helm template` (not `helm lint`, which renders the
defaults) without the two settings the controller refuses to start without.
*/}}
{{- define "driftwood.requiredSettings" -}}
{{- if or .Release.IsInstall .Release.IsUpgrade -}}
{{- if not .Values.settings.clusterName -}}
{{- fail "settings.clusterName is required: the EKS cluster's name (--set settings.clusterName=NAME)" -}}
{{- end -}}
{{- if not .Values.settings.clusterEndpoint -}}
{{- fail "settings.clusterEndpoint is required: driftwood does not discover it (aws eks describe-cluster --name NAME --query cluster.endpoint)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
