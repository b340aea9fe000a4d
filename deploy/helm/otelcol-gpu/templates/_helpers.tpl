{{/*
Labels on every object's metadata (never in selectors, which must not
change between chart versions).
*/}}
{{- define "otelcol-gpu.labels" -}}
app.kubernetes.io/part-of: otelcol-gpu
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
An image reference: .image (images.<name>), .global (.Values.global), .chart.
global.imageRegistry replaces the registry of a repository that names one
(its first part has a dot or a colon, or is localhost, as Docker reads it)
and prefixes one that does not; a digest gives repository@digest.
*/}}
{{- define "otelcol-gpu.image" -}}
{{- $repo := .image.repository -}}
{{- with (.global | default dict).imageRegistry -}}
{{- $parts := splitn "/" 2 $repo -}}
{{- if and $parts._1 (or (contains "." $parts._0) (contains ":" $parts._0) (eq $parts._0 "localhost")) -}}
{{- $repo = $parts._1 -}}
{{- end -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo -}}
{{- end -}}
{{- if .image.digest -}}
{{ $repo }}@{{ .image.digest }}
{{- else -}}
{{ $repo }}:{{ .image.tag | default .chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
GOMEMLIMIT of .who (agent, gateway): its goMemLimit, or else 54 % of its
container's memory limit in MiB, which is 90 % of the memory_limiter's soft
limit, (80 % - 20 %) of the limit (deploy/internal/gomemlimit holds every
rendered value to between 80 % and 100 % of that soft limit).
*/}}
{{- define "otelcol-gpu.goMemLimit" -}}
{{- $v := index .Values .who -}}
{{- if $v.goMemLimit -}}
{{ $v.goMemLimit }}
{{- else -}}
{{- $limit := toString ((($v.resources | default dict).limits | default dict).memory | default "") -}}
{{- if not $limit -}}
{{- fail (printf "%s.goMemLimit: empty, and %s.resources.limits.memory is not set to derive it from: set the memory limit (the memory_limiter's percentages are of it) or goMemLimit" .who .who) -}}
{{- end -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$" $limit) -}}
{{- fail (printf "%s.resources.limits.memory: %q is not a quantity GOMEMLIMIT can be derived from (a number with Ki, Mi, Gi, Ti, k, M, G or T): write it so, or set %s.goMemLimit" .who $limit .who) -}}
{{- end -}}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- $number := regexReplaceAll "^([0-9.]+)([A-Za-z]*)$" $limit "${1}" -}}
{{- $unit := regexReplaceAll "^([0-9.]+)([A-Za-z]*)$" $limit "${2}" -}}
{{- $mib := floor (divf (mulf (float64 $number) (index $units $unit) 54) (mul 100 1048576)) | int64 -}}
{{- if lt $mib 1 -}}
{{- fail (printf "%s.resources.limits.memory: %s is too small to run the collector (GOMEMLIMIT would be under 1MiB)" .who $limit) -}}
{{- end -}}
{{ $mib }}MiB
{{- end -}}
{{- end }}

{{/*
A pod template's labels and annotations: .fixed (the chart's: the
selector's labels, the config checksum) over .extra (podLabels,
podAnnotations of .key), which may not restate them.
*/}}
{{- define "otelcol-gpu.podMeta" -}}
{{- $extra := .extra | default dict -}}
{{- range $k, $_ := .fixed -}}
{{- if hasKey $extra $k -}}
{{- fail (printf "%s: %q is the chart's (the selector's, or the config checksum): leave it out" $.key $k) -}}
{{- end -}}
{{- end -}}
{{- toYaml (merge (deepCopy .fixed) $extra) -}}
{{- end }}

