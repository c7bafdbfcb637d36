"""The LPS images, run the way the Helm chart runs them, end to end (scripts/test-images.sh
runs this; it builds the images and passes what is below in the environment).

Every container is configured from the chart's rendered pods (`helm template`, default
values, as JSON in LPS_RENDERED; the migrations Job's and both Deployments'): user and group, read-only root filesystem,
dropped capabilities, no privilege escalation, an emptyDir per tmpfs (sized as the chart
sizes it, the Memory one at /dev/shm as --shm-size), the literal env values and the
termination grace period. What a pod gets from Kubernetes is given here instead: secrets
(tokens, DATABASE_URL, proxy password), LPS_NODE_ID (the pod name), site profiles pointed
at this run's test malls (mounted where the chart mounts its profiles ConfigMap), and
addresses on 127.0.0.1, since every container shares the host's network with the test
kit. One deliberate difference: LPS_NODE_SLOTS=1 (the chart's default is 2), so which
node runs which job is decided.

The scenario, each step asserted on outcomes (fails loudly with the containers' logs):
1. `coordinator migrate` (the chart's hook Job) exits 0 and the schema is there;
   `coordinator serve` answers /healthz, /readyz, /metrics and /ops.
2. A node container becomes ready (its browser self-check passes in the image) and a real
   search over the three test malls is found through Chromium, the proxy ledger and the
   test kit's gateway.
3. Drain: with the alpha mall's search page slowed, the node is mid-search (job running,
   a proxy port held, the page requested through the gateway); a second search waits
   queued behind it (one slot). `stop -t <the chart's grace>` sends SIGTERM; a second
   node container starts, as a replacement pod would. The first node finishes its job
   within the drain and exits 0 well before the grace; the coordinator shows it
   disconnected and holding no proxy port; the second search is done by the second node
   (job_attempt, attempt by attempt); sampled from the host's /proc while it ran, every
   process in the first container ran as the chart's non-root user, Chromium ran, no
   orphan re-parented to tini stayed a zombie (tini reaps the browsers' helpers), and after
   it exited nothing of its PID namespace is left. The node's root filesystem is
   read-only and its /dev/shm has the chart's size (checked inside it).
4. The coordinator container exits 0 on SIGTERM within its grace period.
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ENGINE = shlex.split(os.environ["LPS_ENGINE_CMD"])
COORDINATOR_IMAGE = os.environ["LPS_COORDINATOR_IMAGE"]
NODE_IMAGE = os.environ["LPS_NODE_IMAGE"]
BIN = os.environ["LPS_HOST_BIN"]  # lpsctl and lps-test-kit, built on this host
DATABASE_URL = os.environ["DATABASE_URL"]
ROOT = os.environ["LPS_ROOT"]
with open(os.environ["LPS_RENDERED"]) as f:
    RENDERED = json.load(f)

RUN = f"lps-img-{os.getpid()}"
CLIENT_TOKEN = "images-client-token-" + os.urandom(6).hex()
ADMIN_TOKEN = "images-admin-token-" + os.urandom(6).hex()
NODE_TOKEN = "images-node-token-" + os.urandom(6).hex()
PROXY_USER = "lps-images"
PROXY_PASSWORD = "images-proxy-" + os.urandom(6).hex()
MALLS = ["testmall-alpha", "testmall-beta", "testmall-gamma"]
ULIMITS = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"]
PRODUCT = "제주 삼다수 2L x 12"
DRAIN_PRODUCTS = ["코카콜라 500ml 24개", "농심 신라면 120g 5개입"]
SLOW_PAGE_MS = 20000

work = tempfile.mkdtemp(prefix="lps-images-")
containers = []
failures = []


def log(msg):
    print(f"[images] {msg}", flush=True)


class Failed(Exception):
    pass


def fail(msg):
    raise Failed(msg)


def engine(*args, check=True, timeout=120):
    r = subprocess.run(ENGINE + list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        fail(f"{' '.join(args[:3])} ... exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, method="GET", timeout=5):
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)


def wait_until(what, pred, within, every=0.5, diag=None):
    deadline = time.monotonic() + within
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            fail(f"{what}: not within {within}s" + (f"\n{diag()}" if diag else ""))
        time.sleep(every)


def psql(sql):
    r = subprocess.run(["psql", DATABASE_URL, "-qAtX", "-v", "ON_ERROR_STOP=1", "-c", sql],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"psql: {r.stderr.strip()}")
    return [line.split("|") for line in r.stdout.splitlines() if line]


def lpsctl(*args, token=CLIENT_TOKEN, timeout=300, ndjson=False):
    """`lpsctl --json ARGS`: its JSON document (with ndjson, the last line's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LPS_")}
    env.update(LPS_ADDR=f"http://127.0.0.1:{GRPC}", LPS_TOKEN=token)
    r = subprocess.run([os.path.join(BIN, "lpsctl"), "--json", *args], capture_output=True,
                       text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        fail(f"lpsctl {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout.splitlines()[-1] if ndjson else r.stdout)


def container_log(name, lines=40):
    """The container's last `lines` log lines (None: all)."""
    tail = [] if lines is None else ["--tail", str(lines)]
    r = engine("logs", *tail, name, check=False)
    return r.stdout + r.stderr


def state(name):
    r = engine("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}} {{.State.Pid}}", name)
    status, code, pid = r.stdout.split()
    return status, int(code), int(pid)


# ------------------------------------------------------------------ the chart's pod specs

def workload(component, kind="Deployment"):
    for d in RENDERED:
        if d.get("kind") == kind and \
                d["metadata"]["labels"].get("app.kubernetes.io/component") == component:
            return d["spec"]["template"]["spec"]
    fail(f"the chart renders no {component} {kind}")


def duration_secs(text):
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        fail(f"not a duration: {text!r}")
    return sum(int(n) * units[u] for n, u in parts)


def size_bytes(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(q))
    if not m:
        fail(f"unexpected quantity {q!r}")
    return int(m.group(1)) * {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}[m.group(2)]


def run_args(pod, overrides):
    """The engine flags that give a container what `pod` (a rendered pod spec) gives it."""
    c = pod["containers"][0]
    sc = {**pod.get("securityContext", {}), **c.get("securityContext", {})}
    args = ["--network", "host", *ULIMITS]
    if sc.get("runAsNonRoot") is not True or not sc.get("runAsUser"):
        fail(f"{c['name']}: the chart no longer runs it as a non-root user")
    args += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
    if sc.get("readOnlyRootFilesystem"):
        # Only the chart's own volumes are writable (no engine-provided /run, /tmp tmpfs).
        args += ["--read-only", "--read-only-tmpfs=false"] if ENGINE[0] == "podman" else ["--read-only"]
    for cap in sc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        if "emptyDir" not in v:
            continue  # ConfigMaps and Secrets: the test mounts its own where it needs them
        size = v["emptyDir"].get("sizeLimit")
        if m["mountPath"] == "/dev/shm":
            if v["emptyDir"].get("medium") != "Memory" or not size:
                fail("/dev/shm is not a sized Memory emptyDir in the chart")
            args += ["--shm-size", str(size_bytes(size))]
        else:
            # An emptyDir: empty and writable by the pod's user. NB: runc (1.1) gives a
            # tmpfs the mode of the image's directory and ignores mode=, and podman 4.3
            # refuses uid=; podman's U chowns it to the container's user instead.
            if ENGINE[0] == "podman":
                opts = "rw,notmpcopyup,U"
            else:
                opts = "rw,mode=1777"
            opts += f",size={size_bytes(size)}" if size else ""
            args += ["--tmpfs", f"{m['mountPath']}:{opts}"]
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
    env.update(overrides)
    for k, v in env.items():
        args += ["-e", f"{k}={v}"]
    return args, env


def start(name, image, pod, overrides, extra=(), cmd=()):
    args, env = run_args(pod, overrides)
    engine("rm", "-f", name, check=False)
    containers.append(name)
    engine("run", "-d", "--name", name, *args, *extra, image, *cmd)
    return env


# ------------------------------------------------------------------ process sampling

class Sampler(threading.Thread):
    """Samples a container's processes from the host's /proc (by its PID namespace) until
    the container's init is gone: names, uids and zombies."""

    def __init__(self, init_pid):
        super().__init__(daemon=True)
        self.init_pid = init_pid
        self.ns = os.readlink(f"/proc/{init_pid}/ns/pid")
        self.samples = []
        self.stop = False

    def snapshot(self):
        procs = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != self.ns:
                    continue
                with open(f"/proc/{pid}/status") as f:
                    st = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
                procs[int(pid)] = (st["Name"].strip(), st["State"].split()[0], int(st["Uid"].split()[0]),
                                   int(st["PPid"]))
            except (FileNotFoundError, ProcessLookupError, PermissionError, KeyError):
                continue
        return procs

    def run(self):
        while not self.stop:
            s = self.snapshot()
            self.samples.append(s)
            if not s:
                return
            time.sleep(0.3)


def check_processes(sampler, uid):
    seen = {p[0] for s in sampler.samples for p in s.values()}
    if not any("chrom" in n for n in seen):
        fail(f"no Chromium process was ever seen in the node container (saw {sorted(seen)})")
    users = {p[2] for s in sampler.samples for p in s.values()}
    if users != {uid}:
        fail(f"processes in the node container ran as uids {sorted(users)}, not only {uid}")
    # tini's job: an orphan re-parented to PID 1 (a browser helper whose parent died) is
    # reaped at once. A zombie child of crawler-node waits for the node's own reaping.
    streak, most = {}, 0
    for s in sampler.samples:
        zombies = {pid for pid, p in s.items() if p[1] == "Z"}
        most = max(most, len(zombies))
        orphans = {pid for pid in zombies if s[pid][3] == sampler.init_pid}
        streak = {pid: streak.get(pid, 0) + 1 for pid in orphans}
        lingering = [f"{pid} {s[pid][0]}" for pid, n in streak.items() if n >= 4]
        if lingering:
            fail(f"orphaned zombies not reaped by PID 1 in the node container for >1 s: {lingering}")
    if most > 16:
        fail(f"{most} zombies at once in the node container")
    left = sampler.snapshot()
    if left:
        fail(f"processes of the stopped node container are still alive: {left}")
    log(f"node container: {len(sampler.samples)} process samples, seen {sorted(seen)}; all uid {uid}; "
        f"no orphan left unreaped (at most {most} zombies at once); nothing left after exit")


# ------------------------------------------------------------------ the scenario

def main():
    global GRPC
    coord_pod = workload("coordinator")
    node_pod = workload("crawler-node")
    node_env = {e["name"]: e.get("value") for e in node_pod["containers"][0]["env"]}
    drain_timeout = duration_secs(node_env["LPS_DRAIN_TIMEOUT"])
    node_grace = node_pod["terminationGracePeriodSeconds"]
    coord_grace = coord_pod["terminationGracePeriodSeconds"]
    uid = node_pod["securityContext"]["runAsUser"]
    log(f"chart: node drain {drain_timeout:g}s, grace {node_grace}s; coordinator grace {coord_grace}s")

    # --- the test kit on the host: three malls and the proxy gateway
    mall_ports = {m: free_port() for m in MALLS}
    GRPC, coord_http = free_port(), free_port()
    pw = os.path.join(work, "proxy-password")
    with open(pw, "w") as f:
        f.write(PROXY_PASSWORD + "\n")
    kit_log = open(os.path.join(work, "testkit.log"), "w")
    kit = subprocess.Popen(
        [os.path.join(BIN, "lps-test-kit"), "serve",
         "--alpha-listen", f"127.0.0.1:{mall_ports['testmall-alpha']}",
         "--beta-listen", f"127.0.0.1:{mall_ports['testmall-beta']}",
         "--gamma-listen", f"127.0.0.1:{mall_ports['testmall-gamma']}",
         "--gateway-listen-base", "127.0.0.1:0", "--ports", "4",
         "--user", PROXY_USER, "--password-file", pw],
        stdout=subprocess.PIPE, stderr=kit_log, text=True)
    try:
        addresses = json.loads(kit.stdout.readline())
        return scenario(addresses, mall_ports, coord_http, coord_pod, node_pod, drain_timeout,
                        node_grace, coord_grace, uid)
    finally:
        kit.terminate()
        kit.wait(timeout=30)


def scenario(addresses, mall_ports, coord_http, coord_pod, node_pod, drain_timeout, node_grace,
             coord_grace, uid):
    gateway_ports = [a["addr"].rsplit(":", 1)[1] for a in addresses["gateway"]]
    alpha = f"http://127.0.0.1:{mall_ports['testmall-alpha']}"

    # Site profiles pointed at this run's malls, mounted where the chart mounts its
    # profiles ConfigMap (LPS_PROFILES_DIR).
    profiles = os.path.join(work, "profiles")
    os.makedirs(profiles)
    for i, mall in enumerate(MALLS):
        with open(os.path.join(ROOT, "profiles", "builtin", f"{mall}.toml")) as f:
            text = f.read().replace(f"127.0.0.1:{18081 + i}", f"127.0.0.1:{mall_ports[mall]}")
        with open(os.path.join(profiles, f"{mall}.toml"), "w") as f:
            f.write(text)
    os.chmod(work, 0o755)
    for p in [profiles] + [os.path.join(profiles, x) for x in os.listdir(profiles)]:
        os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)

    # --- 1. migrations, then the coordinator
    coord_env = {
        "DATABASE_URL": DATABASE_URL,
        "LPS_GRPC_ADDR": f"127.0.0.1:{GRPC}",
        "LPS_HTTP_ADDR": f"127.0.0.1:{coord_http}",
        "LPS_CLIENT_TOKENS": CLIENT_TOKEN,
        "LPS_ADMIN_TOKENS": ADMIN_TOKEN,
        "LPS_NODE_TOKENS": NODE_TOKEN,
        "LPS_MALLS": ",".join(MALLS),
        "LPS_PROFILES_DIR": "/etc/lps/profiles",
        "LPS_PROXY_GATEWAY_HOST": "127.0.0.1",
        "LPS_PROXY_PORTS": ",".join(gateway_ports),
        "LPS_PROXY_USERNAME": PROXY_USER,
        "LPS_PROXY_PASSWORD": PROXY_PASSWORD,
        "LPS_CLAIM_POLL": "1s",
    }
    # The migrations hook Job's pod as rendered: DATABASE_URL (a Secret there) is all it gets.
    migrate = f"{RUN}-migrate"
    job_pod = workload("migrations", kind="Job")
    if job_pod["containers"][0].get("args") != ["migrate"]:
        fail(f"the migrations Job does not run `migrate`: {job_pod['containers'][0].get('args')}")
    args, _ = run_args(job_pod, {"DATABASE_URL": DATABASE_URL})
    containers.append(migrate)
    r = engine("run", "--name", migrate, *args, COORDINATOR_IMAGE, "migrate", check=False, timeout=300)
    if r.returncode != 0:
        fail(f"coordinator migrate exited {r.returncode}:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    tables = psql("select count(*) from information_schema.tables where table_name in ('job', 'proxy_port', 'node_session')")
    if tables != [["3"]]:
        fail(f"migrate ran but the schema is not there: {tables}")
    log("coordinator migrate: exit 0, schema present")

    coord = f"{RUN}-coordinator"
    start(coord, COORDINATOR_IMAGE, coord_pod, coord_env,
          extra=["-v", f"{profiles}:/etc/lps/profiles:ro"], cmd=["serve"])
    base = f"http://127.0.0.1:{coord_http}"
    wait_until("coordinator /readyz 200", lambda: http(base + "/readyz")[0] == 200, 90,
               diag=lambda: container_log(coord))
    for path in ("/healthz", "/metrics", "/ops"):
        status, body = http(base + path)
        if status != 200:
            fail(f"coordinator {path} answered {status}: {body[:300]}")
    if "lps_jobs" not in http(base + "/metrics")[1]:
        fail("coordinator /metrics has no lps_jobs")
    log(f"coordinator container: /healthz /readyz /metrics /ops answer 200 on {base}")

    # --- 2. one node, a real search
    def node(name):
        http_port = free_port()
        env = {
            "LPS_NODE_ID": name,
            "LPS_NODE_TOKEN": NODE_TOKEN,
            "LPS_COORDINATOR_URL": f"http://127.0.0.1:{GRPC}",
            "LPS_HTTP_ADDR": f"127.0.0.1:{http_port}",
            # One slot, so the drain scenario decides which node runs which job.
            "LPS_NODE_SLOTS": "1",
        }
        start(name, NODE_IMAGE, node_pod, env)
        nb = f"http://127.0.0.1:{http_port}"
        wait_until(f"{name} /readyz 200 (stream up, browser self-check passed)",
                   lambda: http(nb + "/readyz")[0] == 200, 240, diag=lambda: container_log(name))
        return nb

    node1 = f"{RUN}-node-1"
    node(node1)
    # The root filesystem is read-only and /dev/shm is the chart's size.
    r = engine("exec", node1, "sh", "-c", "touch /usr/local/bin/x", check=False)
    if r.returncode == 0 or "Read-only file system" not in r.stderr:
        fail(f"the node's root filesystem is writable: {r.returncode} {r.stderr}")
    shm = int(engine("exec", node1, "df", "-k", "--output=size", "/dev/shm").stdout.split()[-1]) * 1024
    want = size_bytes(next(v["emptyDir"]["sizeLimit"] for v in node_pod["volumes"]
                           if v.get("emptyDir", {}).get("medium") == "Memory"))
    if shm != want:
        fail(f"/dev/shm is {shm} bytes, the chart sets {want}")
    who = engine("exec", node1, "id", "-u").stdout.strip()
    if who != str(uid):
        fail(f"the node runs as uid {who}, not {uid}")
    log(f"{node1}: ready; uid {who}, read-only root, /dev/shm {shm >> 20} MiB")

    started = time.monotonic()
    status = lpsctl("search", PRODUCT, "--wait", timeout=400)
    check_found(status, PRODUCT, MALLS)
    lowest = status["products"][0]["lowest"]
    log(f"search {status['search_id']} {PRODUCT!r}: final in {time.monotonic() - started:.0f}s, "
        f"found in {len(MALLS)} malls, lowest {json.dumps(lowest, ensure_ascii=False)}")

    # --- 3. SIGTERM mid-search
    r = http(alpha + f"/_control/slow?page_ms={SLOW_PAGE_MS}&api_ms=0", method="POST")
    if r[0] != 200:
        fail(f"cannot slow the alpha mall: {r}")
    through_gateway_before = gateway_searches(alpha)
    first = lpsctl("search", DRAIN_PRODUCTS[0], "--mall", "testmall-alpha")
    job_a = first["items"][0]["job_id"]

    def mid_search():
        nodes = {n["node_id"]: n for n in lpsctl("nodes")}
        held = [p for p in lpsctl("ports") if p.get("holder_node") == node1]
        return (nodes.get(node1, {}).get("running_jobs") == [job_a] and held
                and gateway_searches(alpha) > through_gateway_before)
    def mid_search_diag():
        return (f"nodes {lpsctl('nodes')}\nports {lpsctl('ports')}\njob {lpsctl('job', str(job_a))}\n"
                f"alpha stats {http(alpha + '/_control/stats')[1][:1500]}\n{container_log(node1)}")
    wait_until(f"{node1} mid-search (job running, port held, page requested through the gateway)",
               mid_search, 180, diag=mid_search_diag)
    second = lpsctl("search", DRAIN_PRODUCTS[1], "--mall", "testmall-alpha")
    job_b = second["items"][0]["job_id"]

    _, _, init_pid = state(node1)
    sampler = Sampler(init_pid)
    sampler.start()
    log(f"{node1}: mid-search on job {job_a} (job {job_b} queued); stop -t {node_grace} (SIGTERM)")
    t0 = time.monotonic()
    stopper = subprocess.Popen(ENGINE + ["stop", "-t", str(node_grace), node1],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # The in-flight page is already delayed; later pages are not.
    http(alpha + "/_control/slow?page_ms=0&api_ms=0", method="POST")
    node2 = f"{RUN}-node-2"
    node(node2)
    stopper.wait(timeout=node_grace + 60)
    stopped_in = time.monotonic() - t0
    sampler.stop = True
    sampler.join(timeout=10)
    status1, code1, _ = state(node1)
    node1_log = container_log(node1, lines=None)
    if stopper.returncode != 0:
        fail(f"stop {node1} failed: {stopper.stderr.read()}")
    if status1 != "exited" or code1 != 0:
        fail(f"{node1} ended {status1} with exit code {code1} (want exited 0):\n{node1_log}")
    if stopped_in >= drain_timeout:
        fail(f"{node1} took {stopped_in:.0f}s to stop, beyond its drain timeout {drain_timeout:g}s")
    for line in ("drain requested", "goodbye sent", "crawler node drained; exiting"):
        if line not in node1_log:
            fail(f"{node1}'s log lacks {line!r}:\n{node1_log}")
    log(f"{node1}: drained and exited 0 in {stopped_in:.0f}s (grace {node_grace}s)")
    check_processes(sampler, uid)

    # The coordinator's view: node gone, no port held, every IP session ended.
    nodes = {n["node_id"] for n in lpsctl("nodes")}
    if node1 in nodes:
        fail(f"the coordinator still lists {node1} as connected")
    held = [p for p in lpsctl("ports") if p.get("holder_node") == node1]
    if held:
        fail(f"{node1} still holds proxy ports after it exited: {held}")
    # An IP session ends with its job (DESIGN §4): the last one ended with the job the
    # drain waited for (idle) or with the drain itself (shutdown), and none is left open
    # (no port held, above).
    sessions = psql(f"select end_reason::text from ip_session where node_id = '{node1}' order by id")
    if not sessions or sessions[-1] not in (["idle"], ["shutdown"]):
        fail(f"the drain did not end {node1}'s last IP session: {sessions}")
    if psql(f"select bool_and(disconnected_at is not null) from node_session where node_id = '{node1}'") != [["t"]]:
        fail(f"{node1}'s node_session is not disconnected")
    log(f"coordinator: {node1} disconnected, holds no proxy port; IP sessions ended "
        f"{[r[0] for r in sessions]}")

    for search, name, job, by in ((first, DRAIN_PRODUCTS[0], job_a, node1),
                                  (second, DRAIN_PRODUCTS[1], job_b, node2)):
        final = lpsctl("watch", str(search["search_id"]), timeout=300, ndjson=True)
        check_found(final, name, ["testmall-alpha"])
        attempts = psql(f"select coalesce(node_id, ''), ended::text from job_attempt "
                        f"where job_id = {job} order by lease_epoch")
        if attempts != [[by, "done"]]:
            fail(f"job {job} ({name}): attempts {attempts}, want one done by {by}")
        log(f"job {job} {name!r}: found, its one attempt done by {by}")

    # --- 4. the coordinator stops within its grace period, exit 0
    t0 = time.monotonic()
    engine("stop", "-t", str(coord_grace), coord, timeout=coord_grace + 30)
    status_c, code_c, _ = state(coord)
    if status_c != "exited" or code_c != 0:
        fail(f"coordinator ended {status_c} {code_c}:\n{container_log(coord)}")
    log(f"coordinator container: SIGTERM -> exit 0 in {time.monotonic() - t0:.1f}s (grace {coord_grace}s)")


def gateway_searches(mall):
    status, body = http(mall + "/_control/stats")
    if status != 200:
        fail(f"test-kit stats: {status} {body[:200]}")
    return sum(n for exit_, n in json.loads(body).get("searches", {}).items() if exit_ != "direct")


def check_found(status, name, malls):
    if not status.get("final"):
        fail(f"search not final: {json.dumps(status, ensure_ascii=False)[:2000]}")
    product = status["products"][0]
    got = {m["mall"]: m for m in product["malls"]}
    for mall in malls:
        m = got.get(mall)
        if not m or m.get("outcome") != "found" or not m.get("offers"):
            fail(f"{name!r} in {mall}: {json.dumps(m, ensure_ascii=False)}")
    if not product.get("lowest") or product["lowest"].get("price", 0) <= 0:
        fail(f"{name!r}: no lowest offer: {json.dumps(product, ensure_ascii=False)[:2000]}")


def cleanup():
    for name in reversed(containers):
        engine("rm", "-f", "-t", "5", name, check=False, timeout=60)
    shutil.rmtree(work, ignore_errors=True)


def interrupted(signum, _frame):
    raise Failed(f"interrupted by signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    code = 0
    try:
        main()
        log("images end to end: passed")
    except Failed as e:
        code = 1
        print(f"[images] FAILED: {e}", file=sys.stderr, flush=True)
        for name in containers:
            if name.endswith(("coordinator", "node-1", "node-2")):
                print(f"--- {name} (last lines)\n{container_log(name)}", file=sys.stderr)
    finally:
        cleanup()
    sys.exit(code)
