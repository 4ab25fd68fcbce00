"""The policy answer side by side: ``gpu-share simulate --compare``.

:func:`compare` turns the results of the same trace simulated in several modes into
one table per team and one for the pool, with the best value of each row marked.
It only reads :class:`~cdk_gpu_share.core.simulate.SimResult` (no second simulator).

Which value is best: the lowest for waits, preemptions, lost and queued GPU-hours;
the highest for utilization and for GPU-hours borrowed (capacity a team got from
others' idle guarantees is what sharing buys). A row whose values are all equal
has no best value; a mode that could not run (``static`` with a job larger than its
team's guarantee) shows no value and does not compete.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdk_gpu_share.core.simulate import Job, SimResult

LOWER, HIGHER = "lower", "higher"
TOL = 1e-9


@dataclass(frozen=True)
class Row:
    """One metric across the modes; ``values[i]`` is None when mode i did not run."""

    key: str
    label: str
    unit: str  # "s", "GPU-h", "count", "%", or "of N" (objectives met out of N)
    better: str
    values: tuple[float | None, ...]

    @property
    def best(self) -> tuple[int, ...]:
        """Indexes of the best values; empty when there is nothing to choose between."""
        present = [(i, v) for i, v in enumerate(self.values) if v is not None]
        if len(present) < 2:
            return ()
        pick = min if self.better == LOWER else max
        target = pick(v for _, v in present)
        if all(abs(v - target) <= TOL for _, v in present):
            return ()
        return tuple(i for i, v in present if abs(v - target) <= TOL)


@dataclass
class Comparison:
    modes: tuple[str, ...]
    pool: list[Row]
    teams: dict[str, list[Row]]
    guarantees: dict[str, float]
    capacity: float
    notes: list[str] = field(default_factory=list)
    #: :func:`order_verdict` when the comparison ran the checkpoint-aware victim order.
    victim_order: dict[str, Any] | None = None
    #: Per mode, the teams with objectives whose objectives all hold (teams without objectives
    #: are not listed); empty when no team has objectives.
    objectives_hold: dict[str, list[str]] = field(default_factory=dict)
    #: The teams promised other than their guarantee (``objectives.entitlement``), in GPUs:
    #: their wait for their own guarantee and their objectives count the jobs within it.
    entitlements: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def rows(rs: list[Row]) -> dict[str, Any]:
            return {r.key: {"values": dict(zip(self.modes, r.values)), "unit": r.unit, "better": r.better,
                            "best": [self.modes[i] for i in r.best]} for r in rs}

        return {
            "modes": list(self.modes),
            "capacity_gpus": self.capacity,
            "pool": rows(self.pool),
            "teams": {name: {"guarantee_gpus": self.guarantees[name],
                             **({"entitlement_gpus": self.entitlements[name]} if name in self.entitlements else {}),
                             **rows(rs)} for name, rs in self.teams.items()},
            "notes": list(self.notes),
            **({} if self.victim_order is None else {"victim_order": self.victim_order}),
            **({"objectives_hold": self.objectives_hold} if self.objectives_hold else {}),
        }


def lost_by_team(result: SimResult, jobs: Sequence[Job]) -> dict[str, float]:
    """GPU-seconds of work thrown away per team: what the team's jobs ran beyond their own work."""
    work = {j.id: j.duration_s * j.gpus for j in jobs}
    lost = {name: 0.0 for name in result.team_names}
    for o in result.outcomes:
        lost[o.team] += max(0.0, o.busy_gpu_seconds - work.get(o.id, 0.0))
    return lost


