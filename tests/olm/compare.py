#!/usr/bin/env python3
"""The OLM v0 differential harness: `make compare-olm`.

Every scenario runs once under OLM v0 (tests/peers/olm.sh: v0.46.0's `olm` and `catalog` with `opm
serve` catalogs; the version is tests/peers/build-olm.sh's pin, `OLM_VERSION` below) and once under
capstan (`capstan controller`), each system on its own fresh cluster of tests/cluster/
(CAPSTAN_REAL_NODE=0, kwok node), never both on one cluster. Both clusters get the
same environment first (namespaces `olm` and `operators`, OperatorGroup `global-operators`, the
same catalogs: the example bundles, the synthetic scenario bundles of tests/olm/bundles.py and
cert-manager from the corpus), then the scenarios run in the same order with the same namespace
names. At each checkpoint of a scenario, once the cluster has settled, every object of the kinds in
KINDS that was created or changed since the scenario began (or deleted: recorded as `<deleted>`) is
dumped, normalised (see `normalise`) and compared field by field with the other system's.

A difference is explained only by an entry of docs/olm-differences.md under "## Explained
differences" with a `match:` line (kind, name and field-path globs; see that file). The rest are
printed, grouped, and counted. The last line is
    compare-olm: N scenarios, M objects compared, D unexplained differences
and the exit status is 1 when D > 0. Dumps and the full report go to target/compare-olm/.

Options: --scenarios a,b (a subset, as the CI test runs), --keep (leave the clusters running),
--only olm|capstan (run one system and reuse the other's last dump from target/compare-olm/).
"""

import argparse
import copy
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bundles as synth  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "target", "compare-olm")


def shared_dir():
    """The read-only shared/ directory: $CAPSTAN_SHARED, else beside the clone, else /work/shared
    (the rule of tests/support's shared_dir)."""
    if os.environ.get("CAPSTAN_SHARED"):
        return os.environ["CAPSTAN_SHARED"]
    beside = os.path.abspath(os.path.join(ROOT, "..", "shared"))
    return beside if os.path.isdir(beside) else "/work/shared"


def peer_pin(script, var):
    """The version tests/peers/<script> pins on its `VAR=version` line: each peer's one pin."""
    for line in open(os.path.join(ROOT, "tests", "peers", script)):
        if line.startswith(var + "="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError(f"tests/peers/{script} has no {var}= line")


OLM_VERSION = peer_pin("build-olm.sh", "OLM_VERSION")
CORPUS = os.path.join(shared_dir(), "corpus", "community-operators-prod")
WAIT = float(os.environ.get("COMPARE_OLM_WAIT", "180"))

# The kinds each system may create or change, fully qualified for `kubectl get`.
KINDS = [
    "deployments.apps", "services", "secrets", "serviceaccounts", "configmaps",
    "roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io",
    "clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io",
    "validatingwebhookconfigurations.admissionregistration.k8s.io",
    "mutatingwebhookconfigurations.admissionregistration.k8s.io",
    "customresourcedefinitions.apiextensions.k8s.io", "apiservices.apiregistration.k8s.io",
    "clusterserviceversions.operators.coreos.com", "installplans.operators.coreos.com",
    "subscriptions.operators.coreos.com", "operatorgroups.operators.coreos.com",
    "operatorconditions.operators.coreos.com", "operators.operators.coreos.com",
]


def log(msg):
    print(f"[compare-olm] {msg}", file=sys.stderr, flush=True)


def run(cmd, env=None, input=None, check=True, quiet=False):
    p = subprocess.run(cmd, env={**os.environ, **(env or {})}, input=input, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return p.stdout


# ------------------------------------------------------------------ clusters and systems

class Cluster:
    """A fresh cluster of tests/cluster/ in its own state directory."""

    def __init__(self, name, real_node=False):
        self.dir = os.path.join(ROOT, f".cluster-compare-{name}")
        self.env = {"CAPSTAN_CLUSTER_DIR": self.dir, "CAPSTAN_REAL_NODE": "1" if real_node else "0"}
        self.want_real_node = real_node

    def up(self):
        self.down(purge=True)
        log(f"starting cluster {self.dir}")
        run(["bash", os.path.join(ROOT, "tests/cluster/up.sh"), "all"], env=self.env)
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.registry = open(os.path.join(self.dir, "registry")).read().strip()
        self.kinds = None
        # up.sh starts without the real node when another environment of this machine runs it
        if self.want_real_node and not os.path.exists(os.path.join(self.dir, "node-name")):
            raise RuntimeError(f"{self.dir}: started without the real node (another environment on this machine runs it: "
                               "stop it with `make cluster-down`, or set CAPSTAN_REAL_NODE=0); see its logs/")

    def refresh_kinds(self):
        """The dumped kinds this cluster serves (call after a system installed its CRDs)."""
        names = set(self.kubectl("api-resources", "-o", "name").split())
        self.kinds = [k for k in KINDS if k in names]

    def down(self, purge=False):
        if os.path.isdir(os.path.join(self.dir, "pids")):
            run(["bash", os.path.join(ROOT, "tests/cluster/down.sh")] + (["--purge"] if purge else []), env=self.env, check=False)
        if purge:
            shutil.rmtree(self.dir, ignore_errors=True)

    def kubectl(self, *args, input=None, check=True):
        return run([os.path.join(self.dir, "bin", "kubectl"), "--kubeconfig", os.path.join(self.dir, "kubeconfig"), *args],
                   input=input, check=check)

    def apply(self, *objs):
        self.kubectl("create", "-f", "-", input="\n".join(json.dumps(o) for o in objs))

    def get(self, kind, ns, name):
        out = self.kubectl("get", kind, "-n", ns, name, "-o", "json", "--ignore-not-found", check=False)
        return json.loads(out) if out.strip() else None

    def dump(self):
        """Every object of the dumped kinds, keyed by (kind, namespace, name)."""
        if self.kinds is None:
            self.refresh_kinds()
        items = [slim(o) for o in json.loads(self.kubectl("get", ",".join(self.kinds), "-A", "-o", "json"))["items"]]
        return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in items}


def slim(o):
    """A CRD with each version's openAPIV3Schema replaced by its SHA-256 (the dumps stay small;
    two schemas still compare equal only when identical)."""
    if o.get("kind") == "CustomResourceDefinition":
        import hashlib
        for v in o.get("spec", {}).get("versions", []):
            sch = (v.get("schema") or {}).get("openAPIV3Schema")
            if sch is not None:
                v["schema"]["openAPIV3Schema"] = "sha256:" + hashlib.sha256(json.dumps(sch, sort_keys=True).encode()).hexdigest()
    return o


ENVIRONMENT = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "operators"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "olm"}},
]


