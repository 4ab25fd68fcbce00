"""An in-memory Kubernetes API server for the quota window switcher, behind a real urllib opener.

The switcher's requests go through :class:`urllib.request.OpenerDirector` as they would to the
cluster (its ``Authorization`` header, JSON bodies, ``Content-Type``, the ``fieldManager``
query) and are answered here: ``GET`` and ``PATCH`` (``application/merge-patch+json``, RFC 7386)
of ClusterQueues and Cohorts at ``/apis/kueue.x-k8s.io/v1beta2/...``. Each request is:

1. authenticated (the bearer token is the switcher's service account's);
2. authorized by the ClusterRole the platform deploys, bound to that account by its
   ClusterRoleBinding (verb, resource, ``resourceNames``): 403 otherwise;
3. for a patch, held to the ``resourceVersion`` it carries (409 Conflict when the object changed
   since), merged, checked against the pinned Kueue CRD schema (422), then admitted by the
   platform's ValidatingAdmissionPolicies that match it, their CEL evaluated (403).

Faults: ``conflicts`` (another writer changes the object just before each of the next N
patches), ``errors`` (the next requests answer 500 before doing anything), ``lost`` (the next
patches are applied, then answer 500).
"""

from __future__ import annotations

import copy
import email.message
import io
import json
import urllib.parse
import urllib.request
import urllib.response
from dataclasses import dataclass, field
from typing import Any

import celpy

from tests.backends.kueue.admission_check import _as_map, _evaluate
from tests.backends.kueue.schema_check import cel_errors, schema_errors

