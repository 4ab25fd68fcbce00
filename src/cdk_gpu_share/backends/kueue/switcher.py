"""The quota window switcher of the Kueue backend: a job that puts each team's ClusterQueue (and
the platform's Cohort) at the quotas of the window in force.

It runs in the cluster, from a CronJob at each boundary (a window's opening or closing, in the
window's own time zone) and from a Job after each deploy (applying the ClusterQueues writes the
base values back). This module and what it imports are standard library only, apart from
:mod:`cdk_gpu_share.core.configuration.windows` itself, so a ConfigMap ships them into the
cluster verbatim and a plain Python image runs them: the window open at an instant is worked
out by the very code ``plan`` and the simulator use. Each run:

1. works out the window open **at its own clock** (never from which CronJob started it: a run
   late, or twice, applies the window then in force and changes nothing the second time);
2. reads each ClusterQueue (and the Cohort) and patches only what differs from the window's
   values, and only ``nominalQuota`` and ``borrowingLimit`` (a JSON merge patch of the
   ``resourceGroups`` just read, at the ``resourceVersion`` read: another writer's change in
   between is a 409 Conflict, read again and retried at once);
3. lowers before it raises: first every object's quotas go to the smaller of the current and
   the new values, then to the new values, so the quotas never add up to more than the nodes
   in the middle of a switch; when a lowering fails, nothing is raised;
4. retries a failed read or write :data:`ATTEMPTS` times, and when an object still cannot be
   switched, exits 1 after trying the others with one line "quota window not applied" on
   stderr and in the container's termination message: the Job fails (and is retried up to its
   ``backoffLimit``).

Settings (``settings.json``, written by :func:`cdk_gpu_share.backends.kueue.quota_windows.switcher_settings`):
``apiVersion`` (Kueue's), ``windows`` (the config's, as it writes them) and ``targets``, each
``kind`` (``ClusterQueue`` or ``Cohort``), ``name``, ``base`` and ``windows`` (window name ->
values), values being flavor -> resource -> ``{"nominalQuota": q}`` plus ``"borrowingLimit": q``
when there is a limit (none: no limit).
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

from cdk_gpu_share.core.configuration.windows import Window, window_at

__all__ = [
    "ATTEMPTS", "BACKOFF_SECONDS", "BASE", "FIELD_MANAGER", "FIELDS", "ApiError", "ApiServer", "SwitchFailed", "Target",
    "main", "quantity", "read_settings", "switch",
]

#: Tries of each read-and-patch.
ATTEMPTS = 4
#: The pause before the second try; it doubles at each next one (a conflict is retried at once).
BACKOFF_SECONDS = 2.0
#: What the logs call the values outside every window.
BASE = "base"
#: The field manager of the switcher's patches (a GitOps tool may ignore the fields it owns).
FIELD_MANAGER = "gpu-share-window-switcher"
#: The only fields of a quota the switcher writes.
FIELDS = ("nominalQuota", "borrowingLimit")
#: The words of the failure, as the alarm of the other backends says it.
NOT_APPLIED = "quota window not applied"
#: Where the container's termination message goes (Kubernetes shows it in the Pod's status).
TERMINATION_LOG = "/dev/termination-log"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"

_sleep: Callable[[float], None] = time.sleep

#: Values of one object: flavor -> resource -> field -> quantity (a field left out: none).
Values = Mapping[str, Mapping[str, Mapping[str, Any]]]


class SwitchFailed(RuntimeError):
    """Some object could not be put at the window's values after every try."""


class ApiError(RuntimeError):
    """An answer of the API server other than 2xx."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


@dataclass(frozen=True)
class Target:
    """One ClusterQueue or Cohort and its quotas in the base and in each window."""

    kind: str
    name: str
    base: Values
    windows: Mapping[str, Values]

    def values(self, window: str | None) -> Values:
        """The values in force while ``window`` is open (None: the base)."""
        return self.base if window is None else self.windows.get(window, self.base)

    def path(self, api_version: str) -> str:
        plural = {"ClusterQueue": "clusterqueues", "Cohort": "cohorts"}[self.kind]
        return f"/apis/{api_version}/{plural}/{self.name}"


def read_settings(settings: Mapping[str, Any]) -> tuple[str, tuple[Window, ...], tuple[Target, ...]]:
    """Kueue's API version, the windows and the targets of the settings."""
    windows = tuple(Window(**dict(w)) for w in settings.get("windows") or ())
    targets = tuple(Target(kind=t["kind"], name=t["name"], base=t["base"], windows=t.get("windows") or {})
                    for t in settings.get("targets") or ())
    return settings["apiVersion"], windows, targets


