#!/usr/bin/env bash
# Checks the Helm chart helm/lps, offline, from any working directory:
#   - helm lint --strict and helm template for the default values and every
#     helm/lps/ci/*-values.yaml (full-values.yaml turns every feature on);
#   - the rendered built-in kinds against the Kubernetes OpenAPI schemas
#     (kubernetes-validate --strict, pinned Kubernetes versions);
#   - the CRD kinds it renders (KEDA ScaledObject/TriggerAuthentication, ServiceMonitor)
#     structurally, including their references to rendered Deployments/Services/Secrets;
#   - the runtime contracts: crawler-node terminationGracePeriodSeconds > LPS_DRAIN_TIMEOUT,
#     coordinator grace > preStop + 30 s, /dev/shm, non-root, migrations hook, and with
#     persistentProfiles a StatefulSet whose profiles are a claim per replica;
#   - that the guards fail when they should (typo'd values, grace <= drain, ...).
# Gets helm (into .tools/bin) and kubernetes-validate (into .tools/python) when missing,
# and promtool (apt-get, scripts/lib/checkers.sh): without it the rules check fails under
# CI=true and warns elsewhere.
# Exit status is non-zero on any failure; the last line is the summary.
#
#   scripts/check-helm.sh            # HELM=/path/to/helm to use another helm
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHART="$ROOT/helm/lps"
# Oldest supported (Chart.yaml kubeVersion) and a current release.
K8S_VERSIONS=(1.29.0 1.35.0)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

say() { printf '%s\n' "$*"; }
die() { say "check-helm: $*" >&2; say "helm checks: $passed passed, $((failed + 1)) failed"; exit 1; }

# check NAME CMD...: run CMD, count it, show its output only when it fails.
check() {
  local name=$1; shift
  if "$@" >"$work/log" 2>&1; then
    passed=$((passed + 1)); say "ok    $name"
  else
    failed=$((failed + 1)); say "FAIL  $name"; sed -e 's/^/      /' "$work/log" | head -n 60
  fi
}

# expect_failure NAME PATTERN CMD...: CMD must fail with output matching PATTERN.
expect_failure() {
  local name=$1 pattern=$2; shift 2
  if "$@" >"$work/log" 2>&1; then
    failed=$((failed + 1)); say "FAIL  $name (succeeded, should have failed)"
  elif grep -Eq -- "$pattern" "$work/log"; then
    passed=$((passed + 1)); say "ok    $name"
  else
    failed=$((failed + 1)); say "FAIL  $name (failed without /$pattern/):"
    sed -e 's/^/      /' "$work/log" | head -n 20
  fi
}

# --- tools -------------------------------------------------------------------------------
source "$ROOT/scripts/lib/chart-tools.sh"
source "$ROOT/scripts/lib/checkers.sh"
lps_chart_tools_ensure "$ROOT" 2>"$work/log" || { cat "$work/log" >&2; die "chart tools unavailable"; }
[[ -s "$work/log" ]] && cat "$work/log"
say "helm $("$HELM" version --short 2>/dev/null), kubernetes-validate $(python3 -c \
  'import kubernetes_validate.version as v; print(v.__version__)'), Kubernetes ${K8S_VERSIONS[*]}"

# --- python helpers ------------------------------------------------------------------------
cat >"$work/checks.py" <<'PY'
"""Split rendered manifests; check CRD kinds structurally; check runtime contracts."""
import json, re, sys
import yaml
import kubernetes_validate as kv

CRDS = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("keda.sh/v1alpha1", "TriggerAuthentication"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h))+$")


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def seconds(text):
    text = str(text).strip()
    if not DURATION.match(text):
        raise ValueError(f"not a duration: {text!r}")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(n) * scale[u] for n, u in re.findall(r"(\d+)(ms|s|m|h)", text))


def split(rendered, builtin_out, crd_out):
    """Known CRD kinds to one file, everything else to another: kubernetes-validate then
    rejects any kind there it has no schema for (a typo'd apiVersion, an unknown CRD)."""
    builtin, crds = [], []
    for d in load(rendered):
        (crds if (d.get("apiVersion"), d.get("kind")) in CRDS else builtin).append(d)
    for path, docs in ((builtin_out, builtin), (crd_out, crds)):
        with open(path, "w") as f:
            yaml.safe_dump_all(docs, f, sort_keys=False)
    print(f"{len(builtin)} built-in, {len(crds)} CRD objects")