class Olm:
    name = "olm"

    def start(self, cluster, catalogs):
        env = {**cluster.env}
        run(["bash", os.path.join(ROOT, "tests/peers/olm.sh"), "start"] + [f"{n}={d}" for n, d in catalogs.items()], env=env)

    def add_catalog(self, cluster, ns, name, d):
        """CatalogSource `ns/name` serving FBC directory `d` (an `opm serve` beside the others)."""
        run(["bash", os.path.join(ROOT, "tests/peers/olm.sh"), "catalog", f"{ns}/{name}={d}"], env=cluster.env)

    def stop(self, cluster):
        run(["bash", os.path.join(ROOT, "tests/peers/olm.sh"), "stop"], env=cluster.env, check=False)

    def pids(self, cluster):
        d = os.path.join(cluster.dir, "olm", "pids")
        return {f[:-4]: int(open(os.path.join(d, f)).read()) for f in os.listdir(d)} if os.path.isdir(d) else {}


class Capstan:
    name = "capstan"

    def __init__(self, binary):
        self.binary = binary
        self.proc = None

    def start(self, cluster, catalogs):
        crds = tempfile.mkdtemp(prefix="capstan-crds-")
        run([self.binary, "crds", "--dir", crds])
        cluster.kubectl("apply", "--server-side", "-f", crds)
        cluster.kubectl("wait", "--for", "condition=Established", "--timeout=60s", "-f", crds)
        shutil.rmtree(crds)
        cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            *ENVIRONMENT,
            {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "global-operators", "namespace": "operators"}},
        ]}))
        for name, d in catalogs.items():
            self.add_catalog(cluster, "olm", name, d)
        logf = open(os.path.join(cluster.dir, "logs", "capstan.log"), "a")
        self.proc = subprocess.Popen([self.binary, "controller", "--kubeconfig", cluster.kubeconfig,
                                      "--global-catalog-namespace", "olm", "--metrics-addr", "0"],
                                     stdout=logf, stderr=logf, env={**os.environ, "CAPSTAN_CACHE": os.path.join(cluster.dir, "capstan-cache")})

    def add_catalog(self, cluster, ns, name, d):
        """CatalogSource `ns/name` with the image of FBC directory `d`, pushed to the cluster's registry."""
        ref = f"{cluster.registry}/compare/{name}:latest"
        run([self.binary, "catalog", "push", "-q", d, ref])
        cluster.apply({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
                       "metadata": {"name": name, "namespace": ns},
                       "spec": {"sourceType": "grpc", "image": ref, "displayName": name}})

    def stop(self, cluster):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    def pids(self, cluster):
        return {"capstan": self.proc.pid} if self.proc else {}


# ------------------------------------------------------------------ catalogs

def build_catalogs(binary, registry, work):
    """FBC directories by CatalogSource name, built by capstan from pushed bundle images."""
    cats = {}
    # examples: the repository's bundles (nginx-operator 0.1.0 -> 0.2.0, kaiwudb-operator)
    # compare: the synthetic bundles; corpus: cert-manager 1.16.5 (webhooks, AllNamespaces);
    # orphan: the catalog the catalog-removed scenario adds to its namespace and deletes (not global)
    sources = {"examples": [], "compare": [], "corpus": [], "orphan": []}
    for pkg in ["nginx-operator", "kaiwudb-operator"]:
        root = os.path.join(ROOT, "bundles", pkg)
        for v in sorted(os.listdir(root)):
            if os.path.isdir(os.path.join(root, v)):
                sources["examples"].append((f"{pkg}-bundle:v{v}", os.path.join(root, v)))
    synth_dir = os.path.join(work, "bundles")
    for b in synth.scenario_bundles():
        sources["compare"].append((f"{b.package}-bundle:v{b.version}", b.write(synth_dir)))
    for b in synth.orphan_bundles():
        sources["orphan"].append((f"{b.package}-bundle:v{b.version}", b.write(synth_dir)))
    cm = os.path.join(CORPUS, "operators", "cert-manager", "1.16.5")
    if not os.path.isdir(cm):
        sys.exit(f"compare-olm: the corpus bundle {cm} is missing: set CAPSTAN_SHARED to the shared/ directory that holds corpus/")
    sources["corpus"].append(("cert-manager-bundle:v1.16.5", cm))
    for name, items in sources.items():
        d = os.path.join(work, "catalogs", name)
        for tag, bdir in items:
            ref = f"{registry}/compare/{tag}"
            run([binary, "bundle", "push", "-q", bdir, ref])
            run([binary, "catalog", "add", d, ref, "--channel", default_channel(bdir)] if name == "corpus" else [binary, "catalog", "add", d, ref])
        cats[name] = d
    return cats


def default_channel(bdir):
    import yaml
    a = yaml.safe_load(open(os.path.join(bdir, "metadata", "annotations.yaml")))["annotations"]
    return a.get("operators.operatorframework.io.bundle.channel.default.v1") or a["operators.operatorframework.io.bundle.channels.v1"].split(",")[0]


# ------------------------------------------------------------------ scenarios