{{/* The endpoints ConfigMap's data, also hashed into the pod templates. */}}
{{- define "otelcol-gpu.endpoints" -}}
KAFKA_BROKERS: {{ .Values.endpoints.kafkaBrokers | quote }}
DCGM_ENDPOINT: {{ .Values.dcgm.endpoint | quote }}
PROMETHEUS_REMOTE_WRITE_URL: {{ .Values.endpoints.prometheusRemoteWriteURL | quote }}
LOKI_OTLP_ENDPOINT: {{ .Values.endpoints.lokiOTLPEndpoint | quote }}
TEMPO_OTLP_ENDPOINT: {{ .Values.endpoints.tempoOTLPEndpoint | quote }}
TEMPO_INSECURE: {{ .Values.endpoints.tempoInsecure | toString | quote }}
{{- end }}

{{/* An env var from the endpoints ConfigMap. */}}
{{- define "otelcol-gpu.endpointEnv" -}}
- name: {{ . }}
  valueFrom:
    configMapKeyRef: {name: otelcol-gpu-endpoints, key: {{ . }}}
{{- end }}

{{/* Kafka over TLS and SASL: the env of distribution .who (agent, gateway). */}}
{{- define "otelcol-gpu.kafkaSecurityEnv" -}}
{{- $sasl := index .Values.kafka.sasl .who -}}
- name: KAFKA_SASL_USERNAME
  value: {{ $sasl.username | quote }}
- name: KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ $sasl.passwordSecret.name }}, key: {{ $sasl.passwordSecret.key }}}
- name: KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.sasl.mechanism | quote }}
{{- if .Values.kafka.tls.caSecret.name }}
- name: KAFKA_TLS_CA_FILE
  value: /etc/otelcol-gpu-kafka-ca/ca.crt
{{- end }}
{{- end }}

{{- define "otelcol-gpu.kafkaCAVolume" -}}
{{- if .Values.kafka.tls.caSecret.name }}
# The brokers' CA (Strimzi's cluster CA certificate, mirrored).
- name: kafka-cluster-ca
  secret:
    secretName: {{ .Values.kafka.tls.caSecret.name }}
    items:
      - {key: {{ .Values.kafka.tls.caSecret.key }}, path: ca.crt}
{{- end }}
{{- end }}

{{- define "otelcol-gpu.kafkaTLSSASL" -}}
{{- and (not .Values.smallCluster.enabled) (eq .Values.kafka.security "tls-sasl") -}}
{{- end }}

{{/*
Small cluster (smallCluster.enabled): the agents' OTLP exporter to the
central gateway (distributions/agent/small-cluster.yaml), over TLS (the CA
from a Secret mounted as a directory: rotations reach the running
collectors) with each agent pod's own projected ServiceAccount token; the
central checks those tokens with TokenReviews (nodeauth/agents).
*/}}
{{- define "otelcol-gpu.smallClusterAgentEnv" -}}
# The central gateway's OTLP Service, its CA and this pod's token.
- name: OTELCOL_GPU_CENTRAL_ENDPOINT
  value: otelcol-gpu-central.{{ .Release.Namespace }}.svc:4317
- name: OTELCOL_GPU_CENTRAL_CA_FILE
  value: /etc/otelcol-gpu-central-tls/ca.crt
- name: OTELCOL_GPU_CENTRAL_TOKEN_FILE
  value: /var/run/secrets/otelcol-gpu-central/token
{{- end }}
{{- define "otelcol-gpu.smallClusterGatewayEnv" -}}
# The central's certificate and key, and whose tokens the agents present:
# the agents' ServiceAccount, for the projected volume's audience.
- name: OTELCOL_GPU_CENTRAL_TLS_CERT_FILE
  value: /etc/otelcol-gpu-central-tls/tls.crt
- name: OTELCOL_GPU_CENTRAL_TLS_KEY_FILE
  value: /etc/otelcol-gpu-central-tls/tls.key
- name: OTELCOL_GPU_AGENT_SERVICE_ACCOUNT
  value: {{ .Release.Namespace }}/otelcol-gpu-agent
