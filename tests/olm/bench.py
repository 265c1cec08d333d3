#!/usr/bin/env python3
"""OLM v0 and capstan side by side: `make bench-olm`. Prints a markdown table.

Each system gets its own fresh cluster of tests/cluster/, the same two catalogs (the example bundles,
and the whole community-operators v4.20 corpus catalog), and the same work, one system after the
other. On the kwok node (a fresh cluster with CAPSTAN_REAL_NODE=0):
  - a warm-up install (not timed: both systems have fetched and indexed their catalogs after it);
  - 10 installs of nginx-operator one after another, each in a fresh namespace with an
    OwnNamespace OperatorGroup, timed from the Subscription's create call to the watch event of
    the CSV with phase Succeeded (a watch on the CSV opened before the create);
  - 20, then 100 Subscriptions created at once (fresh namespaces made first), timed to the last
    CSV Succeeded (polled with one list call every 100 ms);
  - resident memory (VmRSS from /proc) of every process the system needs — OLM: olm, catalog and
    one `opm serve` per catalog; capstan: `capstan controller` — after the catalogs are loaded and
    after all installs;
  - API requests per install: the API server's apiserver_request_total over the 10 sequential
    installs, minus the benchmark's own requests, divided by 10. It includes what the control plane
    does in reaction (Deployment → ReplicaSet → Pod, kwok's pod status), the same for both systems.
Then on the real node (a fresh cluster with CAPSTAN_REAL_NODE=1, one system after the other): the
nginx-operator image built here (images/build.sh) pushed to that cluster's registry and the example
bundles relocated to it (as examples/publish.sh does), and the same 10 sequential installs with the
Subscription's spec.config placing the operator on the real node — timed to the CSV Succeeded with
its helm-operator pod pulled, started and Ready on the real node (`install_on_real_node`: OLM v0
first runs a pod without spec.config, here on the kwok node, and its CSV says Succeeded before the
configured pod exists; that earlier Succeeded does not count). No other environment of this machine
may hold the real node meanwhile (`make cluster-down` first).
Options: --runs N (default 10), --bursts 20,100, --only olm|capstan (one system, print its rows),
--nodes kwok,real (default both).
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
from kube import Kube  # noqa: E402

CSV = "nginx-operator.v0.2.0"
CORPUS_CATALOG = os.path.join(compare.CORPUS, "catalogs", "v4.20")


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def ns_and_group(k, name):
    k.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    k.create(f"/apis/operators.coreos.com/v1/namespaces/{name}/operatorgroups",
             {"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": name},
              "spec": {"targetNamespaces": [name]}})


# spec.config of the Subscriptions on the real node: its label and taint (tests/cluster/up.sh)
REAL_NODE_CONFIG = {"nodeSelector": {"type": "real"},
                    "tolerations": [{"key": "capstan.dev/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}]}


def subscribe(k, ns, config=None):
    spec = {"name": "nginx-operator", "channel": "alpha", "source": "examples", "sourceNamespace": "olm"}
    if config:
        spec["config"] = config
    k.create(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/subscriptions",
             {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "metadata": {"name": "nginx-operator", "namespace": ns},
              "spec": spec})


def succeeded(k, ns):
    c = k.get(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/clusterserviceversions/{CSV}")
    return bool(c) and (c.get("status") or {}).get("phase") == "Succeeded"


DEPLOYMENT = "nginx-operator-controller-manager"


def available(d):
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in (d.get("status") or {}).get("conditions") or [])


def rolled_out_on(node):
    """The operator's Deployment is Available with every replica of its current template, that
    template places the pods on the real node, and no older ReplicaSet has pods left."""
    def check(d):
        spec, st = d.get("spec") or {}, d.get("status") or {}
        want = spec.get("replicas", 1)
        return (available(d) and ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector", {}).get("type") == node
                and st.get("observedGeneration", 0) >= d["metadata"].get("generation", 0)
                and st.get("updatedReplicas") == want and st.get("replicas") == want and st.get("availableReplicas") == want)
    return check


def install_on_real_node(k, ns, timeout=300, seen=None, succeeded=None):
    """Seconds from the Subscription's create call (with REAL_NODE_CONFIG) to the CSV being
    Succeeded with its operator running Ready on the real node: the later of the watch event of
    the Deployment rolled out with the Subscription's config (`rolled_out_on`) and the CSV's last
    transition into Succeeded. A CSV that was Succeeded earlier with a pod that ignored the
    config (OLM v0 creates the Deployment first without spec.config, so on this cluster its
    first pod runs on the kwok node, then rolls out the configured one) counts only once it is
    Succeeded again after that rollout; if the CSV is still Succeeded from before when the
    rollout completes, the rollout's time counts (the operator runs on the real node and the CSV
    says Succeeded). `seen` gets the Deployment's time, `succeeded` the number of times the CSV
    entered Succeeded by then (OLM v0: 2 here, capstan: 1)."""
    ns_and_group(k, ns)
    watches = []
    try:
        csvs = k.record(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/clusterserviceversions", CSV)
        watches.append(csvs)
        d = k.watch_for(f"/apis/apps/v1/namespaces/{ns}/deployments", DEPLOYMENT, rolled_out_on("real"))
        watches.append(d)
        t0 = time.perf_counter()
        subscribe(k, ns, REAL_NODE_CONFIG)
        ready = d.wait(timeout)
        while True:
            phases = [(t, (o.get("status") or {}).get("phase")) for t, o in list(csvs.events)]
            if phases and phases[-1][1] == "Succeeded":
                since = phases[-1][0]
                for t, p in reversed(phases):
                    if p != "Succeeded":
                        break
                    since = t
                if seen is not None:
                    seen.append(ready - t0)
                if succeeded is not None:
                    succeeded.append(sum(1 for i, (_, p) in enumerate(phases)
                                         if p == "Succeeded" and (i == 0 or phases[i - 1][1] != "Succeeded")))
                return max(ready, since) - t0
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"CSV not Succeeded after the rollout: {[p for _, p in phases]}")
            time.sleep(0.005)
    except RuntimeError as e:
        raise RuntimeError(f"{ns}: {CSV} not Succeeded on the real node after {timeout} s ({e})") from None
    finally:
        for w in watches:
            w.close()


def install_one(k, ns, timeout=300, config=None, seen=None):
    """Seconds from the Subscription's create call to the watch event of its CSV with phase
    Succeeded (the watch is opened before the create). With `seen` (a list), also appends the
    seconds to the watch event of the operator's Deployment being Available: what the control
    plane (Deployment → ReplicaSet → Pod → node) took is in it, the same for both systems."""
    ns_and_group(k, ns)
    watches = []
    try:
        w = k.watch_for(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/clusterserviceversions", CSV,
                        lambda c: (c.get("status") or {}).get("phase") == "Succeeded")
        watches.append(w)
        d = k.watch_for(f"/apis/apps/v1/namespaces/{ns}/deployments", DEPLOYMENT, available) if seen is not None else None
        watches.append(d)
        t0 = time.perf_counter()
        subscribe(k, ns, config)
        done = w.wait(timeout) - t0
        if d is not None:
            seen.append(d.wait(timeout) - t0)
        return done
    except RuntimeError as e:
        raise RuntimeError(f"{ns}: {CSV} not Succeeded after {timeout} s ({e})") from None
    finally:
        for x in watches:
            if x is not None:
                x.close()


def burst(k, prefix, n, timeout=900):
    names = [f"{prefix}-{i}" for i in range(n)]
    for ns in names:
        ns_and_group(k, ns)
    t0 = time.perf_counter()
    for ns in names:
        subscribe(k, ns)
    want = set(names)
    while True:
        items = (k.get("/apis/operators.coreos.com/v1alpha1/clusterserviceversions") or {}).get("items", [])
        done = {c["metadata"]["namespace"] for c in items
                if c["metadata"]["name"] == CSV and (c.get("status") or {}).get("phase") == "Succeeded"}
        if want <= done:
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"burst {n}: {len(want - done)} CSVs not Succeeded after {timeout} s")
        time.sleep(0.1)


def catalogs_ready(k, catalogs, timeout=300):
    """Waits until every CatalogSource of olm reports READY (both systems write
    status.connectionState), then 2 s more, so that "catalogs loaded" is read after every catalog
    (the corpus one too, which the warm-up install does not need) is loaded."""
    t0 = time.perf_counter()
    while True:
        items = (k.get("/apis/operators.coreos.com/v1alpha1/namespaces/olm/catalogsources") or {}).get("items", [])
        ready = {c["metadata"]["name"] for c in items
                 if ((c.get("status") or {}).get("connectionState") or {}).get("lastObservedState") == "READY"}
        if set(catalogs) <= ready:
            time.sleep(2)
            return
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"CatalogSources not READY after {timeout} s: {sorted(set(catalogs) - ready)}")
        time.sleep(0.2)


def p90(v):
    s = sorted(v)
    return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]


def measure(system, catalogs_for, runs, bursts):
    """The kwok-node measurements of one system on a fresh cluster."""
    cluster = compare.Cluster(f"bench-{system.name}")
    cluster.up()
    res = {"load": [os.getloadavg()[0]]}
    try:
        catalogs = catalogs_for(cluster, relocate=False)
        system.start(cluster, catalogs)
        k = Kube(cluster.kubeconfig)
        res["warmup"] = install_one(k, "bench-warm", timeout=600)
        catalogs_ready(k, catalogs)
        pids = system.pids(cluster)
        res["rss_loaded"] = {n: rss_mib(p) for n, p in pids.items()}
        m0, r0 = k.metrics_total(), k.requests
        times, ready = [], []
        for i in range(runs):
            times.append(install_one(k, f"bench-seq-{i}", seen=ready))
            print(f"[bench] {system.name} install {i}: {times[-1]:.3f} s (Deployment Available at {ready[-1]:.3f} s)", file=sys.stderr, flush=True)
        m1, r1 = k.metrics_total(), k.requests
        res["times"] = times
        res["deployment_available"] = ready
        # our own requests: r1 - r0 (the first metrics call is counted by the server before it
        # answers, so it is in m1 - m0 as well)
        res["api_per_install"] = (m1 - m0 - (r1 - r0)) / runs
        res["load"].append(os.getloadavg()[0])
        for n in bursts:
            res[f"burst{n}"] = burst(k, f"bench-b{n}", n)
            print(f"[bench] {system.name} {n} at once: {res[f'burst{n}']:.2f} s", file=sys.stderr, flush=True)
            res["load"].append(os.getloadavg()[0])
        res["rss_after"] = {n: rss_mib(p) for n, p in pids.items()}
    finally:
        system.stop(cluster)
        cluster.down(purge=True)
    return res


def measure_real(system, catalogs_for, runs):
    """The real-node installs of one system on a fresh cluster with the real node: a warm-up
    install (which also pulls the operator image into the node's containerd), then `runs`
    sequential installs, each waiting for its pod to be pulled, started and Ready."""
    cluster = compare.Cluster(f"bench-real-{system.name}", real_node=True)
    cluster.up()
    res = {"load": [os.getloadavg()[0]]}
    try:
        compare.run(["bash", os.path.join(compare.ROOT, "images/build.sh"), "--push", cluster.registry, "httpd", "nginx-operator"],
                    env=cluster.env)
        catalogs = catalogs_for(cluster, relocate=True)
        system.start(cluster, catalogs)
        k = Kube(cluster.kubeconfig)
        res["warmup"] = install_on_real_node(k, "bench-warm", timeout=600)
        catalogs_ready(k, catalogs)
        times, ready, entered = [], [], []
        for i in range(runs):
            times.append(install_on_real_node(k, f"bench-real-{i}", seen=ready, succeeded=entered))
            print(f"[bench] {system.name} real-node install {i}: {times[-1]:.3f} s (Deployment rolled out on the real node at {ready[-1]:.3f} s; "
                  f"CSV entered Succeeded {entered[-1]}×)", file=sys.stderr, flush=True)
        res["times"] = times
        res["deployment_available"] = ready
        res["csv_entered_succeeded"] = entered
        res["load"].append(os.getloadavg()[0])
        pods = (k.get("/api/v1/pods?labelSelector=control-plane%3Dcontroller-manager") or {}).get("items", [])
        res["pods_on_real_node"] = sum(1 for p in pods if p["spec"].get("nodeName") == open(os.path.join(cluster.dir, "node-name")).read().strip())
    finally:
        system.stop(cluster)
        cluster.down(purge=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--bursts", default="20,100")
    ap.add_argument("--only", choices=["olm", "capstan"])
    ap.add_argument("--nodes", default="kwok,real", help="kwok, real or both (kwok,real)")
    ap.add_argument("--capstan", default=os.path.join(compare.ROOT, "target", "release", "capstan"))
    args = ap.parse_args()
    bursts = [int(b) for b in args.bursts.split(",") if b]
    compare.run(["bash", os.path.join(compare.ROOT, "tests/peers/build-olm.sh")])
    compare.run(["bash", os.path.join(compare.ROOT, "tests/peers/build.sh")])
    import tempfile
    work = tempfile.mkdtemp(prefix="bench-olm-")
    built = {}

    def catalogs_for(cluster, relocate):
        # the example catalog's bundles are pushed to this cluster's registry (capstan pulls them);
        # relocated, the images their CSVs name by digest (quay.io/example/NAME@sha256:...) are
        # named in this cluster's registry, where images/build.sh pushed them (examples/publish.sh)
        base = os.path.join(work, os.path.basename(cluster.dir))
        d = os.path.join(base, "examples")
        for pkg in ["nginx-operator", "kaiwudb-operator"]:
            root = os.path.join(compare.ROOT, "bundles", pkg)
            for v in sorted(os.listdir(root)):
                if os.path.isdir(os.path.join(root, v)):
                    src = os.path.join(root, v)
                    if relocate:
                        src = relocated(src, os.path.join(base, "bundles", pkg, v), cluster.registry)
                    ref = f"{cluster.registry}/bench/{pkg}-bundle:v{v}"
                    compare.run([args.capstan, "bundle", "push", "-q", src, ref])
                    compare.run([args.capstan, "catalog", "add", d, ref])
        built[cluster.dir] = d
        return {"examples": d, "corpus": CORPUS_CATALOG}

    results = {}
    out = os.path.join(compare.OUT, "bench.json")
    os.makedirs(compare.OUT, exist_ok=True)
    nodes = [n for n in args.nodes.split(",") if n]
    # a partial run (one system, or one node) keeps the other rows of the last run
    if (args.only or nodes != ["kwok", "real"]) and os.path.exists(out):
        results = json.load(open(out))
    for node in nodes:
        for system in [compare.Olm(), compare.Capstan(args.capstan)]:
            if args.only and args.only != system.name:
                continue
            key = system.name if node == "kwok" else f"{system.name}-real"
            results[key] = measure(system, catalogs_for, args.runs, bursts) if node == "kwok" else measure_real(system, catalogs_for, args.runs)
            json.dump(results, open(out, "w"), indent=1)
    table(results, bursts)


def relocated(src, dst, registry):
    """A copy of bundle directory `src` at `dst` whose quay.io/example/NAME@sha256:... images are
    REGISTRY/capstan/NAME@sha256:... (the digests images/build.sh pushed there)."""
    import re
    import shutil
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    for top, _, files in os.walk(dst):
        for f in files:
            if f.endswith(".yaml"):
                p = os.path.join(top, f)
                text = open(p).read()
                new = re.sub(r"quay\.io/example/([a-z0-9._-]+)@sha256:", lambda m: f"{registry}/capstan/{m.group(1)}@sha256:", text)
                if new != text:
                    open(p, "w").write(new)
    return dst


def table(r, bursts):
    o, c = r.get("olm"), r.get("capstan")
    if not (o and c):
        print(json.dumps(r, indent=1))
        return
    oreal, creal = r.get("olm-real"), r.get("capstan-real")

    def row(name, a, b, unit="s", fmt="{:.2f}"):
        ratio = a / b if b else float("nan")
        print(f"| {name} | {fmt.format(a)} {unit} | {fmt.format(b)} {unit} | {ratio:.1f}× |")

    print(f"| metric (kwok node) | OLM v0 {compare.OLM_VERSION} | capstan | OLM / capstan |")
    print("|---|---:|---:|---:|")
    row(f"Subscription → CSV Succeeded, median of {len(o['times'])}", statistics.median(o["times"]), statistics.median(c["times"]))
    row(f"Subscription → CSV Succeeded, p90 of {len(o['times'])}", p90(o["times"]), p90(c["times"]))
    if "deployment_available" in o and "deployment_available" in c:
        row("Subscription → its Deployment Available, median", statistics.median(o["deployment_available"]), statistics.median(c["deployment_available"]), "s", "{:.3f}")
    for n in bursts:
        row(f"{n} Subscriptions at once → all CSVs Succeeded", o[f"burst{n}"], c[f"burst{n}"])
    row("resident memory, catalogs loaded (all processes)", sum(o["rss_loaded"].values()), sum(c["rss_loaded"].values()), "MiB", "{:.0f}")
    row("resident memory, after all installs", sum(o["rss_after"].values()), sum(c["rss_after"].values()), "MiB", "{:.0f}")
    row("API requests per install (apiserver_request_total)", o["api_per_install"], c["api_per_install"], "", "{:.0f}")
    if oreal and creal and not ("csv_entered_succeeded" in oreal and "csv_entered_succeeded" in creal):
        print("| real node: rows of an older bench.py (OLM timed to its first Succeeded, before its pod reached the real node): not comparable, rerun with --nodes real | | | |")
    elif oreal and creal:
        row(f"real node: Subscription → CSV Succeeded (pod Ready), median of {len(oreal['times'])}", statistics.median(oreal["times"]), statistics.median(creal["times"]))
        row(f"real node: Subscription → CSV Succeeded (pod Ready), p90 of {len(oreal['times'])}", p90(oreal["times"]), p90(creal["times"]))
        row("real node: Subscription → Deployment rolled out on the real node, median", statistics.median(oreal["deployment_available"]), statistics.median(creal["deployment_available"]), "s", "{:.3f}")
    print()
    for name, res in (("OLM", o), ("capstan", c)):
        procs = ", ".join(f"{n} {v:.0f}" for n, v in sorted(res["rss_after"].items()))
        print(f"- {name}: processes after installs (MiB): {procs}; warm-up install {res['warmup']:.2f} s; "
              f"load average (1 min) during the run {min(res['load']):.1f}–{max(res['load']):.1f}; installs (s): "
              + ", ".join(f"{t:.3f}" for t in res["times"]))
    for name, res in (("OLM", oreal), ("capstan", creal)):
        if res:
            print(f"- {name} on the real node: warm-up install (image pulled) {res['warmup']:.2f} s; {res['pods_on_real_node']} operator pods "
                  f"on the real node after the installs; load average (1 min) {min(res['load']):.1f}–{max(res['load']):.1f}; "
                  f"times the CSV entered Succeeded per install: {res.get('csv_entered_succeeded', '?')}; installs (s): "
                  + ", ".join(f"{t:.3f}" for t in res["times"]))


if __name__ == "__main__":
    main()