TOKEN = "switcher-token"
_PLURALS = {"clusterqueues": "ClusterQueue", "cohorts": "Cohort"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


@dataclass
class ApiServerModel:
    """The cluster's ClusterQueues and Cohorts, and the platform's RBAC and admission objects."""

    objects: dict[tuple[str, str], dict[str, Any]]
    #: The platform's objects: the ClusterRole, its binding, the admission policies and bindings.
    platform: list[dict[str, Any]]
    #: The service account the token belongs to (``system:serviceaccount:NS:NAME``).
    user: str
    conflicts: int = 0
    errors: int = 0
    lost: int = 0
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    version: int = 100

    @classmethod
    def of(cls, objects: list[dict[str, Any]], user: str) -> ApiServerModel:
        """The ClusterQueues and Cohorts of ``objects`` as applied, with their platform's objects."""
        model = cls(objects={}, platform=objects, user=user)
        for o in objects:
            if o["kind"] in ("ClusterQueue", "Cohort"):
                model.put(copy.deepcopy(o))
        return model

    def put(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return self.objects[(kind, name)]

    # -- the HTTP side -------------------------------------------------------------------

    def handle(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, Any]:
        parsed = urllib.parse.urlsplit(url)
        payload = json.loads(body) if body else None
        self.requests.append((method, parsed.path + (f"?{parsed.query}" if parsed.query else ""), headers, payload))
        if headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, _status(401, "Unauthorized")
        if self.errors:
            self.errors -= 1
            return 500, _status(500, "etcdserver: request timed out")
        parts = parsed.path.strip("/").split("/")
        if len(parts) != 5 or parts[:3] != ["apis", "kueue.x-k8s.io", "v1beta2"] or parts[3] not in _PLURALS:
            return 404, _status(404, f"the server could not find the requested resource {parsed.path}")
        plural, name = parts[3], parts[4]
        kind = _PLURALS[plural]
        verb = {"GET": "get", "PATCH": "patch"}.get(method)
        if verb is None or not self._allowed(verb, plural, name):
            return 403, _status(403, f'{kind.lower()}s.kueue.x-k8s.io "{name}" is forbidden: User "{self.user}"'
                                     f" cannot {str(verb or method).lower()} resource \"{plural}\"")
        if (kind, name) not in self.objects:
            return 404, _status(404, f'{plural}.kueue.x-k8s.io "{name}" not found')
        current = self.objects[(kind, name)]
        if verb == "get":
            return 200, copy.deepcopy(current)
        if headers.get("Content-type") != "application/merge-patch+json":
            return 415, _status(415, "the body of the request was in an unknown format")
        if self.conflicts:
            self.conflicts -= 1
            self._other_writer(current)
        wanted = (payload.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            return 409, _status(409, f'Operation cannot be fulfilled on {plural}.kueue.x-k8s.io "{name}": the object'
                                     " has been modified; please apply your changes to the latest version and try again")
        patched = merge_patch(current, payload)
        patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        plain = {k: v for k, v in patched.items() if k != "status"}
        plain["metadata"] = {k: v for k, v in patched["metadata"].items() if k != "resourceVersion"}
        invalid = schema_errors(plain) + cel_errors(plain)
        if invalid:
            return 422, _status(422, "; ".join(invalid))
        refused = self._admission(current, patched)
        if refused:
            return 403, _status(403, f"admission webhook denied the request: {'; '.join(refused)}")
        self.put(patched)
        if self.lost:
            self.lost -= 1
            return 500, _status(500, "the answer was lost")
        return 200, copy.deepcopy(patched)

    def _other_writer(self, obj: dict[str, Any]) -> None:
        """Kueue's controller (or an operator) writes the object: its resourceVersion moves on."""
        obj.setdefault("status", {})["observed"] = self.version
        self.put(obj)

    def _allowed(self, verb: str, plural: str, name: str) -> bool:
        roles = {o["metadata"]["name"]: o for o in self.platform if o["kind"] == "ClusterRole"}
        for binding in (o for o in self.platform if o["kind"] == "ClusterRoleBinding"):
            subjects = {f"system:serviceaccount:{s['namespace']}:{s['name']}" for s in binding["subjects"]
                        if s["kind"] == "ServiceAccount"}
            role = roles.get(binding["roleRef"]["name"])
            if self.user not in subjects or role is None:
                continue
            for rule in role["rules"]:
                if ("kueue.x-k8s.io" in rule["apiGroups"] and plural in rule["resources"] and verb in rule["verbs"]
                        and name in rule.get("resourceNames", [name])):
                    return True
        return False

    def _admission(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        """The messages of the platform's admission policies that refuse the update."""
        return admission_refusals(self.platform, old, new, self.user)


def admission_refusals(platform: list[dict[str, Any]], old: dict[str, Any], new: dict[str, Any],
                       user: str) -> list[str]:
    """What the platform's ValidatingAdmissionPolicies (bound with Deny) refuse of ``user``
    updating the cluster-scoped ``old`` into ``new``: each policy matched by its resource rules
    and match conditions, its validations evaluated; an error refuses (failurePolicy Fail).
    Returns the messages; :func:`matching_policies` names the policies that matched."""
    plural = {v: k for k, v in _PLURALS.items()}[new["kind"]]
    bound = {o["spec"]["policyName"] for o in platform if o["kind"] == "ValidatingAdmissionPolicyBinding"
             and "Deny" in o["spec"]["validationActions"]}
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(new), "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel({"operation": "UPDATE", "userInfo": {"username": user}}),
    }
    refused = []
    for policy in (o for o in platform if o["kind"] == "ValidatingAdmissionPolicy"):
        spec = policy["spec"]
        if policy["metadata"]["name"] not in bound:
            continue
        constraints = spec["matchConstraints"]
        # A namespaceSelector does not filter a cluster-scoped object: the resource rules decide.
        if not any("kueue.x-k8s.io" in r["apiGroups"] and plural in r["resources"] and "UPDATE" in r["operations"]
                   for r in constraints["resourceRules"]):
            continue
        try:
            if not all(bool(_evaluate(c["expression"], activation)) for c in spec.get("matchConditions", [])):
                continue
            variables: dict[str, Any] = {}
            for v in spec.get("variables", []):
                variables[v["name"]] = _evaluate(v["expression"], {**activation, "variables": _as_map(variables)})
            context = {**activation, "variables": _as_map(variables)}
            refused += [v["message"] for v in spec["validations"] if not bool(_evaluate(v["expression"], context))]
        except Exception as e:  # failurePolicy Fail
            refused.append(f"{policy['metadata']['name']}: {e}")
    return refused


def matching_policies(platform: list[dict[str, Any]], kind: str) -> list[str]:
    """The platform's ValidatingAdmissionPolicies whose resource rules match an UPDATE of ``kind``
    (a ClusterQueue or a Cohort), before their match conditions."""
    plural = {v: k for k, v in _PLURALS.items()}[kind]
    return [p["metadata"]["name"] for p in platform if p["kind"] == "ValidatingAdmissionPolicy"
            and any(("kueue.x-k8s.io" in r["apiGroups"] or "*" in r["apiGroups"])
                    and (plural in r["resources"] or "*" in r["resources"])
                    and ("UPDATE" in r["operations"] or "*" in r["operations"])
                    for r in p["spec"]["matchConstraints"]["resourceRules"])]


def _status(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}


class ModelHandler(urllib.request.BaseHandler):
    """Answers the opener's HTTPS requests from the model (before any network handler)."""

    handler_order = 100

    def __init__(self, model: ApiServerModel) -> None:
        self.model = model

    def https_open(self, request: urllib.request.Request) -> urllib.response.addinfourl:
        status, payload = self.model.handle(request.get_method(), request.full_url, dict(request.header_items()),
                                            request.data)  # type: ignore[arg-type]
        headers = email.message.Message()
        headers["Content-Type"] = "application/json"
        response = urllib.response.addinfourl(io.BytesIO(json.dumps(payload).encode()), headers, request.full_url,
                                              status)
        response.msg = "OK" if status < 300 else "Error"  # type: ignore[attr-defined]
        return response


def opener(model: ApiServerModel) -> urllib.request.OpenerDirector:
    """A urllib opener as the switcher builds one, answered by ``model``."""
    return urllib.request.build_opener(ModelHandler(model))