# -- quantities ------------------------------------------------------------------------

_SUFFIXES = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
             "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
             "P": Fraction(10**15), "E": Fraction(10**18),
             "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
             "Pi": Fraction(2**50), "Ei": Fraction(2**60)}


def quantity(value: Any) -> Fraction | None:
    """A Kubernetes quantity (``4``, ``"500m"``, ``"192Gi"``, ``"1e3"``) as an exact number; None
    stays None (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Fraction(value)
    text = str(value).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            return Fraction(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return Fraction(text)  # a plain number, or an exponent (1e3); ValueError otherwise


def _same(a: Any, b: Any) -> bool:
    return quantity(a) == quantity(b)


# -- reading and writing an object ----------------------------------------------------


def _current(obj: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """The quotas of a ClusterQueue or Cohort as :data:`Values`."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for group in obj.get("spec", {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for r in flavor.get("resources") or ():
                out.setdefault(flavor["name"], {})[r["name"]] = {f: r[f] for f in FIELDS if f in r}
    return out


def _lowered(current: Values, wanted: Values) -> dict[str, dict[str, dict[str, Any]]]:
    """Each quota at the smaller of the current and the wanted (a limit left out: no limit)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for flavor, resources in wanted.items():
        for name, fields in resources.items():
            have = current.get(flavor, {}).get(name, {})
            entry: dict[str, Any] = {}
            for f in FIELDS:
                a, b = have.get(f), fields.get(f)
                if a is None or b is None:
                    value = b if a is None else a
                else:
                    value = a if quantity(a) <= quantity(b) else b  # type: ignore[operator]
                if value is not None:
                    entry[f] = value
            out.setdefault(flavor, {})[name] = entry
    return out


def _differs(current: Values, goal: Values) -> bool:
    for flavor, resources in goal.items():
        for name, fields in resources.items():
            have = current.get(flavor, {}).get(name, {})
            if any(not _same(have.get(f), fields.get(f)) for f in FIELDS):
                return True
    return False


def _patched_groups(obj: Mapping[str, Any], goal: Values, target: Target) -> list[dict[str, Any]]:
    """The object's ``resourceGroups`` as read, with the goal's two fields in each resource."""
    groups = json.loads(json.dumps(obj["spec"]["resourceGroups"]))
    seen = set()
    for group in groups:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                fields = goal.get(flavor["name"], {}).get(r["name"])
                if fields is None:
                    continue
                seen.add((flavor["name"], r["name"]))
                for f in FIELDS:
                    r.pop(f, None)
                    if fields.get(f) is not None:
                        r[f] = fields[f]
    missing = [f"{flavor}/{name}" for flavor, resources in goal.items() for name in resources
               if (flavor, name) not in seen]
    if missing:
        raise SwitchFailed(f"{target.kind} {target.name} has no quota for {', '.join(sorted(missing))}: it is not"
                           " the one this platform deployed; deploy the platform again")
    return groups


# -- the API server -------------------------------------------------------------------


class ApiServer:
    """The Kubernetes API server, with the Pod's service-account token (read at each request:
    the kubelet rotates it)."""

    def __init__(self, base_url: str | None = None, *, account: str = SERVICE_ACCOUNT,
                 opener: urllib.request.OpenerDirector | None = None, timeout: float = 10.0) -> None:
        if base_url is None:
            host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            base_url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        self.base_url = base_url
        self.token_path = os.path.join(account, "token")
        if opener is None:
            context = ssl.create_default_context(cafile=os.path.join(account, "ca.crt"))
            opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
        self.opener = opener
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None, content_type: str | None = None) -> Any:
        with open(self.token_path, encoding="utf-8") as f:
            token = f.read().strip()
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type or "application/json"
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with self.opener.open(request, timeout=self.timeout) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as e:
            raise ApiError(e.code, _message(e)) from None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", f"{path}?fieldManager={FIELD_MANAGER}", body, "application/merge-patch+json")


def _message(error: urllib.error.HTTPError) -> str:
    try:
        status = json.loads(error.read() or b"{}")
    except ValueError:
        return str(error.reason)
    return str(status.get("message") or error.reason) if isinstance(status, dict) else str(error.reason)


# -- the switch -----------------------------------------------------------------------


def switch(api: ApiServer, api_version: str, targets: Sequence[Target], window: Window | None, *,
           now: datetime | None = None) -> dict[str, Any]:
    """Put every target at its values for ``window`` (None: the base), lowering first; raises
    :class:`SwitchFailed` when some cannot be."""
    name = window.name if window is not None else BASE
    in_force = window.name if window is not None else None
    log("switch_started", window=name, at=now, targets=len(targets))
    written: dict[str, list[str]] = {"lower": [], "raise": []}
    failed: dict[str, str] = {}
    for phase in ("lower", "raise"):
        for target in targets:
            key = f"{target.kind}/{target.name}"
            if key in failed:
                continue
            try:
                if _apply(api, api_version, target, target.values(in_force), phase):
                    written[phase].append(key)
            except Exception as exc:  # noqa: BLE001 - the others are still switched; raised below
                failed[key] = f"{type(exc).__name__}: {exc}"
                log("switch_failed", "ERROR", window=name, target=key, phase=phase, error=failed[key])
        if failed:
            break  # a lowering not made: raising the others could promise more than the nodes
    if failed:
        raise SwitchFailed(f"{NOT_APPLIED}: window {name!r} for {', '.join(sorted(failed))}: "
                           + "; ".join(f"{t}: {e}" for t, e in sorted(failed.items())))
    done = {*written["lower"], *written["raise"]}
    result: dict[str, Any] = {"window": name, "lowered": written["lower"], "raised": written["raise"],
                              "unchanged": [f"{t.kind}/{t.name}" for t in targets if f"{t.kind}/{t.name}" not in done]}
    log("switched", **result)
    return result


def _apply(api: ApiServer, api_version: str, target: Target, wanted: Values, phase: str) -> bool:
    """Read the target and patch it where it differs from its goal of ``phase``; True when
    patched. Retried, reading afresh each time."""
    path = target.path(api_version)
    wrote = False  # a patch whose answer was lost may have been applied
    for attempt in range(1, ATTEMPTS + 1):
        try:
            obj = api.get(path)
            current = _current(obj)
            goal = wanted if phase == "raise" else _lowered(current, wanted)
            if not _differs(current, goal):
                return wrote
            wrote = True
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                    "spec": {"resourceGroups": _patched_groups(obj, goal, target)}}
            api.merge_patch(path, body)
            log("patched", target=f"{target.kind}/{target.name}", phase=phase, values=goal)
            return True
        except SwitchFailed:
            raise  # not the object deployed: no try will mend it
        except Exception as exc:
            if attempt == ATTEMPTS:
                raise
            conflict = isinstance(exc, ApiError) and exc.status == 409
            log("retrying", "WARNING", target=f"{target.kind}/{target.name}", attempt=attempt, conflict=conflict,
                error=f"{type(exc).__name__}: {exc}")
            if not conflict:
                _sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
    raise AssertionError("unreachable")  # pragma: no cover


def log(event: str, level: str = "INFO", **fields: Any) -> None:
    """One JSON log line."""
    print(json.dumps({"level": level, "event": event, **fields}, default=str, separators=(",", ":")))
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None, *, api: ApiServer | None = None, now: datetime | None = None) -> int:
    """``python -m cdk_gpu_share.backends.kueue.switcher SETTINGS``: 0 when every object holds the
    window's values, 1 (and the line "quota window not applied") otherwise."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        with open(args[0], encoding="utf-8") as f:
            api_version, windows, targets = read_settings(json.load(f))
        now = now or datetime.now(timezone.utc)
        switch(api or ApiServer(), api_version, targets, window_at(windows, now), now=now)
    except Exception as exc:  # noqa: BLE001 - one line, the Job fails, the alert fires
        message = str(exc) if isinstance(exc, SwitchFailed) else f"{NOT_APPLIED}: {type(exc).__name__}: {exc}"
        print(message, file=sys.stderr)
        try:
            with open(TERMINATION_LOG, "w", encoding="utf-8") as f:
                f.write(message[:4000])
        except OSError:
            pass
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
