"""A team's objectives: what its jobs need from the shared fleet, and whether a run meets it.

One definition serves every command: ``simulate`` reports each objective's target,
value and whether it is met; ``advise`` ranks configurations by them; the deployed
alarms take their thresholds from them. A team's ``objectives`` (in the platform config
under the team, in a scenario on the team object) map keys of :data:`OBJECTIVE_KEYS` to
targets:

==============================  ===========================================================
key                             met when, for the team's jobs in the simulated run
==============================  ===========================================================
``wait_p50_minutes``,           ``wait_pXX_s`` <= 60 * target
``wait_p95_minutes``,
``wait_p99_minutes``
``guarantee_wait_p99_minutes``  ``reclaim_wait_p99_s`` <= 60 * target (the owed wait: the time
                                a job waits while its team's unused entitlement could hold it)
``no_worse_than_private``       for p50, p95 and p99: the wait percentile of the team's jobs
                                that fit its entitlement (gpus <= E) is at most the same
                                percentile of the same jobs in a private cluster of exactly
                                E, plus a slack (poll + reclaim_after + 60 s)
``max_preempted_per_day``       ``preempted`` / D <= target
``max_lost_gpu_hours_per_day``  ``lost_gpu_seconds`` / 3600 / D <= target
==============================  ===========================================================

A team's **entitlement** E is what it was promised: ``objectives.entitlement`` (the shape of
its guarantee: ``{"gpu": N}`` in a scenario, whole instances per instance type in the config)
when given, else its guarantee. The two objectives that speak of a promise are judged against
E, so that a configuration cannot meet them by lowering the guarantee: the advisor changes
guarantees, never entitlements. Here the entitlement is read as a mapping of names to
amounts (:attr:`Objectives.entitlement`); what its names must be (the guarantee's resource or
instance types) and how large it may be (the capacity) is checked where the guarantee and
the capacity are known (the scenario's and the config's parsers).

D is the trace's submit span in days, at least 1 (:func:`trace_days`). Targets are
positive numbers; ``max_preempted_per_day`` and ``max_lost_gpu_hours_per_day`` also take
0, which means the team's work must never be stopped by reclaim
(:attr:`Objectives.never_stopped`). ``no_worse_than_private`` is ``true`` or ``false``
(``false`` is no objective).

:func:`evaluate` gives each objective's ``{"target", "value", "met"}`` for one team's
figures in a run; :func:`worst_ratio` how far the worst objective of all teams is from
its target (1 at the boundary, above 1 when missed). This module is pure: the
simulator's figures come in as mappings (a team's entry of ``simulate --json`` plus the
waits of its jobs that fit its entitlement, :data:`FIT_WAIT_KEYS`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdk_gpu_share.core import validation as V

__all__ = [
    "ENTITLEMENT_KEY",
    "FIT_WAIT_KEYS",
    "MAX_TARGET",
    "NEVER_STOPPED_KEYS",
    "OBJECTIVE_KEYS",
    "OBJECTIVE_UNITS",
    "PERCENTILES",
    "Objectives",
    "evaluate",
    "guarantee_wait_alarm_seconds",
    "never_stopped_conflict",
    "parse_objectives",
    "ratio",
    "read_objectives",
    "target_text",
    "verdict_text",
    "trace_days",
    "worst_ratio",
]

OBJECTIVE_KEYS: tuple[str, ...] = (
    "wait_p50_minutes",
    "wait_p95_minutes",
    "wait_p99_minutes",
    "guarantee_wait_p99_minutes",
    "no_worse_than_private",
    "max_preempted_per_day",
    "max_lost_gpu_hours_per_day",
)

#: The key of ``objectives`` that holds the team's entitlement: not an objective (no target),
#: the promise two objectives are judged against.
ENTITLEMENT_KEY = "entitlement"

#: The keys whose target may be 0: the team's work is then never to be stopped by reclaim.
NEVER_STOPPED_KEYS: tuple[str, ...] = ("max_preempted_per_day", "max_lost_gpu_hours_per_day")

#: The unit of each objective's target and value, as reports print it.
OBJECTIVE_UNITS: Mapping[str, str] = {
    "wait_p50_minutes": "min",
    "wait_p95_minutes": "min",
    "wait_p99_minutes": "min",
    "guarantee_wait_p99_minutes": "min",
    "no_worse_than_private": "s",
    "max_preempted_per_day": "/day",
    "max_lost_gpu_hours_per_day": "GPU-h/day",
}

#: The percentiles ``no_worse_than_private`` compares, and where a run's figures hold them:
#: the waits (seconds) of a team's jobs that fit its entitlement.
PERCENTILES: tuple[str, ...] = ("p50", "p95", "p99")
FIT_WAIT_KEYS: Mapping[str, str] = {q: f"fit_wait_{q}_s" for q in PERCENTILES}

#: The largest target accepted (minutes, or stops or GPU-hours a day): a year of minutes is plenty.
MAX_TARGET = 10_000_000

# The figure (in a team's entry of simulate --json) each wait objective reads.
_WAIT_FIGURES = {
    "wait_p50_minutes": "wait_p50_s",
    "wait_p95_minutes": "wait_p95_s",
    "wait_p99_minutes": "wait_p99_s",
    "guarantee_wait_p99_minutes": "reclaim_wait_p99_s",
}
# Comparisons allow the simulator's tolerance: a figure at its target is met.
_TOL = 1e-9


@dataclass(frozen=True)
class Objectives:
    """A team's objectives: ``targets`` maps keys of :data:`OBJECTIVE_KEYS` (in that order)
    to their targets (numbers; ``no_worse_than_private`` a bool), and ``entitlement`` is what
    the team was promised (a mapping such as ``{"ml.g5.xlarge": 2}``; None: its guarantee).

    Built from Python, the targets are checked by the same rules as the config's
    (:func:`read_objectives`); an invalid one raises :class:`ConfigError`. An ``Objectives``
    without targets is falsy: no objective (an entitlement alone judges nothing).
    """

    targets: Mapping[str, float | bool] = field(default_factory=dict)
    entitlement: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        problems = V.Problems()
        raw: object = self.targets
        if self.entitlement is not None and isinstance(raw, Mapping):
            raw = {**raw, ENTITLEMENT_KEY: self.entitlement}
        checked, entitlement = _read_all(raw, "Objectives", problems.add)
        problems.raise_if_any(label="invalid argument")
        object.__setattr__(self, "targets", checked)
        object.__setattr__(self, "entitlement", entitlement)

    @classmethod
    def _of(cls, targets: Mapping[str, float | bool], entitlement: Mapping[str, float] | None) -> Objectives:
        """Objectives of targets and an entitlement already checked: not checked a second time."""
        objectives = object.__new__(cls)
        object.__setattr__(objectives, "targets", dict(targets))
        object.__setattr__(objectives, "entitlement", None if entitlement is None else dict(entitlement))
        return objectives

    def __bool__(self) -> bool:
        return bool(self.targets)

    def __hash__(self) -> int:
        return hash((tuple(self.targets.items()), tuple((self.entitlement or {}).items())))

    @property
    def never_stopped(self) -> bool:
        """True when the team's work must never be stopped by reclaim (a 0 target of
        ``max_preempted_per_day`` or ``max_lost_gpu_hours_per_day``): only ``reserve`` or
        ``lend`` then suit it."""
        return any(self.targets.get(k) == 0 for k in NEVER_STOPPED_KEYS)

    @property
    def needs_private(self) -> bool:
        """True when ``no_worse_than_private`` is set: evaluating it needs the team's run in a
        private cluster of its entitlement."""
        return self.targets.get("no_worse_than_private") is True

    def to_mapping(self) -> dict[str, Any]:
        """The targets, and the entitlement when given, as the config writes them."""
        out: dict[str, Any] = dict(self.targets)
        if self.entitlement is not None:
            out[ENTITLEMENT_KEY] = dict(self.entitlement)
        return out


def _read_all(raw: object, where: str,
              add: V.AddProblem) -> tuple[dict[str, float | bool], dict[str, float] | None]:
    """The checked targets and entitlement of ``raw`` (an ``objectives`` mapping)."""
    targets = _read_targets(raw, where, add)
    entitlement = None
    if isinstance(raw, Mapping) and raw.get(ENTITLEMENT_KEY) is not None:
        entitlement = _read_entitlement(raw[ENTITLEMENT_KEY], V.key(where, ENTITLEMENT_KEY), add)
    return targets, entitlement


def _read_entitlement(raw: object, where: str, add: V.AddProblem) -> dict[str, float] | None:
    """An entitlement's shape: a mapping of names to amounts of 0 or more. Its names and its
    size are the scenario's and the config's to check (they know the guarantee and capacity)."""
    fix = 'write the shape of the guarantee, e.g. {"gpu": 8} in a scenario or {ml.g5.xlarge: 2} in a config'
    if not isinstance(raw, Mapping) or not raw:
        add(where, raw, f"must be a mapping of the guarantee's types to amounts, not {V.kind(raw)}"
            if not isinstance(raw, Mapping) else "is empty", fix)
        return None
    out: dict[str, float] = {}
    for name, value in raw.items():
        path = V.key(where, name)
        why = V.number_problem(value)
        if not isinstance(name, str) or not name:
            add(path, name, "is not a resource or instance type name", fix)
        elif why is not None:
            add(path, value, why, "write a whole number of instances (or GPUs in a scenario), such as 2")
        elif value < 0:
            add(path, value, "must be 0 or more", "write the GPUs (or instances) the team was promised")
        else:
            out[name] = value
    return out if len(out) == len(raw) else None


def _read_targets(raw: object, where: str, add: V.AddProblem) -> dict[str, float | bool]:
    """The checked targets of ``raw`` in :data:`OBJECTIVE_KEYS` order; problems go to ``add``."""
    if not isinstance(raw, Mapping):
        add(where, raw, f"must be a mapping of objective to target, not {V.kind(raw)}",
            "write e.g. {wait_p95_minutes: 60, max_preempted_per_day: 2}")
        return {}
    V.unknown_keys(raw, (*OBJECTIVE_KEYS, ENTITLEMENT_KEY), where, add)
    out: dict[str, float | bool] = {}
    for name in OBJECTIVE_KEYS:
        if name not in raw:
            continue
        value, path = raw[name], V.key(where, name)
        if name == "no_worse_than_private":
            if isinstance(value, bool):
                out[name] = value
            else:
                add(path, value, "must be true or false", "write true to compare with a private cluster of the entitlement")
            continue
        target = _target(value, path, add, zero_ok=name in NEVER_STOPPED_KEYS)
        if target is not None:
            out[name] = target
    return out


def _target(value: object, path: str, add: V.AddProblem, *, zero_ok: bool) -> float | None:
    """A target: a number above 0 (or 0 for the never-stopped keys), at most :data:`MAX_TARGET`."""
    why = "is not a number" if _is_nan(value) else V.number_problem(value)
    if why is not None:
        add(path, value, why, "write a positive number such as 60")
        return None
    number = float(value)  # type: ignore[arg-type]  # number_problem accepted it
    if number < 0 or (number == 0 and not zero_ok):
        fix = ("write a positive number, or 0 for work that must never be stopped" if zero_ok
               else "write a positive number such as 60, or leave the objective out")
        add(path, value, "must be above 0" if not zero_ok else "must be 0 or more", fix)
        return None
    if number > MAX_TARGET:
        add(path, value, f"is too large (at most {MAX_TARGET:,})", f"use a value <= {MAX_TARGET}")
        return None
    return int(number) if isinstance(value, int) else number


def _is_nan(value: object) -> bool:
    """NaN, whether Python's or read from a file (JSON's ``NaN`` is kept as its text, which
    would otherwise read as a number too large)."""
    if isinstance(value, V.OutOfRange):
        return value.text.strip().lstrip("+-.").lower() == "nan"
    return isinstance(value, float) and math.isnan(value)


def read_objectives(raw: object, where: str, add: V.AddProblem) -> Objectives | None:
    """A team's ``objectives`` read in the config parsers' way: every problem (an unknown
    key with the closest known one, a target that is not a positive number, a wrong type)
    goes to ``add`` as ``(field, value, message, fix)``; the result is None when there was
    any. ``None`` (the key left out) is no objective."""
    if raw is None:
        return Objectives()
    problems = V.Problems()
    targets, entitlement = _read_all(raw, where, problems.add)
    for p in problems.items:
        add(p.field, p.value, p.message, p.fix)
    if problems.items:
        return None
    return Objectives._of(targets, entitlement)


def parse_objectives(raw: object, where: str) -> Objectives:
    """A team's ``objectives``, or :class:`ConfigError` listing every problem (see
    :func:`read_objectives`). ``where`` is the field path of the mapping, such as
    ``teams[0].objectives``."""
    problems = V.Problems()
    objectives = read_objectives(raw, where, problems.add)
    problems.raise_if_any()
    assert objectives is not None  # no problem: read
    return objectives


def never_stopped_conflict(objectives: Objectives, sharing: str) -> str | None:
    """Why ``objectives`` and ``sharing`` disagree, or None: a team whose work must never be
    stopped (a 0 target of :data:`NEVER_STOPPED_KEYS`) that borrows (``lend_and_borrow``)
    runs borrowed jobs, which reclaim stops when their lenders want their GPUs back."""
    if sharing != "lend_and_borrow" or not objectives.never_stopped:
        return None
    keys = " and ".join(f"{k}: 0" for k in NEVER_STOPPED_KEYS if objectives.targets.get(k) == 0)
    return (f"objectives {keys} say its work must never be stopped, but sharing lend_and_borrow lets it borrow,"
            " and reclaim stops borrowed jobs when their lenders want their GPUs back; set sharing: lend or"
            " reserve, or allow some stops")


def guarantee_wait_alarm_seconds(objectives: Objectives, default: float) -> float:
    """The threshold of a team's deployed wait-for-its-guarantee alarm (the share monitor's and the
    fair-share dashboard's): its ``guarantee_wait_p99_minutes`` in seconds when set, else ``default``."""
    minutes = objectives.targets.get("guarantee_wait_p99_minutes")
    return default if minutes is None else float(minutes) * 60.0