class Checker:
    def __init__(self, path):
        self.docs = load(path)
        self.errors = []

    def err(self, obj, msg):
        name = obj.get("metadata", {}).get("name", "?") if isinstance(obj, dict) else "?"
        self.errors.append(f"{obj.get('kind', '?')}/{name}: {msg}")

    def of(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def names(self, kind):
        return {d["metadata"]["name"] for d in self.of(kind)}

    def only(self, obj, where, allowed):
        if not isinstance(where, dict):
            self.err(obj, f"expected a mapping, got {type(where).__name__}")
            return False
        extra = set(where) - set(allowed)
        if extra:
            self.err(obj, f"unknown fields {sorted(extra)}")
        return True

    # -- CRD kinds ------------------------------------------------------------------------
    def crds(self, k8s_version):
        for d in self.docs:
            if (d.get("apiVersion"), d.get("kind")) not in CRDS:
                continue
            meta = d.get("metadata") or {}
            if not meta.get("name"):
                self.err(d, "metadata.name missing")
            self.only(d, d, {"apiVersion", "kind", "metadata", "spec"})
            if not isinstance(d.get("spec"), dict):
                self.err(d, "spec missing")
                continue
            getattr(self, "crd_" + d["kind"])(d, d["spec"], k8s_version)

    def crd_PrometheusRule(self, d, spec, k8s_version):
        self.only(d, spec, {"groups"})
        for g in spec.get("groups") or []:
            self.only(d, g, {"name", "interval", "rules"})
            for r in g.get("rules") or []:
                self.only(d, r, {"alert", "record", "expr", "for", "labels", "annotations"})
                if not r.get("expr"):
                    self.err(d, f"rule {r.get('alert')} has no expr")
                if "for" in r and not DURATION.match(str(r["for"])):
                    self.err(d, f"rule {r.get('alert')} for {r['for']!r}")

    def rules(self, out):
        """The PrometheusRules' groups as a Prometheus rule file, for promtool check rules."""
        groups = [g for d in self.of("PrometheusRule") for g in d["spec"]["groups"]]
        if not groups:
            self.errors.append("no PrometheusRule rendered")
        with open(out, "w") as f:
            yaml.safe_dump({"groups": groups}, f, sort_keys=False)
        print(f"{sum(len(g['rules']) for g in groups)} rules in {len(groups)} groups")

    def crd_ScaledObject(self, d, spec, k8s_version):
        self.only(d, spec, {"scaleTargetRef", "pollingInterval", "cooldownPeriod",
                            "initialCooldownPeriod", "idleReplicaCount", "minReplicaCount",
                            "maxReplicaCount", "fallback", "advanced", "triggers"})
        ref = spec.get("scaleTargetRef") or {}
        self.only(d, ref, {"apiVersion", "kind", "name", "envSourceContainerName"})
        kind = ref.get("kind", "Deployment")
        if kind not in ("Deployment", "StatefulSet") or ref.get("name") not in self.names(kind):
            self.err(d, f"scaleTargetRef {ref} is not a rendered Deployment or StatefulSet")
        for k in ("pollingInterval", "cooldownPeriod", "minReplicaCount", "maxReplicaCount"):
            if k in spec and (not isinstance(spec[k], int) or spec[k] < 0):
                self.err(d, f"{k} must be a non-negative integer")
        lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        if isinstance(lo, int) and isinstance(hi, int) and not (hi >= 1 and lo <= hi):
            self.err(d, f"minReplicaCount {lo} / maxReplicaCount {hi}")
        fb = spec.get("fallback")
        if fb is not None:
            self.only(d, fb, {"failureThreshold", "replicas", "behavior"})
            if not all(isinstance(fb.get(k), int) for k in ("failureThreshold", "replicas")):
                self.err(d, "fallback needs integer failureThreshold and replicas")
        adv = spec.get("advanced") or {}
        self.only(d, adv, {"restoreToOriginalReplicaCount", "horizontalPodAutoscalerConfig", "scalingModifiers"})
        hpa_cfg = adv.get("horizontalPodAutoscalerConfig") or {}
        self.only(d, hpa_cfg, {"name", "behavior"})
        if "behavior" in hpa_cfg:  # same type as an HPA's behavior: validate it as one
            probe = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                     "metadata": {"name": "probe"},
                     "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "x"}, "maxReplicas": 1,
                              "behavior": hpa_cfg["behavior"]}}
            try:
                kv.validate(probe, k8s_version, strict=True)
            except kv.ValidationError as e:
                self.err(d, f"advanced.horizontalPodAutoscalerConfig.behavior: {e.message}")
        triggers = spec.get("triggers")
        if not isinstance(triggers, list) or not triggers:
            self.err(d, "triggers must be a non-empty list")
            return
        auths = self.names("TriggerAuthentication")
        for i, t in enumerate(triggers):
            self.only(d, t, {"type", "name", "metadata", "authenticationRef", "metricType", "useCachedMetrics"})
            md = t.get("metadata")
            if not isinstance(t.get("type"), str) or not isinstance(md, dict):
                self.err(d, f"triggers[{i}] needs type and metadata")
                continue
            bad = [k for k, v in md.items() if not isinstance(v, str)]
            if bad:
                self.err(d, f"triggers[{i}].metadata values must be strings: {bad}")
            if t.get("metricType", "AverageValue") not in ("AverageValue", "Value", "Utilization"):
                self.err(d, f"triggers[{i}].metricType {t.get('metricType')!r}")
            ar = t.get("authenticationRef")
            if ar is not None and ar.get("kind", "TriggerAuthentication") == "TriggerAuthentication" \
                    and ar.get("name") not in auths:
                self.err(d, f"triggers[{i}].authenticationRef {ar} is not a rendered TriggerAuthentication")
            if t["type"] == "postgresql":
                if not str(md.get("query", "")).strip():
                    self.err(d, f"triggers[{i}]: postgresql needs a query")
                try:
                    if float(md.get("targetQueryValue", "0")) <= 0:
                        raise ValueError
                    float(md.get("activationTargetQueryValue", "0"))
                except ValueError:
                    self.err(d, f"triggers[{i}]: targetQueryValue must be a number > 0")
                if ar is None and not ({"connectionFromEnv", "host"} & set(md)):
                    self.err(d, f"triggers[{i}]: postgresql needs a connection (authenticationRef, connectionFromEnv or host)")

    def crd_TriggerAuthentication(self, d, spec, _v):
        self.only(d, spec, {"secretTargetRef", "env", "podIdentity", "hashiCorpVault",
                            "azureKeyVault", "awsSecretManager", "gcpSecretManager", "configMapTargetRef"})
        refs = spec.get("secretTargetRef")
        if not isinstance(refs, list) or not refs:
            self.err(d, "secretTargetRef must be a non-empty list")
            return
        for i, r in enumerate(refs):
            self.only(d, r, {"parameter", "name", "key"})
            if not all(isinstance(r.get(k), str) and r[k] for k in ("parameter", "name", "key")):
                self.err(d, f"secretTargetRef[{i}] needs parameter, name and key")

    def crd_ServiceMonitor(self, d, spec, _v):
        self.only(d, spec, {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels",
                            "podTargetLabels", "sampleLimit", "attachMetadata"})
        match = (spec.get("selector") or {}).get("matchLabels")
        if not isinstance(match, dict) or not match:
            self.err(d, "selector.matchLabels required")
            return
        ns = (spec.get("namespaceSelector") or {}).get("matchNames")
        services = [s for s in self.of("Service")
                    if match.items() <= (s["metadata"].get("labels") or {}).items()
                    and (ns is None or s["metadata"].get("namespace", ns[0]) in ns)]
        if not services:
            self.err(d, f"selector {match} matches no rendered Service")
            return
        ports = {p.get("name") for s in services for p in s["spec"].get("ports", [])}
        eps = spec.get("endpoints")
        if not isinstance(eps, list) or not eps:
            self.err(d, "endpoints must be a non-empty list")
            return
        for i, ep in enumerate(eps):
            self.only(d, ep, {"port", "targetPort", "path", "scheme", "interval", "scrapeTimeout",
                              "honorLabels", "honorTimestamps", "relabelings", "metricRelabelings",
                              "tlsConfig", "bearerTokenSecret", "authorization", "params"})
            if ep.get("port") not in ports:
                self.err(d, f"endpoints[{i}].port {ep.get('port')!r} is not a port of {sorted(ports)}")
            for k in ("interval", "scrapeTimeout"):
                if k in ep and not re.match(r"^\d+(ms|s|m|h)$", str(ep[k])):
                    self.err(d, f"endpoints[{i}].{k} {ep[k]!r}")

    # -- runtime contracts ------------------------------------------------------------------
    def component(self, kind, comp):
        return [d for d in self.of(kind)
                if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == comp]

    def nodes(self):
        """The crawler nodes' workload: a Deployment, or a StatefulSet (persistentProfiles)."""
        return self.component("Deployment", "crawler-node") + self.component("StatefulSet", "crawler-node")

    def drain(self):
        nodes = self.nodes()
        if len(nodes) != 1:
            self.errors.append(f"expected one crawler-node Deployment or StatefulSet, found {len(nodes)}")
            return
        pod = nodes[0]["spec"]["template"]["spec"]
        grace = pod.get("terminationGracePeriodSeconds", 30)
        c = next(c for c in pod["containers"] if c["name"] == "crawler-node")
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        drain = seconds(env.get("LPS_DRAIN_TIMEOUT") or "240s")
        if not grace > drain:
            self.err(nodes[0], f"terminationGracePeriodSeconds {grace} must exceed LPS_DRAIN_TIMEOUT {drain:g}s")
        print(f"crawler-node: terminationGracePeriodSeconds {grace} > LPS_DRAIN_TIMEOUT {drain:g}s")

    def lease(self):
        """The coordinator refuses to start unless LPS_LEASE_TTL covers a silent node's way
        out: 5 x LPS_HEARTBEAT_INTERVAL + LPS_NODE_GRACE + LPS_REAP_INTERVAL."""
        for dep in self.component("Deployment", "coordinator"):
            c = dep["spec"]["template"]["spec"]["containers"][0]
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            hb = seconds(env.get("LPS_HEARTBEAT_INTERVAL") or "5s")
            grace = seconds(env.get("LPS_NODE_GRACE") or "15s")
            reap = seconds(env.get("LPS_REAP_INTERVAL") or "1s")
            ttl = seconds(env.get("LPS_LEASE_TTL") or "45s")
            need = 5 * hb + grace + reap
            if ttl < need:
                self.err(dep, f"LPS_LEASE_TTL {ttl:g}s must be at least 5 x heartbeat + grace + reaper = {need:g}s")
            print(f"coordinator: LPS_LEASE_TTL {ttl:g}s >= {need:g}s")

    def contracts(self):
        vols = lambda pod: {v["name"]: v for v in pod.get("volumes", [])}
        for dep in self.nodes():
            pod = dep["spec"]["template"]["spec"]
            c = pod["containers"][0]
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            shm = vols(pod).get(mounts.get("/dev/shm"), {})
            if shm.get("emptyDir", {}).get("medium") != "Memory":
                self.err(dep, "/dev/shm must be an emptyDir with medium Memory")
            prof_name = mounts.get("/var/lib/lps/profiles")
            prof = vols(pod).get(prof_name, {})
            claims = {t["metadata"]["name"]: t for t in dep["spec"].get("volumeClaimTemplates", [])}
            if dep["kind"] == "Deployment" and "emptyDir" not in prof:
                self.err(dep, "/var/lib/lps/profiles must be an emptyDir")
            if dep["kind"] == "StatefulSet":
                # Warm profiles survive a pod replacement: the mount is the replica's claim.
                if prof or prof_name not in claims:
                    self.err(dep, "/var/lib/lps/profiles must be a volumeClaimTemplate, not a pod volume")
                elif not claims[prof_name]["spec"].get("resources", {}).get("requests", {}).get("storage"):
                    self.err(dep, "the profiles claim requests no storage")
                headless = [x for x in self.of("Service")
                            if x["metadata"]["name"] == dep["spec"].get("serviceName")
                            and x["spec"].get("clusterIP") == "None"]
                if not headless:
                    self.err(dep, f"serviceName {dep['spec'].get('serviceName')!r} is no rendered headless Service")
                if dep["spec"].get("podManagementPolicy") != "Parallel":
                    self.err(dep, "nodes are interchangeable: podManagementPolicy must be Parallel")
            env = {e["name"] for e in c.get("env", [])}
            for name in ("LPS_COORDINATOR_URL", "LPS_NODE_TOKEN", "LPS_NODE_ID", "LPS_NODE_SLOTS",
                         "LPS_DRAIN_TIMEOUT", "LPS_PROFILE_ROOT", "LPS_CHROMIUM_PATH", "LPS_CHROMEDRIVER_PATH"):
                if name not in env:
                    self.err(dep, f"env {name} missing")
        for dep in self.component("Deployment", "coordinator"):
            pod = dep["spec"]["template"]["spec"]
            c = pod["containers"][0]
            pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
            sleep = int(pre[1]) if len(pre) == 2 and pre[0] == "sleep" else 0
            if not pod.get("terminationGracePeriodSeconds", 30) > sleep + 30:
                self.err(dep, "terminationGracePeriodSeconds must exceed preStop sleep + 30 s shutdown")
            env = {e["name"] for e in c.get("env", [])}
            for name in ("DATABASE_URL", "LPS_CLIENT_TOKENS", "LPS_NODE_TOKENS", "LPS_GRPC_ADDR", "LPS_HTTP_ADDR"):
                if name not in env:
                    self.err(dep, f"env {name} missing")
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if probe not in c:
                    self.err(dep, f"{probe} missing")
            values = {e["name"]: e.get("value") for e in c.get("env", [])}
            vocab = values.get("LPS_VOCABULARY_FILE")
            if vocab is not None:
                mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                vol = vols(pod).get(mounts.get(vocab.rsplit("/", 1)[0]), {})
                keys = [i.get("path") for i in vol.get("configMap", {}).get("items", [])]
                if vocab.rsplit("/", 1)[1] not in keys:
                    self.err(dep, f"LPS_VOCABULARY_FILE {vocab} is no file of a mounted ConfigMap")
        for dep in self.of("Deployment") + self.of("Job"):
            pod = dep["spec"]["template"]["spec"]
            for c in pod["containers"]:
                sc = {**pod.get("securityContext", {}), **c.get("securityContext", {})}
                if sc.get("runAsNonRoot") is not True or sc.get("allowPrivilegeEscalation") is not False:
                    self.err(dep, f"container {c['name']} must run as non-root without privilege escalation")
                if "resources" not in c:
                    self.err(dep, f"container {c['name']} has no resources")
        jobs = self.component("Job", "migrations")
        for job in jobs:
            ann = job["metadata"].get("annotations", {})
            if set(ann.get("helm.sh/hook", "").split(",")) != {"pre-install", "pre-upgrade"}:
                self.err(job, "must be a pre-install,pre-upgrade hook")
            if job["spec"]["template"]["spec"]["containers"][0].get("args") != ["migrate"]:
                self.err(job, "must run `coordinator migrate`")
        svc_ports = {(s["metadata"]["name"], p["port"]) for s in self.of("Service") for p in s["spec"]["ports"]}
        for hpa in self.of("HorizontalPodAutoscaler"):
            ref = hpa["spec"]["scaleTargetRef"]
            if ref.get("name") not in self.names(ref.get("kind", "")):
                self.err(hpa, f"scaleTargetRef {ref} is not a rendered workload")
        for dep in self.nodes():
            url = next((e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
                        if e["name"] == "LPS_COORDINATOR_URL"), "")
            m = re.match(r"^https?://([^:/.]+)(?:\.[^:/]*)?:(\d+)$", url or "")
            if m and (m.group(1), int(m.group(2))) not in svc_ports and self.component("Deployment", "coordinator"):
                self.err(dep, f"LPS_COORDINATOR_URL {url} names no rendered Service port")

    def vocabulary(self, path):
        """An inline vocabulary: its text in a ConfigMap the coordinator reads it from."""
        with open(path) as f:
            want = f.read().rstrip("\n")
        maps = [d for d in self.of("ConfigMap") if "vocabulary.toml" in (d.get("data") or {})]
        if len(maps) != 1:
            self.errors.append(f"expected one ConfigMap with vocabulary.toml, found {len(maps)}")
            return
        if maps[0]["data"]["vocabulary.toml"].rstrip("\n") != want:
            self.err(maps[0], "vocabulary.toml is not the file given")
        for dep in self.component("Deployment", "coordinator"):
            pod = dep["spec"]["template"]["spec"]
            env = {e["name"]: e.get("value") for e in pod["containers"][0].get("env", [])}
            if env.get("LPS_VOCABULARY_FILE") != "/etc/lps/vocabulary/vocabulary.toml":
                self.err(dep, f"LPS_VOCABULARY_FILE is {env.get('LPS_VOCABULARY_FILE')!r}")
            names = [v.get("configMap", {}).get("name") for v in pod.get("volumes", [])]
            if maps[0]["metadata"]["name"] not in names:
                self.err(dep, "the vocabulary ConfigMap is not mounted")
        print(f"vocabulary: {len(want)} characters in ConfigMap/{maps[0]['metadata']['name']}")

    def dashboard(self, path):
        with open(path) as f:
            dash = json.load(f)
        exprs = " ".join(t.get("expr", "") for p in dash.get("panels", []) for t in p.get("targets", []))
        for metric in ("lps_jobs", "lps_pickup_latency_seconds_bucket", "lps_job_duration_seconds_bucket",
                       "lps_nodes_connected", "lps_node_free_slots", "lps_proxy_ports", "lps_blocks_total",
                       "lps_bytes_total", "lps_cost_usd_total", "lps_alert_firing",
                       "lps_dead_last_hour", "lps_stuck_running", "lps_deadline_kills_last_hour",
                       "lps_cost_usd_last_hour", "lps_mall_spend_usd_last_hour",
                       "lps_mall_proxy_ports_available", "lps_mall_proxy_ports_available_ratio", "lps_outbox_pending", "lps_outbox_dead",
                       "lps_deliveries_total",
                       # the crawler nodes' own /metrics
                       "lps_node_jobs_finished_total", "lps_node_page_load_seconds_bucket",
                       "lps_node_proxy_bytes_total", "lps_node_browser_restarts_total",
                       "lps_node_chromedriver_restarts_total", "lps_node_blocks_total"):
            if not re.search(rf"\b{metric}\b", exprs):
                self.errors.append(f"dashboard: no panel queries {metric}")
        # Deployment-wide gauges come from every coordinator replica: never sum them.
        for metric in ("lps_nodes_connected", "lps_node_free_slots", "lps_jobs", "lps_dead_last_hour", "lps_mall_proxy_ports_available_ratio",
                       "lps_outbox_pending", "lps_outbox_dead"):
            if re.search(rf"sum[^(]*\([^()]*\b{metric}\b", exprs):
                self.errors.append(f"dashboard: {metric} is deployment-wide; aggregate it with max")
        # lps_blocks_total (this replica's count) has no mall label.
        if re.search(r"by \(mall\) \([^()]*\(lps_blocks_total\b", exprs):
            self.errors.append("dashboard: lps_blocks_total has no mall label")
        ids = [p.get("id") for p in dash["panels"]]
        if len(ids) != len(set(ids)):
            self.errors.append("dashboard: duplicate panel ids")
        print(f"dashboard: {len(dash['panels'])} panels")


