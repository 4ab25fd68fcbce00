"""The per-job and per-team state of a running simulation.

One :class:`Run` per job of the trace and one :class:`Team` per team of the scenario,
both with ``__slots__``: a trace can hold a million jobs, and the engine, the dispatch
index and the planner's view all read and write these few fields.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.simulate.inputs import RESOURCE, Job

if TYPE_CHECKING:
    from cdk_gpu_share.core.simulate.figures import TeamResult

__all__ = ["Run", "Team"]


class Run:
    """Mutable per-job state during a simulation."""

    __slots__ = ("job", "t", "g", "q", "key", "progress", "start", "run", "stops", "first_start",
                 "done", "owed", "owed_mark", "completion", "busy", "pending_spec", "running_spec", "arrived", "pkey", "grouped",
                 "interval", "borrowed", "since", "duration")

    def __init__(self, job: Job, t: Team):
        self.job = job
        self.t = t
        self.g = job.gpus
        self.q = 0  # exact size in units of 1/D GPU (set by the engine)
        self.key = (-job.priority, job.submit_time, job.position)
        self.progress = 0.0  # seconds of work saved (restart point)
        self.start = -1.0
        self.run = 0
        self.stops = 0
        self.first_start: float | None = None
        self.done = False
        self.owed = 0.0  # seconds pending while its team owed it room (simulate.owed)
        self.owed_mark = 0.0  # its size's owed clock when it last joined the queue
        self.completion = 0.0
        self.busy = 0.0
        self.pending_spec: reclaim.JobSpec | None = None
        self.running_spec: reclaim.JobSpec | None = None
        self.arrived = False
        self.pkey: tuple | None = None  # reclaim.pending_key(pending_spec), in reclaim mode
        self.grouped = False  # in its PendingGroup (reclaim mode)
        self.interval = 0.0  # checkpoint interval, seconds of running time (0: never; set by the engine)
        self.borrowed = False  # whether the current run started beyond the team's guarantee
        # Since when it waits as the planner counts reclaim_after_seconds: its submit, or the later
        # rise of its team's guarantee at a time window's boundary.
        self.since = job.submit_time
        # The seconds of work it needs: its job's duration (a replay from a state sets its own).
        self.duration = job.duration_s


class Team:
    """Mutable per-team state: usage, the queues of pending jobs (``buckets``: one heap
    per job size, in the documented dispatch order) and the team's place in the dispatch index."""

    __slots__ = ("spec", "name", "idx", "G", "cap", "reserve", "in_team", "Uq", "U", "buckets", "keys",
                 "npending", "last_t", "result", "ver", "wk", "ck", "ratio", "ticky", "thresholds",
                 "entitled_spec")

    def __init__(self, spec: Any, idx: int, result: TeamResult):
        self.spec = spec
        self.name = spec.name
        self.idx = idx
        self.G = float(spec.guarantee.get(RESOURCE, 0) or 0)
        cap = reclaim.borrow_cap(spec, RESOURCE)
        self.cap = math.inf if cap is None else float(cap)
        self.reserve = spec.sharing == "reserve"
        self.in_team = bool(spec.in_team_preemption)
        self.Uq = 0  # exact usage, in units of 1/D GPU (see the engine's scale)
        self.U = 0.0
        self.buckets: dict[float, list] = {}
        self.keys: list[float] = []  # sizes with a non-empty bucket, ascending
        self.npending = 0
        self.last_t = 0.0
        self.result = result
        # Dispatch index (see DispatchIndex._refresh): bumped whenever U changes; the
        # largest index into DispatchIndex.sizes within the team's guarantee (wk) and
        # within its borrow cap (ck) at this U; U/G; whether the team makes a planner
        # tick needed.
        self.ver = 0
        self.wk = -1
        self.ck = -1
        self.ratio = math.inf
        self.ticky = False
        self.thresholds: dict[float, tuple[int, int]] = {}  # U -> (wk, ck): the rules are pure
        # The team's spec with its entitlement as guarantee, when that differs from its guarantee:
        # whether a job is entitled (U(T) + gpus <= E(T)) is then asked of it. None: E = G.
        self.entitled_spec: Any = None

