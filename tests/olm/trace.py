#!/usr/bin/env python3
"""Trace of one capstan install: where the time between a Subscription's create and its
CSV Succeeded goes. A fresh cluster of tests/cluster/ (kwok node), `capstan controller` with
RUST_LOG=info,capstan=debug,kube_client::client::builder=debug (kube's client logs one "requesting"
line per API request, inside a span with the method and URL), the example catalog, one warm-up
install, then one traced install of nginx-operator. Prints every API request capstan made during the
traced install, relative to the Subscription's create call, with the capstan log lines between
them, and a count by verb and resource. The raw log stays in <cluster dir>/logs/capstan.log.
CAPSTAN_BIN chooses the capstan binary (default target/release/capstan). TRACE_AS_BENCH=1 creates the
namespace and its OperatorGroup right before the Subscription, as tests/olm/bench.py does (by
default they are created a second earlier, so that their own reconciles are out of the way). The
moments the Deployment's pod was ready and the CSV Succeeded, as the benchmark's poll saw them, are
printed in the timeline.
"""

import collections
import datetime
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import compare  # noqa: E402
from kube import Kube  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z\s+(\w+)\s+(.*)$")


def main():
    # The release build by default; CAPSTAN_BIN=target/debug/capstan counts the same requests
    # (the times of a debug build are not the benchmark's).
    binary = os.environ.get("CAPSTAN_BIN") or os.path.join(compare.ROOT, "target", "release", "capstan")
    os.environ["RUST_LOG"] = "info,capstan=debug,kube_client::client::builder=debug"
    cluster = compare.Cluster("trace")
    cluster.up()
    system = compare.Capstan(binary)
    try:
        import tempfile
        d = os.path.join(tempfile.mkdtemp(prefix="trace-"), "examples")
        root = os.path.join(compare.ROOT, "bundles", "nginx-operator")
        for v in sorted(os.listdir(root)):
            ref = f"{cluster.registry}/trace/nginx-operator-bundle:v{v}"
            compare.run([binary, "bundle", "push", "-q", os.path.join(root, v), ref])
            compare.run([binary, "catalog", "add", d, ref])
        system.start(cluster, {"examples": d})
        k = Kube(cluster.kubeconfig)
        bench.install_one(k, "trace-warm", timeout=300)
        time.sleep(2)
        as_bench = os.environ.get("TRACE_AS_BENCH") == "1"
        if not as_bench:
            bench.ns_and_group(k, "trace-1")
            time.sleep(1)
        t0 = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        start = time.perf_counter()
        if as_bench:
            bench.ns_and_group(k, "trace-1")
        created = time.perf_counter() - start
        bench.subscribe(k, "trace-1")
        seen = {}
        dep = "/apis/apps/v1/namespaces/trace-1/deployments"
        while not bench.succeeded(k, "trace-1"):
            if "ready" not in seen:
                items = (k.get(dep) or {}).get("items", [])
                if items and (items[0].get("status") or {}).get("readyReplicas"):
                    seen["ready"] = time.perf_counter() - start - created
            time.sleep(0.01)
        total = time.perf_counter() - start
        time.sleep(1)
    finally:
        system.stop(cluster)
    log = open(os.path.join(cluster.dir, "logs", "capstan.log")).read()
    counts = collections.Counter()
    print(f"install of nginx-operator in trace-1: {total - created:.3f} s (Subscription create → CSV Succeeded seen)"
          + (f"; namespace and OperatorGroup created in the first {created * 1000:.0f} ms" if created > 0.001 else "")
          + (f"; Deployment ready seen {seen['ready'] * 1000:.0f} ms after the Subscription's create" if "ready" in seen else "")
          + ("; the table's times count from the namespace's create" if created > 0.001 else "") + "\n")
    print("| t (ms) | what |\n|---:|---|")
    for raw in log.splitlines():
        line = ANSI.sub("", raw)
        m = LINE.match(line)
        if not m:
            continue
        t = datetime.datetime.fromisoformat(m.group(1)[:26])
        ms = (t - t0).total_seconds() * 1000
        if ms < -5 or ms > total * 1000 + 200:
            continue
        text = m.group(3)
        req = re.search(r"HTTP\{http\.method=(\w+) http\.url=(\S+)", text)
        if req and not text.rstrip().endswith("requesting"):
            continue  # the span's other events ("stream closed") are the same request
        if req:
            url = re.sub(r"\?.*", "", req.group(2))
            url = re.sub(r"^https://[^/]+", "", url)
            watch = "watch=true" in req.group(2)
            counts[(req.group(1) + (" watch" if watch else ""), re.sub(r"/namespaces/[^/]+", "/namespaces/*", url))] += 1
            print(f"| {ms:.0f} | {req.group(1)}{' watch' if watch else ''} {url} |")
        else:
            print(f"| {ms:.0f} | {text[:220]} |")
    print("\n| requests | verb | path |\n|---:|---|---|")
    for (verb, path), n in counts.most_common():
        print(f"| {n} | {verb} | {path} |")
    print(f"\n{sum(counts.values())} API requests from capstan during the install")
    cluster.down(purge=False)


if __name__ == "__main__":
    main()
