{{/* The release's base name, at most 63 characters. */}}
{{- define "evalmeter.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "evalmeter.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: call with (list $ "api"). */}}
{{- define "evalmeter.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ $.Chart.Name }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "evalmeter.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Secret and key holding DATABASE_URL. */}}
{{- define "evalmeter.databaseSecret" -}}
{{- if .Values.postgresql.enabled -}}{{ include "evalmeter.fullname" . }}-database{{- else -}}{{ .Values.database.existingSecret }}{{- end -}}
{{- end -}}
{{- define "evalmeter.databaseKey" -}}
{{- if .Values.postgresql.enabled -}}url{{- else -}}{{ .Values.database.existingSecretKey }}{{- end -}}
{{- end -}}

{{/* The Secret and key holding the session-token secret. */}}
{{- define "evalmeter.tokenSecret" -}}
{{- .Values.tokenSecret.existingSecret | default (printf "%s-token" (include "evalmeter.fullname" .)) -}}
{{- end -}}
{{- define "evalmeter.tokenKey" -}}
{{- if .Values.tokenSecret.existingSecret -}}{{ .Values.tokenSecret.existingSecretKey }}{{- else -}}secret{{- end -}}
{{- end -}}

{{/* The security context of every evalmeter container. */}}
{{- define "evalmeter.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
{{- define "evalmeter.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* DATABASE_URL from its Secret. */}}
{{- define "evalmeter.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "evalmeter.databaseSecret" . }}
      key: {{ include "evalmeter.databaseKey" . }}
{{- end -}}
