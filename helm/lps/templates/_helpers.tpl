{{/* Chart name. */}}
{{- define "lps.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: release name, or release-chart when the release name lacks the chart name. */}}
{{- define "lps.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "lps.coordinator.fullname" -}}
{{- printf "%s-coordinator" (include "lps.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "lps.coordinator.grpcService" -}}
{{- printf "%s-coordinator-grpc" (include "lps.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "lps.coordinator.httpService" -}}
{{- printf "%s-coordinator-http" (include "lps.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "lps.crawlerNode.fullname" -}}
{{- printf "%s-crawler-node" (include "lps.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The crawler nodes' workload kind: a StatefulSet when each replica keeps its browser
profiles in its own volume claim (crawlerNode.persistentProfiles.enabled). */}}
{{- define "lps.crawlerNode.kind" -}}
{{- ternary "StatefulSet" "Deployment" .Values.crawlerNode.persistentProfiles.enabled -}}
{{- end -}}

{{- define "lps.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Common labels; call with (dict "ctx" $ "component" "coordinator"). */}}
{{- define "lps.labels" -}}
helm.sh/chart: {{ include "lps.chart" .ctx }}
{{ include "lps.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: lps
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "lps.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lps.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{- define "lps.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lps.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Image reference; call with (dict "ctx" $ "image" .Values.coordinator.image). */}}
{{- define "lps.image" -}}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* Name of the chart-created Secret. */}}
{{- define "lps.secretName" -}}
{{- printf "%s-secrets" (include "lps.fullname" .) -}}
{{- end -}}

{{/* Secret name for one ref; call with (dict "ctx" $ "ref" .Values.secrets.refs.databaseUrl). */}}
{{- define "lps.refSecretName" -}}
{{- if .ref.name -}}
{{- .ref.name -}}
{{- else if .ctx.Values.secrets.create -}}
{{- include "lps.secretName" .ctx -}}
{{- else -}}
{{- required "secrets.existingSecret is required (or secrets.create=true for a trial)" .ctx.Values.secrets.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* One env entry from a secret ref; call with (dict "ctx" $ "env" "DATABASE_URL" "ref" ...). */}}
{{- define "lps.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "lps.refSecretName" (dict "ctx" .ctx "ref" .ref) }}
      key: {{ .ref.key }}
      {{- if .ref.optional }}
      optional: true
      {{- end }}
{{- end -}}

{{/*
Seconds in a duration string as the services parse it (`240s`, `4m`, `1h30m`, `500ms`),
rounded up. Fails on anything else, naming the value.
*/}}
{{- define "lps.durationSeconds" -}}
{{- $d := toString .value | trim -}}
{{- if not (regexMatch "^([0-9]+(ms|s|m|h))+$" $d) -}}
{{- fail (printf "%s: %q is not a duration (use e.g. 240s, 4m, 1h30m)" .name $d) -}}
{{- end -}}
{{- $ms := 0 -}}
{{- range regexFindAll "[0-9]+(ms|s|m|h)" $d -1 -}}
{{- $n := regexFind "^[0-9]+" . | int -}}
{{- $unit := trimPrefix (regexFind "^[0-9]+" .) . -}}
{{- if eq $unit "ms" }}{{ $ms = add $ms $n }}
{{- else if eq $unit "s" }}{{ $ms = add $ms (mul $n 1000) }}
{{- else if eq $unit "m" }}{{ $ms = add $ms (mul $n 60000) }}
{{- else }}{{ $ms = add $ms (mul $n 3600000) }}
{{- end -}}
{{- end -}}
{{- div (add $ms 999) 1000 -}}
{{- end -}}

{{/* OTEL_* env for one service; call with (dict "ctx" $ "service" "lps-coordinator"). */}}
{{- define "lps.otelEnv" -}}
{{- $o := .ctx.Values.otel -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- if $o.enabled }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $o.endpoint | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ .service | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $o.sampler | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $o.samplerArg | toString | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),service.version=%s%s" .ctx.Chart.AppVersion (ternary (printf ",%s" $o.resourceAttributes) "" (ne $o.resourceAttributes "")) | quote }}
{{- end }}
{{- end -}}

{{/* Container securityContext: defaults, each top-level key replaceable from values. */}}
{{- define "lps.containerSecurityContext" -}}
{{- $base := dict "runAsNonRoot" true "runAsUser" 10001 "runAsGroup" 10001 "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- range $k, $v := . }}{{ $_ := set $base $k $v }}{{ end -}}
{{- toYaml $base -}}
{{- end -}}

{{- define "lps.podSecurityContext" -}}
{{- $base := dict "runAsNonRoot" true "runAsUser" 10001 "runAsGroup" 10001 "fsGroup" 10001 "fsGroupChangePolicy" "OnRootMismatch" "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- range $k, $v := . }}{{ $_ := set $base $k $v }}{{ end -}}
{{- toYaml $base -}}
{{- end -}}

{{/* Readiness probe type of the coordinator after resolving `auto`. */}}
{{- define "lps.coordinator.readinessType" -}}
{{- $t := .Values.coordinator.probes.readiness.type -}}
{{- if eq $t "auto" -}}
{{- ternary "http" "grpc" .Values.tls.enabled -}}
{{- else -}}
{{- $t -}}
{{- end -}}
{{- end -}}

{{/* Node-facing coordinator URL. */}}
{{- define "lps.coordinatorUrl" -}}
{{- if .Values.crawlerNode.coordinatorUrl -}}
{{- .Values.crawlerNode.coordinatorUrl -}}
{{- else -}}
{{- printf "%s://%s:%d" (ternary "https" "http" .Values.tls.enabled) (include "lps.coordinator.grpcService" .) (int .Values.coordinator.grpcPort) -}}
{{- end -}}
{{- end -}}

{{/* Profiles ConfigMap name ("" when none). */}}
{{- define "lps.profilesConfigMap" -}}
{{- if .Values.profilesConfigMap -}}
{{- .Values.profilesConfigMap -}}
{{- else if .Values.profiles -}}
{{- printf "%s-profiles" (include "lps.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
Name of the ConfigMap holding the vocabulary file (key vocabulary.toml); empty when the
built-in vocabulary is used.
*/}}
{{- define "lps.vocabularyConfigMap" -}}
{{- if .Values.vocabularyConfigMap -}}
{{- .Values.vocabularyConfigMap -}}
{{- else if .Values.vocabulary -}}
{{- printf "%s-vocabulary" (include "lps.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
NetworkPolicy ports for proxy.ports ("10000-10099", "10000,10005-10010").
*/}}
{{- define "lps.proxyPolicyPorts" -}}
{{- range $part := splitList "," (toString .Values.proxy.ports) }}
{{- $p := trim $part }}
{{- if regexMatch "^[0-9]+-[0-9]+$" $p }}
{{- $lo := regexFind "^[0-9]+" $p | int }}
{{- $hi := regexFind "[0-9]+$" $p | int }}
{{- if gt $lo $hi }}{{ fail (printf "proxy.ports: range %q is reversed" $p) }}{{ end }}
- protocol: TCP
  port: {{ $lo }}
  {{- if ne $lo $hi }}
  endPort: {{ $hi }}
  {{- end }}
{{- else if regexMatch "^[0-9]+$" $p }}
- protocol: TCP
  port: {{ $p | int }}
{{- else }}
{{- fail (printf "proxy.ports: %q is neither a port nor a range like 10000-10099" $p) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Checksum of the chart-managed config that every pod must restart on: the secrets.
Site profiles are not in it: the coordinator watches its profile directory and sends an
edit to the connected nodes without a restart (DESIGN §5 "Profile revisions"), so a profile
fix neither drains the nodes nor restarts the coordinator. */}}
{{- define "lps.configChecksum" -}}
{{- $parts := list -}}
{{- if .Values.secrets.create -}}
{{- $parts = append $parts (toJson .Values.secrets.values) -}}
{{- end -}}
{{- join "|" $parts | sha256sum -}}
{{- end -}}

{{/* Checksum of what the coordinator reads only at start-up: the vocabulary file (nodes
get the vocabulary from the coordinator, so they do not restart on it). */}}
{{- define "lps.vocabularyChecksum" -}}
{{- toJson .Values.vocabulary | sha256sum -}}
{{- end -}}

{{/*
KEDA query: the number of crawler-node slots wanted right now; KEDA divides it by
targetQueryValue (= LPS_NODE_SLOTS) into a node count. It follows the claim rules in
coordinator/src/queue/sql/claim.sql (enabled mall, run_after passed, per-mall max_running)
so that nodes are only added for jobs that could start now.
*/}}
{{- define "lps.keda.query" -}}
{{- $k := .Values.autoscaling.keda -}}
{{- $cap := float64 .Values.coordinator.spendCapHourlyUsd -}}
{{- if $k.query -}}
{{- $k.query | trim -}}
{{- else -}}
-- slots wanted = running jobs (their nodes must stay)
--   + queued jobs a claim could take now, by the claim's own rules (queue/sql/claim.sql):
--     past run_after (a retry's backoff, a hand-back's not_before), of an enabled mall,
--     within the mall's cap on running jobs (max_running; null = no cap), not of a mall
--     whose spend over the last hour reached its spend_cap_hourly_usd,
{{- if gt $cap 0.0 }}
--     none at all while the deployment's spend over the last hour reached
--     LPS_SPEND_CAP_HOURLY_USD ({{ $cap }}, coordinator.spendCapHourlyUsd),
{{- end }}
--     and with a proxy ledger (any enabled port) no more for a mall than its ports not
--     cooling for it, and in all than the ports not cooling, less the running jobs
{{- if $k.capByProxyPorts }}
--     and, all together, no more than the proxy ports available now (enabled, and not
--     leased, resting or cooling down): a node added beyond that would only wait for an IP.
{{- end }}
with running as (
    select mall, count(*) as n from job where state = 'running' group by mall
),
ports as (
    select count(*) as enabled,
           count(*) filter (where cooldown_until is null or cooldown_until <= now()) as usable
    from proxy_port where enabled
),
room as (
    select m.mall_id,
           case when m.max_running is null then null
                else greatest(m.max_running - coalesce(r.n, 0), 0) end as cap_room,
           case when ports.enabled = 0 then null
                else greatest(ports.usable - coalesce(r.n, 0)
                     - (select count(*) from proxy_port_cooldown c
                        join proxy_port p on p.host = c.host and p.port = c.port
                        where c.mall = m.mall_id and c.cooldown_until > now() and p.enabled
                          and (p.cooldown_until is null or p.cooldown_until <= now())), 0)
           end as port_room
    from mall m
    cross join ports
    left join running r on r.mall = m.mall_id
    where m.enabled
      and (m.spend_cap_hourly_usd is null
           or coalesce((select sum(s.cost_usd) from spend_minute s
                        where s.mall = m.mall_id and s.minute > now() - interval '1 hour'), 0)
              < m.spend_cap_hourly_usd)
),
startable as (
    select least(coalesce(sum(least(q.n, coalesce(rm.cap_room, q.n), coalesce(rm.port_room, q.n))), 0),
                 (select case when enabled = 0 then null
                              else greatest(usable - (select coalesce(sum(n), 0) from running), 0) end
                  from ports)) as n
    from (select mall, count(*) as n from job
          where state = 'queued' and run_after <= now() group by mall) q
    join room rm on rm.mall_id = q.mall
{{- if gt $cap 0.0 }}
    where coalesce((select sum(cost_usd) from spend_minute
                    where minute > now() - interval '1 hour'), 0) < {{ $cap }}
{{- end }}
){{ if $k.capByProxyPorts }},
available_ports as (
    select count(*) as n from proxy_port
    where enabled
      and (leased_until is null or leased_until <= now())
      and (rest_until is null or rest_until <= now())
      and (cooldown_until is null or cooldown_until <= now())
){{ end }}
select ((select coalesce(sum(n), 0) from running)
        + {{ if $k.capByProxyPorts }}least((select n from startable), (select n from available_ports)){{ else }}(select n from startable){{ end }})::float8
{{- end -}}
{{- end -}}
