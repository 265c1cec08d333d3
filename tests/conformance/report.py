#!/usr/bin/env python3
"""The conformance report from ginkgo's JSON report (`--ginkgo.json-report`) of OLM's e2e suite.

Prints one line per spec that ran or was skipped (`passed`, `FAILED` with the first line of the
failure and where, `skipped`, `unfinished` when the run was interrupted during it), a table per spec file (passed / failed / skipped), and last
`conformance: P passed, F failed, N specs` where N counts the specs that ran (passed + failed);
skipped specs ([FLAKE], out of scope, not focused) are counted apart. Suite-level nodes
(BeforeSuite, AfterSuite) that fail are reported as failures too: nothing runs without them.

Usage: report.py [--strict] REPORT.json
Exit status 0; with --strict (CI's subset), 1 when a spec failed or did not finish, or none ran.
"""
import collections
import json
import os
import sys

FAILED = {"failed", "panicked", "timedout"}
# A spec stopped from outside (the run interrupted, ginkgo aborting the rest): not a verdict.
UNFINISHED = {"interrupted", "aborted"}


def name(spec):
    texts = [t for t in spec.get("ContainerHierarchyTexts") or [] if t]
    leaf = spec.get("LeafNodeText") or spec.get("LeafNodeType", "")
    return " ".join(texts + [leaf]).strip()


def where(spec):
    loc = spec.get("LeafNodeLocation") or {}
    return os.path.basename(loc.get("FileName", "?"))


def main(path, strict=False):
    with open(path) as f:
        suites = json.load(f)
    per_file = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    for suite in suites:
        for spec in suite.get("SpecReports") or []:
            kind = spec.get("LeafNodeType", "")
            state = spec.get("State", "")
            if kind != "It" and state not in FAILED:
                continue
            if state in UNFINISHED:
                print(f"unfinished {name(spec)}  [{state}]")
                per_file[where(spec)]["unfinished"] += 1
                totals["unfinished"] += 1
                continue
            if state == "passed":
                verdict = "passed"
                print(f"passed   {name(spec)}")
            elif state in FAILED:
                verdict = "failed"
                failure = spec.get("Failure") or {}
                message = (failure.get("Message") or "").strip().splitlines()
                loc = failure.get("Location") or {}
                at = f"{os.path.basename(loc.get('FileName', '?'))}:{loc.get('LineNumber', '?')}"
                print(f"FAILED   {name(spec)}  [{state} at {at}: {message[0] if message else ''}]")
            else:
                verdict = "skipped"
                print(f"skipped  {name(spec)}")
            per_file[where(spec)][verdict] += 1
            totals[verdict] += 1
    print()
    print("| file | passed | failed | skipped |")
    print("|---|---:|---:|---:|")
    for file in sorted(per_file):
        c = per_file[file]
        print(f"| {file} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    ran = totals["passed"] + totals["failed"]
    print(f"\nconformance: {totals['passed']} passed, {totals['failed']} failed, {ran} specs "
          f"({totals['skipped']} skipped: [FLAKE], out of scope or not focused; "
          f"{totals['unfinished']} unfinished: the run was interrupted)")
    if strict and (totals["failed"] or totals["unfinished"] or not ran):
        sys.exit(1)


if __name__ == "__main__":
    args = sys.argv[1:]
    strict = "--strict" in args
    args = [a for a in args if a != "--strict"]
    if len(args) != 1:
        sys.exit(__doc__)
    main(args[0], strict)
