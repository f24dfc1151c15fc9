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

{{/* The CloudNativePG Cluster of postgresql.cnpg: postgresql.cnpg.clusterName, else
     <fullname>-db in at most 50 characters, CloudNativePG's limit for Cluster names. */}}
{{- define "evalmeter.cnpgCluster" -}}
{{- if .Values.postgresql.cnpg.clusterName -}}
{{ .Values.postgresql.cnpg.clusterName }}
{{- else -}}
{{ include "evalmeter.fullname" . | trunc 47 | trimSuffix "-" }}-db
{{- end -}}
{{- end -}}

{{/* The Barman Cloud plugin's ObjectStore of postgresql.cnpg.backup, one per release: the
     Cluster archives into it, and a restored Cluster reads its predecessor's folder there. */}}
{{- define "evalmeter.cnpgObjectStore" -}}
{{ include "evalmeter.fullname" . | trunc 56 | trimSuffix "-" }}-backup
{{- end -}}

{{/* The Cluster's folder in the object store: backup.serverName, else the Cluster's name. */}}
{{- define "evalmeter.cnpgServerName" -}}
{{ .Values.postgresql.cnpg.backup.serverName | default (include "evalmeter.cnpgCluster" .) }}
{{- end -}}

{{/* The Secret and key holding DATABASE_URL. */}}
{{- define "evalmeter.databaseSecret" -}}
{{- if .Values.postgresql.enabled -}}{{ include "evalmeter.fullname" . }}-database
{{- else if .Values.postgresql.cnpg.enabled -}}{{ include "evalmeter.cnpgCluster" . }}-app
{{- else -}}{{ .Values.database.existingSecret }}{{- end -}}
{{- end -}}
{{- define "evalmeter.databaseKey" -}}
{{- if .Values.postgresql.enabled -}}url
{{- else if .Values.postgresql.cnpg.enabled -}}uri
{{- else -}}{{ .Values.database.existingSecretKey }}{{- end -}}
{{- end -}}

{{/* The Secret and key holding the CA that signs PostgreSQL's certificate; none: empty. */}}
{{- define "evalmeter.databaseCASecret" -}}
{{- if .Values.postgresql.cnpg.enabled -}}{{ include "evalmeter.cnpgCluster" . }}-ca
{{- else if not .Values.postgresql.enabled -}}{{ .Values.database.caSecret }}{{- end -}}
{{- end -}}
{{- define "evalmeter.databaseCAKey" -}}
{{- if .Values.postgresql.cnpg.enabled -}}ca.crt{{- else -}}{{ .Values.database.caSecretKey }}{{- end -}}
{{- end -}}

{{/* The Secret and key holding the session-token secret. */}}
{{/* The receipt key's Secret and key, and the public URL the API signs under. */}}
{{- define "evalmeter.receiptSecret" -}}
{{- .Values.receipts.existingSecret | default (printf "%s-receipt-key" (include "evalmeter.fullname" .)) -}}
{{- end -}}
{{- define "evalmeter.receiptKey" -}}
{{- if .Values.receipts.existingSecret -}}{{ .Values.receipts.existingSecretKey }}{{- else -}}key.pem{{- end -}}
{{- end -}}
{{- define "evalmeter.publicURL" -}}
{{- if .Values.receipts.publicURL -}}
{{ .Values.receipts.publicURL }}
{{- else if .Values.ingress.enabled -}}
{{- /* https even when TLS ends in front of the Ingress: clients refuse http to a remote host. */ -}}
https://{{ .Values.ingress.host }}
{{- end -}}
{{- end -}}

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

{{/* DATABASE_URL from its Secret; with a CA, libpq's variables that make pgx verify
     the server against it (a URL's own sslmode and sslrootcert take precedence). */}}
{{- define "evalmeter.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "evalmeter.databaseSecret" . }}
      key: {{ include "evalmeter.databaseKey" . }}
{{- if include "evalmeter.databaseCASecret" . }}
- name: PGSSLMODE
  value: verify-full
- name: PGSSLROOTCERT
  value: /var/run/evalmeter/database-ca/ca.crt
{{- end }}
{{- end -}}

{{/* The database CA's volume and its mount (only the certificate: CloudNativePG's CA
     Secret also holds its private key); nothing without a CA. */}}
{{- define "evalmeter.databaseCAVolume" -}}
{{- with include "evalmeter.databaseCASecret" . -}}
- name: database-ca
  secret:
    secretName: {{ . }}
    items:
    - key: {{ include "evalmeter.databaseCAKey" $ }}
      path: ca.crt
{{- end -}}
{{- end -}}
{{- define "evalmeter.databaseCAMount" -}}
{{- if include "evalmeter.databaseCASecret" . -}}
- name: database-ca
  mountPath: /var/run/evalmeter/database-ca
  readOnly: true
{{- end -}}
{{- end -}}

{{/* GOMEMLIMIT of a container: call with (list "container" resources). Go's limit is
     soft and counts only the runtime's memory, so it is 90% of limits.memory, leaving
     the rest for what Go does not count and for the GC to catch up before the kernel
     kills the container. Without a limit in values, the limit Kubernetes applies (a
     LimitRange's default, else the node's memory) through the downward API. */}}
{{- define "evalmeter.goMemLimit" -}}
{{- $container := index . 0 -}}
{{- $limit := dig "limits" "memory" "" (index . 1 | default dict) -}}
{{- $bytes := 0.0 -}}
{{- if or (kindIs "float64" $limit) (kindIs "int" $limit) (kindIs "int64" $limit) -}}
{{- $bytes = float64 $limit -}}
{{- else -}}
{{- /* A quantity: a number (with an exponent, 1e9) and a binary or decimal suffix. */ -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?" (toString $limit) -}}
{{- $scales := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 -}}
{{- $unit := trimPrefix $number (toString $limit) -}}
{{- if and $number (hasKey $scales $unit) -}}
{{- $bytes = mulf (float64 $number) (get $scales $unit) -}}
{{- end -}}
{{- end -}}
- name: GOMEMLIMIT
{{- if gt $bytes 0.0 }}
  value: {{ mulf $bytes 0.9 | floor | int64 | toString | quote }}
{{- else }}
  valueFrom:
    resourceFieldRef:
      containerName: {{ $container }}
      resource: limits.memory
{{- end }}
{{- end -}}

{{/* The most PostgreSQL connections the pods can hold at once (values.yaml,
     database.maxConns): every API and controller pod, each with a rollout's surge (25%,
     rounded up), with a full pool; 2 for a migration; 3 superuser_reserved_connections. */}}
{{- define "evalmeter.connectionsNeeded" -}}
{{- $api := int .Values.api.replicas -}}
{{- if .Values.api.autoscaling.enabled }}{{ $api = int .Values.api.autoscaling.maxReplicas }}{{ end -}}
{{- $controller := int .Values.controller.replicas -}}
{{- $pods := add $api (div (add $api 3) 4) $controller (div (add $controller 3) 4) -}}
{{- add (mul $pods (int .Values.database.maxConns)) 2 3 -}}
{{- end -}}
