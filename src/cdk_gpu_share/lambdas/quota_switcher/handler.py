"""The quota window switcher: puts each team's quota share (AWS Batch quota management) or
compute quota (HyperPod task governance) at the values of the window in force.

Batch quota shares and HyperPod compute quotas keep the values they were last given, so a
platform whose teams' values follow the clock (``windows:``) has them switched at every
boundary. The function is invoked by a schedule at each boundary and once after every deploy
(CloudFormation writes the base values back), and each time:

1. works out the window open **at its own clock** with :func:`cdk_gpu_share.core.configuration.windows.window_at`
   (never from the event: a delivery an hour late applies the window in force an hour later,
   a delivery repeated changes nothing);
2. reads each share or quota (``DescribeQuotaShare``, ``DescribeComputeQuota``) and writes it
   (``UpdateQuotaShare``, ``UpdateComputeQuota`` with the ``TargetVersion`` just read) only
   where it differs from the window's values;
3. lowers before it raises: first every share or quota goes to the smaller of its current and
   its new amount of each instance type, then each to its new values, so the guarantees never
   add up to more than the fleet in the middle of a switch. When a lowering fails, nothing is
   raised;
4. retries a failed read or write :data:`ATTEMPTS` times, reading again each time (a version
   conflict on HyperPod is another writer's change: read and retry at once), and when a
   share or quota still cannot be switched, raises :class:`SwitchFailed` after trying the
   others, so the invocation fails (the Lambda's ``Errors``: the "quota window not applied"
   alarm) and an asynchronous invocation is retried.

Settings (environment variable ``GPU_SHARE_SWITCHER``, JSON): ``windows`` (the config's
windows as it writes them) and ``targets``, one per team: ``kind`` (``batch`` or
``hyperpod``), ``team``, ``id`` (the quota share's ARN or the compute quota's id), ``base``
(the values outside every window) and ``windows`` (window name -> the values while it is
open), each as the update API takes them: ``capacityLimits`` and
``resourceSharingConfiguration`` for Batch, ``ComputeQuotaConfig`` for HyperPod. The values
of each window are complete (the construct works them out from the config, field by field
from the team's own), so this function only chooses among them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from cdk_gpu_share.core.configuration.windows import Window, window_at

__all__ = [
    "ATTEMPTS", "BACKOFF_SECONDS", "BASE", "KINDS", "SETTINGS_ENV", "SwitchFailed", "Target", "handler",
    "read_settings", "switch",
]

SETTINGS_ENV = "GPU_SHARE_SWITCHER"
#: Tries of each read-and-write (botocore's own retries of throttling and 5xx come within each).
ATTEMPTS = 4
#: The pause before the second try; it doubles at each next one (a conflict is retried at once).
BACKOFF_SECONDS = 2.0
#: What the logs and the answer call the values outside every window.
BASE = "base"
#: The physical id of the custom resource that runs the switcher after each deploy.
PHYSICAL_ID = "gpu-share-quota-window"

_clients: dict[str, Any] = {}
#: The clock (tests replace it).
_now: Callable[[], float] = time.time
_sleep: Callable[[float], None] = time.sleep


class SwitchFailed(RuntimeError):
    """Some share or quota could not be put at the window's values after every try."""


@dataclass(frozen=True)
class Target:
    """One team's quota share or compute quota and its values in the base and in each window."""

    kind: str
    team: str
    id: str
    base: Mapping[str, Any]
    windows: Mapping[str, Mapping[str, Any]]

    def values(self, window: str | None) -> Mapping[str, Any]:
        """The values in force while ``window`` is open (None: the base)."""
        if window is None:
            return self.base
        return self.windows.get(window, self.base)


def read_settings(settings: Mapping[str, Any]) -> tuple[tuple[Window, ...], tuple[Target, ...]]:
    """The windows and targets of the function's settings."""
    windows = tuple(Window(**dict(w)) for w in settings.get("windows") or ())
    targets = []
    for t in settings.get("targets") or ():
        if t["kind"] not in KINDS:
            raise ValueError(f"targets: kind {t['kind']!r} is not one of {', '.join(sorted(KINDS))}")
        targets.append(Target(kind=t["kind"], team=t["team"], id=t["id"], base=t["base"],
                              windows=t.get("windows") or {}))
    return windows, tuple(targets)


