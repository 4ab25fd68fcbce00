"""The reclaim planner's view of a running simulation (``share+reclaim`` only).

A planner call costs in the running jobs and the (team, size) groups of pending jobs,
not in the length of the queue: the view keeps a spec per running job and the pending
jobs as the planner's :class:`~cdk_gpu_share.core.policy.reclaim.PendingGroup` objects, one per
team and size, each in rule 2's order. Both are brought up to date at a call, for the
jobs that changed state since the last one (:meth:`PlannerView.touch`): most jobs start
as they arrive, between two ticks, and never reach a group. One demand dict per size is
shared by every spec of that size, and :meth:`PlannerView.tick_useful` tells the engine
when a call could not choose a victim, so that it skips it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdk_gpu_share.core import frozen
from cdk_gpu_share.core.policy import reclaim
from cdk_gpu_share.core.simulate import tree_dispatch
from cdk_gpu_share.core.simulate.dispatch import DispatchIndex
from cdk_gpu_share.core.simulate.inputs import RESOURCE, TOL, Scenario
from cdk_gpu_share.core.simulate.state import Run
from cdk_gpu_share.core.simulate.tree_dispatch import TreeUsage

_new_spec = frozen.maker(reclaim.JobSpec)
_new_state = frozen.maker(reclaim.State)  # one at every planner call
_new_group = frozen.maker(reclaim.PendingGroup)  # one whenever a team starts to wait with a size

__all__ = ["CHECK_CANDIDATES", "KEEP_RUNNING_INDEX", "PlannerView", "ViewCopy"]

# Whether the running jobs reach the planner as its RunningJobs index, kept in victim order as they
# start and end (False only to check that the index changes no plan: a tuple sorted at every call).
KEEP_RUNNING_INDEX = True
# With a tree, whether a tick skips the planner when no running job could be a victim for any
# waiting entitled job (False only to check that the check changes no figure).
CHECK_CANDIDATES = True


class PlannerView:
    """The planner's input, kept up to date incrementally between ticks."""

    def __init__(self, scenario: Scenario, index: DispatchIndex, running: dict[int, Run],
                 tree: TreeUsage | None = None):
        self.base = scenario.state
        self.index = index
        self.tree = tree
        # The groups with a borrow limit (the others are never above their bound).
        self.limited = [] if tree is None else [g for g in tree.tree.groups
                                                 if tree.limit(g, RESOURCE) is not None]
        self.running = running  # the engine's running jobs, by trace position (read only here)
        self.specs: dict[int, Any] = {}  # running jobs, by trace position
        # The same specs in the planner's victim order (KEEP_RUNNING_INDEX).
        self.running_jobs = reclaim.RunningJobs(t.name for t in scenario.state.teams)
        self.touched: dict[int, Run] = {}  # changed state since the last call, in order
        self.groups: dict[tuple[int, float], reclaim.PendingGroup] = {}
        self.version = 0  # one more at every change of a job's state
        # The version at which the last dispatch found nothing more to start (-1: none yet).
        self.settled = -1
        self.free: Callable[[], float] = lambda: 0.0  # the pool's idle GPUs (the engine's)
        self._possible: tuple[int, bool] = (-1, True)  # (version, tick_possible's answer at it)

    def touch(self, r: Run) -> None:
        """r started, stopped, or joined or left its queue: bring it up to date at the next call."""
        self.touched[r.job.position] = r
        self.version += 1

    def completed(self, r: Run) -> None:
        """r completed: it leaves the view at the next call, if the view holds it."""
        self.version += 1
        if r.grouped or r.job.position in self.specs:
            self.touched[r.job.position] = r  # the planner's view still holds it
        else:
            self.touched.pop(r.job.position, None)  # nothing to bring up to date
        # Never asked for again (leaving the planner's view needs pkey only): a
        # million-job trace would otherwise keep two specs per job to its end.
        r.pending_spec = r.running_spec = None

    def tick_useful(self, t: float) -> bool:
        """Whether the planner may choose a victim at ``t``; when not, the tick skips
        the call (the documented rule, with time).

        Until the plan's first victim, the plan only serves pending jobs (rule 2a),
        which raises U: a job within its guarantee when it is reached was within it
        when the plan started. The first victim must then come from rule 1
        (a team above its borrow cap), rule 2b (a pending job within its team's
        guarantee that has waited) or rule 2c (a pending job that has waited, of a
        team with in-team preemption). None of them: no victim, the same as the call.
        Only teams in the index's ``ticky_teams`` can have such a job; whether a job
        has waited is the planner's own :func:`reclaim.has_waited`."""
        settings = self.base.settings
        kidx = self.index.kidx
        has_waited = reclaim.has_waited
        tree = self.tree
        for team in self.index.ticky_teams:
            if team.U - team.G > team.cap + TOL:
                return True
            if tree is not None and not team.in_team:
                continue  # its jobs within its guarantee are entitled at its own node: below
            wk = team.wk
            for g in team.keys:  # ascending
                if not team.in_team and kidx[g] > wk:
                    break  # beyond the guarantee from here on
                for _, r in team.buckets[g]:
                    if has_waited(self.pending_spec(r), t, settings):
                        return True
        return tree is not None and self._tree_tick_useful(t)

    def tick_possible(self) -> bool:
        """With a tree and no team that makes a tick needed by the flat rules (the index's
        ``ticky``, asked first by the engine): whether a tick may call the planner at any time
        before a job next changes state. False only once the dispatch after the last change
        started everything that fits and :meth:`_tree_tick_useful` finds no victim with every
        waiting job counted as having waited: it reads the time through that alone, so every tick
        until the next change would skip the call. Answered once per state (:attr:`version`)."""
        version, possible = self._possible
        if version != self.version:
            possible = self.settled != self.version or self._tree_tick_useful(None)
            self._possible = (self.version, possible)
        return possible

    def _tree_tick_useful(self, t: float | None) -> bool:
        """With a tree, two more sources of a first victim: a group above its bound (rule 1 for
        groups), and a pending job entitled at a node (its team's guarantee, or a group) that has
        waited, for which some running job may be a victim. Serving before the first victim only
        raises each group's U - Q (a served ``reserve`` team raises both alike), so a job entitled
        when the planner reaches it was entitled when the plan started.

        A tick comes after a dispatch that started every job that fits (:attr:`settled`): the
        plan then serves no one before its first victim, and a search that finds none gives back
        what it took, so every job meets the usage the plan started with. A job none of whose
        candidates (:meth:`TreeUsage.may_reclaim`) could be a victim then finds none.

        ``t`` None: at whatever time, every waiting job counted as having waited."""
        tree = self.tree
        assert tree is not None
        for name in self.limited:
            if tree.above_bound(name):
                return True
        settings = self.base.settings
        has_waited = reclaim.has_waited
        settled = CHECK_CANDIDATES and self.settled == self.version
        if settled and not tree.any_borrowing():
            return False  # no team uses more than its guarantee: no candidate for anyone (may_reclaim)
        index = self.index
        assert isinstance(index, tree_dispatch.TreeDispatchIndex)
        kidx, levels = index.kidx, tree_dispatch.LEVELS_AT_GROUPS
        for team in index.waiting.values():  # the teams with a pending job
            for g in team.keys:  # ascending: once entitled nowhere, no larger job is
                if (tree.height_at(team, kidx[g]) if levels else tree.height(team, g)) is None:
                    break
                if t is not None and not any(has_waited(self.pending_spec(r), t, settings)
                                             for _, r in team.buckets[g]):
                    continue
                if not settled or tree.may_reclaim(team, g, self.free(), self.index.ri(team)):
                    return True
        return False

    def pending_spec(self, r: Run) -> reclaim.JobSpec:
        """r as a pending job of the planner's input (made once, with its rule-2 key ``pkey``)."""
        # One demand dict per size, shared by every job of that size: the planner's
        # memo of fits per (team, demand) then answers a team's many pending jobs once.
        if r.pending_spec is None:
            r.pending_spec = (_new_spec if frozen.FAST else reclaim.JobSpec)(
                id=r.job.id, team=r.job.team, state="pending", demand=self.index.demands[self.index.kidx[r.g]],
                priority=r.job.priority, since=r.since, terminating=False)
            r.pkey = reclaim.pending_key(r.pending_spec)
        return r.pending_spec

    def running_spec(self, r: Run) -> reclaim.JobSpec:
        """r as a running job of the planner's input (made again after each start), with what
        the checkpoint-aware order reads: its checkpoint interval and whether this run
        started on borrowed capacity."""
        if r.running_spec is None:
            r.running_spec = (_new_spec if frozen.FAST else reclaim.JobSpec)(
                id=r.job.id, team=r.job.team, state="running", demand=self.index.demands[self.index.kidx[r.g]],
                priority=r.job.priority, since=r.start, terminating=False, borrowed=r.borrowed,
                checkpoint_seconds=r.interval)
        return r.running_spec

    def state(self, t: float) -> reclaim.State:
        """The planner's input at ``t``, brought up to date for the jobs touched since the last call."""
        specs, running, index = self.specs, self.running, self.running_jobs
        for position, r in self.touched.items():
            old = specs.get(position)
            if position in running:
                spec = self.running_spec(r)
                if spec is not old:
                    if old is not None:
                        index.remove(old)
                    index.add(spec)
                    specs[position] = spec
            elif old is not None:
                index.remove(old)
                del specs[position]
            pending = r.arrived and not r.done and position not in running
            if pending != r.grouped:
                (self._group_add if pending else self._group_remove)(r)
        self.touched.clear()
        base = self.base
        if KEEP_RUNNING_INDEX:
            jobs, kept = (), index
        else:
            jobs, kept = tuple(specs.values()), None
        return (_new_state if frozen.FAST else reclaim.State)(
            now=t, capacity=base.capacity, settings=base.settings, teams=base.teams, jobs=jobs,
            pending_groups=tuple(self.groups.values()), groups=base.groups, running=kept)

    def copy(self, runs: list[Run]) -> ViewCopy:
        """What the view holds now, brought up to date (its specs, its running index and its
        pending groups, with the specs and rule-2 keys of ``runs``), for :meth:`take` to give
        another view: replays that start from one state, whose views start alike."""
        self.state(0.0)  # every touched job brought up to date
        return ViewCopy(
            demands=self.index.demands, specs=dict(self.specs), index=self.running_jobs.copy(),
            groups=[(gkey, g.team, g.demand, list(g.jobs), list(g.keys)) for gkey, g in self.groups.items()],
            runs=[(r.pending_spec, r.pkey, r.grouped, r.running_spec) for r in runs])

    def take(self, copy: ViewCopy, runs: list[Run]) -> None:
        """Hold what ``copy`` holds (made by :meth:`copy` of a view whose jobs and their states
        were those of this one: ``runs``, the same jobs as there, in the same order), instead of
        bringing every touched job up to date at the next call. Before any spec is made: the
        specs made from now on share ``copy``'s demand dicts."""
        self.index.demands = copy.demands
        self.specs = dict(copy.specs)
        self.running_jobs = copy.index.copy()
        self.groups = {gkey: reclaim.PendingGroup(team=name, demand=demand, jobs=list(jobs), keys=list(keys))
                       for gkey, name, demand, jobs, keys in copy.groups}
        for r, (pending_spec, pkey, grouped, running_spec) in zip(runs, copy.runs, strict=True):
            r.pending_spec, r.pkey, r.grouped, r.running_spec = pending_spec, pkey, grouped, running_spec
        self.touched.clear()

    def _group_add(self, r: Run) -> None:
        """r joins its team's pending group of its size, at its place in rule 2's order."""
        spec = self.pending_spec(r)
        gkey = (r.t.idx, r.g)
        group = self.groups.get(gkey)
        if group is None:
            group = self.groups[gkey] = (_new_group if frozen.FAST else reclaim.PendingGroup)(
                team=r.t.name, demand=spec.demand, jobs=[], keys=[])
        keys = group.keys
        i = bisect_left(keys, r.pkey)
        keys.insert(i, r.pkey)
        group.jobs.insert(i, spec)
        r.grouped = True

    def _group_remove(self, r: Run) -> None:
        """r leaves its team's pending group of its size (found by its rule-2 key)."""
        gkey = (r.t.idx, r.g)
        group = self.groups[gkey]
        jobs = group.jobs
        i = bisect_left(group.keys, r.pkey)
        del group.keys[i]
        del jobs[i]
        if not jobs:
            del self.groups[gkey]
        r.grouped = False


@dataclass(frozen=True)
class ViewCopy:
    """A :class:`PlannerView`'s content (:meth:`PlannerView.copy`): the demand dict of each
    size, the running jobs' specs by trace position, a copy of the running index, each
    pending group as (key, team, demand, jobs, keys), and each given run's (pending spec, rule-2
    key, grouped, running spec). The specs are frozen, shared; every list is copied when taken."""

    demands: list[dict]
    specs: dict[int, Any]
    index: reclaim.RunningJobs
    groups: list[tuple]
    runs: list[tuple]
