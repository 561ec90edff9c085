#!/usr/bin/python3
"""A structural Kubernetes check of rendered manifests (no kubeconform in
Debian).  Every object of a built-in kind is walked against the API models
of Debian's python3-kubernetes (the generated client of the Kubernetes 1.22
API): every field must be one the model knows, of the model's type, and
every field the model requires must be there.  The ServiceMonitor (a
Prometheus Operator CRD, not in those models) is walked against a minimal
hand-written structure of the fields the chart emits.  Then the objects are
checked against each other: selectors match the pod labels, ports and
volumes are referenced by names that exist, the StatefulSet's serviceName
is a headless Service, RBAC names what it binds.

    k8s_check.py FILE...     exit 0 if every file passes, else 1
"""
import re
import sys

import yaml
import kubernetes.client as k8s
from kubernetes.client.configuration import Configuration

KINDS = {
    ("v1", "ConfigMap"), ("v1", "Service"), ("v1", "ServiceAccount"), ("v1", "Secret"),
    ("apps/v1", "StatefulSet"), ("policy/v1", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
}
# monitoring.coreos.com/v1 ServiceMonitor: the fields the chart may emit
SERVICE_MONITOR = {
    "apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
    "spec": {
        "jobLabel": "str", "selector": "V1LabelSelector",
        "namespaceSelector": {"any": "bool", "matchNames": "list[str]"},
        "endpoints": [{"port": "str", "path": "str", "scheme": "str", "interval": "str",
                       "scrapeTimeout": "str", "honorLabels": "bool"}],
        "_required": ["selector", "endpoints"],
    },
    "_required": ["spec"],
}
QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUB = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

errors = []
CFG = Configuration()
CFG.client_side_validation = True


def err(path, msg):
    errors.append("%s: %s" % (path, msg))


def required_attrs(cls):
    """The attributes whose setter refuses None (the model's required
    fields)."""
    req = []
    for attr in cls.openapi_types:
        inst = cls.__new__(cls)
        inst.local_vars_configuration = CFG
        try:
            setattr(inst, attr, None)
        except ValueError:
            req.append(attr)
    return req


def check_scalar_with_setter(cls, attr, value, path):
    """Setters also check enums (allowed_values) and some formats."""
    inst = cls.__new__(cls)
    inst.local_vars_configuration = CFG
    try:
        setattr(inst, attr, value)
    except ValueError as e:
        err(path, str(e))


def walk(value, typ, path):
    if isinstance(typ, dict):  # hand-written structure
        if not isinstance(value, dict):
            return err(path, "expected an object, got %r" % (value,))
        for k in typ.get("_required", []):
            if k not in value:
                err(path, "missing required field %s" % k)
        for k, v in value.items():
            if k not in typ or k.startswith("_"):
                err("%s.%s" % (path, k), "unknown field")
            else:
                walk(v, typ[k], "%s.%s" % (path, k))
        return
    if isinstance(typ, list):
        if not isinstance(value, list):
            return err(path, "expected a list")
        for i, v in enumerate(value):
            walk(v, typ[0], "%s[%d]" % (path, i))
        return
    if typ.startswith("list["):
        if not isinstance(value, list):
            return err(path, "expected a list, got %r" % (value,))
        for i, v in enumerate(value):
            walk(v, typ[5:-1], "%s[%d]" % (path, i))
        return
    if typ.startswith("dict("):
        if not isinstance(value, dict):
            return err(path, "expected a map, got %r" % (value,))
        inner = typ[typ.index(",") + 1:-1].strip()
        quantities = re.search(r"\.(limits|requests|capacity)$", path)
        for k, v in value.items():
            if not isinstance(k, str):
                err(path, "key %r is not a string" % (k,))
            if quantities:
                if isinstance(v, bool) or not QUANTITY.match(str(v)):
                    err("%s.%s" % (path, k), "%r is not a quantity" % (v,))
            else:
                walk(v, inner, "%s.%s" % (path, k))
        return
    if typ == "str":
        if not isinstance(value, str):
            err(path, "expected a string, got %r" % (value,))
        return
    if typ == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            err(path, "expected an integer, got %r" % (value,))
        return
    if typ == "bool":
        if not isinstance(value, bool):
            err(path, "expected a boolean, got %r" % (value,))
        return
    if typ == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            err(path, "expected a number, got %r" % (value,))
        return
    if typ == "datetime":
        if not isinstance(value, str):
            err(path, "expected a timestamp")
        return
    if typ == "object":  # IntOrString and free-form fields
        return
    cls = getattr(k8s, typ, None)
    if cls is None:
        return err(path, "no model %s" % typ)
    if not isinstance(value, dict):
        return err(path, "expected a %s object, got %r" % (typ, value))
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for a in required_attrs(cls):
        if cls.attribute_map[a] not in value:
            err(path, "missing required field %s (%s)" % (cls.attribute_map[a], typ))
    for k, v in value.items():
        p = "%s.%s" % (path, k)
        if k not in by_json:
            err(p, "unknown field of %s" % typ)
            continue
        t = cls.openapi_types[by_json[k]]
        walk(v, t, p)
        if t in ("str", "int", "bool") and v is not None:
            check_scalar_with_setter(cls, by_json[k], v, p)


def check_meta(obj, path):
    md = obj.get("metadata") or {}
    name = md.get("name", "")
    kind = obj.get("kind")
    if kind == "Service" and not (DNS1123_LABEL.match(name) and len(name) <= 63):
        err(path, "Service name %r is not a DNS-1123 label" % name)
    elif not (DNS1123_SUB.match(name) and len(name) <= 253):
        err(path, "name %r is not a DNS-1123 subdomain" % name)
    if kind == "StatefulSet" and len(name) > 52:
        err(path, "StatefulSet name %r is longer than 52 (pod names, revision hash label)" % name)
    for where in ("labels", "annotations"):
        for k, v in (md.get(where) or {}).items():
            if where == "labels" and not (isinstance(v, str) and LABEL_VALUE.match(v) and len(v) <= 63):
                err(path, "label %s=%r: not a label value" % (k, v))
            prefix, _, nm = k.rpartition("/")
            if (prefix and not DNS1123_SUB.match(prefix)) or not LABEL_NAME.match(nm) or len(nm) > 63:
                err(path, "%s key %r is not a qualified name" % (where, k))


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_pod(spec, claim_names, path):
    vols = {v["name"] for v in spec.get("volumes", [])} | claim_names
    for group in ("initContainers", "containers"):
        names = set()
        for i, c in enumerate(spec.get(group, [])):
            cp = "%s.%s[%d]" % (path, group, i)
            if c["name"] in names:
                err(cp, "duplicate container name %s" % c["name"])
            names.add(c["name"])
            ports = set()
            for p in c.get("ports", []):
                if "name" in p:
                    if len(p["name"]) > 15 or not PORT_NAME.match(p["name"]):
                        err(cp, "port name %r is not an IANA service name" % p["name"])
                    ports.add(p["name"])
                if not 1 <= p["containerPort"] <= 65535:
                    err(cp, "containerPort %r out of range" % p["containerPort"])
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                pr = c.get(probe)
                if pr and "httpGet" in pr:
                    port = pr["httpGet"]["port"]
                    if isinstance(port, str) and port not in ports:
                        err(cp, "%s port %r is not a port of the container" % (probe, port))
            envs = set()
            for e in c.get("env", []):
                if e["name"] in envs:
                    err(cp, "duplicate env %s" % e["name"])
                envs.add(e["name"])
                if not ENV_NAME.match(e["name"]):
                    err(cp, "env name %r" % e["name"])
                if ("value" in e) == ("valueFrom" in e) and "value" in e:
                    err(cp, "env %s has both value and valueFrom" % e["name"])
                vf = e.get("valueFrom") or {}
                if len(vf) > 1:
                    err(cp, "env %s: valueFrom takes one source" % e["name"])
                ref = vf.get("secretKeyRef")
                if ref is not None and not (ref.get("name") and ref.get("key")):
                    err(cp, "env %s: secretKeyRef needs name and key" % e["name"])
            mounts = set()
            for m in c.get("volumeMounts", []):
                if m["name"] not in vols:
                    err(cp, "volumeMount %s names no volume" % m["name"])
                if m["mountPath"] in mounts:
                    err(cp, "two mounts at %s" % m["mountPath"])
                mounts.add(m["mountPath"])
    return {p.get("name") for c in spec.get("containers", []) for p in c.get("ports", [])}


def check_file(fn):
    with open(fn) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    objs = []
    for i, d in enumerate(docs):
        kind, api = d.get("kind"), d.get("apiVersion")
        path = "%s#%d %s/%s" % (fn, i, kind, (d.get("metadata") or {}).get("name"))
        if (api, kind) in KINDS:
            walk(d, "V1" + kind, path)
        elif (api, kind) == ("monitoring.coreos.com/v1", "ServiceMonitor"):
            walk(d, SERVICE_MONITOR, path)
        else:
            err(path, "kind %s of %s is not one this check knows" % (kind, api))
            continue
        check_meta(d, path)
        objs.append((path, d))
    by_kind = {}
    for path, d in objs:
        by_kind.setdefault(d["kind"], []).append((path, d))
    services = {d["metadata"]["name"]: d for _, d in by_kind.get("Service", [])}
    pods = []
    for path, sts in by_kind.get("StatefulSet", []):
        spec = sts["spec"]
        tpl = spec["template"]
        labels = tpl["metadata"].get("labels", {})
        if not matches(spec["selector"].get("matchLabels"), labels):
            err(path, "selector does not match the pod template's labels")
        claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
        for c in spec.get("volumeClaimTemplates", []):
            if "storage" not in c["spec"].get("resources", {}).get("requests", {}):
                err(path, "volumeClaimTemplate %s requests no storage" % c["metadata"]["name"])
        ports = check_pod(tpl["spec"], claims, path + ".spec.template.spec")
        svc = services.get(spec.get("serviceName"))
        if svc is None or svc["spec"].get("clusterIP") != "None":
            err(path, "serviceName %r is not a headless Service of the release" % spec.get("serviceName"))
        sa = tpl["spec"].get("serviceAccountName")
        sas = {d["metadata"]["name"] for _, d in by_kind.get("ServiceAccount", [])}
        if sas and sa not in sas:
            err(path, "serviceAccountName %r is not the release's ServiceAccount" % sa)
        pods.append((labels, ports))
    for path, d in by_kind.get("Service", []):
        sel = d["spec"].get("selector", {})
        hit = [p for l, p in pods if matches(sel, l)]
        if not hit:
            err(path, "selector matches no pod of the release")
        for p in d["spec"].get("ports", []):
            tp = p.get("targetPort")
            if isinstance(tp, str) and hit and tp not in hit[0]:
                err(path, "targetPort %r is not a container port name" % tp)
    for path, d in by_kind.get("PodDisruptionBudget", []):
        if not any(matches(d["spec"]["selector"].get("matchLabels"), l) for l, _ in pods):
            err(path, "selector matches no pod of the release")
        if ("minAvailable" in d["spec"]) == ("maxUnavailable" in d["spec"]):
            err(path, "exactly one of minAvailable and maxUnavailable")
    roles = {d["metadata"]["name"] for _, d in by_kind.get("ClusterRole", [])}
    sas = {d["metadata"]["name"] for _, d in by_kind.get("ServiceAccount", [])}
    for path, d in by_kind.get("ClusterRoleBinding", []):
        if d["roleRef"]["name"] not in roles:
            err(path, "roleRef %s is not a ClusterRole of the release" % d["roleRef"]["name"])
        for s in d.get("subjects", []):
            if s["kind"] == "ServiceAccount" and sas and s["name"] not in sas:
                err(path, "subject %s is not the release's ServiceAccount" % s["name"])
    for path, d in by_kind.get("ServiceMonitor", []):
        sel = d["spec"]["selector"].get("matchLabels", {})
        hit = [s for s in services.values() if matches(sel, s["metadata"].get("labels", {}))]
        if len(hit) != 1:
            err(path, "selector matches %d Services, not 1" % len(hit))
        for ep in d["spec"]["endpoints"]:
            if hit and ep["port"] not in {p.get("name") for p in hit[0]["spec"]["ports"]}:
                err(path, "endpoint port %r is not a port of the Service" % ep["port"])
    return len(objs)


n = 0
for fn in sys.argv[1:]:
    n += check_file(fn)
for e in errors:
    print("k8s_check: " + e)
print("k8s_check: %d objects in %d files, %d problems" % (n, len(sys.argv) - 1, len(errors)))
sys.exit(1 if errors else 0)