def handler(event: Any, context: Any = None) -> dict:
    """Lambda entry point: a schedule's boundary, a retry, or the deploy's custom resource."""
    request = event.get("RequestType") if isinstance(event, Mapping) else None
    if request == "Delete":
        # The stack is going away: the shares and quotas go with it.
        return {"PhysicalResourceId": PHYSICAL_ID}
    windows, targets = read_settings(json.loads(os.environ[SETTINGS_ENV]))
    now = datetime.fromtimestamp(_now(), timezone.utc)
    scheduled = event.get("time") if isinstance(event, Mapping) else None
    result = switch(targets, window_at(windows, now), _client, now=now, scheduled=scheduled)
    if request is not None:
        return {"PhysicalResourceId": PHYSICAL_ID, "Data": {"Window": result["window"]}}
    return result


def switch(targets: Sequence[Target], window: Window | None, client: Callable[[str], Any], *,
           now: datetime | None = None, scheduled: Any = None) -> dict:
    """Put every target at its values for ``window`` (None: the base), lowering first.

    :param client: the boto3 client of a target kind (``client("batch")``)."""
    name = window.name if window is not None else BASE
    in_force = window.name if window is not None else None
    log("switch_started", window=name, at=now, scheduled=scheduled, targets=len(targets))
    written: dict[str, list[str]] = {"lower": [], "raise": []}
    failed: dict[str, str] = {}
    for phase in ("lower", "raise"):
        for target in targets:
            if target.team in failed:
                continue
            try:
                if _apply(target, target.values(in_force), phase, client(target.kind)):
                    written[phase].append(target.team)
            except Exception as exc:  # noqa: BLE001 - the others are still switched; raised below
                failed[target.team] = f"{type(exc).__name__}: {exc}"
                log("switch_failed", "ERROR", window=name, team=target.team, kind=target.kind, id=target.id,
                    phase=phase, error=failed[target.team])
        if failed:
            # A lowering not made: raising the others could promise more than the fleet.
            break
    if failed:
        raise SwitchFailed(f"quota window {name!r} not applied for {', '.join(sorted(failed))}: "
                           + "; ".join(f"{t}: {e}" for t, e in sorted(failed.items())))
    result: dict[str, Any] = {"window": name, "lowered": written["lower"], "raised": written["raise"],
              "unchanged": [t.team for t in targets
                            if t.team not in written["lower"] and t.team not in written["raise"]]}
    log("switched", **result)
    return result


def _apply(target: Target, wanted: Mapping[str, Any], phase: str, client: Any) -> bool:
    """Read the target and write it where it differs from its goal of ``phase``; True when
    written. Retried, reading afresh each time."""
    kind = KINDS[target.kind]
    wrote = False  # a write whose answer was lost may have been applied
    for attempt in range(1, ATTEMPTS + 1):
        try:
            current, version = kind.read(client, target.id)
            goal = dict(wanted) if phase == "raise" else kind.lowered(current, wanted)
            if kind.canonical(goal) == kind.canonical(current, like=goal):
                return wrote
            wrote = True
            kind.write(client, target.id, current, goal, version)
            log("written", team=target.team, kind=target.kind, phase=phase, values=goal)
            return True
        except Exception as exc:
            if attempt == ATTEMPTS:
                raise
            conflict = _error_code(exc) in kind.conflicts
            log("retrying", "WARNING", team=target.team, attempt=attempt, conflict=conflict,
                error=f"{type(exc).__name__}: {exc}")
            if not conflict:
                _sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
    raise AssertionError("unreachable")  # pragma: no cover


def _error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, Mapping) else None


# -- the two APIs -------------------------------------------------------------------


def _lowered(current: Mapping[Any, float], wanted: Mapping[Any, float]) -> dict[Any, float]:
    """Each amount at the smaller of the current and the wanted (one missing: 0)."""
    return {k: min(current.get(k, 0), wanted.get(k, 0)) for k in {*current, *wanted}}


def _nonzero(amounts: Mapping[Any, float]) -> dict[Any, float]:
    return {k: v for k, v in amounts.items() if v}


