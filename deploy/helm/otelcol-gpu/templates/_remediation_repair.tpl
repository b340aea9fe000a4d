{{- /*
The gateway side of the repair loop (remediation.repair; exporter/
remediationexporter README, "Repair loop"): the REMEDIATION_REPAIR*
variables distributions/gateway/config.yaml reads, the private key that
signs the requests and the CA of the agents' certificates. The check
fails the render naming the value rather than render a gateway that
refuses to start or asks agents that are not listening.
*/ -}}
{{- define "otelcol-gpu.remediationRepairCheck" -}}
{{- $r := .Values.remediation.repair }}
{{- if $r.enabled }}
{{- if not .Values.agent.repair.enabled }}
{{- fail "remediation.repair.enabled: the loop asks each node's agent to reset, verify and confirm: set agent.repair.enabled too (the agents' repair endpoint)" }}
{{- end }}
{{- if not .Values.agent.repair.tls.secretName }}
{{- fail "remediation.repair.enabled: the gateway reaches the agents over HTTPS only: set agent.repair.tls.secretName (a kubernetes.io/tls Secret for the agents' repair endpoint) and remediation.repair.agentCA.secretName (its CA)" }}
{{- end }}
{{- if not $r.privateKey.secretName }}
{{- fail "remediation.repair.privateKey.secretName: the Secret with the gateway's Ed25519 private key (openssl genpkey -algorithm ed25519 -out gateway.key) is required" }}
{{- end }}
{{- if not $r.privateKey.secretKey }}
{{- fail "remediation.repair.privateKey.secretKey: name the Secret's key holding the private key (gateway.key)" }}
{{- end }}
{{- if and $r.agentCA.secretName (not $r.agentCA.secretKey) }}
{{- fail "remediation.repair.agentCA.secretKey: name the Secret's key holding the CA certificate (ca.crt)" }}
{{- end }}
{{- end }}
{{- end }}
{{- define "otelcol-gpu.remediationRepairEnv" -}}
{{- $r := .Values.remediation.repair }}
# The repair loop (remediation.repair): the agents' repair port
# (agent.repair.port, HTTPS), the key that signs the requests and the CA
# their certificates are verified with.
- name: REMEDIATION_REPAIR
  value: "true"
- name: REMEDIATION_REPAIR_AGENT_PORT
  value: {{ .Values.agent.repair.port | toString | quote }}
- name: REMEDIATION_REPAIR_PRIVATE_KEY_FILE
  value: /etc/otelcol-gpu-repair-key/gateway.key
{{- if $r.agentCA.secretName }}
- name: REMEDIATION_REPAIR_AGENT_CA_FILE
  value: /etc/otelcol-gpu-repair-ca/ca.crt
{{- end }}
{{- with $r.agentServerName }}
- name: REMEDIATION_REPAIR_AGENT_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- define "otelcol-gpu.remediationRepairMounts" -}}
- {name: repair-private-key, mountPath: /etc/otelcol-gpu-repair-key, readOnly: true}
{{- if .Values.remediation.repair.agentCA.secretName }}
- {name: repair-agent-ca, mountPath: /etc/otelcol-gpu-repair-ca, readOnly: true}
{{- end }}
{{- end }}
{{- define "otelcol-gpu.remediationRepairVolumes" -}}
{{- $r := .Values.remediation.repair }}
# The gateway's repair signing key (remediation.repair.privateKey),
# readable by the gateway's group only.
- name: repair-private-key
  secret:
    secretName: {{ $r.privateKey.secretName }}
    defaultMode: 0440
    items:
      - {key: {{ $r.privateKey.secretKey }}, path: gateway.key}
{{- if $r.agentCA.secretName }}
# The CA of the agents' repair certificates (remediation.repair.agentCA).
- name: repair-agent-ca
  secret:
    secretName: {{ $r.agentCA.secretName }}
    defaultMode: 0440
    items:
      - {key: {{ $r.agentCA.secretKey }}, path: ca.crt}
{{- end }}
{{- end }}
