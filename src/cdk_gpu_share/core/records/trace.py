"""Convert published GPU cluster traces into the simulator's job trace, or write a sample one.

The simulator (:mod:`cdk_gpu_share.core.simulate`, documented in
``docs/simulator.md``) reads a CSV with the columns
``job_id,team,submit_time,duration_s,gpus,priority``. Public traces carry no team,
so every converter states here, in one place, how it assigns teams and priorities.

Alibaba OpenB (``alibaba/clusterdata``, ``cluster-trace-gpu-v2023``; Weng et al.,
"Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC 2023). The rule:

- keep the tasks with ``num_gpu > 0``, a ``scheduled_time`` and
  ``deletion_time > scheduled_time``;
- ``team`` = ``qos`` in lower case (``ls``, ``be``, ``burstable``, ``guaranteed``);
- ``submit_time`` = ``creation_time``; ``duration_s`` = ``deletion_time - scheduled_time``;
- ``gpus`` = ``num_gpu`` when it is above 1, otherwise ``gpu_milli / 1000``;
- ``priority``: guaranteed 3, ls 2, burstable 1, be 0.

On ``openb_pod_list_default.csv`` that keeps 6,203 of 8,152 tasks, in file order.

:func:`sample_jobs` makes a small deterministic trace for trying the simulator without
external data (``gpu-share trace sample``).
"""

from __future__ import annotations

import csv
import io
import os
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import IO, Any

from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.core.validation import decimal_problem

#: Columns of the simulator's job trace, in the order the converters write them.
TRACE_COLUMNS = ("job_id", "team", "submit_time", "duration_s", "gpus", "priority")

#: Columns the OpenB pod list must have for the conversion.
OPENB_COLUMNS = (
    "name",
    "num_gpu",
    "gpu_milli",
    "qos",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)

#: Priority of each OpenB QoS class (team), higher is more important.
OPENB_PRIORITY = {"guaranteed": 3, "ls": 2, "burstable": 1, "be": 0}

#: Source formats ``gpu-share trace convert --from`` accepts.
SOURCES = ("alibaba-openb",)


@dataclass(frozen=True)
class TraceJob:
    """One row of the simulator's job trace, with numbers kept exact as text."""

    job_id: str
    team: str
    submit_time: str
    duration_s: str
    gpus: str
    priority: int

    def as_row(self) -> list[str]:
        return [
            self.job_id,
            self.team,
            self.submit_time,
            self.duration_s,
            self.gpus,
            str(self.priority),
        ]


def _fmt(value: Decimal) -> str:
    """Exact decimal text without exponent or trailing zeros (``0.46``, ``8``)."""
    if value == value.to_integral_value():
        return str(int(value))
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _dec(row: Mapping[str, str], column: str, line: int, source: str) -> Decimal | None:
    raw = (row.get(column) or "").strip()
    if raw == "":
        return None
    why = decimal_problem(raw)  # the toolkit checks the text: 1e999999999 would hang int() below
    try:
        value = Decimal(raw) if why is None else None
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite():
        raise ConfigError(
            Problem(
                field=f"line {line} ({column})",
                value=raw,
                message=why or "is not a number",
                fix="the OpenB pod list has numbers in this column; check the file is the original CSV",
            ),
            source=source,
        )
    return value


def openb_job(row: Mapping[str, str], *, line: int = 0, source: str = "trace") -> TraceJob | None:
    """The simulator job for one OpenB pod-list row, or ``None`` when the rule drops it.

    This is the single place the OpenB conversion rule lives (see the module docstring).
    """
    num_gpu = _dec(row, "num_gpu", line, source)
    scheduled = _dec(row, "scheduled_time", line, source)
    deletion = _dec(row, "deletion_time", line, source)
    if num_gpu is None or num_gpu <= 0 or scheduled is None or deletion is None:
        return None
    if not deletion > scheduled:
        return None
    creation = _dec(row, "creation_time", line, source)
    if creation is None:
        raise ConfigError(
            Problem(
                field=f"line {line} (creation_time)",
                value="",
                message="is empty on a task that was scheduled",
                fix="the OpenB pod list gives every task a creation_time; check the file",
            ),
            source=source,
        )
    team = (row.get("qos") or "").strip().lower()
    if team not in OPENB_PRIORITY:
        raise ConfigError(
            Problem(
                field=f"line {line} (qos)",
                value=row.get("qos"),
                message="is not an OpenB QoS class",
                fix="expected one of LS, BE, Burstable, Guaranteed",
            ),
            source=source,
        )
    if num_gpu > 1:
        gpus = num_gpu
    else:
        milli = _dec(row, "gpu_milli", line, source)
        if milli is None or milli <= 0:
            raise ConfigError(
                Problem(
                    field=f"line {line} (gpu_milli)",
                    value=row.get("gpu_milli"),
                    message="must be above 0 for a task with num_gpu 1",
                    fix="gpu_milli is the share of one GPU in thousandths (1..1000)",
                ),
                source=source,
            )
        gpus = milli / 1000
    return TraceJob(
        job_id=(row.get("name") or "").strip() or f"line-{line}",
        team=team,
        submit_time=_fmt(creation),
        duration_s=_fmt(deletion - scheduled),
        gpus=_fmt(gpus),
        priority=OPENB_PRIORITY[team],
    )


