"""MIG (Multi-Instance GPU) partition catalog and placement rule.

SageMaker Inference takes one accelerator partition layout per production variant,
applies it to every GPU of the instance and refuses a layout that does not fit the
GPU with an HTTP 400 in the middle of a deploy. This module decides, at synth time,
whether a set of MIG profiles fits one GPU, says why not, and lists the layouts that
do fit (documentation: ``docs/backends/mig-inference.md``).

Facts (NVIDIA MIG user guide): every GPU here has 7 compute slices and 8 memory
slices and holds at most 7 instances. Each instance occupies a run of memory slices
starting at an allowed index; a set of profiles fits when each gets an allowed
start, no two overlap and their compute slices sum to 7 or less. ``+me`` profiles
are not accepted by SageMaker and are refused here.

Pure Python (standard library only); used by the CLI, the constructs and tests.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = [
    "COMPUTE_SLICES",
    "MEMORY_SLICES",
    "MAX_INSTANCES",
    "KINDS",
    "Kind",
    "GPUS",
    "INSTANCE_TYPES",
    "InstanceGpuInfo",
    "Profile",
    "CheckResult",
    "Layout",
    "PRESETS",
    "MigError",
    "resolve_gpu",
    "profile",
    "place",
    "check",
    "layouts",
    "clear_layout_cache",
    "resolve_layout",
    "format_placement",
    "format_layout",
]

COMPUTE_SLICES = 7
MEMORY_SLICES = 8
MAX_INSTANCES = 7


class MigError(ConfigError):
    """An unknown GPU, instance type, profile or layout, or a layout that does not fit."""


@dataclass(frozen=True)
class Kind:
    """A profile shape, the same on every GPU: compute slices, memory slices, starts."""

    key: str
    compute_slices: int
    memory_slices: int
    allowed_starts: tuple[int, ...]
    description: str


# Largest first: this is the order profiles are placed in and layouts are sorted by.
KINDS: dict[str, Kind] = {
    k.key: k
    for k in (
        Kind("7g", 7, 8, (0,), "7g, the whole GPU"),
        Kind("4g", 4, 4, (0,), "4g"),
        Kind("3g", 3, 4, (0, 4), "3g"),
        Kind("2g", 2, 2, (0, 2, 4), "2g"),
        Kind("1g-2m", 1, 2, (0, 2, 4, 6), "1g with 2 memory slices"),
        Kind("1g", 1, 1, (0, 1, 2, 3, 4, 5, 6), "1g with 1 memory slice"),
    )
}
_KIND_RANK = {key: i for i, key in enumerate(KINDS)}

# GPU -> kind -> profile name (NVIDIA's MIG user guide).
_NAMES: dict[str, dict[str, str]] = {
    "A100-40GB": {
        "1g": "mig-1g.5gb",
        "1g-2m": "mig-1g.10gb",
        "2g": "mig-2g.10gb",
        "3g": "mig-3g.20gb",
        "4g": "mig-4g.20gb",
        "7g": "mig-7g.40gb",
    },
    "A100-80GB": {
        "1g": "mig-1g.10gb",
        "1g-2m": "mig-1g.20gb",
        "2g": "mig-2g.20gb",
        "3g": "mig-3g.40gb",
        "4g": "mig-4g.40gb",
        "7g": "mig-7g.80gb",
    },
    "H100-80GB": {
        "1g": "mig-1g.10gb",
        "1g-2m": "mig-1g.20gb",
        "2g": "mig-2g.20gb",
        "3g": "mig-3g.40gb",
        "4g": "mig-4g.40gb",
        "7g": "mig-7g.80gb",
    },
    "H200-141GB": {
        "1g": "mig-1g.18gb",
        "1g-2m": "mig-1g.35gb",
        "2g": "mig-2g.35gb",
        "3g": "mig-3g.71gb",
        "4g": "mig-4g.71gb",
        "7g": "mig-7g.141gb",
    },
    "B200-180GB": {
        "1g": "mig-1g.23gb",
        "1g-2m": "mig-1g.45gb",
        "2g": "mig-2g.45gb",
        "3g": "mig-3g.90gb",
        "4g": "mig-4g.90gb",
        "7g": "mig-7g.180gb",
    },
}

#: GPU name -> its SageMaker MIG profile names, smallest first.
GPUS: dict[str, tuple[str, ...]] = {
    gpu: tuple(names[k] for k in reversed(KINDS)) for gpu, names in _NAMES.items()
}


@dataclass(frozen=True)
class InstanceGpuInfo:
    """The GPU model of a SageMaker instance type and how many it has."""

    gpu: str
    gpu_count: int


#: SageMaker instance types with MIG-capable GPUs (SageMaker's documentation; 8 GPUs each): the
#: instance catalog's types marked ``mig`` (:func:`cdk_gpu_share.core.catalog.instances.mig_types`).
INSTANCE_TYPES: dict[str, InstanceGpuInfo] = {
    name: InstanceGpuInfo(info.gpu_model, info.gpus) for name, info in instances.mig_types().items()
}


@dataclass(frozen=True)
class Profile:
    """One MIG profile of one GPU, e.g. ``mig-3g.40gb`` on H100-80GB."""

    name: str
    gpu: str
    kind: str
    compute_slices: int
    memory_slices: int
    memory_gb: int
    allowed_starts: tuple[int, ...]


@dataclass(frozen=True)
class CheckResult:
    """Whether profiles fit one GPU; ``placement`` when they do, ``reason`` when not."""

    fits: bool
    placement: list[tuple[str, int]] | None
    reason: str = ""


@dataclass(frozen=True)
class Layout:
    """A layout that fits one GPU: profile names and their start memory slices."""

    profiles: tuple[str, ...]
    starts: tuple[int, ...]

    def to_dict(self) -> dict[str, list]:
        return {"profiles": list(self.profiles), "starts": list(self.starts)}

    def __str__(self) -> str:
        return format_placement(zip(self.profiles, self.starts))

    @property
    def layout(self) -> str:
        """The profiles as a config's ``layout:`` takes them (:func:`format_layout`)."""
        return format_layout(self.profiles)


