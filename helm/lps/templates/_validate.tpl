{{/*
Render-time guards: settings that are each valid alone but wrong together. Included once
from the coordinator Deployment so every render runs them.
*/}}
{{- define "lps.validate" -}}
{{- $v := .Values -}}
{{- /* Drain contract: the kubelet must not SIGKILL a node that is still draining. */ -}}
{{- $drain := include "lps.durationSeconds" (dict "name" "crawlerNode.drainTimeout" "value" $v.crawlerNode.drainTimeout) | int -}}
{{- $grace := int $v.crawlerNode.terminationGracePeriodSeconds -}}
{{- if le $grace $drain -}}
{{- fail (printf "crawlerNode.terminationGracePeriodSeconds (%d) must exceed crawlerNode.drainTimeout (%s = %ds): a draining node would be killed mid-job. Leave a margin, e.g. drain 240s / grace 300." $grace $v.crawlerNode.drainTimeout $drain) -}}
{{- end -}}
{{- /* Lease contract: a silent node's jobs are reclaimed before their leases run out
       (5 heartbeats of 5 s + the grace + a 1 s reaper pass), or the coordinator refuses to start. */ -}}
{{- $nodeGrace := include "lps.durationSeconds" (dict "name" "coordinator.nodeGrace" "value" $v.coordinator.nodeGrace) | int -}}
{{- $leaseTtl := include "lps.durationSeconds" (dict "name" "coordinator.leaseTtl" "value" $v.coordinator.leaseTtl) | int -}}
{{- if lt $leaseTtl (add 26 $nodeGrace | int) -}}
{{- fail (printf "coordinator.leaseTtl (%s) must be at least 5 heartbeats (25s) + coordinator.nodeGrace (%s) + 1s = %ds: a node that goes silent must have its jobs reclaimed before their leases run out." $v.coordinator.leaseTtl $v.coordinator.nodeGrace (add 26 $nodeGrace | int)) -}}
{{- end -}}
{{- /* The coordinator exits within 30 s of SIGTERM, after the preStop sleep. */ -}}
{{- $cgrace := int $v.coordinator.terminationGracePeriodSeconds -}}
{{- $cneed := add (int $v.coordinator.preStopSleepSeconds) 30 -}}
{{- if le $cgrace $cneed -}}
{{- fail (printf "coordinator.terminationGracePeriodSeconds (%d) must exceed preStopSleepSeconds + 30 s shutdown (%d)" $cgrace $cneed) -}}
{{- end -}}
{{- $_ := include "lps.durationSeconds" (dict "name" "coordinator.nodeGrace" "value" $v.coordinator.nodeGrace) -}}
{{- $_ := include "lps.durationSeconds" (dict "name" "coordinator.jobDeadline" "value" $v.coordinator.jobDeadline) -}}
{{- $a := $v.autoscaling -}}
{{- if ne $a.mode "none" -}}
{{- if gt (int $a.minReplicas) (int $a.maxReplicas) -}}
{{- fail (printf "autoscaling.minReplicas (%d) exceeds autoscaling.maxReplicas (%d)" (int $a.minReplicas) (int $a.maxReplicas)) -}}
{{- end -}}
{{- if and (eq $a.mode "hpa") (lt (int $a.minReplicas) 1) -}}
{{- fail "autoscaling.minReplicas must be >= 1 with mode hpa (a plain HPA cannot scale to zero; use mode keda)" -}}
{{- end -}}
{{- end -}}
{{- if $v.tls.enabled -}}
{{- $_ := required "tls.existingSecret is required when tls.enabled (a kubernetes.io/tls Secret)" $v.tls.existingSecret -}}
{{- if eq (include "lps.coordinator.readinessType" .) "grpc" -}}
{{- fail "coordinator.probes.readiness.type=grpc cannot be used with tls.enabled (kubelet gRPC probes speak plaintext); use auto or http" -}}
{{- end -}}
{{- else if $v.tls.clientCA.enabled -}}
{{- fail "tls.clientCA.enabled requires tls.enabled" -}}
{{- end -}}
{{- if and $v.llm.baseUrl (not $v.llm.model) -}}
{{- fail "llm.model is required when llm.baseUrl is set (LPS_LLM_MODEL)" -}}
{{- end -}}
{{- if $v.llm.baseUrl -}}
{{- $_ := include "lps.durationSeconds" (dict "name" "llm.timeout" "value" (default "20s" $v.llm.timeout)) -}}
{{- end -}}
{{- if and $v.profiles $v.profilesConfigMap -}}
{{- fail "set either profiles or profilesConfigMap, not both" -}}
{{- end -}}
{{- if and $v.vocabulary $v.vocabularyConfigMap -}}
{{- fail "set either vocabulary or vocabularyConfigMap, not both" -}}
{{- end -}}
{{- if $v.secrets.create -}}
{{- range $item := list "databaseUrl" "clientTokens" "adminTokens" "nodeToken" "proxyPassword" "llmApiKey" "alertWebhookUrl" -}}
{{- $ref := index $v.secrets.refs $item -}}
{{- if and (not $ref.name) (not $ref.optional) (not (index $v.secrets.values $item)) -}}
{{- fail (printf "secrets.create=true: secrets.values.%s is required (or mark secrets.refs.%s.optional)" $item $item) -}}
{{- end -}}
{{- end -}}
{{- if and (not $v.secrets.refs.nodeTokens.name) (not $v.secrets.refs.nodeTokens.optional) (not (or $v.secrets.values.nodeTokens $v.secrets.values.nodeToken)) -}}
{{- fail "secrets.create=true: secrets.values.nodeTokens (or nodeToken) is required" -}}
{{- end -}}
{{- end -}}
{{- end -}}