def iter_openb(stream: IO[str], *, source: str = "trace") -> Iterator[TraceJob]:
    """Convert an OpenB pod list read from ``stream``, yielding the kept jobs in file order."""
    reader = csv.DictReader(stream)
    header = reader.fieldnames or []
    missing = [c for c in OPENB_COLUMNS if c not in header]
    if missing:
        raise ConfigError(
            Problem(
                field="line 1 (header)",
                value=",".join(header),
                message=f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
                fix="pass an Alibaba OpenB pod list (openb_pod_list_*.csv) with its original header",
            ),
            source=source,
        )
    for row in reader:
        job = openb_job(row, line=reader.line_num, source=source)
        if job is not None:
            yield job


def convert_openb(
    src: str | os.PathLike[str] | IO[str], out: IO[str] | None = None
) -> list[TraceJob]:
    """Convert an OpenB pod list (path or text stream) to the simulator's job trace.

    Writes the CSV (header ``job_id,team,submit_time,duration_s,gpus,priority``) to
    ``out`` when given, and returns the kept jobs. Raises :class:`ConfigError` naming
    the line for a malformed file.
    """
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        try:
            with open(path, newline="", encoding="utf-8") as stream:
                jobs = list(iter_openb(stream, source=path))
        except FileNotFoundError:
            raise ConfigError(
                Problem(field="FILE", value=path, message="does not exist", fix="pass the path of an OpenB pod list CSV")
            ) from None
        except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
            raise ConfigError(
                Problem(field="FILE", value=path, message=f"cannot be read ({exc.__class__.__name__})",
                        fix="pass a readable OpenB pod list CSV")
            ) from None
    else:
        jobs = list(iter_openb(src, source=getattr(src, "name", "trace")))
    if out is not None:
        write_trace(jobs, out)
    return jobs