def main():
    cmd = sys.argv[1]
    if cmd == "split":
        split(*sys.argv[2:5])
        return 0
    ck = Checker(sys.argv[2])
    if cmd == "crds":
        ck.crds(sys.argv[3])
        n = sum((d.get("apiVersion"), d.get("kind")) in CRDS for d in ck.docs)
        print(f"{n} CRD objects checked")
    elif cmd == "drain":
        ck.drain()
    elif cmd == "lease":
        ck.lease()
    elif cmd == "contracts":
        ck.contracts()
    elif cmd == "rules":
        ck.rules(sys.argv[3])
    elif cmd == "dashboard":
        ck.dashboard(sys.argv[3])
    elif cmd == "vocabulary":
        ck.vocabulary(sys.argv[3])
    for e in ck.errors:
        print("ERROR", e)
    return 1 if ck.errors else 0


sys.exit(main())
PY

checks() { python3 "$work/checks.py" "$@"; }

# kubernetes-validate prints WARN and exits 0 for a kind it has no schema for (e.g. a
# typo'd apiVersion), so any WARN or ERROR line counts as a failure here.
kvalidate() {
  local file=$1 out rc=0
  local args=()
  for v in "${K8S_VERSIONS[@]}"; do args+=(-k "$v"); done
  out=$(python3 -m kubernetes_validate --strict --quiet "${args[@]}" "$file" 2>&1) || rc=$?
  [[ -n "$out" ]] && printf '%s\n' "$out"
  [[ $rc -eq 0 ]] && ! grep -Eq '^(WARN|ERROR|FATAL)' <<<"$out"
}