def compare(runs: Sequence[tuple[str, SimResult | None]], jobs: Sequence[Job], *, notes: Sequence[str] = ()) -> Comparison:
    """``runs``: (mode label, SimResult or None when the mode could not run), in column order."""
    modes = tuple(label for label, _ in runs)
    results = [r for _, r in runs]
    first = next((r for r in results if r is not None), None)
    if first is None:
        raise ValueError("no mode ran")
    names = first.team_names

    def per(fn: Callable[[Any], float]) -> tuple[float | None, ...]:
        return tuple(None if r is None else float(fn(r)) for r in results)

    pool = [
        Row("utilization", "pool utilization", "%", HIGHER, per(lambda r: 100.0 * r.utilization)),
        Row("queued_gpu_hours", "queued GPU-hours", "GPU-h", LOWER, per(lambda r: r.wait_gpu_hours)),
        Row("preemptions", "preemptions", "count", LOWER, per(lambda r: r.preemptions)),
        Row("lost_gpu_hours", "lost GPU-hours", "GPU-h", LOWER, per(lambda r: r.lost_gpu_seconds / 3600.0)),
    ]
    lost = [None if r is None else lost_by_team(r, jobs) for r in results]
    teams: dict[str, list[Row]] = {}
    for name in names:
        def team_value(key: str, name: str = name) -> Callable[[Any], float]:
            def get(r: Any) -> float:
                return r.teams[name].to_dict()[key]
            return get

        def borrowed_hours(r: Any, name: str = name) -> float:
            return r.teams[name].borrowed_gpu_seconds / 3600.0

        def preempted(r: Any, name: str = name) -> float:
            return r.teams[name].preempted

        teams[name] = [
            Row("wait_p50_s", "wait p50", "s", LOWER, per(team_value("wait_p50_s"))),
            Row("wait_p99_s", "wait p99", "s", LOWER, per(team_value("wait_p99_s"))),
            Row("lender_wait_p99_s", "wait for own guarantee p99", "s", LOWER, per(team_value("reclaim_wait_p99_s"))),
            Row("borrowed_gpu_hours", "GPU-hours borrowed", "GPU-h", HIGHER,
                per(borrowed_hours)),
            Row("preemptions", "preemptions", "count", LOWER, per(preempted)),
            Row("lost_gpu_hours", "lost GPU-hours", "GPU-h", LOWER,
                tuple(None if d is None else d[name] / 3600.0 for d in lost)),
        ]
    judged = [name for name in names if any(r is not None and name in r.objectives for r in results)]
    for name in judged:
        def met(r: Any, name: str = name) -> float:
            return sum(e["met"] for e in r.objectives.get(name, {}).values())

        count = max(len(r.objectives.get(name, {})) for r in results if r is not None)
        teams[name].append(Row("objectives_met", "objectives met", f"of {count}", HIGHER, per(met)))
    hold = {label: [name for name in judged if all(e["met"] for e in r.objectives.get(name, {}).values())]
            for label, r in runs if r is not None} if judged else {}
    guarantees = dict(zip(names, (float(g) for g in first.guarantees)))
    notes = list(notes) + [f"objectives, {label}: " + (f"all hold for {', '.join(teams_ok)}" if teams_ok
                                                        else "no team meets all of its own")
                           for label, teams_ok in hold.items()]
    entitlements = {name: float(e) for name in names
                    if (e := first.teams[name].entitlement) is not None and abs(e - guarantees[name]) > TOL}
    return Comparison(modes=modes, pool=pool, teams=teams, guarantees=guarantees, capacity=float(first.capacity),
                      notes=notes, objectives_hold=hold, entitlements=entitlements)


def order_verdict(youngest: SimResult, checkpoint: SimResult, *, bound_seconds: float) -> dict[str, Any]:
    """Which victim order won: the checkpoint-aware run against the youngest-first run
    with the same checkpoints, on lost work, queued GPU-hours and each team's wait for
    its own guarantee (p99, against ``bound_seconds``: poll + reclaim_after + 60 s)."""
    lost_y, lost_c = youngest.lost_gpu_seconds / 3600.0, checkpoint.lost_gpu_seconds / 3600.0
    queued_y, queued_c = youngest.wait_gpu_hours, checkpoint.wait_gpu_hours
    teams = {}
    for name in youngest.team_names:
        y = float(youngest.teams[name].to_dict()["reclaim_wait_p99_s"])
        c = float(checkpoint.teams[name].to_dict()["reclaim_wait_p99_s"])
        teams[name] = {"youngest": y, "checkpoint": c, "within_bound": c <= bound_seconds + TOL}
    return {
        "lost_gpu_hours": {"youngest": lost_y, "checkpoint": lost_c,
                           "ratio": (lost_y / lost_c) if lost_c > TOL else None},
        "queued_gpu_hours": {"youngest": queued_y, "checkpoint": queued_c,
                             "change_percent": (100.0 * (queued_c - queued_y) / queued_y) if queued_y > TOL else None},
        "guarantee_wait_p99_s": teams,
        "bound_s": bound_seconds,
    }


def verdict_lines(v: dict[str, Any], human: Callable[[float], str]) -> list[str]:
    """:func:`order_verdict` in words, one line per finding (``human`` formats seconds)."""
    lost, queued = v["lost_gpu_hours"], v["queued_gpu_hours"]
    if lost["ratio"] is None:
        ratio = "nothing lost" if lost["youngest"] <= TOL else "all of it saved"
    else:
        ratio = f"{lost['ratio']:.1f}x {'lower' if lost['ratio'] >= 1 else 'higher'}"
    winner = "checkpoint" if lost["checkpoint"] < lost["youngest"] - TOL else (
        "youngest" if lost["youngest"] < lost["checkpoint"] - TOL else "neither")
    lines = [f"victim order, lost work: {winner} wins, {lost['youngest']:,.1f} -> {lost['checkpoint']:,.1f} GPU-hours "
             f"({ratio}) with the same checkpoints"]
    if queued["change_percent"] is not None:
        lines.append(f"victim order, queued GPU-hours: {queued['youngest']:,.1f} -> {queued['checkpoint']:,.1f} "
                     f"({queued['change_percent']:+.1f}%)")
    waits = []
    for name, t in v["guarantee_wait_p99_s"].items():
        mark = "" if t["within_bound"] else " (over the bound)"
        waits.append(f"{name} {human(t['youngest'])} -> {human(t['checkpoint'])}{mark}")
    over = [name for name, t in v["guarantee_wait_p99_s"].items() if not t["within_bound"]]
    bound = human(v["bound_s"])
    summary = f"every team within {bound}" if not over else f"{', '.join(over)} over {bound}"
    lines.append(f"victim order, wait for own guarantee p99: {'; '.join(waits)} ({summary})")
    return lines