- name: OTELCOL_GPU_AGENT_TOKEN_AUDIENCE
  value: {{ .Values.smallCluster.agentToken.audience | quote }}
{{- end }}
{{/* .who: agent (the CA and its token) or gateway (certificate and key). */}}
{{- define "otelcol-gpu.smallClusterMounts" -}}
- {name: central-tls, mountPath: /etc/otelcol-gpu-central-tls, readOnly: true}
{{- if eq .who "agent" }}
- {name: central-token, mountPath: /var/run/secrets/otelcol-gpu-central, readOnly: true}
{{- end }}
{{- end }}
{{- define "otelcol-gpu.smallClusterVolumes" -}}
{{- if hasKey .Values.smallCluster "tokenSecret" }}
{{- fail "smallCluster.tokenSecret: removed; one Secret on every agent let any node speak for all. Each agent now presents its pod's ServiceAccount token (smallCluster.agentToken); delete the value and the Secret" }}
{{- end }}
{{- $t := .Values.smallCluster.agentToken }}
{{- if lt (int $t.expirationSeconds) 600 }}
{{- fail (printf "smallCluster.agentToken.expirationSeconds: %v is below 600, the shortest token the API server issues" $t.expirationSeconds) }}
{{- end }}
- name: central-tls
  secret:
    secretName: {{ .Values.smallCluster.tlsSecret }}
    items:
      {{- if eq .who "agent" }}
      - {key: ca.crt, path: ca.crt}
      {{- else }}
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
      {{- end }}
{{- if eq .who "agent" }}
# This pod's own token for the central: bound to the pod (deleting it
# revokes the token), for the central's audience only, renewed by the
# kubelet; the agent re-reads the file.
- name: central-token
  projected:
    sources:
      - serviceAccountToken:
          audience: {{ $t.audience | quote }}
          expirationSeconds: {{ int $t.expirationSeconds }}
          path: token
{{- end }}
{{- end }}

