#!/usr/bin/env python3
"""Builds OCI images without a container daemon, and pushes them to a registry over plain HTTP.

    oci.py build OUT_DIR [--file SRC:DEST[:MODE]]... [--dir DEST[:MODE]]... [--entrypoint JSON]
                 [--cmd JSON] [--user UID:GID] [--env K=V]... [--workdir DIR] [--label K=V]...
    oci.py push OUT_DIR HOST:PORT/REPOSITORY:TAG      (prints the pushed manifest's digest)

`build` writes an OCI image layout (oci-layout, index.json, blobs/sha256/...) with one gzip
layer made from the listed files, owned by root, with fixed timestamps, so the same inputs give
the same digest. `push` uploads that layout's blobs (skipping those the registry has) and its
manifest with the registry's v2 API. Only the Python standard library is used.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import urllib.error
import urllib.request

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def add_dirs(tar, path, seen):
    """Adds the parent directories of `path` (mode 0755) that are not in the archive yet."""
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i])
        if d and d not in seen:
            seen.add(d)
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)


def layer(files, dirs):
    raw = io.BytesIO()
    seen = set()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for spec in dirs:
            dest, _, mode = spec.partition(":")
            add_dirs(tar, dest, seen)
            name = dest.strip("/")
            if name in seen:
                continue
            seen.add(name)
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = int(mode, 8) if mode else 0o755
            tar.addfile(info)
        for spec in files:
            src, dest, *rest = spec.split(":")
            with open(src, "rb") as f:
                data = f.read()
            add_dirs(tar, dest, seen)
            info = tarfile.TarInfo(dest.strip("/"))
            info.size = len(data)
            info.mode = int(rest[0], 8) if rest else (os.stat(src).st_mode & 0o777)
            tar.addfile(info, io.BytesIO(data))
    tar_bytes = raw.getvalue()
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=6) as g:
        g.write(tar_bytes)
    return tar_bytes, gz.getvalue()


def write_blob(out, data):
    digest = sha256(data)
    path = os.path.join(out, "blobs", "sha256", digest.split(":")[1])
    with open(path, "wb") as f:
        f.write(data)
    return digest


def build(a):
    os.makedirs(os.path.join(a.out, "blobs", "sha256"), exist_ok=True)
    tar_bytes, gz = layer(a.file or [], a.dir or [])
    layer_digest = write_blob(a.out, gz)
    cfg = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Env": a.env or ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [sha256(tar_bytes)]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "capstan images/oci.py"}],
    }
    if a.entrypoint:
        cfg["config"]["Entrypoint"] = json.loads(a.entrypoint)
    if a.cmd:
        cfg["config"]["Cmd"] = json.loads(a.cmd)
    if a.user:
        cfg["config"]["User"] = a.user
    if a.workdir:
        cfg["config"]["WorkingDir"] = a.workdir
    if a.label:
        cfg["config"]["Labels"] = dict(l.split("=", 1) for l in a.label)
    cfg_bytes = json.dumps(cfg, sort_keys=True, separators=(",", ":")).encode()
    cfg_digest = write_blob(a.out, cfg_bytes)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": cfg_digest, "size": len(cfg_bytes)},
        "layers": [{"mediaType": LAYER, "digest": layer_digest, "size": len(gz)}],
    }
    man_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    man_digest = write_blob(a.out, man_bytes)
    with open(os.path.join(a.out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [
            {"mediaType": MANIFEST, "digest": man_digest, "size": len(man_bytes)}]}, f)
    print(man_digest)


def request(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def push(a):
    host, _, rest = a.ref.partition("/")
    repo, _, tag = rest.rpartition(":")
    if not repo or "/" in tag:
        sys.exit(f"oci.py: expected HOST:PORT/REPOSITORY:TAG, got {a.ref}")
    base = f"http://{host}/v2/{repo}"
    with open(os.path.join(a.out, "index.json")) as f:
        desc = json.load(f)["manifests"][0]
    blob = lambda d: open(os.path.join(a.out, "blobs", "sha256", d.split(":")[1]), "rb").read()
    man_bytes = blob(desc["digest"])
    manifest = json.loads(man_bytes)
    for d in [manifest["config"]] + manifest["layers"]:
        status, _, _ = request("HEAD", f"{base}/blobs/{d['digest']}")
        if status == 200:
            continue
        status, headers, body = request("POST", f"{base}/blobs/uploads/")
        if status != 202:
            sys.exit(f"oci.py: starting an upload to {base} failed: HTTP {status} {body[:200]!r}")
        loc = headers["Location"]
        if loc.startswith("/"):
            loc = f"http://{host}{loc}"
        sep = "&" if "?" in loc else "?"
        status, _, body = request("PUT", f"{loc}{sep}digest={d['digest']}", blob(d["digest"]),
                                  {"Content-Type": "application/octet-stream"})
        if status != 201:
            sys.exit(f"oci.py: uploading {d['digest']} failed: HTTP {status} {body[:200]!r}")
    status, _, body = request("PUT", f"{base}/manifests/{tag}", man_bytes, {"Content-Type": MANIFEST})
    if status != 201:
        sys.exit(f"oci.py: pushing the manifest failed: HTTP {status} {body[:200]!r}")
    print(desc["digest"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd_name", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--file", action="append", help="SRC:DEST[:MODE]")
    b.add_argument("--dir", action="append", help="DEST[:MODE]")
    b.add_argument("--entrypoint")
    b.add_argument("--cmd")
    b.add_argument("--user")
    b.add_argument("--env", action="append")
    b.add_argument("--workdir")
    b.add_argument("--label", action="append")
    s = sub.add_parser("push")
    s.add_argument("out")
    s.add_argument("ref")
    a = p.parse_args()
    build(a) if a.cmd_name == "build" else push(a)


if __name__ == "__main__":
    main()
