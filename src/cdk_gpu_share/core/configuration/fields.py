"""The platform config's fields: the readers, the value types and the rules of a team's and a group's fields.

Each reader records the problem of a bad value (the field, the value and the fix) and returns
None; the section parsers of the backends (:mod:`cdk_gpu_share.backends`) read their sections
with them. :class:`Sharing` and :class:`Amount` are the values a guarantee is made of;
:func:`_team_fields` and :func:`_group_fields` are the rules every team and group meets, read
from YAML (:mod:`cdk_gpu_share.core.configuration.parse`) or built in Python
(:mod:`cdk_gpu_share.core.configuration.model`) alike.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.catalog import hyperpod_schema as hp
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration.objectives import ENTITLEMENT_KEY, Objectives, read_objectives
from cdk_gpu_share.core.configuration.windows import TEAM_WINDOW_KEYS

__all__ = [
    "Amount", "amount_mapping", "ASSUMER_ARN_PATTERN", "BATCH", "BATCH_NAME_PATTERN", "check_keys",
    "DEFAULT_MAX_PRIORITY", "DEFAULT_PRINCIPAL_TAG", "DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS", "DNS_LABEL",
    "drop_uncatalogued", "FAIRSHARE", "GROUP_NAME_FIX", "GROUP_NAME_PATTERN", "HYPERPOD",
    "MAX_CHECKPOINT_SECONDS", "MAX_INT", "MAX_NUMBER", "MAX_PREEMPTION_RETRIES", "MAX_SCHEDULING_PRIORITY",
    "MAX_TEAM_NAME", "MISSING", "PLATFORM_NAME_PATTERN", "read_bool", "read_capacity", "read_fleet",
    "read_int", "read_mapping", "read_object", "read_section", "read_str", "RECLAIM_MAX_CHECKPOINT_FIX",
    "SECURITY_GROUP_ID_PATTERN", "Sharing", "STACK_NAME_PATTERN", "SUBNET_ID_PATTERN", "TAG_KEY_PATTERN",
    "TEAM_DERIVED_NAMES", "TEAM_INT_RANGES", "team_name_problems", "VPC_ID_PATTERN", "vpc_problems",
]


# ---------------------------------------------------------------------------
# Limits of the services, in one place.

BATCH_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
PLATFORM_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9-]{0,39}$"
# AWS APIs take 32-bit integers; larger values would also overflow float arithmetic.
MAX_INT = 2**31 - 1
MAX_NUMBER = 10_000_000  # the largest VCpu / MemoryInGiB a HyperPod compute quota takes
BATCH = "batch_quota"
HYPERPOD = "hyperpod"
FAIRSHARE = "fairshare"
#: The backends whose sections are fields of :class:`PlatformConfig` (a registered backend's
#: section is in ``PlatformConfig.other_backends``); every backend: :func:`cdk_gpu_share.core.configuration.backends.keys`.
_BUILTIN_SECTIONS = (BATCH, HYPERPOD, FAIRSHARE)


#: The longest checkpoint interval a team may declare: 7 days.
MAX_CHECKPOINT_SECONDS = 604800
#: ``fairshare.reclaim.max_checkpoint_seconds``: default (the reclaim planner's, an hour) and
#: the fix of a value out of its range, 1 to :data:`MAX_CHECKPOINT_SECONDS`.
DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS = 3600
RECLAIM_MAX_CHECKPOINT_FIX = (f"give the longest checkpoint interval the checkpoint order believes, 1 to"
                              f" {MAX_CHECKPOINT_SECONDS} seconds (default {DEFAULT_RECLAIM_MAX_CHECKPOINT_SECONDS});"
                              " a job declaring none, 0 or more is ordered as if it saved that often")
#: The most requeues after preemption a team may ask Batch quota management for.
MAX_PREEMPTION_RETRIES = 1000
#: Batch's scheduling priorities run from 0 to 9999; a team's jobs may use 0..max_priority.
#: The same default for every team means no team outranks another unless the platform
#: team raises its cap.
DEFAULT_MAX_PRIORITY = 100
MAX_SCHEDULING_PRIORITY = 9999
DEFAULT_PRINCIPAL_TAG = "gpu-share:team"


class Sharing(str, Enum):
    """How a team shares its guarantee with the others."""

    RESERVE = "reserve"
    LEND = "lend"
    LEND_AND_BORROW = "lend_and_borrow"

    @property
    def lends(self) -> bool:
        """True when the team lends its idle guarantee (``lend``, ``lend_and_borrow``)."""
        return self is not Sharing.RESERVE

    @property
    def borrows(self) -> bool:
        """True when the team may borrow beyond its guarantee (``lend_and_borrow``)."""
        return self is Sharing.LEND_AND_BORROW

    @property
    def batch_strategy(self) -> str:
        """The ``ResourceSharingConfiguration.Strategy`` of an AWS Batch quota share."""
        return self.value.upper()

    @property
    def hyperpod_strategy(self) -> str:
        """The ``ResourceSharingConfig.Strategy`` of a HyperPod compute quota."""
        return {"reserve": "DontLend", "lend": "Lend", "lend_and_borrow": "LendAndBorrow"}[self.value]


@dataclass(frozen=True)
class Amount:
    """Capacity of one instance type: whole instances, or resources of it.

    ``instances`` alone is the common case (``ml.g5.xlarge: 1``). HyperPod also
    takes ``accelerators``, ``vcpu``, ``memory_gib`` and MIG partitions (``mig``:
    profile -> count).
    """

    instances: int | None = None
    accelerators: int | None = None
    vcpu: float | None = None
    memory_gib: float | None = None
    mig: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        # The Python API takes what the YAML takes: mig={"mig-3g.20gb": 8} (profile -> count).
        problems = _Problems()
        for name in ("instances", "accelerators"):
            value = getattr(self, name)
            if value is not None and V.read_int(value, f"Amount.{name}", problems.add, minimum=0,
                                                 fix=f"pass {name}=N, a whole number >= 0") is not None:
                object.__setattr__(self, name, int(value))
        for name in ("vcpu", "memory_gib"):
            value = getattr(self, name)
            if value is not None:
                V.read_number(value, f"Amount.{name}", problems.add, minimum=0, maximum=MAX_NUMBER,
                              fix=f"pass {name}=N, a number >= 0")
        mig = self.mig
        if isinstance(mig, Mapping):
            mig = tuple(sorted(mig.items(), key=lambda kv: str(kv[0])))
        if not isinstance(mig, (tuple, list)) or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in mig):
            problems.add("Amount.mig", mig, "must map MIG profiles to counts", 'pass mig={"mig-3g.20gb": 4}')
            mig = ()
        for profile, count in mig:
            if not isinstance(profile, str):
                problems.add(f"Amount.mig[{profile!r}]", profile, "is not a MIG profile name", 'pass a name such as "mig-3g.20gb"')
            V.read_int(count, V.key("Amount.mig", profile), problems.add, minimum=0, fix="pass a whole number of partitions")
        object.__setattr__(self, "mig", tuple((p, int(c)) if V.is_number(c) and not isinstance(c, bool) else (p, c) for p, c in mig))
        problems.raise_if_any(label="invalid argument")

    @property
    def is_instances_only(self) -> bool:
        """True when the amount is a whole number of instances and nothing else."""
        return (
            self.instances is not None
            and self.accelerators is None
            and self.vcpu is None
            and self.memory_gib is None
            and not self.mig
        )

    def gpus(self, instance_type: str) -> float | None:
        """GPUs this amount stands for on ``instance_type`` (None when unknown)."""
        info = instances.lookup(instance_type)
        if self.accelerators is not None:
            return float(self.accelerators)
        if self.instances is not None and info is not None:
            return float(self.instances * info.gpus)
        return None

    def describe(self) -> str:
        """The amount in words, such as ``2 instances`` or ``4 accelerators, 96 vCPU``."""
        parts = []
        if self.instances is not None:
            parts.append(f"{self.instances} instance{'s' if self.instances != 1 else ''}")
        if self.accelerators is not None:
            parts.append(f"{self.accelerators} accelerators")
        if self.vcpu is not None:
            parts.append(f"{self.vcpu:g} vCPU")
        if self.memory_gib is not None:
            parts.append(f"{self.memory_gib:g} GiB")
        parts += [f"{count}x {profile}" for profile, count in self.mig]
        return ", ".join(parts) or "nothing"


#: A group's name: a DNS-1123 label (it names a Kueue Cohort).
GROUP_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
GROUP_NAME_FIX = "use up to 63 lower-case letters, digits and hyphens, starting and ending with a letter or digit"


# ---------------------------------------------------------------------------
# Parsing and validation.


# The helpers below are thin names over the validation toolkit
# (cdk_gpu_share.core.validation), which owns number parsing, quoting, field paths
# and the YAML loader for every input of the library. To add a field: add it to the
# section's *_KEYS set (and to core/configuration/schema.py, whose test checks both agree),
# read it with _int/_number/_bool/_str/_mapping under the path V.key(where, "field"),
# and record problems with problems.add(field, value, message, fix).

_Problems = V.Problems
_MISSING = object()


def _check_keys(raw: Mapping, allowed: set[str], where: str, problems: _Problems) -> None:
    V.unknown_keys(raw, allowed, where, problems.add)


def _mapping(value: Any, where: str, problems: _Problems, *, required: bool = False) -> Mapping | None:
    return V.read_mapping(None if value is _MISSING else value, where, problems.add, required=required)


def _int(
    value: Any,
    where: str,
    problems: _Problems,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    fix: str = "",
) -> int | None:
    return V.read_int(value, where, problems.add, minimum=minimum, maximum=MAX_INT if maximum is None else maximum, fix=fix)


def _number(value: Any, where: str, problems: _Problems) -> float | None:
    return V.read_number(value, where, problems.add, minimum=0, maximum=MAX_NUMBER, type_fix="write a number such as 96")


def _bool(value: Any, where: str, problems: _Problems) -> bool | None:
    if not isinstance(value, bool):
        problems.add(where, value, "must be true or false", "write true or false")
        return None
    return value


def _str(value: Any, where: str, problems: _Problems, pattern: str | None = None, fix: str = "") -> str | None:
    if not isinstance(value, str) or not value:
        problems.add(where, value, "must be a non-empty string", fix or "write a name")
        return None
    if pattern and not re.fullmatch(pattern, value):
        problems.add(where, value, f"does not match {pattern}", fix)
        return None
    return value


# The readers a backend's section parser uses (cdk_gpu_share.backends): each records the
# problem of a bad value and returns None (read_capacity drops the bad entries).
MISSING = _MISSING
read_mapping = _mapping
check_keys = _check_keys


def read_object(value: Any, where: str, keys: Iterable[str], problems: _Problems) -> Mapping | None:
    """``value`` as a mapping of the given ``keys`` (an unknown key is a problem, with the closest
    known one); None when it is absent or not a mapping."""
    data = _mapping(value, where, problems)
    if data is not None:
        _check_keys(data, set(keys), where, problems)
    return data


read_int = _int
read_bool = _bool
read_str = _str


_AMOUNT_KEYS = {"instances", "accelerators", "vcpu", "memory_gib", "mig"}


def _amount(value: Any, where: str, problems: _Problems) -> Amount | None:
    if value is None:
        # `ml.g5.xlarge:` with nothing after it: a team silently without this guarantee.
        problems.add(where, None, "is empty", "write a number of instances, such as 1, or remove the instance type")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        n = _int(value, where, problems, minimum=0, fix="write a whole number of instances, such as 1")
        return None if n is None else Amount(instances=n)
    if isinstance(value, (str, bool)):
        problems.add(where, value, f"must be a whole number of instances or a mapping, not {V.kind(value)}",
                     "write a number such as 1, or {accelerators: 4}")
        return None
    raw = _mapping(value, where, problems)
    if raw is None:
        return None
    before = len(problems.items)
    _check_keys(raw, _AMOUNT_KEYS, where, problems)
    kwargs: dict[str, Any] = {}
    if "instances" in raw:
        kwargs["instances"] = _int(raw["instances"], f"{where}.instances", problems, minimum=0)
    if "accelerators" in raw:
        kwargs["accelerators"] = _int(raw["accelerators"], f"{where}.accelerators", problems, minimum=0)
    for key in ("vcpu", "memory_gib"):
        if key in raw:
            kwargs[key] = _number(raw[key], f"{where}.{key}", problems)
    if "mig" in raw:
        mig = _mapping(raw["mig"], f"{where}.mig", problems)
        pairs = []
        for profile, count in (mig or {}).items():
            if profile not in hp.HYPERPOD_MIG_PROFILES:
                close = difflib.get_close_matches(str(profile), sorted(hp.HYPERPOD_MIG_PROFILES), n=1)
                problems.add(
                    f"{where}.mig.{profile}",
                    profile,
                    "is not a MIG profile that HyperPod accepts",
                    f"did you mean '{close[0]}'?" if close else "use a profile such as mig-3g.40gb",
                )
                continue
            n = _int(count, f"{where}.mig.{profile}", problems, minimum=0)
            if n is not None:
                pairs.append((str(profile), n))
        kwargs["mig"] = tuple(sorted(pairs))
    if all(v in (None, ()) for v in kwargs.values()):
        if len(problems.items) == before:
            problems.add(where, dict(raw), "names no capacity", "give instances, accelerators, vcpu, memory_gib or mig")
        return None
    return Amount(**kwargs)


def _capacity(value: Any, where: str, problems: _Problems, *, ml: bool) -> dict[str, int]:
    raw = _mapping(value, where, problems, required=True)
    out: dict[str, int] = {}
    for instance_type, count in (raw or {}).items():
        it = str(instance_type)
        if ml and not it.startswith("ml."):
            problems.add(f"{where}.{it}", it, "is not a SageMaker instance type", f"write ml.{it}")
            continue
        if not ml and it.startswith("ml."):
            problems.add(f"{where}.{it}", it, "is a SageMaker type; this fleet runs EC2 instances", f"write {it[3:]}")
            continue
        n = _int(count, f"{where}.{it}", problems, minimum=1, fix="declare at least 1 instance, or remove the type")
        if n is not None:
            out[it] = n
    if raw is not None and not raw:
        problems.add(where, {}, "declares no instance type", "list at least one, such as ml.g5.xlarge: 3")
    return out


def _catalogued(capacity: dict[str, int], backend: str, problems: _Problems, *, sagemaker: bool) -> None:
    """Drop from ``capacity`` the types the instance catalog refuses (typo, no GPU), each reported."""
    for it in list(capacity):
        refusal = instances.instance_type_problem(it, sagemaker=sagemaker)
        if refusal is not None:
            problems.add(f"{backend}.capacity.{it}", it, *refusal)
            del capacity[it]


read_capacity = _capacity
drop_uncatalogued = _catalogued


def read_section(raw: Any, key: str, keys: Iterable[str], problems: _Problems, *,
                 sagemaker: bool) -> tuple[Mapping, dict[str, int]] | None:
    """Section ``key`` of the given ``keys`` and its capacity (:func:`read_fleet`), or None when absent."""
    data = read_object(raw, key, keys, problems)
    return None if data is None else (data, read_fleet(data, key, problems, sagemaker=sagemaker))


def read_fleet(section: Mapping, key: str, problems: _Problems, *, sagemaker: bool) -> dict[str, int]:
    """The ``capacity`` of section ``key``: instances per type, of the types the catalog knows
    (SageMaker ``ml.`` types, or EC2 types); each refusal recorded."""
    capacity = _capacity(section.get("capacity", _MISSING), f"{key}.capacity", problems, ml=sagemaker)
    _catalogued(capacity, key, problems, sagemaker=sagemaker)
    return capacity


_TEAM_KEYS = {
    "name",
    "guarantee",
    "sharing",
    "borrow_limit_percent",
    "borrow_limit",
    "in_team_preemption",
    "fair_share_weight",
    "checkpoint_seconds",
    "preemption_retries",
    "description",
    "objectives",
    "group",
    "windows",
    # authorization (_team_authorization)
    "max_priority",
    "assumed_by",
    "principal_tag",
}


#: (field, minimum, maximum, fix) of a team's bounded whole numbers, in YAML and in Python
#: (:class:`TeamConfig` gives its own fix, in Python's words).
TEAM_INT_RANGES: tuple[tuple[str, int, int, str], ...] = (
    ("borrow_limit_percent", -1, MAX_INT, "use -1 for unlimited, or a percentage >= 0"),
    ("fair_share_weight", 0, 100, "HyperPod fair-share weights run from 0 to 100"),
    ("checkpoint_seconds", 0, MAX_CHECKPOINT_SECONDS,
     f"give the seconds between two checkpoints of the team's jobs, 0 (never) to {MAX_CHECKPOINT_SECONDS} (7 days)"),
    ("preemption_retries", 0, MAX_PREEMPTION_RETRIES,
     f"give how many times a preempted job is queued again before it fails, 0 to {MAX_PREEMPTION_RETRIES}; leave it"
     " out to queue it again every time"),
)


def _team_fields(data: Mapping[str, Any], where: str, problems: _Problems, *, guarantee_required: bool) -> dict[str, Any]:
    """Every field of one team but its name, read and checked; a field that breaks a rule is
    reported and left out. The rules of a team, for the YAML parser and :class:`TeamConfig` alike."""
    guarantee: dict[str, Amount] = {}
    graw = _mapping(data.get("guarantee", _MISSING), f"{where}.guarantee", problems, required=guarantee_required)
    for it, amount in (graw or {}).items():
        a = _amount(amount, f"{where}.guarantee.{it}", problems)
        if a is not None:
            guarantee[str(it)] = a
    if graw is not None and not graw and guarantee_required:
        problems.add(f"{where}.guarantee", {}, "is empty", "guarantee at least one instance type, such as ml.g5.xlarge: 1")
    sharing = Sharing.LEND_AND_BORROW
    if "sharing" in data:
        try:
            sharing = Sharing(data["sharing"])
        except ValueError:
            problems.add(
                f"{where}.sharing",
                data["sharing"],
                "is not a sharing strategy",
                "use reserve, lend or lend_and_borrow",
            )
    ints: dict[str, int | None] = {}
    for key, lo, hi, fix in TEAM_INT_RANGES:
        ints[key] = None
        if data.get(key) is not None:
            ints[key] = _int(data[key], f"{where}.{key}", problems, minimum=lo, maximum=hi, fix=fix)
    percent = ints["borrow_limit_percent"]
    if percent is not None and not sharing.borrows:
        problems.add(
            f"{where}.borrow_limit_percent",
            percent,
            f"is set but sharing is {sharing.value}, which never borrows",
            "remove borrow_limit_percent, or set sharing: lend_and_borrow",
        )
        percent = None
    borrow_limit: dict[str, Amount] = {}
    braw = _mapping(data.get("borrow_limit"), f"{where}.borrow_limit", problems)
    for it, amount in (braw or {}).items():
        a = _amount(amount, f"{where}.borrow_limit.{it}", problems)
        if a is not None:
            borrow_limit[str(it)] = a
    if braw and not sharing.borrows:
        problems.add(
            f"{where}.borrow_limit",
            dict(braw),
            f"is set but sharing is {sharing.value}, which never borrows",
            "remove borrow_limit, or set sharing: lend_and_borrow",
        )
        borrow_limit = {}
    preempt = None  # unset: the service's default
    if data.get("in_team_preemption") is not None:
        preempt = _bool(data["in_team_preemption"], f"{where}.in_team_preemption", problems)
    description = data.get("description", "")
    if not isinstance(description, str):
        problems.add(f"{where}.description", description, "must be a string", "quote it")
        description = ""
    elif len(description) > 1024 or any(unicodedata.category(c).startswith("C") for c in description):
        # A HyperPod compute quota's Description takes up to 1024 printable characters.
        problems.add(
            f"{where}.description",
            description,
            "must be at most 1024 characters on one line, without control characters",
            "shorten it, and write it on one line (no `|` block)",
        )
        description = ""
    return {
        **_team_authorization(data, where, problems),
        "guarantee": guarantee,
        "sharing": sharing,
        "borrow_limit_percent": percent,
        "borrow_limit": borrow_limit,
        "in_team_preemption": preempt,
        "fair_share_weight": ints["fair_share_weight"],
        "checkpoint_seconds": ints["checkpoint_seconds"],
        "preemption_retries": ints["preemption_retries"],
        "description": description,
        "objectives": _entitled(read_objectives(data.get("objectives"), f"{where}.objectives", problems.add),
                                guarantee, f"{where}.objectives", problems),
        "group": _str(data["group"], f"{where}.group", problems, fix="write the name of a group of groups:")
        if data.get("group") is not None else None,
        "windows": _team_windows(data, guarantee, where, problems),
    }


def _team_windows(data: Mapping[str, Any], guarantee: Mapping[str, Amount], where: str,
                  problems: _Problems) -> dict[str, dict[str, Any]]:
    """A team's values per window (``windows: {night: {guarantee: ...}}``), each read by the rules
    of the team's own fields: the team with the window's values must be a team the parser accepts.
    Whether each window exists is checked with the whole config."""
    raw = _mapping(data.get("windows"), f"{where}.windows", problems)
    out: dict[str, dict[str, Any]] = {}
    base = {k: v for k, v in data.items() if k != "windows"}
    for name, values in (raw or {}).items():
        here = f"{where}.windows.{name}"
        given = _mapping(values, here, problems, required=True)
        if given is None:
            continue
        _check_keys(given, set(TEAM_WINDOW_KEYS), here, problems)
        keys = [k for k in given if k in TEAM_WINDOW_KEYS]
        if not keys:
            problems.add(here, dict(given), "changes nothing",
                         "give the window a guarantee, borrow_limit_percent or borrow_limit, or remove it")
            continue
        seen = _Problems()
        fields = _team_fields({**base, **{k: given[k] for k in keys}}, here, seen, guarantee_required=False)
        refused = set()
        for p in seen.items:
            key = next((k for k in keys if p.field == f"{here}.{k}" or p.field.startswith((f"{here}.{k}.", f"{here}.{k}["))),
                       None)
            if key is not None:  # the base's own problems are reported once, for the base
                problems.items.append(p)
                refused.add(key)
        if "guarantee" in keys and "guarantee" not in refused and set(fields["guarantee"]) != set(guarantee):
            problems.add(f"{here}.guarantee", _amounts_mapping(fields["guarantee"]),
                         "names other instance types than the team's guarantee",
                         f"give the window the types of the team's guarantee ({', '.join(guarantee) or 'none'}), "
                         "0 for a type it does not guarantee then")
            refused.add("guarantee")
        # A refused value is left out (reported above); the window keeps the others.
        out[str(name)] = {k: fields[k] for k in keys if k not in refused}
    return out


def _entitled(objectives: Objectives | None, guarantee: Mapping[str, Amount], where: str,
              problems: _Problems) -> Objectives:
    """``objectives`` (None: refused, no objective) once its entitlement is a guarantee of the
    team's: whole instances of the very instance types the team is guaranteed. A refused
    entitlement is reported and left out (the guarantee is then the entitlement)."""
    if objectives is None:
        return Objectives()
    entitlement = objectives.entitlement
    if entitlement is None:
        return objectives
    where = f"{where}.{ENTITLEMENT_KEY}"
    types = ", ".join(guarantee) or "none"
    before = len(problems.items)
    for it, count in entitlement.items():
        if it not in guarantee:
            problems.add(V.key(where, it), count, "is not an instance type of the team's guarantee",
                         f"entitle the team to what it is guaranteed, in the same types ({types})")
        else:
            V.read_int(count, V.key(where, it), problems.add, minimum=0,
                       fix="write a whole number of instances, such as 2")
    missing = [it for it in guarantee if it not in entitlement]
    if missing and len(problems.items) == before:
        problems.add(where, dict(entitlement), f"lacks {', '.join(missing)}, guaranteed to the team",
                     f"give the instances of {', '.join(missing)} the team was promised too")
    if len(problems.items) > before:
        return Objectives._of(objectives.targets, None)
    return Objectives._of(objectives.targets, {it: int(n) for it, n in entitlement.items()})


# -- the organisation's tree of quotas (``groups:``). Its shape's rules are core/configuration/hierarchy.py's.

_GROUP_KEYS = {"name", "parent", "guarantee", "borrow_limit", "description"}


def _whole_instances(raw: Any, where: str, problems: _Problems) -> dict[str, Amount]:
    """A group's pool or borrow limit: whole instances per instance type."""
    out: dict[str, Amount] = {}
    for it, count in (_mapping(raw, where, problems) or {}).items():
        n = _int(count, f"{where}.{it}", problems, minimum=0,
                 fix="write a whole number of instances, such as 2 (a group's pool is whole instances)")
        if n is not None:
            out[str(it)] = Amount(instances=n)
    return out


