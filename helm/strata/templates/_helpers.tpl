{{/*
The chart's name, or nameOverride.
*/}}
{{- define "strata.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified name of the release's objects: fullnameOverride, else
the release name (when it already holds the chart's name), else
<release>-<name>.  Kept to 52 characters: the StatefulSet's pods add
"-<ordinal>" and the controller-revision-hash label adds 11 more.
*/}}
{{- define "strata.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "strata.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels that select the pods (never change them on upgrade).
*/}}
{{- define "strata.selectorLabels" -}}
app.kubernetes.io/name: {{ include "strata.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The labels every object carries: Kubernetes' recommended ones plus
commonLabels.
*/}}
{{- define "strata.labels" -}}
{{ include "strata.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: broker
app.kubernetes.io/part-of: strata
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "strata.chart" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "strata.headlessName" -}}
{{- printf "%s-headless" (include "strata.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "strata.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "strata.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "strata.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
The cluster id, the same on every node: clusterId, else one derived from
the release's namespace and name, so that it stays the same across
upgrades (a node whose log dirs hold another id refuses to start).
*/}}
{{- define "strata.clusterId" -}}
{{- if .Values.clusterId }}
{{- .Values.clusterId }}
{{- else }}
{{- printf "%s/%s" .Release.Namespace .Release.Name | sha256sum | trunc 22 }}
{{- end }}
{{- end }}

{{/*
The DNS name of pod $i under the headless Service.
Call with (list $ $i).
*/}}
{{- define "strata.podHost" -}}
{{- $top := index . 0 }}
{{- printf "%s-%d.%s.%s.svc.%s" (include "strata.fullname" $top) (index . 1) (include "strata.headlessName" $top) $top.Release.Namespace $top.Values.clusterDomain }}
{{- end }}

{{/*
controller.quorum.voters: every pod is a voter, id@host:port.
*/}}
{{- define "strata.voters" -}}
{{- $voters := list }}
{{- range $i := until (int .Values.replicas) }}
{{- $voters = append $voters (printf "%d@%s:%d" (add $i $.Values.nodeIdOffset) (include "strata.podHost" (list $ $i)) (int $.Values.listeners.controller.port)) }}
{{- end }}
{{- join "," $voters }}
{{- end }}

{{/*
The client bootstrap address through the client Service.
*/}}
{{- define "strata.bootstrap" -}}
{{- printf "%s.%s.svc.%s:%d" (include "strata.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.service.port) }}
{{- end }}

{{/*
Replication defaults that fit the number of nodes (config overrides them).
*/}}
{{- define "strata.replicationFactor" -}}
{{- min 3 (int .Values.replicas) }}
{{- end }}
{{- define "strata.minIsr" -}}
{{- if ge (int .Values.replicas) 3 }}2{{ else }}1{{ end }}
{{- end }}

{{/*
A value as a properties file wants it: whole numbers without an exponent
(Helm reads numbers in values as floats), the rest as text.
*/}}
{{- define "strata.propValue" -}}
{{- if or (kindIs "float64" .) (kindIs "float32" .) }}
{{- if eq (float64 .) (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else }}
{{- toString . }}
{{- end }}
{{- end }}

{{/*
The pod's annotations: podAnnotations and a checksum of the ConfigMap,
so that a change of configuration rolls the pods.
*/}}
{{- define "strata.configChecksum" -}}
{{- include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- end }}
