"""Synthetic registry+v1 bundles for the OLM differential scenarios (tests/olm/compare.py).

Each `Bundle` is written as a bundle directory (manifests/ with a CSV, the owned CRDs and optional
extra manifests; metadata/annotations.yaml), in the shape operator-sdk generates, so that the same
bytes are published to capstan (capstan bundle push + catalog add) and to OLM (the same catalog
served by `opm serve`). Fields are the registry+v1 ones (reference/: CSV spec, install modes,
olm.package.required / olm.gvk.required in metadata/dependencies.yaml, olm.skipRange annotation).
"""

import os
import yaml

IMAGE = "quay.io/capstan-compare/operator:v1"


class Bundle:
    """One bundle. `owned`/`required` are (group, version, kind, plural) tuples; `deps` is a list of
    dependencies.yaml entries ({"type": "olm.package", "value": {...}}); `modes` the install-mode
    types supported; `webhooks` CSV webhookdefinitions; `cluster_rules` clusterPermissions rules."""

    def __init__(self, package, version, channel="stable", replaces=None, skips=(), skip_range=None,
                 owned=(), required=(), deps=(), modes=("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"),
                 webhooks=(), cluster_rules=(), extra=()):
        self.package, self.version, self.channel = package, version, channel
        self.replaces, self.skips, self.skip_range = replaces, list(skips), skip_range
        self.owned, self.required, self.deps, self.modes = list(owned), list(required), list(deps), set(modes)
        self.webhooks, self.cluster_rules, self.extra = list(webhooks), list(cluster_rules), list(extra)

    @property
    def csv_name(self):
        return f"{self.package}.v{self.version}"

    def crd(self, gvk):
        group, version, kind, plural = gvk
        return {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                                   "subresources": {"status": {}}}]},
        }

    def csv(self):
        sa = f"{self.package}-controller-manager"
        annotations = {"capabilities": "Basic Install", "containerImage": IMAGE,
                       "operators.operatorframework.io/builder": "capstan-compare"}
        if self.skip_range:
            annotations["olm.skipRange"] = self.skip_range
        spec = {
            "displayName": self.package, "version": self.version, "maturity": "alpha",
            "description": f"{self.package} for the OLM differential scenarios",
            "provider": {"name": "capstan"}, "maintainers": [{"name": "capstan", "email": "capstan@example.com"}],
            "installModes": [{"type": t, "supported": t in self.modes}
                             for t in ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")],
            "customresourcedefinitions": {
                "owned": [{"name": f"{p}.{g}", "version": v, "kind": k, "displayName": k, "description": k} for g, v, k, p in self.owned],
                "required": [{"name": f"{p}.{g}", "version": v, "kind": k, "displayName": k, "description": k} for g, v, k, p in self.required],
            },
            "install": {"strategy": "deployment", "spec": {
                "deployments": [{
                    "name": f"{self.package}-controller-manager",
                    "label": {"control-plane": "controller-manager", "app": self.package},
                    "spec": {"replicas": 1,
                             "selector": {"matchLabels": {"app": self.package}},
                             "template": {"metadata": {"labels": {"app": self.package}},
                                          "spec": {"serviceAccountName": sa,
                                                   "containers": [{"name": "manager", "image": IMAGE,
                                                                   "args": ["--leader-elect"],
                                                                   "env": [{"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}}],
                                                                   "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]}}},
                }],
                "permissions": [{"serviceAccountName": sa, "rules": [
                    {"apiGroups": [""], "resources": ["configmaps", "events"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                ] + [{"apiGroups": [g], "resources": [p, f"{p}/status"], "verbs": ["*"]} for g, v, k, p in self.owned]}],
                **({"clusterPermissions": [{"serviceAccountName": sa, "rules": self.cluster_rules}]} if self.cluster_rules else {}),
            }},
        }
        if self.replaces:
            spec["replaces"] = self.replaces
        if self.skips:
            spec["skips"] = self.skips
        if self.webhooks:
            spec["webhookdefinitions"] = self.webhooks
        return {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": self.csv_name, "annotations": annotations}, "spec": spec}

    def write(self, root):
        """Writes the bundle directory under `root`; returns its path."""
        d = os.path.join(root, self.package, self.version)
        os.makedirs(os.path.join(d, "manifests"), exist_ok=True)
        os.makedirs(os.path.join(d, "metadata"), exist_ok=True)
        with open(os.path.join(d, "manifests", f"{self.package}.clusterserviceversion.yaml"), "w") as f:
            yaml.safe_dump(self.csv(), f, sort_keys=False)
        for gvk in self.owned:
            with open(os.path.join(d, "manifests", f"{gvk[3]}.{gvk[0]}.crd.yaml"), "w") as f:
                yaml.safe_dump(self.crd(gvk), f, sort_keys=False)
        for i, obj in enumerate(self.extra):
            with open(os.path.join(d, "manifests", f"extra-{i}.yaml"), "w") as f:
                yaml.safe_dump(obj, f, sort_keys=False)
        with open(os.path.join(d, "metadata", "annotations.yaml"), "w") as f:
            yaml.safe_dump({"annotations": {
                "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
                "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
                "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
                "operators.operatorframework.io.bundle.package.v1": self.package,
                "operators.operatorframework.io.bundle.channels.v1": self.channel,
                "operators.operatorframework.io.bundle.channel.default.v1": self.channel,
            }}, f, sort_keys=False)
        if self.deps:
            with open(os.path.join(d, "metadata", "dependencies.yaml"), "w") as f:
                yaml.safe_dump({"dependencies": self.deps}, f, sort_keys=False)
        return d


def gvk(name, group="compare.capstan.dev", version="v1"):
    """An owned API (group, version, kind, plural) named after `name` (e.g. "Widget")."""
    return (group, version, name, name.lower() + "s")


def scenario_bundles():
    """Every synthetic bundle the scenarios use, in the order they are added to the catalog."""
    b = []
    # install modes / config / scoped / removal: one package each (one owner per API in a group).
    for pkg, kind in [("modes-own", "OwnThing"), ("modes-single", "SingleThing"), ("modes-multi", "MultiThing"),
                      ("modes-all", "AllThing"), ("config-op", "ConfigThing"), ("scoped-op", "ScopedThing"),
                      ("removal-op", "RemovalThing"), ("manual-op", "ManualThing"), ("auto-op", "AutoThing")]:
        b.append(Bundle(pkg, "1.0.0", owned=[gvk(kind)]))
    # upgrade along skips: 1.0.0 -> 1.1.0 -> 1.2.0 (skips 1.0.0 and 1.1.0 — replaces 1.1.0)
    b += [Bundle("skips-op", "1.0.0", owned=[gvk("SkipThing")]),
          Bundle("skips-op", "1.1.0", replaces="skips-op.v1.0.0", owned=[gvk("SkipThing")]),
          Bundle("skips-op", "1.2.0", replaces="skips-op.v1.1.0", skips=["skips-op.v1.0.0"], owned=[gvk("SkipThing")])]
    # upgrade along skipRange: from 1.0.0 the candidates are 1.5.0 (replaces) and 2.0.0 (olm.skipRange
    # ">=1.0.0 <1.5.0"; it replaces 1.5.0 so that the channel has one head) — 2.0.0 must win
    b += [Bundle("range-op", "1.0.0", owned=[gvk("RangeThing")]),
          Bundle("range-op", "1.5.0", replaces="range-op.v1.0.0", owned=[gvk("RangeThing")]),
          Bundle("range-op", "2.0.0", replaces="range-op.v1.5.0", skip_range=">=1.0.0 <1.5.0", owned=[gvk("RangeThing")])]
    # dependencies: dep-app needs package dep-base (>=1.0.0) and the GVK DepGvkThing (from dep-gvk)
    b += [Bundle("dep-base", "1.0.0", owned=[gvk("BaseThing")]),
          Bundle("dep-gvk", "1.0.0", owned=[gvk("DepGvkThing")]),
          Bundle("dep-app", "1.0.0", owned=[gvk("AppThing")], required=[gvk("DepGvkThing")],
                 deps=[{"type": "olm.package", "value": {"packageName": "dep-base", "version": ">=1.0.0"}},
                       {"type": "olm.gvk", "value": {"group": "compare.capstan.dev", "version": "v1", "kind": "DepGvkThing"}}])]
    # a webhook operator: validating and mutating webhooks served by its Deployment
    hook = lambda t, name: {
        "type": t, "generateName": name, "deploymentName": "webhook-op-controller-manager", "containerPort": 9443,
        "targetPort": 9443, "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore",
        "webhookPath": f"/{t.lower()}-hook", "rules": [{"apiGroups": ["compare.capstan.dev"], "apiVersions": ["v1"],
                                                        "operations": ["CREATE", "UPDATE"], "resources": ["hookthings"]}]}
    b.append(Bundle("webhook-op", "1.0.0", owned=[gvk("HookThing")], modes=("OwnNamespace", "AllNamespaces"),
                    webhooks=[hook("ValidatingAdmissionWebhook", "vhookthing.compare.capstan.dev"),
                              hook("MutatingAdmissionWebhook", "mhookthing.compare.capstan.dev")]))
    # cluster-scoped permissions
    b.append(Bundle("cluster-op", "1.0.0", owned=[gvk("ClusterThing")],
                    cluster_rules=[{"apiGroups": [""], "resources": ["namespaces", "nodes"], "verbs": ["get", "list", "watch"]}]))
    return b


def orphan_bundles():
    """The bundle of the catalog-removed scenario, published in a catalog of its own that the scenario
    adds to its namespace and deletes once the operator runs."""
    return [Bundle("orphan-op", "1.0.0", owned=[gvk("OrphanThing")])]
