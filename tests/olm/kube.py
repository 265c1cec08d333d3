"""A minimal Kubernetes API client for the OLM side-by-side benchmark (tests/olm/bench.py).

One kept-alive HTTPS connection with the cluster's admin client certificate (tests/cluster/up.sh
writes the kubeconfig with file paths), JSON in and out. It counts its own requests (`requests`),
so that the benchmark can subtract them from the API server's `apiserver_request_total`.
"""

import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
import yaml


class Kube:
    def __init__(self, kubeconfig):
        cfg = yaml.safe_load(open(kubeconfig))
        cluster = cfg["clusters"][0]["cluster"]
        user = cfg["users"][0]["user"]
        host = cluster["server"].removeprefix("https://")
        self.host, self.port = host.rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        self.ctx = ctx
        self.conn = None
        self.requests = 0

    def call(self, method, path, body=None, ctype="application/json"):
        """Returns (status, parsed JSON or text)."""
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx, timeout=30)
                self.requests += 1
                data = None if body is None else (body if isinstance(body, str) else json.dumps(body))
                self.conn.request(method, path, body=data, headers={"Content-Type": ctype, "Accept": "application/json"})
                r = self.conn.getresponse()
                raw = r.read().decode()
                try:
                    return r.status, json.loads(raw)
                except json.JSONDecodeError:
                    return r.status, raw
            except (http.client.HTTPException, OSError):
                self.conn = None
                if attempt == 2:
                    raise
        raise RuntimeError("unreachable")

    def create(self, path, obj):
        status, out = self.call("POST", path, obj)
        if status not in (200, 201):
            raise RuntimeError(f"POST {path}: {status} {out}")
        return out

    def get(self, path):
        status, out = self.call("GET", path)
        return out if status == 200 else None

    def metrics_total(self):
        """Sum of apiserver_request_total (every verb, resource and code)."""
        status, text = self.call("GET", "/metrics")
        total = 0.0
        for line in text.splitlines():
            if line.startswith("apiserver_request_total{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def record(self, path, name):
        """A watch of the object `name` in collection `path` that records every event's arrival
        time and object until closed (`Watch.events`: (time.perf_counter(), object) pairs)."""
        return Watch(self, path, name, None)

    def watch_for(self, path, name, predicate):
        """Starts a watch of the object `name` in collection `path` on a connection of its own and
        returns a Watch once the API server has answered (the watch is open), so that a change made
        after this call is seen: Watch.wait(timeout) returns the time.perf_counter() at which the
        first event whose object satisfies `predicate` arrived. More precise than polling: the
        time is taken as the event arrives, not at the next poll."""
        return Watch(self, path, name, predicate)


class Watch:
    def __init__(self, kube, path, name, predicate):
        self.at = None
        self.error = None
        self.events = []
        self.done = threading.Event()
        query = urllib.parse.urlencode({"watch": "true", "fieldSelector": f"metadata.name={name}", "timeoutSeconds": "900"})
        # 429 "storage is (re)initializing": the watch cache of a just-created CRD is not ready yet
        for attempt in range(60):
            self.conn = http.client.HTTPSConnection(kube.host, int(kube.port), context=kube.ctx, timeout=900)
            kube.requests += 1
            self.conn.request("GET", f"{path}?{query}", headers={"Accept": "application/json"})
            # kept to end the watch from another thread (`close`): HTTPConnection.close() would
            # wait for the reading thread's lock on the response (a BufferedReader) until the
            # next event arrives; taken before getresponse(), which may hand it to the response
            self.sock = self.conn.sock
            self.resp = self.conn.getresponse()
            if self.resp.status == 200:
                break
            body = self.resp.read()[:500]
            self.conn.close()
            if self.resp.status != 429 or attempt == 59:
                raise RuntimeError(f"watch {path}: {self.resp.status} {body!r}")
            time.sleep(0.5)
        threading.Thread(target=self._read, args=(predicate,), daemon=True).start()

    def _read(self, predicate):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    self.error = "the watch ended"
                    break
                now = time.perf_counter()
                event = json.loads(line)
                if predicate is None:
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.events.append((now, event.get("object") or {}))
                    continue
                if event.get("type") in ("ADDED", "MODIFIED") and predicate(event.get("object") or {}):
                    self.at = now
                    break
        except Exception as e:  # noqa: BLE001 - reported by wait()
            self.error = str(e)
        finally:
            self.done.set()
            self.conn.close()

    def close(self):
        """Ends the watch: shuts the socket down, so that the reading thread sees the end of the
        stream and closes the connection itself."""
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except (OSError, TypeError):
            pass
        self.done.wait(10)

    def wait(self, timeout):
        if not self.done.wait(timeout):
            self.close()
            raise RuntimeError(f"no matching event within {timeout} s")
        if self.at is None:
            raise RuntimeError(f"watch failed: {self.error}")
        return self.at