def _group_fields(data: Mapping[str, Any], where: str, problems: _Problems) -> dict[str, Any]:
    """Every field of one group, read and checked (YAML and :class:`GroupConfig` alike)."""
    if "windows" in data:  # said as what it is: time windows are a team's
        problems.add(f"{where}.windows", data["windows"], "a group's pool is the same at every hour",
                     "give the windows to the teams below it")
        data = {k: v for k, v in data.items() if k != "windows"}
    _check_keys(data, _GROUP_KEYS, where, problems)
    name = _str(data.get("name"), f"{where}.name", problems, GROUP_NAME_PATTERN, GROUP_NAME_FIX)
    parent = None
    if data.get("parent") is not None:
        parent = _str(data["parent"], f"{where}.parent", problems, fix="write the name of another group")
    description = data.get("description", "")
    if not isinstance(description, str) or len(description) > 1024:
        problems.add(f"{where}.description", description, "must be a string of at most 1024 characters",
                     "quote it and shorten it")
        description = ""
    return {
        "name": name,
        "parent": parent,
        "guarantee": _whole_instances(data.get("guarantee"), f"{where}.guarantee", problems),
        "borrow_limit": None if data.get("borrow_limit") is None
        else _whole_instances(data["borrow_limit"], f"{where}.borrow_limit", problems),
        "description": description,
    }