render() {  # render NAME ARGS... -> $work/NAME.yaml
  local name=$1; shift
  "$HELM" template lps "$CHART" --namespace lps-ci --kube-version "${K8S_VERSIONS[0]}" "$@" >"$work/$name.yaml"
}

notes() {  # NOTES.txt must render too. `helm template` skips it and Helm 3's
  # `install --dry-run` needs a cluster, so render a copy of it as a ConfigMap.
  rm -rf "$work/notes-chart" && cp -r "$CHART" "$work/notes-chart" || return 1
  python3 - "$work/notes-chart/templates" <<'NOTES' || return 1
import os, sys
d = sys.argv[1]
body = open(os.path.join(d, "NOTES.txt")).read()
os.remove(os.path.join(d, "NOTES.txt"))
open(os.path.join(d, "zz-ci-notes.yaml"), "w").write(
    '{{- define "lps.ci.notes" -}}\n' + body + '{{- end -}}\n'
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ci-notes\ndata:\n"
    '  NOTES.txt: {{ include "lps.ci.notes" . | toJson }}\n')
NOTES
  "$HELM" template lps "$work/notes-chart" --namespace lps-ci "$@" \
    --show-only templates/zz-ci-notes.yaml >"$work/notes.yaml" || return 1
  python3 -c 'import sys, yaml; n = yaml.safe_load(open(sys.argv[1]))["data"]["NOTES.txt"]; print(n); sys.exit("lpsctl search" not in n)' \
    "$work/notes.yaml"
}

