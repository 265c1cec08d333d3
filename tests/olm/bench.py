#!/usr/bin/env python3
"""OLM v0 and capstan side by side (issue 13): `make bench-olm`. Prints a markdown table.

Each system gets its own fresh cluster of tests/cluster/ (CAPSTAN_REAL_NODE=0: the kwok node; the
real node belongs to the demo environment), the same two catalogs (the example bundles, and the
whole community-operators v4.20 corpus catalog), and the same work, one system after the other:
  - a warm-up install (not timed: both systems have fetched and indexed their catalogs after it);
  - 10 installs of nginx-operator one after another, each in a fresh namespace with an
    OwnNamespace OperatorGroup, timed from the Subscription's create call to the API server
    returning the CSV with phase Succeeded (polled every 20 ms over one kept-alive connection);
  - 20, then 100 Subscriptions created at once (fresh namespaces made first), timed to the last
    CSV Succeeded (polled with one list call every 100 ms);
  - resident memory (VmRSS from /proc) of every process the system needs — OLM: olm, catalog and
    one `opm serve` per catalog; capstan: `capstan controller` — after the catalogs are loaded and
    after all installs;
  - API requests per install: the API server's apiserver_request_total over the 10 sequential
    installs, minus the benchmark's own requests, divided by 10. It includes what the control plane
    does in reaction (Deployment → ReplicaSet → Pod, kwok's pod status), the same for both systems.
Options: --runs N (default 10), --bursts 20,100, --only olm|capstan (one system, print its rows).
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


def subscribe(k, ns):
    k.create(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/subscriptions",
             {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "metadata": {"name": "nginx-operator", "namespace": ns},
              "spec": {"name": "nginx-operator", "channel": "alpha", "source": "examples", "sourceNamespace": "olm"}})


def succeeded(k, ns):
    c = k.get(f"/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/clusterserviceversions/{CSV}")
    return bool(c) and (c.get("status") or {}).get("phase") == "Succeeded"


def install_one(k, ns, timeout=300):
    ns_and_group(k, ns)
    t0 = time.perf_counter()
    subscribe(k, ns)
    while not succeeded(k, ns):
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"{ns}: {CSV} not Succeeded after {timeout} s")
        time.sleep(0.02)
    return time.perf_counter() - t0


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
    cluster = compare.Cluster(f"bench-{system.name}")
    cluster.up()
    res = {"load": [os.getloadavg()[0]]}
    try:
        catalogs = catalogs_for(cluster)
        system.start(cluster, catalogs)
        k = Kube(cluster.kubeconfig)
        res["warmup"] = install_one(k, "bench-warm", timeout=600)
        catalogs_ready(k, catalogs)
        pids = system.pids(cluster)
        res["rss_loaded"] = {n: rss_mib(p) for n, p in pids.items()}
        m0, r0 = k.metrics_total(), k.requests
        times = []
        for i in range(runs):
            times.append(install_one(k, f"bench-seq-{i}"))
            print(f"[bench] {system.name} install {i}: {times[-1]:.2f} s", file=sys.stderr, flush=True)
        m1, r1 = k.metrics_total(), k.requests
        res["times"] = times
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--bursts", default="20,100")
    ap.add_argument("--only", choices=["olm", "capstan"])
    ap.add_argument("--capstan", default=os.path.join(compare.ROOT, "target", "release", "capstan"))
    args = ap.parse_args()
    bursts = [int(b) for b in args.bursts.split(",") if b]
    compare.run(["bash", os.path.join(compare.ROOT, "tests/peers/build-olm.sh")])
    compare.run(["bash", os.path.join(compare.ROOT, "tests/peers/build.sh")])
    import tempfile
    work = tempfile.mkdtemp(prefix="bench-olm-")
    built = {}

    def catalogs_for(cluster):
        # the example catalog's bundles are pushed to this cluster's registry (capstan pulls them)
        d = os.path.join(work, cluster.dir.rsplit("-", 1)[-1], "examples")
        for pkg in ["nginx-operator", "kaiwudb-operator"]:
            root = os.path.join(compare.ROOT, "bundles", pkg)
            for v in sorted(os.listdir(root)):
                if os.path.isdir(os.path.join(root, v)):
                    ref = f"{cluster.registry}/bench/{pkg}-bundle:v{v}"
                    compare.run([args.capstan, "bundle", "push", "-q", os.path.join(root, v), ref])
                    compare.run([args.capstan, "catalog", "add", d, ref])
        built[cluster.dir] = d
        return {"examples": d, "corpus": CORPUS_CATALOG}

    results = {}
    out = os.path.join(compare.OUT, "bench.json")
    os.makedirs(compare.OUT, exist_ok=True)
    if args.only and os.path.exists(out):
        results = json.load(open(out))
    for system in [compare.Olm(), compare.Capstan(args.capstan)]:
        if args.only and args.only != system.name:
            continue
        results[system.name] = measure(system, catalogs_for, args.runs, bursts)
        json.dump(results, open(out, "w"), indent=1)
    table(results, bursts)


def table(r, bursts):
    o, c = r.get("olm"), r.get("capstan")
    if not (o and c):
        print(json.dumps(r, indent=1))
        return

    def row(name, a, b, unit="s", fmt="{:.2f}"):
        ratio = a / b if b else float("nan")
        print(f"| {name} | {fmt.format(a)} {unit} | {fmt.format(b)} {unit} | {ratio:.1f}× |")

    print("| metric (kwok node) | OLM v0 v0.38.0 | capstan | OLM / capstan |")
    print("|---|---:|---:|---:|")
    row(f"Subscription → CSV Succeeded, median of {len(o['times'])}", statistics.median(o["times"]), statistics.median(c["times"]))
    row(f"Subscription → CSV Succeeded, p90 of {len(o['times'])}", p90(o["times"]), p90(c["times"]))
    for n in bursts:
        row(f"{n} Subscriptions at once → all CSVs Succeeded", o[f"burst{n}"], c[f"burst{n}"])
    row("resident memory, catalogs loaded (all processes)", sum(o["rss_loaded"].values()), sum(c["rss_loaded"].values()), "MiB", "{:.0f}")
    row("resident memory, after all installs", sum(o["rss_after"].values()), sum(c["rss_after"].values()), "MiB", "{:.0f}")
    row("API requests per install (apiserver_request_total)", o["api_per_install"], c["api_per_install"], "", "{:.0f}")
    print()
    for name, res in (("OLM", o), ("capstan", c)):
        procs = ", ".join(f"{n} {v:.0f}" for n, v in sorted(res["rss_after"].items()))
        print(f"- {name}: processes after installs (MiB): {procs}; warm-up install {res['warmup']:.2f} s; "
              f"load average (1 min) during the run {min(res['load']):.1f}–{max(res['load']):.1f}")


if __name__ == "__main__":
    main()