# -- who may act as a team, and how far. Self-contained: new fields only.

#: An IAM role or user that may be named in a trust policy (no wildcards: IAM refuses them there).
ASSUMER_ARN_PATTERN = r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}"
#: A tag key IAM accepts in aws:PrincipalTag/<key>.
TAG_KEY_PATTERN = r"[A-Za-z0-9 _.:/=+@-]{1,128}"


def _team_authorization(data: Mapping, where: str, problems: _Problems) -> dict[str, Any]:
    """``max_priority``, ``assumed_by`` and ``principal_tag`` of one team (defaults when absent).

    * ``max_priority`` (default 100, within 0..9999): the highest scheduling priority the
      team's jobs may carry (enforced by IAM on Batch service jobs, and by the reclaimer,
      which never ranks a job above its team's cap when it picks victims).
    * ``assumed_by`` (default: none): IAM role or user ARNs allowed to assume the team's
      SubmitRole, e.g. an IAM Identity Center permission-set role or a CI role.
    * ``principal_tag`` (default ``gpu-share:team``): when ``assumed_by`` is empty, principals
      of the platform's account may assume the role only if their principal tag of this key
      is the team's name. Whoever can set that tag can become the team: the tag guard
      (:mod:`cdk_gpu_share.core.policy.guard`) keeps it with ``security.administrators``.
    """
    out: dict[str, Any] = {}
    if data.get("max_priority") is not None:
        value = _int(data["max_priority"], f"{where}.max_priority", problems, minimum=0,
                     maximum=MAX_SCHEDULING_PRIORITY,
                     fix=f"use a whole number from 0 to {MAX_SCHEDULING_PRIORITY} (default {DEFAULT_MAX_PRIORITY})")
        if value is not None:
            out["max_priority"] = value
    raw = data.get("assumed_by")
    if raw is not None:
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items:
            problems.add(f"{where}.assumed_by", raw, "must be a non-empty list of IAM role or user ARNs",
                         "write e.g. [arn:aws:iam::111122223333:role/team-a-ci], or remove it to trust"
                         f" principals tagged {DEFAULT_PRINCIPAL_TAG}=<team>")
        else:
            arns = []
            for i, arn in enumerate(items):
                if not isinstance(arn, str) or not re.fullmatch(ASSUMER_ARN_PATTERN, arn):
                    problems.add(f"{where}.assumed_by[{i}]", arn, "is not an IAM role or user ARN",
                                 "write arn:aws:iam::ACCOUNT:role/NAME (no wildcards: trust policies refuse them)")
                elif arn not in arns:
                    arns.append(arn)
            out["assumed_by"] = tuple(arns)
    if data.get("principal_tag") is not None:
        tag = data["principal_tag"]
        if not isinstance(tag, str) or not re.fullmatch(TAG_KEY_PATTERN, tag) or tag.lower().startswith("aws:"):
            problems.add(f"{where}.principal_tag", tag, "is not a tag key IAM accepts",
                         f"use up to 128 letters, digits, spaces and _.:/=+-@, not starting with aws: (default"
                         f" {DEFAULT_PRINCIPAL_TAG})")
        elif raw is not None:
            problems.add(f"{where}.principal_tag", tag, "is set together with assumed_by, which replaces it",
                         "keep one: assumed_by (named principals) or principal_tag (tagged principals)")
        else:
            out["principal_tag"] = tag
    return out