class _Batch:
    """A Batch quota share: ``capacityLimits`` (instances per type) and its sharing."""

    conflicts: tuple[str, ...] = ()

    @staticmethod
    def read(client: Any, id: str) -> tuple[dict[str, Any], None]:
        r = client.describe_quota_share(quotaShareArn=id)
        return {"capacityLimits": r.get("capacityLimits") or [],
                "resourceSharingConfiguration": r.get("resourceSharingConfiguration") or {}}, None

    @staticmethod
    def amounts(values: Mapping[str, Any]) -> dict[str, float]:
        return {c["capacityUnit"]: c["maxCapacity"] for c in values.get("capacityLimits") or ()}

    @classmethod
    def lowered(cls, current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
        amounts = _lowered(cls.amounts(current), cls.amounts(wanted))
        return {**wanted, "capacityLimits": [{"capacityUnit": u, "maxCapacity": amounts[u]} for u in sorted(amounts)]}

    @classmethod
    def canonical(cls, values: Mapping[str, Any], like: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What is compared: the amounts (a type at 0 is a type left out) and, when ``like``
        gives it, the sharing."""
        out: dict[str, Any] = {"capacity": _nonzero(cls.amounts(values))}
        if "resourceSharingConfiguration" in (like if like is not None else values):
            out["sharing"] = dict(values.get("resourceSharingConfiguration") or {})
        return out

    @staticmethod
    def write(client: Any, id: str, current: Mapping[str, Any], goal: Mapping[str, Any], version: None) -> None:
        client.update_quota_share(quotaShareArn=id, **goal)


class _HyperPod:
    """A HyperPod compute quota: ``ComputeQuotaConfig`` (resources per instance type, sharing,
    preemption), updated at the version read."""

    conflicts = ("ConflictException",)
    _FIELDS = ("Count", "Accelerators", "VCpu", "MemoryInGiB")

    @staticmethod
    def read(client: Any, id: str) -> tuple[dict[str, Any], int]:
        r = client.describe_compute_quota(ComputeQuotaId=id)
        return {"ComputeQuotaConfig": r.get("ComputeQuotaConfig") or {}}, r["ComputeQuotaVersion"]

    @classmethod
    def resource_amounts(cls, resources: Sequence[Mapping[str, Any]] | None) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for r in resources or ():
            for f in cls._FIELDS:
                if r.get(f) is not None:
                    out[(r["InstanceType"], f)] = r[f]
            partition = r.get("AcceleratorPartition")
            if partition:
                out[(r["InstanceType"], "partition:" + partition["Type"])] = partition["Count"]
        return out

    @staticmethod
    def resources(amounts: Mapping[tuple[str, str], float]) -> list[dict[str, Any]]:
        by_type: dict[str, dict[str, Any]] = {}
        for (itype, f), n in sorted(amounts.items()):
            entry = by_type.setdefault(itype, {"InstanceType": itype})
            if f.startswith("partition:"):
                entry["AcceleratorPartition"] = {"Type": f.removeprefix("partition:"), "Count": n}
            else:
                entry[f] = n
        return list(by_type.values())

    @classmethod
    def lowered(cls, current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
        config = dict(wanted.get("ComputeQuotaConfig") or {})
        have = cls.resource_amounts((current.get("ComputeQuotaConfig") or {}).get("ComputeQuotaResources"))
        want = cls.resource_amounts(config.get("ComputeQuotaResources"))
        config["ComputeQuotaResources"] = cls.resources(_lowered(have, want))
        return {**wanted, "ComputeQuotaConfig": config}

    @classmethod
    def canonical(cls, values: Mapping[str, Any], like: Mapping[str, Any] | None = None) -> dict[str, Any]:
        config = values.get("ComputeQuotaConfig") or {}
        keys = (like if like is not None else values).get("ComputeQuotaConfig") or {}
        out: dict[str, Any] = {"resources": _nonzero(cls.resource_amounts(config.get("ComputeQuotaResources")))}
        if "ResourceSharingConfig" in keys:
            sharing = dict(config.get("ResourceSharingConfig") or {})
            sharing["AbsoluteBorrowLimits"] = _nonzero(cls.resource_amounts(sharing.get("AbsoluteBorrowLimits")))
            out["sharing"] = sharing
        if "PreemptTeamTasks" in keys:
            out["preempt"] = config.get("PreemptTeamTasks")
        return out

    @staticmethod
    def write(client: Any, id: str, current: Mapping[str, Any], goal: Mapping[str, Any], version: int) -> None:
        # The update replaces the whole configuration: what the goal leaves out stays as read.
        config = {**(current.get("ComputeQuotaConfig") or {}), **(goal.get("ComputeQuotaConfig") or {})}
        client.update_compute_quota(ComputeQuotaId=id, TargetVersion=version, ComputeQuotaConfig=config)


#: Each target kind's reading, comparing and writing.
KINDS: Mapping[str, Any] = {"batch": _Batch, "hyperpod": _HyperPod}
_SERVICES = {"batch": "batch", "hyperpod": "sagemaker"}


def _client(kind: str) -> Any:
    if kind not in _clients:
        import boto3
        from botocore.config import Config

        _clients[kind] = boto3.client(_SERVICES[kind], config=Config(
            retries={"total_max_attempts": 3, "mode": "standard"}, connect_timeout=3, read_timeout=10))
    return _clients[kind]


def log(event: str, level: str = "INFO", **fields: Any) -> None:
    """One JSON log line."""
    print(json.dumps({"level": level, "event": event, **fields}, default=str, separators=(",", ":")))
    sys.stdout.flush()