def trace_days(first_submit: float, last_submit: float) -> float:
    """D: the trace's submit span in days, at least 1 (a short trace counts as one day)."""
    return max(1.0, (last_submit - first_submit) / 86400.0)


def evaluate(
    objectives: Objectives,
    team_result: Mapping[str, Any],
    days: float,
    private_waits: Mapping[str, float] | None,
    slack_s: float,
) -> dict[str, dict[str, Any]]:
    """Each objective's ``{"target", "value", "met"}`` for one team's figures in a run.

    ``team_result``: the team's entry of ``simulate --json`` (``wait_pXX_s``,
    ``reclaim_wait_p99_s``, ``preempted``, ``lost_gpu_seconds``), and, for
    ``no_worse_than_private``, the percentiles of its jobs that fit its entitlement
    (:data:`FIT_WAIT_KEYS`: ``fit_wait_p50_s`` ...). ``days``: :func:`trace_days`.
    ``private_waits``: ``{"p50", "p95", "p99"}``, the same jobs' waits in a private cluster
    of the entitlement (needed when :attr:`Objectives.needs_private`). ``slack_s``: the
    private comparison's allowance, the planner's period + ``reclaim_after_seconds`` + 60.

    ``value`` is in the key's unit: minutes for the waits, stops or GPU-hours a day, and
    for ``no_worse_than_private`` the worst of the three differences in seconds (met when
    <= 0). ``no_worse_than_private: false`` is no objective and is left out.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, target in objectives.targets.items():
        if name in _WAIT_FIGURES:
            seconds = float(team_result[_WAIT_FIGURES[name]])
            value: float = seconds / 60.0
            met = seconds <= 60.0 * float(target) + _TOL
        elif name == "max_preempted_per_day":
            value = float(team_result["preempted"]) / days
            met = value <= float(target) + _TOL
        elif name == "max_lost_gpu_hours_per_day":
            value = float(team_result["lost_gpu_seconds"]) / 3600.0 / days
            met = value <= float(target) + _TOL
        else:  # no_worse_than_private
            if target is not True:
                continue
            if private_waits is None:
                raise ValueError("no_worse_than_private needs the team's waits in a private cluster (private_waits)")
            value = max(float(team_result[FIT_WAIT_KEYS[q]]) - float(private_waits[q]) - slack_s for q in PERCENTILES)
            met = value <= _TOL
        out[name] = {"target": target, "value": value, "met": bool(met)}
    return out


_LABELS = {
    "wait_p50_minutes": "wait p50",
    "wait_p95_minutes": "wait p95",
    "wait_p99_minutes": "wait p99",
    "guarantee_wait_p99_minutes": "guarantee wait p99",
    "no_worse_than_private": "vs private",
    "max_preempted_per_day": "stops/day",
    "max_lost_gpu_hours_per_day": "lost GPU-h/day",
}


def _figure(x: float) -> str:
    """A figure as reports print it: at most three decimals, no trailing zeros."""
    text = f"{float(x):,.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def target_text(name: str, target: float | bool) -> str:
    """One objective in words, as ``plan`` lists it: ``wait p95 <= 60 min``, ``never stopped``."""
    if name == "no_worse_than_private":
        return "no worse than a private cluster of its entitlement" if target else "not compared with a private cluster"
    if name in _WAIT_FIGURES:
        return f"{_LABELS[name]} <= {_figure(float(target))} min"
    if target == 0:
        return "never stopped" if name == "max_preempted_per_day" else "no work lost"
    what = "stops" if name == "max_preempted_per_day" else "lost GPU-hours"
    return f"at most {_figure(float(target))} {what} a day"


def verdict_text(name: str, evaluation: Mapping[str, Any]) -> str:
    """One objective's verdict in a table cell: ``wait p95 41.5/60 min ok``, ``vs private +30 s MISSED``."""
    mark = "ok" if evaluation["met"] else "MISSED"
    value = float(evaluation["value"])
    if name == "no_worse_than_private":
        return f"{_LABELS[name]} {'+' if value > 0 else ''}{_figure(value)} s {mark}"
    unit = " min" if name in _WAIT_FIGURES else ""
    return f"{_LABELS[name]} {_figure(value)}/{_figure(float(evaluation['target']))}{unit} {mark}"


def ratio(name: str, evaluation: Mapping[str, Any]) -> float:
    """How far one objective's value is from its target: value / target (1 at the
    boundary, above 1 when missed); for ``no_worse_than_private`` 1 + difference / 3600.

    A target of 0 (work never to be stopped) has ratio 0 when the value is 0 and infinity
    otherwise: no amount of stopping is "close" to never.
    """
    value = float(evaluation["value"])
    if name == "no_worse_than_private":
        return 1.0 + value / 3600.0
    target = float(evaluation["target"])
    if target == 0:
        return 0.0 if value <= _TOL else math.inf
    return value / target


def worst_ratio(evaluations: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> float:
    """The largest :func:`ratio` over every team's objectives (``{team: evaluate(...)}``);
    0.0 when no team has an objective. At most 1 when every objective is met."""
    return max((ratio(name, e) for per_team in evaluations.values() for name, e in per_team.items()), default=0.0)