#: EC2 resource IDs: the prefix, then 8 (older) or 17 hexadecimal digits.
VPC_ID_PATTERN = r"^vpc-(?:[0-9a-f]{8}|[0-9a-f]{17})$"
SUBNET_ID_PATTERN = r"^subnet-(?:[0-9a-f]{8}|[0-9a-f]{17})$"
SECURITY_GROUP_ID_PATTERN = r"^sg-(?:[0-9a-f]{8}|[0-9a-f]{17})$"


#: (field, pattern, example) of each id ``fairshare.vpc`` takes.
_VPC_IDS = (
    ("vpc_id", VPC_ID_PATTERN, "vpc-0123456789abcdef0"),
    ("subnet_ids", SUBNET_ID_PATTERN, "subnet-0123456789abcdef0"),
    ("security_group_ids", SECURITY_GROUP_ID_PATTERN, "sg-0123456789abcdef0"),
)


def vpc_problems(values: Mapping[str, Any], where: str, add: V.AddProblem) -> None:
    """The one rule for ``fairshare.vpc``, from YAML and Python alike: an id like ``vpc-...``, and
    non-empty lists of distinct ``subnet-...`` / ``sg-...`` ids (security groups may be absent)."""
    given = [entry for entry in _VPC_IDS if entry[0] != "security_group_ids" or "security_group_ids" in values]
    for name, pattern, example in given:
        path = V.key(where, name)
        value = values.get(name)
        if name == "vpc_id":
            if not isinstance(value, str) or not re.fullmatch(pattern, value):
                add(path, value, "is not a VPC id", f"write it as the console shows it, e.g. {example}")
            continue
        if not isinstance(value, (list, tuple)) or not value:
            fix = (f"list at least one, e.g. [{example}], or leave {name} out for a new egress-only group"
                   if name == "security_group_ids" else f"list the private subnets of the GPU instances, e.g. [{example}]")
            add(path, value, "is an empty list" if isinstance(value, (list, tuple)) else f"must be a list of ids, not {V.kind(value)}",
                fix)
            continue
        first: dict[str, int] = {}
        for i, entry in enumerate(value):
            if not isinstance(entry, str) or not re.fullmatch(pattern, entry):
                add(V.item(path, i), entry, f"is not an id like {example}", f"write it as the console shows it, e.g. {example}")
            elif entry in first:
                add(V.item(path, i), entry, f"repeats {V.item(path, first[entry])}", "list each id once")
            else:
                first[entry] = i