# --- scenarios -------------------------------------------------------------------------------
scenarios=("default")
for f in "$CHART"/ci/*-values.yaml; do
  [[ -e "$f" ]] && scenarios+=("$f")
done

for s in "${scenarios[@]}"; do
  if [[ "$s" == default ]]; then name=default; args=()
  else name=$(basename "$s" -values.yaml); args=(-f "$s"); fi
  say "-- $name values"
  check "$name: helm lint --strict" "$HELM" lint --strict "$CHART" "${args[@]}"
  check "$name: helm template" render "$name" "${args[@]}"
  [[ -s "$work/$name.yaml" ]] || continue
  check "$name: split rendered kinds" checks split "$work/$name.yaml" "$work/$name.builtin.yaml" "$work/$name.crd.yaml"
  check "$name: kubernetes-validate --strict (${K8S_VERSIONS[*]})" kvalidate "$work/$name.builtin.yaml"
  check "$name: CRD kinds (ScaledObject, TriggerAuthentication, ServiceMonitor)" \
    checks crds "$work/$name.yaml" "${K8S_VERSIONS[${#K8S_VERSIONS[@]}-1]}"
  check "$name: drain contract (node grace > LPS_DRAIN_TIMEOUT)" checks drain "$work/$name.yaml"
  check "$name: lease contract (LPS_LEASE_TTL covers heartbeats + grace + reaper)" checks lease "$work/$name.yaml"
  check "$name: runtime contracts" checks contracts "$work/$name.yaml"
  check "$name: NOTES.txt renders" notes "${args[@]}"
done

say "-- alerting rules"
promtool_rules() {  # the full values' PrometheusRule through promtool check rules
  checks rules "$work/full.yaml" "$work/rules.yaml" || return 1
  # Missing promtool: a failure under CI=true, a loud warning elsewhere (checkers.sh).
  local rc=0
  lps_checker_ensure promtool prometheus "the chart's alerting rules (promtool check rules)" || rc=$?
  case $rc in
    0) promtool check rules "$work/rules.yaml" ;;
    2) return 0 ;;
    *) return 1 ;;
  esac
}
check "full: PrometheusRule passes promtool check rules" promtool_rules
promtool_tests() {  # helm/tests/rules-test.yaml: what the rules fire on, with which labels
  local rc=0
  lps_checker_ensure promtool prometheus "the chart's alerting rules (promtool test rules)" || rc=$?
  case $rc in
    0) cp "$ROOT/helm/tests/rules-test.yaml" "$work/rules-test.yaml" \
         && promtool test rules "$work/rules-test.yaml" ;;
    2) return 0 ;;
    *) return 1 ;;
  esac
}
check "full: PrometheusRule passes promtool test rules (helm/tests/rules-test.yaml)" promtool_tests
check "default: no PrometheusRule" bash -c "! grep -q '^kind: PrometheusRule' '$work/default.yaml'"

say "-- dashboard, inline vocabulary and guards"
check "dashboard JSON parses and covers the metrics" checks dashboard /dev/null "$CHART/dashboards/lps.json"
# The built-in vocabulary given inline (--set-file), as an operator replaces it.
check "inline vocabulary: helm template" render vocabulary --set-file "vocabulary=$ROOT/profiles/vocabulary.toml"
check "inline vocabulary: split rendered kinds" \
  checks split "$work/vocabulary.yaml" "$work/vocabulary.builtin.yaml" "$work/vocabulary.crd.yaml"
check "inline vocabulary: kubernetes-validate --strict (${K8S_VERSIONS[*]})" kvalidate "$work/vocabulary.builtin.yaml"
check "inline vocabulary: runtime contracts" checks contracts "$work/vocabulary.yaml"
check "inline vocabulary: ConfigMap mounted as LPS_VOCABULARY_FILE" \
  checks vocabulary "$work/vocabulary.yaml" "$ROOT/profiles/vocabulary.toml"
# A profile edit restarts no pod (the coordinator watches its directory and pushes the
# edit to the nodes); a vocabulary edit restarts the coordinator only (read at start-up).
pod_checksums() {  # pod_checksums FILE: each Deployment's/StatefulSet's checksum annotations
  awk '/^kind: /{kind=$2} /^  name: /{if (kind=="Deployment"||kind=="StatefulSet") name=$2}
       /checksum\//{print kind, name, $1, $2}' "$1"
}
profile_edit_restarts_nothing() {
  render profiles-a --set-string 'profiles.shop\.toml=format = 2' \
    && render profiles-b --set-string 'profiles.shop\.toml=format = 2 # edited' \
    && render vocabulary-b --set-string 'profiles.shop\.toml=format = 2' --set-string 'vocabulary=format = 1' \
    || return 1
  local a b v
  a=$(pod_checksums "$work/profiles-a.yaml"); b=$(pod_checksums "$work/profiles-b.yaml")
  v=$(pod_checksums "$work/vocabulary-b.yaml")
  [ -n "$a" ] || { echo "no checksum annotations rendered"; return 1; }
  [ "$a" = "$b" ] || { printf 'a profile edit changes pod checksums:\n%s\n--\n%s\n' "$a" "$b"; return 1; }
  # The vocabulary changes the coordinator's checksum and no node's.
  diff <(echo "$a" | grep -v coordinator) <(echo "$v" | grep -v coordinator) \
    || { echo "a vocabulary edit changes a node's checksum"; return 1; }
  [ "$(echo "$a" | grep coordinator)" != "$(echo "$v" | grep coordinator)" ] \
    || { echo "a vocabulary edit does not restart the coordinator"; return 1; }
}
check "a profile edit changes no pod checksum; a vocabulary edit only the coordinator's" profile_edit_restarts_nothing
# (Helm 4 says "additional properties 'x' not allowed", Helm 3 "Additional property x is not allowed".)
expect_failure "schema rejects a typo'd top-level value" "[Aa]dditional propert[a-z]+ '?crawlerNodes'? (is )?not allowed" \
  render bad --set crawlerNodes.slots=4
expect_failure "schema rejects a typo'd nested value" "[Aa]dditional propert[a-z]+ '?drainTimout'? (is )?not allowed" \
  render bad --set crawlerNode.drainTimout=240s
expect_failure "schema rejects a malformed duration" "drainTimeout" \
  render bad --set crawlerNode.drainTimeout=4min
expect_failure "template fails when grace <= drain timeout" "must exceed crawlerNode.drainTimeout" \
  render bad --set crawlerNode.drainTimeout=5m --set crawlerNode.terminationGracePeriodSeconds=300
expect_failure "template fails when the lease is shorter than heartbeats + grace" "coordinator.leaseTtl" \
  render bad --set coordinator.nodeGrace=30s
expect_failure "template fails on hpa with minReplicas 0" "minReplicas must be >= 1" \
  render bad --set autoscaling.mode=hpa --set autoscaling.minReplicas=0
expect_failure "template fails on a trial Secret without DATABASE_URL" "secrets.values.databaseUrl is required" \
  render bad --set secrets.create=true
expect_failure "template fails on TLS without a certificate Secret" "tls.existingSecret is required" \
  render bad --set tls.enabled=true
# Warm profiles kept across pod replacements under an HPA (ci/ has the KEDA case).
check "persistent profiles + hpa: helm template" \
  render psts-hpa --set crawlerNode.persistentProfiles.enabled=true --set autoscaling.mode=hpa
check "persistent profiles + hpa: split rendered kinds" \
  checks split "$work/psts-hpa.yaml" "$work/psts-hpa.builtin.yaml" "$work/psts-hpa.crd.yaml"
check "persistent profiles + hpa: kubernetes-validate --strict (${K8S_VERSIONS[*]})" kvalidate "$work/psts-hpa.builtin.yaml"
check "persistent profiles + hpa: StatefulSet, claim per replica, HPA targets it" \
  checks contracts "$work/psts-hpa.yaml"
expect_failure "schema rejects a bad persistentProfiles.whenScaled" "whenScaled" \
  render bad --set crawlerNode.persistentProfiles.enabled=true --set crawlerNode.persistentProfiles.whenScaled=Keep
expect_failure "template fails with both vocabulary and vocabularyConfigMap" "either vocabulary or vocabularyConfigMap" \
  render bad --set vocabulary=x --set vocabularyConfigMap=lps-vocabulary

say "helm checks: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