class Ctx:
    """What a scenario step may do on one system's cluster; `checkpoint` records a comparison point."""

    def __init__(self, cluster, scenario, record, system=None, catalogs=None):
        self.c, self.scenario, self.record = cluster, scenario, record
        self.system, self.catalogs = system, catalogs or {}
        self.baseline = cluster.dump()
        self.subs = set()  # (namespace, name) of the Subscriptions this scenario created

    def ns(self, *names):
        self.c.apply(*[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names])

    def og(self, ns, name="og", targets=None, sa=None, selector=None):
        spec = {}
        if targets is not None:
            spec["targetNamespaces"] = targets
        if sa:
            spec["serviceAccountName"] = sa
        if selector:
            spec["selector"] = selector
        self.c.apply({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": name, "namespace": ns}, "spec": spec})

    def catalog(self, ns, name):
        """Adds the scenario catalog `name` (built by build_catalogs, not started with the system) as
        CatalogSource `ns/name`, the way the system under test serves catalogs."""
        self.system.add_catalog(self.c, ns, name, self.catalogs[name])

    def sub(self, ns, pkg, catalog="compare", channel="stable", approval="Automatic", starting=None, config=None, name=None,
            source_ns="olm"):
        spec = {"name": pkg, "channel": channel, "source": catalog, "sourceNamespace": source_ns, "installPlanApproval": approval}
        if starting:
            spec["startingCSV"] = starting
        if config:
            spec["config"] = config
        self.c.apply({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                      "metadata": {"name": name or pkg, "namespace": ns}, "spec": spec})
        self.subs.add((ns, name or pkg))

    def wait(self, what, pred):
        start = time.time()
        while time.time() - start < WAIT:
            try:
                if pred():
                    return True
            except (RuntimeError, KeyError, TypeError, json.JSONDecodeError):
                pass
            time.sleep(0.5)
        log(f"  {self.scenario}: timed out waiting for {what}")
        return False

    def csv_phase(self, ns, name, phase="Succeeded"):
        return self.wait(f"CSV {ns}/{name} {phase}", lambda: ((self.c.get("clusterserviceversions.operators.coreos.com", ns, name) or {}).get("status") or {}).get("phase") == phase)

    def plan_waiting(self, ns, sub):
        def pred():
            s = self.c.get("subscriptions.operators.coreos.com", ns, sub)
            ref = ((s or {}).get("status") or {}).get("installPlanRef") or {}
            ip = ref and self.c.get("installplans.operators.coreos.com", ns, ref["name"])
            return bool(ip) and ip.get("status", {}).get("phase") == "RequiresApproval"
        return self.wait(f"InstallPlan of {ns}/{sub} RequiresApproval", pred)

    def approve(self, ns, sub):
        s = self.c.get("subscriptions.operators.coreos.com", ns, sub)
        name = s["status"]["installPlanRef"]["name"]
        self.c.kubectl("patch", "installplans.operators.coreos.com", "-n", ns, name, "--type", "merge", "-p", '{"spec":{"approved":true}}')

    def delete(self, kind, ns, name):
        self.c.kubectl("delete", kind, "-n", ns, name, "--ignore-not-found", "--wait=false")

    def gone(self, kind, ns, name):
        return self.wait(f"{kind} {ns}/{name} gone", lambda: self.c.get(kind, ns, name) is None)

    def replaced_gone(self, ns, csv):
        """Waits for the garbage collector to take what the replaced CSV owned (its
        OperatorCondition, and that one's Role and RoleBinding): both systems leave it to the
        collector, which lags under load, and a checkpoint taken before it would differ by timing."""
        self.gone("operatorconditions.operators.coreos.com", ns, csv)
        self.gone("roles.rbac.authorization.k8s.io", ns, csv)
        self.gone("rolebindings.rbac.authorization.k8s.io", ns, csv)

    def checkpoint(self, label):
        """Waits until every InstallPlan has left its transient states (`settled`)
        and two dumps 1.5 s apart agree (after normalising), then records what changed. Under load
        OLM's catalog operator marks a plan Complete seconds after its CSV succeeded: without the
        first condition a checkpoint could catch one system mid-install (the CI run at d5dadec did)."""
        prev, now, start, waiting, waited = None, None, time.time(), [], {}
        while time.time() - start < WAIT:
            now = self.c.dump()
            norm = canonical(changed(self.baseline, now))
            waiting = unsettled(now, self.subs)
            if norm == prev and not waiting:
                break
            if norm == prev:
                # what alone kept two equal dumps from being a checkpoint, for the log
                waited.update(dict.fromkeys(waiting))
            prev = norm
            time.sleep(1.5)
        else:
            log(f"  {self.scenario}: {label}: the cluster did not settle in {WAIT:.0f} s; still waiting for: "
                + ("; ".join(waiting) if waiting else "two equal dumps"))
        if waited:
            log(f"  {self.scenario}: {label}: two equal dumps were not settled yet ({time.time() - start:.1f} s): " + "; ".join(waited))
        self.record(self.scenario, label, {"changed": sorted("|".join(k) for k in changed(self.baseline, now)),
                                           "now": {"|".join(k): v for k, v in now.items()}})


TERMINAL_PLAN_PHASES = {"Complete", "RequiresApproval", "Failed"}


def unsettled(objs, subs):
    """What keeps the cluster from being settled, one phrase each (empty when settled):
    - an InstallPlan still Planning or Installing (a plan awaiting approval is a settled state);
    - a Subscription the scenario created that waits on an installing plan (`InstallPlanPending`
      other than `RequiresApproval`). Not the Subscriptions a system created for dependencies: OLM
      leaves `InstallPlanPending` on them after their plan completed (E16);
    - such a Subscription with a state whose Operator is not there yet;
    - an Operator whose component list still shows an earlier state of one of its components: its
      `status.components.refs[].conditions` are copies of each component's conditions (of a CSV's
      phase, reason and message), written after the component changed — by OLM's operator
      controller in another process, from its own watches (`pkg/controller/operators/
      operator_controller.go`, `decorators/operator.go`), by capstan up to 2 s later (E14). Two
      dumps 1.5 s apart can both fall between the component's change and its copy: OLM's Operator
      then still showed `InstallPlanPending` after the Subscription had dropped it;
    - a component not labelled yet (`unadopted`): OLM's adoption controller, also in another
      process, labels an install's objects after they exist (capstan labels them as it creates
      them); a checkpoint caught OLM's CRD of an installed CSV without its label;
    - an install for other namespaces whose Role or RoleBinding is not in each of them yet
      (`untenanted`): OLM copies them there after its copy of the CSV (`ensureTenantRBAC`,
      pkg/controller/operators/olm/operatorgroup.go), capstan in the InstallPlan (E17)."""
    out = []
    for (kind, ns, name), o in objs.items():
        status = (o or {}).get("status") or {}
        if kind == "InstallPlan" and status.get("phase") not in TERMINAL_PLAN_PHASES:
            out.append(f"InstallPlan {ns}/{name} {status.get('phase') or 'without a phase'}")
        if kind == "Subscription" and (ns, name) in subs:
            for c in status.get("conditions") or []:
                if c.get("type") == "InstallPlanPending" and c.get("status") == "True" and c.get("reason") != "RequiresApproval":
                    out.append(f"Subscription {ns}/{name} InstallPlanPending {c.get('reason')}")
            # Both systems make an Operator `<package>.<namespace>` for a Subscription with a
            # state; capstan writes it up to 2 s after the change (E14).
            package = ((o or {}).get("spec") or {}).get("name")
            if status.get("state") and package and ("Operator", "", f"{package}.{ns}") not in objs:
                out.append(f"Operator {package}.{ns}")
        out += unadopted(kind, ns, name, o, objs) + untenanted(kind, ns, o, objs)
        if kind == "Operator":
            for ref in (status.get("components") or {}).get("refs") or []:
                component = objs.get((ref.get("kind"), ref.get("namespace") or "", ref.get("name")))
                if component is not None and condition_set(ref.get("conditions")) != condition_set(component_conditions(component)):
                    out.append(f"Operator {name}: its copy of {ref.get('kind')} {ref.get('namespace') or ''}/{ref.get('name')}'s conditions")
    return out


# The kinds an Operator lists as components (OLM's `componentLists`, pkg/controller/operators/components.go).
COMPONENT_KINDS = {"Deployment", "Service", "Namespace", "APIService", "CustomResourceDefinition", "Subscription",
                   "InstallPlan", "ClusterServiceVersion", "OperatorCondition", "Secret", "ConfigMap", "ServiceAccount",
                   "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
COMPONENT_LABEL = "operators.coreos.com/"


def unadopted(kind, ns, name, o, objs):
    """The components of install `o` (a Subscription or a CSV) that do not carry its component label
    `operators.coreos.com/<package>.<namespace>` yet, by OLM's adoption rules
    (pkg/controller/operators/adoption_controller.go): a Subscription labels itself, its installed
    CSV and its latest InstallPlan with its label; a CSV that is not a copy gives its labels to every
    object of a component kind with an owner reference to it and to the CRDs it owns."""
    if not o:
        return []
    md, spec, status = o["metadata"], o.get("spec") or {}, o.get("status") or {}
    if kind == "Subscription" and spec.get("name"):
        label = f"{COMPONENT_LABEL}{spec['name']}.{ns}"
        parts = [("Subscription", ns, name), ("ClusterServiceVersion", ns, status.get("installedCSV")),
                 ("InstallPlan", ns, (status.get("installPlanRef") or {}).get("name"))]
        labels = [label]
    elif kind == "ClusterServiceVersion" and "olm.copiedFrom" not in (md.get("labels") or {}) and status.get("reason") != "Copied":
        labels = [k for k in md.get("labels") or {} if k.startswith(COMPONENT_LABEL)]
        if not labels:
            return []
        crds = {c.get("name") for c in (spec.get("customresourcedefinitions") or {}).get("owned") or []}
        parts = [k for k, c in objs.items() if c and k[0] in COMPONENT_KINDS and (
            any(r.get("uid") == md.get("uid") for r in c["metadata"].get("ownerReferences") or []) or
            (k[0] == "CustomResourceDefinition" and k[2] in crds))]
    else:
        return []
    out = []
    for part in parts:
        c = objs.get(part)
        missing = [l for l in labels if c and l not in (c["metadata"].get("labels") or {})]
        if missing:
            out.append(f"{part[0]} {part[1]}/{part[2]} without the component label {', '.join(missing)}")
    return out


def untenanted(kind, ns, o, objs):
    """The Roles and RoleBindings of CSV `o` (owner reference) missing in a namespace its
    `olm.targetNamespaces` annotation names besides its own (with all namespaces, empty, OLM makes
    ClusterRoles instead). Copies of the CSV are not installs."""
    if kind != "ClusterServiceVersion" or not o or "olm.copiedFrom" in (o["metadata"].get("labels") or {}):
        return []
    md = o["metadata"]
    targets = [t for t in ((md.get("annotations") or {}).get("olm.targetNamespaces") or "").split(",") if t and t != ns]
    if not targets:
        return []
    rbac = [k for k, c in objs.items() if c and k[0] in ("Role", "RoleBinding") and k[1] == ns and
            any(r.get("uid") == md.get("uid") for r in c["metadata"].get("ownerReferences") or [])]
    return [f"{k[0]} {k[2]} in target namespace {t}" for t in targets for k in rbac if (k[0], t, k[2]) not in objs]


def component_conditions(o):
    """The conditions an Operator copies of component `o`: its `status.conditions`, for a CSV one
    made of its phase, reason and message (OLM's `csvConditionsJQ`)."""
    status = o.get("status") or {}
    if o.get("kind") == "ClusterServiceVersion":
        return [{"type": status.get("phase"), "status": "True", "reason": status.get("reason"), "message": status.get("message")}]
    return status.get("conditions") or []


def condition_set(conditions):
    """Conditions compared by type, status, reason and message (their times are when each copy was made)."""
    return sorted((c.get("type") or "", c.get("status") or "", c.get("reason") or "", c.get("message") or "") for c in conditions or [])


def s_install_automatic(x):
    x.ns("s-auto"); x.og("s-auto", targets=["s-auto"]); x.sub("s-auto", "auto-op")
    x.csv_phase("s-auto", "auto-op.v1.0.0"); x.checkpoint("installed")


def s_install_manual(x):
    x.ns("s-manual"); x.og("s-manual", targets=["s-manual"]); x.sub("s-manual", "manual-op", approval="Manual")
    x.plan_waiting("s-manual", "manual-op"); x.checkpoint("awaiting approval")
    x.approve("s-manual", "manual-op"); x.csv_phase("s-manual", "manual-op.v1.0.0"); x.checkpoint("approved")


def s_upgrade_replaces(x):
    x.ns("s-replaces"); x.og("s-replaces", targets=["s-replaces"])
    x.sub("s-replaces", "nginx-operator", catalog="examples", channel="alpha", starting="nginx-operator.v0.1.0")
    x.csv_phase("s-replaces", "nginx-operator.v0.2.0"); x.gone("clusterserviceversions.operators.coreos.com", "s-replaces", "nginx-operator.v0.1.0")
    x.replaced_gone("s-replaces", "nginx-operator.v0.1.0")
    x.checkpoint("upgraded")


def s_upgrade_skips(x):
    x.ns("s-skips"); x.og("s-skips", targets=["s-skips"]); x.sub("s-skips", "skips-op", starting="skips-op.v1.0.0")
    x.csv_phase("s-skips", "skips-op.v1.2.0"); x.gone("clusterserviceversions.operators.coreos.com", "s-skips", "skips-op.v1.0.0")
    x.replaced_gone("s-skips", "skips-op.v1.0.0")
    x.checkpoint("upgraded")


def s_upgrade_skiprange(x):
    x.ns("s-range"); x.og("s-range", targets=["s-range"]); x.sub("s-range", "range-op", starting="range-op.v1.0.0")
    x.csv_phase("s-range", "range-op.v2.0.0"); x.gone("clusterserviceversions.operators.coreos.com", "s-range", "range-op.v1.0.0")
    x.replaced_gone("s-range", "range-op.v1.0.0")
    x.checkpoint("upgraded")


def s_dependencies(x):
    x.ns("s-deps"); x.og("s-deps", targets=["s-deps"]); x.sub("s-deps", "dep-app")
    for csv in ["dep-app.v1.0.0", "dep-base.v1.0.0", "dep-gvk.v1.0.0"]:
        x.csv_phase("s-deps", csv)
    x.checkpoint("installed")


def s_mode_own(x):
    x.ns("s-own"); x.og("s-own", targets=["s-own"]); x.sub("s-own", "modes-own")
    x.csv_phase("s-own", "modes-own.v1.0.0"); x.checkpoint("installed")


def s_mode_single(x):
    x.ns("s-single", "s-single-target"); x.og("s-single", targets=["s-single-target"]); x.sub("s-single", "modes-single")
    x.csv_phase("s-single", "modes-single.v1.0.0"); x.checkpoint("installed")


def s_mode_multi(x):
    x.ns("s-multi", "s-multi-a", "s-multi-b"); x.og("s-multi", targets=["s-multi-a", "s-multi-b"]); x.sub("s-multi", "modes-multi")
    x.csv_phase("s-multi", "modes-multi.v1.0.0"); x.checkpoint("installed")


def s_config(x):
    x.ns("s-config"); x.og("s-config", targets=["s-config"])
    x.sub("s-config", "config-op", config={
        "env": [{"name": "EXTRA", "value": "from-subscription"}, {"name": "WATCH_NAMESPACE", "value": "overridden"}],
        "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "20m"}},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "annotations": {"compare.capstan.dev/from": "subscription"},
    })
    x.csv_phase("s-config", "config-op.v1.0.0"); x.checkpoint("installed")


def s_webhook(x):
    x.ns("s-webhook"); x.og("s-webhook", targets=["s-webhook"]); x.sub("s-webhook", "webhook-op")
    x.csv_phase("s-webhook", "webhook-op.v1.0.0"); x.checkpoint("installed")


def s_cluster_permissions(x):
    x.ns("s-clusterperm"); x.og("s-clusterperm", targets=["s-clusterperm"]); x.sub("s-clusterperm", "cluster-op")
    x.csv_phase("s-clusterperm", "cluster-op.v1.0.0"); x.checkpoint("installed")


def s_scoped(x):
    ns = "s-scoped"
    x.ns(ns)
    x.c.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer", "namespace": ns}},
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "installer", "namespace": ns},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "installer", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "installer"},
               "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}]},
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "s-scoped-installer"},
               "rules": [{"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["*"]}]},
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "s-scoped-installer"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "s-scoped-installer"},
               "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns}]})
    x.og(ns, targets=[ns], sa="installer"); x.sub(ns, "scoped-op")
    x.csv_phase(ns, "scoped-op.v1.0.0"); x.checkpoint("installed")


def s_removal(x):
    ns = "s-removal"
    x.ns(ns); x.og(ns, targets=[ns]); x.sub(ns, "removal-op")
    x.csv_phase(ns, "removal-op.v1.0.0"); x.checkpoint("installed")
    x.delete("subscriptions.operators.coreos.com", ns, "removal-op")
    x.delete("clusterserviceversions.operators.coreos.com", ns, "removal-op.v1.0.0")
    x.gone("clusterserviceversions.operators.coreos.com", ns, "removal-op.v1.0.0")
    x.gone("deployments.apps", ns, "removal-op-controller-manager")
    x.checkpoint("removed")


def s_catalog_removed(x):
    """The operator keeps running when the CatalogSource it came from is deleted: its CSV,
    Deployment and RBAC stay. Both systems then resolve the Subscription again without the catalog
    and say so (OLM: the catalog's delete event requeues the Subscriptions that could see it,
    `notifyOnCatalog` in pkg/controller/operators/catalog/subscription/syncer.go); the checkpoint
    is taken once the Subscription's catalogHealth has dropped the catalog and its
    `ResolutionFailed` condition says why it cannot be resolved."""
    ns = "s-orphan"
    x.ns(ns); x.og(ns, targets=[ns]); x.catalog(ns, "orphan"); x.sub(ns, "orphan-op", catalog="orphan", source_ns=ns)
    x.csv_phase(ns, "orphan-op.v1.0.0"); x.checkpoint("installed")
    x.delete("catalogsources.operators.coreos.com", ns, "orphan")
    x.gone("catalogsources.operators.coreos.com", ns, "orphan")

    def resolved_without_it():
        status = (x.c.get("subscriptions.operators.coreos.com", ns, "orphan-op") or {}).get("status") or {}
        refs = [h.get("catalogSourceRef") or {} for h in status.get("catalogHealth") or []]
        return not any(r.get("namespace") == ns and r.get("name") == "orphan" for r in refs) and \
            any(c.get("type") == "ResolutionFailed" for c in status.get("conditions") or [])
    x.wait(f"Subscription {ns}/orphan-op resolved without the deleted catalog", resolved_without_it)
    x.checkpoint("catalog deleted")


def s_mode_all(x):
    # last but one: an AllNamespaces operator is copied into every namespace, earlier scenarios' too
    x.sub("operators", "modes-all"); x.csv_phase("operators", "modes-all.v1.0.0"); x.checkpoint("installed")


def s_cert_manager(x):
    x.sub("operators", "cert-manager", catalog="corpus", channel="stable")
    x.csv_phase("operators", "cert-manager.v1.16.5"); x.checkpoint("installed")


SCENARIOS = [
    ("install-automatic", s_install_automatic), ("install-manual", s_install_manual),
    ("upgrade-replaces", s_upgrade_replaces), ("upgrade-skips", s_upgrade_skips), ("upgrade-skiprange", s_upgrade_skiprange),
    ("dependencies", s_dependencies), ("mode-own", s_mode_own), ("mode-single", s_mode_single), ("mode-multi", s_mode_multi),
    ("subscription-config", s_config), ("webhook", s_webhook), ("cluster-permissions", s_cluster_permissions),
    ("scoped", s_scoped), ("removal", s_removal), ("catalog-removed", s_catalog_removed),
    ("mode-all", s_mode_all), ("cert-manager", s_cert_manager),
]


# ------------------------------------------------------------------ normalising and comparing

TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
# OLM's hashed RBAC names (base62 of a rule hash), ReplicaSet/pod-template hashes, generated suffixes
HASHED = re.compile(r"-[0-9A-Za-z]{28,}\b")
RS_HASH = re.compile(r"-[0-9a-f]{6,10}(?=\"|'|\s|$)")
DROP_META = {"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}
BYTES_KEYS = {"caBundle", "tls.crt", "tls.key", "ca.crt", "olmCAKey", "olm.caHash", "olmcahash", "token"}


def changed(baseline, now):
    """Objects created or changed since `baseline` (compared without resourceVersion etc.), and
    baseline objects now gone (as None)."""
    out = {}
    for k, o in now.items():
        if k[0] == "ServiceAccount" and k[2] == "default":
            continue
        if k[0] == "ConfigMap" and k[2] in ("kube-root-ca.crt",):
            continue
        b = baseline.get(k)
        if b is None or strip_volatile(b) != strip_volatile(o):
            out[k] = o
    for k in baseline:
        if k not in now:
            out[k] = None
    return out


def strip_volatile(o):
    o = copy.deepcopy(o)
    for f in DROP_META:
        o["metadata"].pop(f, None)
    return o


def canonical(objs):
    return json.dumps({"|".join(k): normalise(v, {}) for k, v in objs.items()}, sort_keys=True)


def generated_names(objs):
    """Maps generated object names (metadata.generateName, OLM's hashed names) to stable ones."""
    names = {}
    by_prefix = {}
    for k, o in objs.items():
        if o and o["metadata"].get("generateName"):
            by_prefix.setdefault((k[0], k[1], o["metadata"]["generateName"]), []).append(o)
        elif o and k[0] == "InstallPlan":
            # capstan names its InstallPlans install-<hash> itself; numbered alike
            by_prefix.setdefault((k[0], k[1], "install-"), []).append(o)
        elif o and k[0] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration") and \
                (o["metadata"].get("labels") or {}).get("olm.webhook-description-generate-name"):
            # capstan names webhook configurations <generateName>-<hash> itself (E8); numbered alike
            prefix = o["metadata"]["labels"]["olm.webhook-description-generate-name"] + "-"
            by_prefix.setdefault((k[0], k[1], prefix), []).append(o)
    for (_, _, prefix), os_ in by_prefix.items():
        # creation times have one-second resolution: plans made in the same second are ordered by
        # their spec.generation (both systems number a namespace's plans), then by name
        os_.sort(key=lambda o: (o["metadata"].get("creationTimestamp", ""), (o.get("spec") or {}).get("generation") or 0, o["metadata"]["name"]))
        for i, o in enumerate(os_):
            names[o["metadata"]["name"]] = f"{prefix}<{i + 1}>"
    return names


def normalise(o, names):
    if o is None:
        return "<deleted>"
    o = copy.deepcopy(o)
    md = o["metadata"]
    for f in DROP_META:
        md.pop(f, None)
    md.get("annotations", {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
    for ref in md.get("ownerReferences", []):
        ref.pop("uid", None)
    if o.get("kind") == "Service":
        for f in ("clusterIP", "clusterIPs"):
            if f in o.get("spec", {}):
                o["spec"][f] = "<ip>"
    if o.get("kind") == "Secret":
        o["data"] = {k: "<bytes>" for k in (o.get("data") or {})}
    return walk(o, names, None)


IDS = {"uid": "<uid>", "uuid": "<uid>", "resourceVersion": "<rv>"}


# OperatorGroup label keys carry the group's UID (`olm.operatorgroup.uid/<uid>`: on target
# namespaces, and as the namespace selector of webhooks), which differs between the two clusters.
OG_UID_KEY = re.compile(r"^olm\.operatorgroup\.uid/.+$")


def walk(v, names, key):
    if isinstance(v, dict):
        v = {OG_UID_KEY.sub("olm.operatorgroup.uid/<uid>", k): x for k, x in v.items()}
        v = {k: (IDS[k] if k in IDS and isinstance(x, str) else x) for k, x in v.items()}
        return {k: walk(x, names, k) for k, x in v.items() if not (k in BYTES_KEYS and isinstance(x, str))} | \
               {k: "<bytes>" for k, x in v.items() if k in BYTES_KEYS and isinstance(x, str)}
    if isinstance(v, list):
        return [walk(x, names, key) for x in v]
    if isinstance(v, str):
        if TIME.match(v):
            return "<time>"
        if v in names:
            return names[v]
        v = HASHED.sub("-<hash>", v)
        if key in ("message", "reason") or key is None:
            v = RS_HASH.sub("-<hash>", v)
        return v
    return v


def list_key(items):
    for k in ("name", "type", "kind"):
        if items and all(isinstance(i, dict) and k in i for i in items) and len({json.dumps(i[k]) for i in items}) == len(items):
            return k
    return None


def diff(a, b, path=""):
    """Differences between normalised values a (OLM) and b (capstan): [(path, a_value, b_value)];
    lists of objects with a unique name/type are matched by it, other lists compared as multisets."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k not in a:
                out.append((p, "<absent>", b[k]))
            elif k not in b:
                out.append((p, a[k], "<absent>"))
            else:
                out += diff(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list):
        k = list_key(a) if a else list_key(b)
        if k and (not a or list_key(a) == k) and (not b or list_key(b) == k):
            am, bm = {json.dumps(i[k]): i for i in a}, {json.dumps(i[k]): i for i in b}
            out = []
            for key in sorted(set(am) | set(bm)):
                p = f"{path}[{k}={json.loads(key)}]"
                out += diff(am.get(key, "<absent>"), bm.get(key, "<absent>"), p) if key in am and key in bm else \
                    [(p, am.get(key, "<absent>"), bm.get(key, "<absent>"))]
            return out
        sa, sb = sorted(json.dumps(i, sort_keys=True) for i in a), sorted(json.dumps(i, sort_keys=True) for i in b)
        return [] if sa == sb else [(path, a, b)]
    return [] if a == b else [(path, a, b)]


# ------------------------------------------------------------------ explanations

def explanations(path):
    """`match:` lines of the '## Explained differences' section: (id, kind glob, name glob, path glob)."""
    out, section, ident = [], None, None
    for line in open(path):
        if line.startswith("## "):
            section = line[3:].strip().lower()
        elif line.startswith("### ") and section == "explained differences":
            ident = line[4:].split(":")[0].strip()
        elif section == "explained differences" and line.strip().startswith("- match:"):
            m = dict(re.findall(r"(\w+)=`([^`]*)`", line))
            out.append((ident, m.get("kind", "*"), m.get("name", "*"), m.get("path", "*"), m.get("scenario", "*")))
    return out


def glob(pattern, text):
    """`*` matches anything, everything else literally (paths contain `[name=x]`)."""
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), text) is not None


def explained(rules, scenario, kind, ns, name, path):
    for ident, k, n, p, s in rules:
        if glob(k, kind) and glob(n, f"{ns}/{name}") and glob(p, path) and glob(s, scenario):
            return ident
    return None


# ------------------------------------------------------------------ main

# The catalogs a system serves from the start, in the global catalog namespace `olm`; the others are
# added by the scenario that uses them (Ctx.catalog).
GLOBAL_CATALOGS = ("examples", "compare", "corpus")


def run_system(system, cluster, catalogs, scenarios, result):
    system.start(cluster, {n: d for n, d in catalogs.items() if n in GLOBAL_CATALOGS})
    cluster.refresh_kinds()
    # Both systems start from the same environment; wait until the catalogs are served.
    time.sleep(3)
    for name, fn in scenarios:
        log(f"{system.name}: {name}")
        t0 = time.time()
        try:
            fn(Ctx(cluster, name, lambda s, label, objs: result.setdefault(f"{s} / {label}", objs), system, catalogs))
        except Exception as e:  # a failed step is reported, the other scenarios still run
            log(f"  {name} failed under {system.name}: {e}")
            result.setdefault(f"{name} / <error>", {"changed": [f"Error||{name}"],
                                                    "now": {f"Error||{name}": {"kind": "Error", "metadata": {"name": name}, "error": str(e)[:500]}}})
        log(f"  {name}: {time.time() - t0:.1f} s")
    system.stop(cluster)


def save(path, result):
    with open(path, "w") as f:
        json.dump(result, f)


def load(path):
    return json.load(open(path))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--only", choices=["olm", "capstan"])
    ap.add_argument("--report", action="store_true", help="compare the last dumps in target/compare-olm/ again (no cluster)")
    ap.add_argument("--capstan", default=os.path.join(ROOT, "target", "release", "capstan"))
    args = ap.parse_args()
    wanted = [s for s in args.scenarios.split(",") if s]
    scenarios = [s for s in SCENARIOS if not wanted or s[0] in wanted]
    unknown = set(wanted) - {s[0] for s in SCENARIOS}
    if unknown:
        sys.exit(f"compare-olm: unknown scenarios {sorted(unknown)}; known: {[s[0] for s in SCENARIOS]}")
    os.makedirs(OUT, exist_ok=True)
    if args.report:
        report(load(os.path.join(OUT, "olm.json")), load(os.path.join(OUT, "capstan.json")), [s[0] for s in scenarios])
    run(["bash", os.path.join(ROOT, "tests/peers/build-olm.sh")])
    run(["bash", os.path.join(ROOT, "tests/peers/build.sh")])

    results = {}
    work = tempfile.mkdtemp(prefix="compare-olm-")
    systems = [Capstan(args.capstan), Olm()]
    catalogs = None
    for system in systems:
        dump_file = os.path.join(OUT, f"{system.name}.json")
        if args.only and args.only != system.name:
            results[system.name] = load(dump_file)
            continue
        cluster = Cluster(system.name)
        cluster.up()
        try:
            # catalogs are built once (capstan pushes the bundle images to the first cluster's
            # registry); OLM serves the same FBC directories
            if catalogs is None:
                catalogs = build_catalogs(args.capstan, cluster.registry, work)
            res = {}
            run_system(system, cluster, catalogs, scenarios, res)
            results[system.name] = res
            save(dump_file, res)
        finally:
            system.stop(cluster)
            if not args.keep:
                cluster.down(purge=False)
    report(results["olm"], results["capstan"], [s[0] for s in scenarios])


def report(olm, cap, scenario_names):
    rules = explanations(os.path.join(ROOT, "docs", "olm-differences.md"))
    lines, unexplained, explained_count, objects = [], [], {}, 0
    for cp in sorted(set(olm) | set(cap), key=lambda c: (scenario_names.index(c.split(" / ")[0]) if c.split(" / ")[0] in scenario_names else 99, c)):
        scenario = cp.split(" / ")[0]
        # the objects either system changed, each side's current version of them (an object one
        # system left unchanged is compared as it is on that side)
        keys = set(olm.get(cp, {}).get("changed", [])) | set(cap.get(cp, {}).get("changed", []))
        a = {tuple(k.split("|")): olm.get(cp, {}).get("now", {}).get(k) for k in keys}
        b = {tuple(k.split("|")): cap.get(cp, {}).get("now", {}).get(k) for k in keys}
        a = {k: v for k, v in a.items() if v is not None}
        b = {k: v for k, v in b.items() if v is not None}
        # generated names are numbered over every object of the checkpoint, so that a changed
        # object referring to an unchanged one (a Subscription's installPlanRef) maps alike
        na = generated_names({tuple(k.split("|")): v for k, v in olm.get(cp, {}).get("now", {}).items()})
        nb = generated_names({tuple(k.split("|")): v for k, v in cap.get(cp, {}).get("now", {}).items()})
        ka = {key_of(k, a, na): normalise(v, na) for k, v in a.items()}
        kb = {key_of(k, b, nb): normalise(v, nb) for k, v in b.items()}
        for key in sorted(set(ka) | set(kb)):
            objects += 1
            kind, ns, name = key
            if key not in kb:
                ds = [("<object>", "present", "<absent>")]
            elif key not in ka:
                ds = [("<object>", "<absent>", "present")]
            else:
                ds = diff(ka[key], kb[key])
            for path, va, vb in ds:
                gpath = re.sub(r"\[(\w+)=[^\]]*\]", r"[\1=*]", path)
                ident = explained(rules, scenario, kind, ns, name, path)
                entry = (cp, kind, ns, name, path, va, vb)
                if ident:
                    explained_count[ident] = explained_count.get(ident, 0) + 1
                else:
                    unexplained.append((kind, gpath, entry))
    # grouped: kind + path pattern
    groups = {}
    for kind, gpath, entry in unexplained:
        groups.setdefault((kind, gpath), []).append(entry)
    out = []
    for (kind, gpath), entries in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        cp, _, ns, name, path, va, vb = entries[0]
        out.append(f"- {kind} `{gpath}` ×{len(entries)} (e.g. {cp}: {ns + '/' if ns else ''}{name} `{path}`)\n"
                   f"    OLM:     {short(va)}\n    capstan: {short(vb)}")
    text = "\n".join(out)
    with open(os.path.join(OUT, "report.txt"), "w") as f:
        f.write(text + "\n\nexplained: " + json.dumps(explained_count, indent=1) + "\n")
        f.write("\n\nall unexplained:\n" + "\n".join(f"{e[0]} | {e[1]} {e[2]}/{e[3]} {e[4]}: OLM={short(e[5], 300)} capstan={short(e[6], 300)}" for _, _, e in unexplained))
    print(text)
    print(f"\nexplained by docs/olm-differences.md: {sum(explained_count.values())} ({', '.join(f'{k}: {v}' for k, v in sorted(explained_count.items()))})")
    print(f"full report: {os.path.relpath(os.path.join(OUT, 'report.txt'), ROOT)}")
    print(f"compare-olm: {len(scenario_names)} scenarios, {objects} objects compared, {len(unexplained)} unexplained differences")
    sys.exit(1 if unexplained else 0)


def key_of(k, objs, names):
    """The compared key of object `k` of `objs`: its generated name numbered, or its hashed
    suffix replaced — unless another object of the same kind and namespace would get the same
    key (cert-manager's three `<csv>-cer-<hash>` ClusterRoles), then its own name, so that no
    object silently replaces another."""
    def norm(n):
        return names.get(n, HASHED.sub("-<hash>", n))
    mine = norm(k[2])
    if sum(1 for o in objs if o[0] == k[0] and o[1] == k[1] and norm(o[2]) == mine) > 1:
        return k
    return (k[0], k[1], mine)


def short(v, n=160):
    s = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return s if len(s) <= n else s[:n] + "…"


if __name__ == "__main__":
    main()