# Names derived from a team's name that every team has, whatever its backends.
# Each entry: (what, template, pattern, maximum length). Backend-specific names (quota
# share, HyperPod namespace, fair-share identifier, job definitions) are checked in
# _check_backend. Add a row here when a construct derives a new name from the team's.
STACK_NAME_PATTERN = r"[A-Za-z][A-Za-z0-9-]*"
TEAM_DERIVED_NAMES: tuple[tuple[str, str, str, int], ...] = (
    ("CloudFormation stack name", "{platform}-team-{team}", STACK_NAME_PATTERN, 128),
)
#: A DNS-1123 label: what Kubernetes takes as a namespace, the strictest name any backend derives
#: from a team's (Kueue's namespace and LocalQueue, HyperPod's ``hyperpod-ns-<team>``). Every
#: backend takes the same names, so a config moves from one backend to another unchanged.
DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
MAX_TEAM_NAME = 63


def _as_label(name: str) -> str:
    """The closest DNS-1123 label to ``name``: lower case, other characters as hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_TEAM_NAME].strip("-") or "team-a"


def team_name_problems(platform: str, team: str, where: str, add: V.AddProblem, *, stack: bool = True) -> None:
    """Refuse a team name that is not a DNS-1123 label, or (``stack``: the team gets its own stack)
    that a derived name (its stack name, ...) cannot hold."""
    if len(team) > MAX_TEAM_NAME or not re.fullmatch(DNS_LABEL, team):
        add(
            where,
            team,
            f"must be lower-case letters, digits and hyphens, starting and ending with a letter or digit, at most"
            f" {MAX_TEAM_NAME} characters (a DNS-1123 label: every backend names resources after the team, Kubernetes"
            " namespaces included)",
            f"write {_as_label(team)!r}",
        )
        return
    for what, template, pattern, limit in TEAM_DERIVED_NAMES if stack else ():
        derived = template.format(platform=platform, team=team)
        if len(derived) > limit or not re.fullmatch(pattern, derived):
            room = limit - len(template.format(platform=platform, team=""))
            add(
                where,
                team,
                f"makes the {what} {len(derived)} characters long; it takes at most {limit}",
                f"use at most {room} characters",
            )


# ---------------------------------------------------------------------------
# A config built in Python meets the rules of a config file through the same code:
# the dataclasses are written back as the mapping a file holds and read by the parser.
# A value of the wrong type is passed through as it is, for the parser to name.


def amount_mapping(amount: Amount) -> object:
    """``amount`` as a config file writes it: a number of instances, or a mapping."""
    if not isinstance(amount, Amount):
        return amount
    if amount.is_instances_only:
        return amount.instances
    out: dict[str, Any] = {k: getattr(amount, k) for k in ("instances", "accelerators", "vcpu", "memory_gib")
                           if getattr(amount, k) is not None}
    if amount.mig:
        out["mig"] = dict(amount.mig)
    return out


def _amounts_mapping(amounts: object) -> object:
    if not isinstance(amounts, Mapping):
        return amounts
    return {it: amount_mapping(a) for it, a in amounts.items()}


def _plain(value: object) -> object:
    """Tuples as lists and mappings as dicts, as a config file holds them."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value
