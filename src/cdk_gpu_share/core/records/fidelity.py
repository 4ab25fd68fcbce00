"""The simulator's error, measured on the user's own history (``gpu-share simulate --fidelity``).

An export of ``gpu-share trace export`` holds, beside the simulator's columns, what really
happened to each job: ``wait_s`` (submission to last start), ``preemptions`` and
``borrowed_gpu_s`` (its part of its team's GPU-seconds above the guarantee). The simulator
replays the same jobs under the config that was deployed over the period; per team this module
puts the real figures beside the simulated ones: wait p50, p95 and p99 (nearest rank, the
simulator's own percentiles), preemptions, and borrowed GPU-hours. The error is simulated minus
real: a negative wait error means the simulator is optimistic (jobs really waited longer).

Pure: the caller reads the export (:func:`read_real`) and runs the simulation.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.records.history import read_header
from cdk_gpu_share.core.simulate.accounting import nearest_rank

__all__ = ["METRICS", "REAL_COLUMNS", "Real", "compare", "read_real"]

#: The extra columns of an export the comparison reads.
REAL_COLUMNS = ("wait_s", "preemptions", "borrowed_gpu_s")
#: The metrics compared, in the table's order: (key, label, unit).
METRICS = (
    ("wait_p50_s", "wait p50", "s"),
    ("wait_p95_s", "wait p95", "s"),
    ("wait_p99_s", "wait p99", "s"),
    ("preemptions", "preemptions", ""),
    ("borrowed_gpu_hours", "borrowed GPU-hours", "h"),
)


@dataclass
class Real:
    """The real figures of an export, per team, and its header comment."""

    waits: dict[str, list[float]] = field(default_factory=dict)
    preemptions: dict[str, int] = field(default_factory=dict)
    borrowed_gpu_s: dict[str, float] = field(default_factory=dict)
    header: dict[str, Any] | None = None

    def figures(self, team: str) -> dict[str, float]:
        waits = self.waits.get(team, [])
        return {
            "wait_p50_s": nearest_rank(waits, 50), "wait_p95_s": nearest_rank(waits, 95),
            "wait_p99_s": nearest_rank(waits, 99), "preemptions": float(self.preemptions.get(team, 0)),
            "borrowed_gpu_hours": self.borrowed_gpu_s.get(team, 0.0) / 3600,
        }


def read_real(stream: IO[str] | Iterable[str], *, source: str = "trace") -> Real:
    """The real columns of an export (``wait_s``, ``preemptions``, ``borrowed_gpu_s``) per team.

    Raises :class:`ConfigError` when the trace is not an export (a column is missing) or a cell
    is not a number, naming the line.
    """
    lines = iter(stream)
    real = Real()
    buffered: list[str] = []
    comments = 0
    for line in lines:
        if line.startswith("#"):
            real.header = real.header or read_header(line.rstrip("\r\n"))
            comments += 1
            continue
        buffered.append(line)
        break
    reader = csv.DictReader([*buffered, *lines])
    missing = [c for c in ("team", *REAL_COLUMNS) if c not in (reader.fieldnames or [])]
    if missing:
        raise ConfigError(Problem(
            field="--trace", value=source, message=f"has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
            fix="--fidelity compares with what really happened: pass a trace written by gpu-share trace export"))
    for row in reader:
        team = row["team"]
        try:
            wait, pre, borrowed = float(row["wait_s"]), int(row["preemptions"]), float(row["borrowed_gpu_s"] or 0)
        except (TypeError, ValueError):
            raise ConfigError(Problem(
                field=f"line {reader.line_num + comments} ({', '.join(REAL_COLUMNS)})", value=[row.get(c) for c in REAL_COLUMNS],
                message="is not a number", fix="pass the export as gpu-share trace export wrote it"), source=source) from None
        real.waits.setdefault(team, []).append(wait)
        real.preemptions[team] = real.preemptions.get(team, 0) + pre
        real.borrowed_gpu_s[team] = real.borrowed_gpu_s.get(team, 0.0) + borrowed
    return real


def compare(real: Real, simulated: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """team -> metric -> ``{"real", "simulated", "error"}`` (error = simulated - real), for the
    teams of the simulation's result (``SimResult.to_dict()["teams"]``)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for team, sim in simulated.items():
        want = real.figures(team)
        got = {
            "wait_p50_s": float(sim["wait_p50_s"]), "wait_p95_s": float(sim["wait_p95_s"]),
            "wait_p99_s": float(sim["wait_p99_s"]), "preemptions": float(sim["preempted"]),
            "borrowed_gpu_hours": float(sim["borrowed_gpu_seconds"]) / 3600,
        }
        out[team] = {key: {"real": _round(want[key]), "simulated": _round(got[key]),
                           "error": _round(got[key] - want[key])} for key, _, _ in METRICS}
    return out


def _round(x: float) -> float:
    """Three decimals: seconds to the millisecond, GPU-hours to 3.6 GPU-seconds (float noise of the
    sums is far below)."""
    value = round(x, 3)
    return 0.0 if value == 0 else value