{{/*
The fault console (gateway.console): the fragment merged after the others
(small-cluster-console.yaml in the small-cluster mode), and the checks of
its values, which fail the render naming the value.
*/}}
{{- define "otelcol-gpu.consoleFragment" -}}
{{- if .Values.smallCluster.enabled }}small-cluster-console.yaml{{ else }}console.yaml{{ end }}
{{- end }}
{{- define "otelcol-gpu.consoleCheck" -}}
{{- $c := .Values.gateway.console }}
{{- if not $c.tokenSecret }}
{{- fail "gateway.console.tokenSecret: name an existing Secret with key token (the console's bearer token, at least 16 bytes: kubectl -n <namespace> create secret generic otelcol-gpu-console-token --from-literal=token=$(openssl rand -hex 32)); the chart does not make one" }}
{{- end }}
{{- if not (kindIs "string" $c.tokenSecret) }}
{{- fail (printf "gateway.console.tokenSecret: %v is not a Secret's name (the Secret's key must be token)" $c.tokenSecret) }}
{{- end }}
{{- $port := int $c.port }}
{{- if or (lt $port 1) (gt $port 65535) (ne (toString $port) (toString $c.port)) }}
{{- fail (printf "gateway.console.port: %v is not a port (1-65535)" $c.port) }}
{{- end }}
{{- if not (kindIs "slice" ($c.allowedNamespaces | default list)) }}
{{- fail (printf "gateway.console.allowedNamespaces: %v is not a list of namespace names" $c.allowedNamespaces) }}
{{- end }}
{{- with $c.allowedPodSelector }}
{{- if not (kindIs "map" .) }}
{{- fail (printf "gateway.console.allowedPodSelector: %v is not a label selector" .) }}
{{- end }}
{{- range $k, $_ := . }}
{{- if not (has $k (list "matchLabels" "matchExpressions")) }}
{{- fail (printf "gateway.console.allowedPodSelector: %q is not a field of a label selector (matchLabels, matchExpressions)" $k) }}
{{- end }}
{{- end }}
{{- end }}
{{- if has $port (list 13134 8889 4317) }}
{{- fail (printf "gateway.console.port: %d is already the gateway's (health 13134, telemetry 8889, OTLP 4317)" $port) }}
{{- end }}
{{- $tls := $c.tls | default dict }}
{{- $cm := $tls.certManager | default dict }}
{{- if and $tls.secret $cm.enabled }}
{{- fail "gateway.console.tls: set secret or certManager.enabled, not both" }}
{{- end }}
{{- if not (or $tls.secret $cm.enabled) }}
{{- fail "gateway.console.tls: the console serves HTTPS only: name a Secret of type kubernetes.io/tls (gateway.console.tls.secret) or let cert-manager issue one (gateway.console.tls.certManager.enabled, issuerRef.name)" }}
{{- end }}
{{- if and $tls.secret (not (kindIs "string" $tls.secret)) }}
{{- fail (printf "gateway.console.tls.secret: %v is not a Secret's name" $tls.secret) }}
{{- end }}
{{- if and $cm.enabled (not ($cm.issuerRef | default dict).name) }}
{{- fail "gateway.console.tls.certManager.issuerRef.name: name the cert-manager Issuer (or ClusterIssuer, with kind) that signs the console's certificate" }}
{{- end }}
{{- end }}
{{- /*
"true" when a standby's console forwards controls to the owner's
(gateway.console.forward): the Kafka topology only, where the gpu_faults
group elects; the small-cluster central is one replica that acts alone.
*/}}
{{- define "otelcol-gpu.consoleForward" -}}
{{- if and .Values.gateway.console.enabled .Values.gateway.console.forward.enabled (not .Values.smallCluster.enabled) }}true{{ end }}
{{- end }}
{{- define "otelcol-gpu.consoleForwardCheck" -}}
{{- $f := .Values.gateway.console.forward }}
{{- $ca := $f.caSecret | default dict }}
{{- if and $ca.name (not (kindIs "string" $ca.name)) }}
{{- fail (printf "gateway.console.forward.caSecret.name: %v is not a Secret's name" $ca.name) }}
{{- end }}
{{- if not $ca.key }}
{{- fail "gateway.console.forward.caSecret.key: name the Secret's key holding the CA certificate (ca.crt)" }}
{{- end }}
{{- if not (regexMatch "^[0-9]+(ms|s|m)$" (toString $f.timeout)) }}
{{- fail (printf "gateway.console.forward.timeout: %v is not a duration such as 40s (at most 55s)" $f.timeout) }}
{{- end }}
{{- end }}
{{- define "otelcol-gpu.consoleForwardCASecret" -}}
{{- .Values.gateway.console.forward.caSecret.name | default (include "otelcol-gpu.consoleTLSSecret" .) }}
{{- end }}
{{- define "otelcol-gpu.consoleTLSSecret" -}}
{{- .Values.gateway.console.tls.secret | default "otelcol-gpu-gateway-console-tls" }}
{{- end }}
{{- define "otelcol-gpu.consoleEnv" -}}
# The fault console (distributions/gateway/console.yaml, then the chart's
# console-tls.yaml): HTTPS, its token from Secret gateway.console.tokenSecret.
{{- if .Values.gateway.console.bindPodIP }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: OTELCOL_GPU_CONSOLE_ENDPOINT
  value: "[$(POD_IP)]:{{ int .Values.gateway.console.port }}"
{{- else }}
- name: OTELCOL_GPU_CONSOLE_ENDPOINT
  value: "0.0.0.0:{{ int .Values.gateway.console.port }}"
{{- end }}
- name: OTELCOL_GPU_CONSOLE_TOKEN_FILE
  value: /etc/otelcol-gpu/console/token
# What this replica advertises to the others in the gpu_faults group: a
# standby's console and otelcol-gpu-ctl point at the owner's.
- name: OTELCOL_GPU_CONSOLE_ADVERTISE_URL
  value: "https://$(KAFKA_GROUP_INSTANCE_ID).otelcol-gpu-gateway.{{ .Release.Namespace }}.svc:{{ int .Values.gateway.console.port }}"
{{- with .Values.gateway.console.traceURL }}
- name: OTELCOL_GPU_CONSOLE_TRACE_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.gateway.console.logsURL }}
- name: OTELCOL_GPU_CONSOLE_LOGS_URL
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- define "otelcol-gpu.consoleVolume" -}}
# The console's token, a directory (a rotated Secret reaches the file; the
# console reads it at start), readable by the gateway's group only.
- name: console-token
  secret:
    secretName: {{ .Values.gateway.console.tokenSecret }}
    defaultMode: 0440
    items:
      - {key: token, path: token}
