"""What a team may borrow on one instance type, in instances of it.

:func:`borrow_cap` is the one rule (the team's ``borrow_limit_percent``, else its backend's
default, and its absolute ``borrow_limit``; whole instances on a backend that lends whole
instances), read by ``plan``, the compilation of the organisation's tree and the backends'
summaries; :func:`instance_equivalent` is how many instances an amount stands for.
"""

from __future__ import annotations

import math

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.parse import Amount, TeamConfig

__all__ = ["UNLIMITED", "borrow_cap", "instance_equivalent"]

#: What :func:`borrow_cap` returns for a team whose borrowing has no cap.
UNLIMITED = None


def instance_equivalent(instance_type: str, amount: Amount) -> float:
    """How many instances of ``instance_type`` ``amount`` stands for."""
    if amount.is_instances_only:
        return float(amount.instances or 0)
    info = instances.lookup(instance_type)
    parts = [float(amount.instances or 0)]
    if info is not None:
        if amount.accelerators is not None:
            parts.append(amount.accelerators / info.gpus)
        if amount.vcpu is not None:
            parts.append(amount.vcpu / info.vcpus)
        if amount.memory_gib is not None:
            parts.append(amount.memory_gib / info.memory_gib)
        if amount.mig:
            parts.append(instances.mig_slices(amount.mig) / (instances.MIG_COMPUTE_SLICES * info.gpus))
    return max(parts)


def borrow_cap(team: TeamConfig, instance_type: str, guarantee: float, backend: str | None = None) -> float | None:
    """The most ``team`` may borrow on ``instance_type`` (None: unbounded).

    A team without ``borrow_limit_percent`` gets the backend's default (HyperPod: 50). On a
    backend that borrows whole instances (Batch quota management) the cap is what it can
    schedule: 150 % of 1 instance lets a team borrow 1 instance, not 1.5.
    """
    if not team.sharing.borrows:
        return 0.0
    caps = []
    pct = team.borrow_limit_percent
    spec = backends.spec(backend) if backend is not None else None
    if pct is None and spec is not None:
        pct = spec.default_borrow_percent
    if pct is not None and pct >= 0:
        caps.append(guarantee * pct / 100)
    if instance_type in team.borrow_limit:
        caps.append(instance_equivalent(instance_type, team.borrow_limit[instance_type]))
    if not caps:
        return UNLIMITED
    cap = min(caps)
    if spec is not None and spec.borrows_whole_instances:
        # Exact for whole-instance guarantees (an integer times an integer percent over 100);
        # the margin only keeps 0.29 * 100 / 100 from flooring below its value.
        cap = float(math.floor(cap + 1e-9))
    return cap
