"""A minimal Kubernetes API client for the OLM side-by-side benchmark (tests/olm/bench.py).

One kept-alive HTTPS connection with the cluster's admin client certificate (tests/cluster/up.sh
writes the kubeconfig with file paths), JSON in and out. It counts its own requests (`requests`),
so that the benchmark can subtract them from the API server's `apiserver_request_total`.
"""

import http.client
import json
import ssl
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