def write_trace(jobs: Iterable[TraceJob], out: IO[str]) -> None:
    """Write simulator trace rows with the header :data:`TRACE_COLUMNS`."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TRACE_COLUMNS)
    for job in jobs:
        writer.writerow(job.as_row())


def convert(source_format: str, src: str | os.PathLike[str] | IO[str], out: IO[str] | None = None) -> list[TraceJob]:
    """Convert ``src`` from ``source_format`` (one of :data:`SOURCES`)."""
    if source_format != "alibaba-openb":
        raise ConfigError(
            Problem(field="--from", value=source_format, message="is not a known trace format",
                    fix=f"use one of: {', '.join(SOURCES)}")
        )
    return convert_openb(src, out)


def trace_text(jobs: Iterable[TraceJob]) -> str:
    """The trace CSV as a string (handy for tests and in-memory pipelines)."""
    buf = io.StringIO()
    write_trace(jobs, buf)
    return buf.getvalue()


# ---------------------------------------------------------------------------
# A sample trace

#: Defaults of :func:`sample_jobs`: the three teams of ``platform.yaml``, one GPU each.
SAMPLE_TEAMS: tuple[tuple[str, float], ...] = (("team-a", 1.0), ("team-b", 1.0), ("team-c", 1.0))
SAMPLE_JOBS = 300
SAMPLE_SEED = 1
#: Busy share of the pool the sample aims at, over its whole span (its bursts go well above it).
SAMPLE_LOAD = 0.5
#: Each team is busy for half of every period, the teams' busy halves staggered.
SAMPLE_PERIOD_S = 12 * 3600
#: Durations in seconds: (share of the jobs, shortest, longest).
SAMPLE_DURATIONS = ((0.5, 300, 1800), (0.35, 1800, 3 * 3600), (0.15, 3 * 3600, 8 * 3600))
#: Job sizes as shares of the team's guarantee, and how often each is drawn.
SAMPLE_SIZES = ((0.25, 0.35), (0.5, 0.35), (1.0, 0.3))


def _sample_size(guarantee: Decimal, share: float, step: Decimal) -> Decimal:
    """``share`` of the guarantee, rounded down to a multiple of ``step`` (a whole GPU, or a quarter
    on a fleet that partitions its GPUs), at least one step and at most the guarantee. A guarantee
    below one step is the size itself on a partitioned fleet, and one whole GPU on any other."""
    if guarantee <= step:
        return guarantee if step < 1 else step
    size = (guarantee * Decimal(str(share)) / step).to_integral_value(rounding="ROUND_FLOOR") * step
    return max(step, min(size, guarantee))


#: The smallest job of a fleet whose GPUs are partitioned (MIG), and of any other: a whole GPU.
PARTITION_STEP = Decimal("0.25")
WHOLE_GPU_STEP = Decimal(1)


def sample_jobs(
    teams: Iterable[tuple[str, float]] = SAMPLE_TEAMS,
    *,
    jobs: int = SAMPLE_JOBS,
    seed: int = SAMPLE_SEED,
    capacity: float | None = None,
    partitioned: bool = False,
) -> list[TraceJob]:
    """A small synthetic job trace, the same for the same arguments on every Python version.

    Each team is busy for half of every 12 hours (the teams' busy halves staggered) and then
    asks for about twice its guarantee, so it borrows what the quiet teams lend; a team that
    turns busy finds its guarantee lent, which a reclaim takes back. Jobs take a quarter, half
    or all of their team's guarantee (so ``static`` can run every one of them) for 5 minutes to
    8 hours, in whole GPUs, or in quarters of a GPU when the fleet is ``partitioned`` (MIG). The
    span is set so that the jobs would keep the pool (``capacity``, default the
    sum of the guarantees) about 80 % busy. Only :meth:`random.Random.random` is drawn from,
    whose sequence for a seed Python keeps stable across versions.
    """
    exact = [(name, Decimal(str(g))) for name, g in teams]
    if not exact:
        raise ValueError("a sample trace needs at least one team")
    if jobs < 1:
        raise ValueError("a sample trace needs at least one job")
    pool = Decimal(str(capacity)) if capacity is not None else sum((g for _, g in exact), Decimal(0))
    if pool <= 0:
        pool = Decimal(len(exact))
    fallback = pool / len(exact)  # the size basis of a team guaranteed nothing
    step = PARTITION_STEP if partitioned else WHOLE_GPU_STEP
    rng = random.Random(seed)

    def pick(weighted: Sequence[tuple[Any, float]]) -> Any:
        x = rng.random()
        for value, weight in weighted:
            x -= weight
            if x < 0:
                return value
        return weighted[-1][0]

    drafts = []
    for i in range(jobs):
        k = i % len(exact)
        name, guarantee = exact[k]
        size = _sample_size(guarantee if guarantee > 0 else fallback, pick(SAMPLE_SIZES), step)
        low, high = pick([((lo, hi), w) for w, lo, hi in SAMPLE_DURATIONS])
        duration = int(low + (high - low) * rng.random())
        drafts.append((k, name, size, duration, rng.random(), rng.random(), 1 if rng.random() < 0.2 else 0))
    work = sum(float(size) * duration for _, _, size, duration, *_ in drafts)
    span = max(SAMPLE_PERIOD_S, int(work / (SAMPLE_LOAD * float(pool))))
    half = SAMPLE_PERIOD_S // 2
    rows = []
    for k, name, size, duration, where, when, priority in drafts:
        if where < 0.85:  # in one of the team's busy halves
            periods = max(1, span // SAMPLE_PERIOD_S)
            start = int(when * periods) * SAMPLE_PERIOD_S + (k * SAMPLE_PERIOD_S) // len(exact) % SAMPLE_PERIOD_S
            submit = (start + int((when * periods % 1) * half)) % span
        else:
            submit = int(when * span)
        rows.append((submit, k, name, duration, size, priority))
    rows.sort(key=lambda r: (r[0], r[1]))
    width = len(str(len(rows)))
    return [
        TraceJob(job_id=f"job-{n:0{width}d}", team=name, submit_time=str(submit), duration_s=str(duration),
                 gpus=_fmt(size), priority=priority)
        for n, (submit, _, name, duration, size, priority) in enumerate(rows, start=1)
    ]