#: Named layouts, in profile kinds (see ``KINDS``); ``resolve_layout`` turns them into
#: profile names of one GPU. The same shapes exist on every GPU in the catalog.
PRESETS: dict[str, tuple[str, ...]] = {
    "whole": ("7g",),
    "half": ("3g", "3g"),
    "four-three": ("4g", "3g"),
    "balanced": ("3g", "2g", "1g", "1g"),
    "thirds": ("2g", "2g", "2g"),
    "quarters": ("1g-2m", "1g-2m", "1g-2m", "1g-2m"),
    "max-instances": ("1g",) * 7,
}
PRESET_DESCRIPTIONS: dict[str, str] = {
    "whole": "one 7g instance: the whole GPU",
    "half": "two 3g instances, half the memory each",
    "four-three": "one 4g and one 3g instance (NVIDIA driver R510 or later)",
    "balanced": "one 3g, one 2g and two 1g instances",
    "thirds": "three 2g instances",
    "quarters": "four 1g instances with 2 memory slices each",
    "max-instances": "seven 1g instances",
}


# --------------------------------------------------------------------------- lookup


def _or_list(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


def _and_list(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _norm_gpu(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.strip()).upper()


def _closest(value: str, choices: Iterable[str], *, key: Callable[[str], str] = lambda s: s) -> list[str]:
    choices = list(choices)
    by_key = {key(c): c for c in choices}
    return [by_key[m] for m in difflib.get_close_matches(key(value), list(by_key), n=2, cutoff=0.6)]


def _gpu(gpu: object, field: str = "gpu") -> str:
    if not isinstance(gpu, str) or not gpu.strip():
        raise MigError(
            Problem(field, gpu, "a GPU name is required", f"use one of {_or_list(list(GPUS))}")
        )
    norm = _norm_gpu(gpu)
    for name in GPUS:
        if name.upper() == norm:
            return name
    prefix = [name for name in GPUS if name.upper().startswith(norm.split("-")[0])]
    close = _closest(norm, GPUS, key=str.upper) or prefix
    fix = f"valid GPUs: {_or_list(list(GPUS))}"
    if close:
        fix = f"did you mean {_or_list(close)}? " + fix
    raise MigError(Problem(field, gpu, "unknown MIG GPU", fix))


def _instance_type(instance_type: object, field: str = "instance_type") -> InstanceGpuInfo:
    valid = f"MIG instance types: {_or_list(list(INSTANCE_TYPES))}"
    if not isinstance(instance_type, str) or not instance_type.strip():
        raise MigError(Problem(field, instance_type, "an instance type is required", valid))
    text = instance_type.strip().lower()
    if text in INSTANCE_TYPES:
        return INSTANCE_TYPES[text]
    if f"ml.{text}" in INSTANCE_TYPES:
        raise MigError(
            Problem(
                field,
                instance_type,
                "SageMaker instance types start with 'ml.'",
                f"use ml.{text}",
            )
        )
    family = text.removeprefix("ml.").split(".")[0]
    same_family = [t for t in INSTANCE_TYPES if t.removeprefix("ml.").split(".")[0] == family]
    if same_family:
        raise MigError(
            Problem(
                field,
                instance_type,
                "this size has no verified MIG support in SageMaker",
                f"use {_or_list(same_family)}; {valid}",
            )
        )
    close = _closest(text, INSTANCE_TYPES)
    fix = valid if not close else f"did you mean {_or_list(close)}? {valid}"
    raise MigError(
        Problem(field, instance_type, "not a SageMaker instance type with MIG-capable GPUs", fix)
    )


def resolve_gpu(gpu: str | None = None, instance_type: str | None = None) -> str:
    """The catalog GPU name for ``gpu`` or ``instance_type`` (give one; both must agree)."""
    if gpu is None and instance_type is None:
        raise MigError(
            Problem(
                "gpu",
                None,
                "give a GPU or an instance type",
                f"GPUs: {_or_list(list(GPUS))}; instance types: {_or_list(list(INSTANCE_TYPES))}",
            )
        )
    if instance_type is None:
        return _gpu(gpu)
    info = _instance_type(instance_type)
    if gpu is not None and _gpu(gpu) != info.gpu:
        raise MigError(
            Problem(
                "gpu",
                gpu,
                f"{instance_type} has {info.gpu} GPUs",
                f"drop gpu or set it to {info.gpu}",
            )
        )
    return info.gpu


_PROFILE_RE = re.compile(r"^(?:mig-)?(\d{1,3})g\.(\d{1,4})gb(\+\w+)?$")  # bounded: int() of 5,001 digits raises


def _norm_profile(text: str) -> str:
    t = re.sub(r"\s+", "", text).lower()
    if not t.startswith("mig-") and _PROFILE_RE.match(t):
        t = "mig-" + t
    return t


def _kind_of(gpu: str, name: str) -> str | None:
    for kind, pname in _NAMES[gpu].items():
        if pname == name:
            return kind
    return None


def profile(gpu: str, name: str, *, field: str = "profile") -> Profile:
    """Look up MIG profile ``name`` (e.g. ``mig-3g.40gb``) on ``gpu``.

    Accepts ``3g.40gb`` and any letter case; the returned ``Profile.name`` is canonical.
    Raises ``MigError`` naming the value, the valid choices and the closest match.
    """
    gpu = _gpu(gpu)
    valid = f"valid {gpu} profiles: {', '.join(GPUS[gpu])}"
    if not isinstance(name, str) or not name.strip():
        raise MigError(Problem(field, name, "a MIG profile name is required", valid))
    norm = _norm_profile(name)
    m = _PROFILE_RE.match(norm)
    if m and m.group(3):
        base = norm[: -len(m.group(3))]
        alt = base if _kind_of(gpu, base) else None
        fix = f"use {alt}" if alt else valid
        if alt:
            fix += f"; {valid}"
        raise MigError(
            Problem(
                field,
                name,
                f"'{m.group(3)}' profiles are not accepted by SageMaker Inference",
                fix,
            )
        )
    kind = _kind_of(gpu, norm)
    if kind is not None:
        k = KINDS[kind]
        return Profile(
            name=norm,
            gpu=gpu,
            kind=kind,
            compute_slices=k.compute_slices,
            memory_slices=k.memory_slices,
            memory_gb=int(m.group(2)) if m else 0,
            allowed_starts=k.allowed_starts,
        )
    # Not a profile of this GPU: is it another GPU's?
    owners: dict[str, list[str]] = {}
    for other in _NAMES:
        okind = _kind_of(other, norm)
        if okind is not None:
            owners.setdefault(okind, []).append(other)
    if owners:
        gpus = sorted({g for gs in owners.values() for g in gs}, key=list(GPUS).index)
        kinds = sorted(owners, key=lambda k: _KIND_RANK[k])
        if len(kinds) == 1:
            alts = [_NAMES[gpu][kinds[0]]]
        else:  # the same name is a different shape on different GPUs
            alts = [
                f"{_NAMES[gpu][k]} ({KINDS[k].description}, as on {_and_list(owners[k])})"
                for k in kinds
            ]
        article = "a" if gpus[0].startswith("B") else "an"
        raise MigError(
            Problem(
                field,
                name,
                f"{norm} is {article} {_and_list(gpus)} profile",
                f"on {gpu} use {_or_list(alts)}; {valid}",
            )
        )
    close: list[str] = []
    if m:
        compute = int(m.group(1))
        close = [p for p in GPUS[gpu] if p.startswith(f"mig-{compute}g.")]
    close = close or _closest(norm, GPUS[gpu])
    fix = valid if not close else f"did you mean {_or_list(close)}? {valid}"
    raise MigError(Problem(field, name, f"not a MIG profile of {gpu}", fix))


# --------------------------------------------------------------------------- placement


def format_placement(placement: Iterable[tuple[str, int]]) -> str:
    """``mig-3g.40gb@0 mig-3g.40gb@4``."""
    return " ".join(f"{name}@{start}" for name, start in placement)


def format_layout(profiles: Iterable[str]) -> str:
    """Profile names as a config's ``layout:`` takes them: ``[mig-4g.40gb, mig-3g.40gb]``."""
    return "[" + ", ".join(profiles) + "]"


def _sorted_for_placement(items: Sequence[Profile]) -> list[Profile]:
    return sorted(items, key=lambda p: (_KIND_RANK[p.kind], p.name))


def _search(items: Sequence[Profile]) -> tuple[list[int] | None, int]:
    """Backtracking placement of ``items`` (already in placement order).

    Returns (starts, -1) on success, else (None, index of the first item that could
    not be placed in the deepest partial placement found).
    """
    n = len(items)
    starts: list[int] = [0] * n
    best = [-1]  # deepest index reached that failed

    def rec(i: int, used: int) -> bool:
        if i == n:
            return True
        p = items[i]
        # identical profiles take increasing starts: no symmetric retries
        lo = starts[i - 1] + 1 if i and items[i - 1].kind == p.kind else 0
        mask = (1 << p.memory_slices) - 1
        for s in p.allowed_starts:
            if s < lo:
                continue
            m = mask << s
            if used & m:
                continue
            starts[i] = s
            if rec(i + 1, used | m):
                return True
        if i >= best[0]:
            best[0] = i
        return False

    if rec(0, 0):
        return starts, -1
    return None, best[0]


def _resolve_profiles(gpu: str, names: Sequence[str], field: str = "profiles") -> list[Profile]:
    if isinstance(names, str):
        names = [names]
    problems: list[Problem] = []
    out: list[Profile] = []
    for i, name in enumerate(names):
        try:
            out.append(profile(gpu, name, field=f"{field}[{i}]"))
        except MigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise MigError(problems)
    return out


def _check(gpu: str, items: list[Profile]) -> CheckResult:
    if not items:
        return CheckResult(False, None, "no profiles given: a layout needs at least one MIG profile")
    if len(items) > MAX_INSTANCES:
        return CheckResult(
            False,
            None,
            f"more than {MAX_INSTANCES} instances: {len(items)} profiles given, "
            f"a GPU holds at most {MAX_INSTANCES} MIG instances",
        )
    compute = sum(p.compute_slices for p in items)
    if compute > COMPUTE_SLICES:
        parts = " + ".join(str(p.compute_slices) for p in _sorted_for_placement(items))
        return CheckResult(
            False,
            None,
            f"compute slices sum to {compute} > {COMPUTE_SLICES} ({parts}); "
            f"each {gpu} GPU has {COMPUTE_SLICES} compute slices",
        )
    memory = sum(p.memory_slices for p in items)
    ordered = _sorted_for_placement(items)
    starts, failed = _search(ordered)
    if starts is None:
        p = ordered[failed]
        placed = ordered[:failed]
        # report the deepest partial placement for the profiles before the failing one
        pre, _ = _search(placed)
        where = format_placement(sorted(zip((q.name for q in placed), pre or []), key=lambda t: t[1]))
        starts_txt = _or_list([str(s) for s in p.allowed_starts])
        need = f"{p.memory_slices} free memory slice{'s' if p.memory_slices > 1 else ''}"
        return CheckResult(
            False,
            None,
            f"no memory slices left for {p.name}: after {where} it needs {need} "
            f"starting at {starts_txt}"
            + (
                f" (memory slices sum to {memory} > {MEMORY_SLICES})"
                if memory > MEMORY_SLICES
                else ""
            ),
        )
    placement = sorted(zip((p.name for p in ordered), starts), key=lambda t: (t[1], t[0]))
    return CheckResult(True, placement, "")


def place(gpu: str, profiles: Sequence[str]) -> list[tuple[str, int]] | None:
    """A placement of ``profiles`` on one ``gpu``: ``[(name, start), ...]`` by start, or None.

    Deterministic: the largest profiles are placed first, each at its lowest free
    allowed start, backtracking when a later profile has no room.
    """
    gpu = _gpu(gpu)
    return _check(gpu, _resolve_profiles(gpu, profiles)).placement


def check(gpu: str, profiles: Sequence[str]) -> CheckResult:
    """Whether ``profiles`` fit together on one ``gpu``, with the placement or the reason."""
    gpu = _gpu(gpu)
    return _check(gpu, _resolve_profiles(gpu, profiles))


_LAYOUT_CACHE: dict[str, tuple[Layout, ...]] = {}


def clear_layout_cache() -> None:
    """Forget the layouts computed so far (``layouts`` computes them again on next use).

    Tests call this so that each computes layouts itself: a cache filled before a
    test runs would hide a change to ``layouts`` from it.
    """
    _LAYOUT_CACHE.clear()


def layouts(gpu: str) -> list[Layout]:
    """Every maximal layout of ``gpu`` (no further profile fits), each multiset once.

    Sorted largest profiles first (the whole GPU first, seven 1g instances last).
    """
    gpu = _gpu(gpu)
    if gpu not in _LAYOUT_CACHE:
        kinds = list(KINDS)  # largest first
        by_kind = {k: profile(gpu, _NAMES[gpu][k]) for k in kinds}
        found: list[tuple[tuple[int, ...], Layout]] = []

        def fits(ranks: list[int]) -> CheckResult:
            return _check(gpu, [by_kind[kinds[r]] for r in ranks])

        def rec(ranks: list[int], result: CheckResult | None) -> None:
            grew = False
            lo = ranks[-1] if ranks else 0
            for r in range(len(kinds)):
                nxt = ranks + [r]
                res = fits(nxt)
                if not res.fits:
                    continue
                grew = True
                if r >= lo:  # non-decreasing ranks: each multiset visited once
                    rec(nxt, res)
            if not grew and result is not None:
                assert result.placement is not None
                found.append(
                    (
                        tuple(ranks),
                        Layout(
                            tuple(n for n, _ in result.placement),
                            tuple(s for _, s in result.placement),
                        ),
                    )
                )

        rec([], None)
        found.sort(key=lambda t: t[0])
        _LAYOUT_CACHE[gpu] = tuple(layout for _, layout in found)
    return list(_LAYOUT_CACHE[gpu])


def resolve_layout(gpu: str, layout: str | Sequence[str], *, field: str = "layout") -> list[str]:
    """Profile names of ``layout`` on ``gpu``: a preset name (``PRESETS``) or profile names.

    Profile names are canonicalised and kept in the order given; presets come largest
    first. Raises ``MigError`` naming ``field`` when a name is unknown or the profiles
    do not fit one GPU.
    """
    gpu = _gpu(gpu)
    if isinstance(layout, str):
        key = layout.strip().lower()
        if key in PRESETS:
            return [_NAMES[gpu][k] for k in PRESETS[key]]
        if _PROFILE_RE.match(_norm_profile(layout)):
            layout = [layout]
        else:
            close = _closest(key, PRESETS)
            presets = ", ".join(PRESETS)
            fix = f"use a preset ({presets}) or a list of {gpu} profiles ({', '.join(GPUS[gpu])})"
            if close:
                fix = f"did you mean {_or_list(close)}? " + fix
            raise MigError(Problem(field, layout, "unknown MIG layout preset", fix))
    if not isinstance(layout, (list, tuple)):
        raise MigError(
            Problem(
                field,
                layout,
                "a MIG layout is a preset name or a list of profile names",
                f"for example 'balanced' or {list(_NAMES[gpu][k] for k in PRESETS['half'])}",
            )
        )
    items = _resolve_profiles(gpu, list(layout), field=field)
    result = _check(gpu, items)
    if not result.fits:
        maximal = [x.layout for x in layouts(gpu)][:3]
        raise MigError(
            Problem(
                field,
                list(layout),
                f"does not fit one {gpu} GPU: {result.reason}",
                "choose a layout that fits, e.g. " + "; ".join(maximal)
                + f" (list all with: gpu-share mig layouts --gpu {gpu})",
            )
        )
    return [p.name for p in items]