# Its certificate and key (gateway.console.tls), readable by the gateway's
# group only.
- name: console-tls
  secret:
    secretName: {{ include "otelcol-gpu.consoleTLSSecret" . }}
    defaultMode: 0440
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
{{- if include "otelcol-gpu.consoleForward" . }}
# The CA a standby verifies the owner's console against before it forwards
# a control with the caller's token (gateway.console.forward.caSecret).
- name: console-forward-ca
  secret:
    secretName: {{ include "otelcol-gpu.consoleForwardCASecret" . }}
    defaultMode: 0440
    items:
      - {key: {{ .Values.gateway.console.forward.caSecret.key }}, path: ca.crt}
{{- end }}
{{- end }}

{{/*
A ServiceMonitor endpoint's scrape settings from .sm (serviceMonitor or
agent.prometheusEndpoint.serviceMonitor), with the job label .job first
among the relabelings: the rules and dashboards select it.
*/}}
{{- define "otelcol-gpu.serviceMonitorEndpoint" -}}
interval: {{ .sm.interval }}
{{- with .sm.scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- if .sm.honorLabels }}
honorLabels: true
{{- end }}
relabelings:
  # The job the rules and dashboards expect, not the Service's name.
  - action: replace
    targetLabel: job
    replacement: {{ .job }}
  {{- with .sm.relabelings }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .sm.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
agent.mode standalone: the agent runs distributions/agent/standalone.yaml
alone (step 1 of adoption: dcgm-exporter's page and node-local fault
records, no Kafka, no gateway, no queue); the gateway is not rendered.
"true" or empty; the checks fail naming the value that cannot go with it.
*/}}
{{- define "otelcol-gpu.standalone" -}}
{{- $mode := .Values.agent.mode | default "pipeline" -}}
{{- if not (has $mode (list "pipeline" "standalone")) -}}
{{- fail (printf "agent.mode: %q is neither pipeline nor standalone" $mode) -}}
{{- end -}}
{{- if eq $mode "standalone" -}}
{{- if .Values.smallCluster.enabled -}}
{{- fail "agent.mode: standalone sends nowhere; smallCluster.enabled sends to a central gateway: choose one (standalone is step 1, small-cluster or Kafka step 2)" -}}
{{- end -}}
{{- if .Values.agent.otlp.auth.enabled -}}
{{- fail "agent.otlp.auth.enabled: standalone.yaml has no OTLP receiver (agent.mode standalone)" -}}
{{- end -}}
{{- if .Values.agent.dcgm.podLabels -}}
{{- fail "agent.dcgm.podLabels: standalone.yaml's page has no pod attribution (agent.mode standalone); it needs agent.mode pipeline with agent.prometheusEndpoint" -}}
{{- end -}}
{{- if .Values.agent.dcgm.collectorsForMainPipeline -}}
{{- fail "agent.dcgm.collectorsForMainPipeline: there is no main pipeline in agent.mode standalone (agent.dcgm.collectorsCSV chooses the page's fields)" -}}
{{- end -}}
true
{{- end -}}
{{- end }}
{{/* "true" when the gateway objects are rendered: gateway.enabled, not standalone. */}}
{{- define "otelcol-gpu.gatewayEnabled" -}}
{{- if and .Values.gateway.enabled (not (include "otelcol-gpu.standalone" .)) }}true{{ end -}}
{{- end }}
{{- define "otelcol-gpu.agentEnabled" -}}
{{- if .Values.agent.enabled }}true{{ end -}}
{{- end }}
{{/* "true" when the agents serve dcgm-exporter's page: always in standalone. */}}
{{- define "otelcol-gpu.agentPage" -}}
{{- if or .Values.agent.prometheusEndpoint.enabled (include "otelcol-gpu.standalone" .) }}true{{ end -}}
{{- end }}
