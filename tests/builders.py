"""Builders shared by the tests: the reclaim planner's input (teams, running and pending jobs, a
state), random valid states for property tests, and the two ways the simulator hands the planner
its jobs. A test case reads as its data: ``state(4, [team("a", 2), team("b", 2)], [run("j1", "a")])``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import botocore.session
from botocore.stub import Stubber
from hypothesis import settings
from hypothesis import strategies as st

from cdk_gpu_share.core.policy import reclaim

# ---------------------------------------------------------------------------
# The planner's input

NOW = 1000


def team(name, gpu=None, **kw):
    """A team guaranteed ``gpu`` GPUs (or ``guarantee=``), with any other field of the input."""
    guarantee = kw.pop("guarantee", None)
    if guarantee is None:
        guarantee = {} if gpu is None else {"gpu": gpu}
    return {"name": name, "guarantee": guarantee, **kw}


def run(id, team, gpu=1, *, since=0, priority=0, demand=None, **kw):
    """A running job of ``team`` using ``gpu`` GPUs (or ``demand=``) since ``since``."""
    return {"id": id, "team": team, "state": "running", "demand": demand or {"gpu": gpu},
            "since": since, "priority": priority, **kw}


def pend(id, team, gpu=1, *, since=0, priority=0, demand=None, **kw):
    """A pending job of ``team`` wanting ``gpu`` GPUs (or ``demand=``), waiting since ``since``."""
    return {"id": id, "team": team, "state": "pending", "demand": demand or {"gpu": gpu},
            "since": since, "priority": priority, **kw}


def state(capacity, teams, jobs, *, now=NOW, **settings):
    """The planner's input: a pool of ``capacity`` GPUs (or a mapping), the teams, the jobs, the settings."""
    if not isinstance(capacity, dict):
        capacity = {"gpu": capacity}
    s = {"now": now, "capacity": capacity, "teams": teams, "jobs": jobs}
    if settings:
        s["settings"] = settings
    return s


def victims(out, reason=None):
    """The jobs a plan stops (those stopped for ``reason`` only, when given)."""
    return [p["job"] for p in out["preemptions"] if reason is None or p["reason"] == reason]


#: With :func:`set_path`: remove the key.
DELETE = object()


def valid_state():
    """A small valid state, for tests that break one field of it."""
    return state(4, [team("a", 2), team("b", 2)], [run("j1", "a", 1), pend("j2", "b", 1)])


def set_path(path, value):
    """A change of a state: ``value`` at ``path`` (keys and indexes), or the key removed with :data:`DELETE`."""
    def mutate(s):
        obj = s
        for key in path[:-1]:
            obj = obj[key]
        if value is DELETE:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value
        return s
    return mutate


# ---------------------------------------------------------------------------
# Random valid states (hypothesis)

RESOURCES = ("gpu", "cpu", "mem")
# Grid of amounts: halves and tenths, so float sums are inexact and the tolerance matters.
AMOUNTS = (0, 0, 0.1, 0.3, 0.5, 1, 1, 2, 3)
CONTENDED_AMOUNTS = (0, 0.1, 0.5, 1, 1, 1, 2)
TEAM_NAMES = ("a", "b", "c", "B", "alpha")
#: The clock of the random states.
STATES_NOW = 100

# Under the mutation profile (tests/conftest.py, set by tools/mutation.py) every test
# draws a tenth of its examples: a surviving mutant runs every property test, and a
# full mutation run of core/policy/reclaim.py must fit in an afternoon. ``make test`` keeps
# the full counts.
MUTATION_SHARE = 20
MUTATION = settings.get_current_profile_name() == "mutation"


def examples(n: int) -> int:
    """n examples; n / MUTATION_SHARE (at least 10) under the mutation profile."""
    if MUTATION:
        return max(10, n // MUTATION_SHARE)
    return n


@st.composite
def states(draw, max_jobs: int = 12, max_teams: int = 4, contended: bool | None = None, checkpoint: bool = False):
    """Random valid states. Half of them are "contended": caps rarely set and the
    capacity barely above the guarantees, so that lenders need their capacity back
    (rules 2b and 2c); the others exercise borrow caps (rule 1).

    ``checkpoint``: the checkpoint-aware victim order, with teams' and jobs' checkpoint
    intervals, ``borrowed`` and ``last_checkpoint`` each present or left out at random."""
    if contended is None:
        contended = draw(st.booleans())
    res = list(RESOURCES[: draw(st.integers(1, 3))])
    names = draw(st.lists(st.sampled_from(TEAM_NAMES), min_size=2 if contended else 1, max_size=max_teams, unique=True))
    amount = st.sampled_from(CONTENDED_AMOUNTS if contended else AMOUNTS)
    sharing = st.sampled_from(
        ("lend_and_borrow", "lend_and_borrow", "lend", "reserve") if contended else reclaim.SHARING_VALUES
    )
    # In contended states a few teams run most jobs (they borrow) and the others wait.
    busy = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)) if contended else names
    teams = []
    totals = {r: 0.0 for r in res}
    for name in names:
        if contended:
            guarantee = {r: draw(st.sampled_from((0, 0.5, 1, 2, 3, 3))) for r in res}
        else:
            guarantee = {r: draw(amount) for r in res if draw(st.booleans()) or r == "gpu"}
        for r, g in guarantee.items():
            totals[r] += g
        team = {"name": name, "guarantee": guarantee}
        if contended and name in busy and draw(st.integers(0, 3)) > 0:
            teams.append(team)  # a borrower without cap
            if draw(st.booleans()):
                team["in_team_preemption"] = True
            continue
        if draw(st.booleans()):
            team["sharing"] = draw(sharing)
        if draw(st.integers(0, 3 if contended else 1)) == 0:
            team["borrow_limit_percent"] = draw(st.sampled_from([-1, 0, 50, 100, 250]))
        if draw(st.integers(0, 5 if contended else 2)) == 0:
            team["borrow_limit"] = {r: draw(st.sampled_from([0, 0.5, 1, 2])) for r in res if draw(st.booleans())}
        if draw(st.booleans()):
            team["in_team_preemption"] = draw(st.booleans())
        teams.append(team)
    extra = st.sampled_from([0, 0, 0, 0.5] if contended else [0, 0, 0.5, 1, 2, 4])
    capacity = {r: round(totals[r] + draw(extra), 6) for r in res}
    jobs = []
    idle = [n for n in names if n not in busy] or names
    for i in range(draw(st.integers(0, max_jobs))):
        state = draw(st.sampled_from(["running", "running", "pending"]))
        if draw(st.integers(0, 3)) == 0:
            team = draw(st.sampled_from(names))
        else:
            team = draw(st.sampled_from(busy if state == "running" else idle))
        job = {
            "id": f"j{draw(st.integers(0, 9))}{i}",
            "team": team,
            "state": state,
            "demand": {r: draw(amount) for r in res if draw(st.booleans()) or r == "gpu"},
            "since": draw(st.sampled_from([0, 40, 70, 90, 100, 130])),
        }
        if draw(st.booleans()):
            job["priority"] = draw(st.integers(-1, 2))
        if draw(st.integers(0, 7)) == 0:
            job["terminating"] = True
        jobs.append(job)
    if contended and draw(st.integers(0, 3)) > 0:
        # Fill the pool with the busy teams' jobs, so that they borrow what others lent.
        used = sum(j["demand"].get("gpu", 0) for j in jobs if j["state"] == "running")
        k = 0
        while used < capacity["gpu"] and k < 8:
            d = draw(st.sampled_from((0.5, 1, 1, 2)))
            jobs.append({
                "id": f"f{k}", "team": draw(st.sampled_from(busy)), "state": "running",
                "demand": {r: (d if r == "gpu" else draw(st.sampled_from((0, 0.5)))) for r in res},
                "since": draw(st.sampled_from([0, 40, 70, 90])), "priority": draw(st.integers(-1, 1)),
            })
            used += d
            k += 1
    state = {"now": STATES_NOW, "capacity": capacity, "teams": teams, "jobs": jobs}
    if draw(st.booleans()):
        state["settings"] = {
            "reclaim_after_seconds": draw(st.sampled_from([0, 0, 30, 60])),
            "min_runtime_seconds": draw(st.sampled_from([0, 0, 30, 60])),
        }
    if checkpoint:
        _checkpoint_fields(draw, state)
    return state


CHECKPOINT_INTERVALS = (0, 7, 25, 30, 60, 0.5, 604800)
#: ``settings.max_checkpoint_seconds`` drawn (None: left out, 3600): caps below, between and
#: above the intervals and the ages (at most STATES_NOW).
MAX_CHECKPOINT_SECONDS = (None, None, 25, 45, 60, 0.25, 7)


def _checkpoint_fields(draw, state: dict) -> None:
    """The checkpoint-aware order's inputs, drawn onto ``state``: ties of lost work are
    common (intervals that divide the ages), so the later keys are exercised too."""
    state.setdefault("settings", {})["victim_order"] = "checkpoint"
    cap = draw(st.sampled_from(MAX_CHECKPOINT_SECONDS))
    if cap is not None:
        state["settings"]["max_checkpoint_seconds"] = cap
    for team in state["teams"]:
        if draw(st.booleans()):
            team["checkpoint_seconds"] = draw(st.sampled_from(CHECKPOINT_INTERVALS))
    for job in state["jobs"]:
        if draw(st.integers(0, 2)) == 0:
            job["borrowed"] = draw(st.booleans())
        if draw(st.integers(0, 2)) == 0:
            job["checkpoint_seconds"] = draw(st.sampled_from(CHECKPOINT_INTERVALS))
        if draw(st.integers(0, 4)) == 0:
            job["last_checkpoint"] = draw(st.sampled_from([0, 50, 95, 129, STATES_NOW, STATES_NOW + 10]))


# ---------------------------------------------------------------------------
# How the simulator hands the planner its jobs

def shared_demands(parsed: reclaim.State) -> reclaim.State:
    """``parsed`` with every two jobs of equal demand holding one dict, as the
    simulator's do: rule 2 then answers "fits?" once per (team, demand) until U
    changes, which jobs with a dict each never exercise."""
    one: dict = {}
    jobs = tuple(dataclasses.replace(j, demand=one.setdefault(tuple(sorted(j.demand.items())), j.demand))
                 for j in parsed.jobs)
    return dataclasses.replace(parsed, jobs=jobs)


def grouped(parsed: reclaim.State) -> reclaim.State:
    """``shared_demands(parsed)`` with its pending jobs as PendingGroups (one per team
    and demand, in rule 2's order), the rest left in ``jobs``."""
    parsed = shared_demands(parsed)
    groups: dict = {}
    rest = []
    for j in parsed.jobs:
        if j.state == "running" or j.terminating:
            rest.append(j)
        else:
            groups.setdefault((j.team, id(j.demand)), []).append(j)
    pending = []
    for (team_name, _), jobs in groups.items():
        jobs.sort(key=reclaim.pending_key)
        pending.append(reclaim.PendingGroup(team=team_name, demand=jobs[0].demand, jobs=jobs,
                                            keys=[reclaim.pending_key(j) for j in jobs]))
    return dataclasses.replace(parsed, jobs=tuple(rest), pending_groups=tuple(pending))



# ---------------------------------------------------------------------------
# A classic Batch queue, as the reclaim Lambda reads it (botocore's Stubber)

QUEUE = "arn:aws:batch:us-east-1:111122223333:job-queue/gpu-share-fairshare"
JOBDEF = "arn:aws:batch:us-east-1:111122223333:job-definition/gpu-share-fairshare-teama-gpu1:1"
#: The clock of the queue's jobs.
BATCH_NOW = 1_800_000_000.0

SETTINGS = {
    "queue": "gpu-share-fairshare",
    "capacity": {"gpu": 3},
    "settings": {"reclaim_after_seconds": 0, "min_runtime_seconds": 0},
    "teams": [
        {"name": "team-a", "share_identifier": "teama", "guarantee": {"gpu": 1}},
        {"name": "team-b", "share_identifier": "teamb", "guarantee": {"gpu": 1}},
        {"name": "team-c", "share_identifier": "teamc", "guarantee": {"gpu": 1}},
    ],
}


def _session(data_path: Path | None = None):
    session = botocore.session.get_session()
    if data_path is not None:
        session.get_component("data_loader").search_paths.insert(0, str(data_path))
    return session


def new_client(data_path: Path | None = None):
    """A Batch client of botocore's model (of ``data_path``'s, when given), for a Stubber."""
    return _session(data_path).create_client(
        "batch", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )


def job(jid: str, share: str, status: str, gpus: float = 1, *, started: float | None = None,
        created: float | None = None, priority: int | None = None, terminated: bool = False) -> dict:
    """A DescribeJobs job detail."""
    detail = {
        "jobName": f"job-{jid}",
        "jobId": jid,
        "jobArn": f"arn:aws:batch:us-east-1:111122223333:job/{jid}",
        "jobQueue": QUEUE,
        "status": status,
        "shareIdentifier": share,
        "createdAt": int((created if created is not None else BATCH_NOW - 500) * 1000),
        "startedAt": int((started if started is not None else BATCH_NOW - 100) * 1000),
        "jobDefinition": JOBDEF,
        "isTerminated": terminated,
        "container": {"resourceRequirements": [{"type": "VCPU", "value": "4"}, {"type": "GPU", "value": str(gpus)}]},
    }
    if priority is not None:
        detail["schedulingPriority"] = priority
    return detail


def summary(d: dict) -> dict:
    """The ListJobs summary of a DescribeJobs job detail."""
    return {"jobId": d["jobId"], "jobName": d["jobName"], "shareIdentifier": d["shareIdentifier"], "status": d["status"]}


def expect_listing(stub: Stubber, jobs: list[dict], *, page: int = 1000, describe: bool = True) -> None:
    """The ListJobs pages (per status) and DescribeJobs batches of one read."""
    order = []
    for status in ("RUNNABLE", "STARTING", "RUNNING"):
        of_status = [j for j in jobs if j["status"] == status]
        chunks = [of_status[i:i + page] for i in range(0, len(of_status), page)] or [[]]
        for k, chunk in enumerate(chunks):
            params = {"jobQueue": QUEUE, "jobStatus": status, "maxResults": 1000}
            if k:
                params["nextToken"] = f"{status}-{k}"
            response = {"jobSummaryList": [summary(j) for j in chunk]}
            if k < len(chunks) - 1:
                response["nextToken"] = f"{status}-{k + 1}"
            stub.add_response("list_jobs", response, params)
            order += chunk
    if describe:
        for i in range(0, len(order), 100):
            batch = order[i:i + 100]
            stub.add_response("describe_jobs", {"jobs": batch}, {"jobs": [j["jobId"] for j in batch]})


# ---------------------------------------------------------------------------
# Configs

SIX_MISTAKES = """
platform: {name: demo}
teams:
  - name: team-a
    guarantee: {ml.g5.xlarge: 2}
    sharing: reserve
    borrow_limit_percent: 20          # 1: borrow limit without a borrowing strategy
  - name: team-a                      # 2: duplicate name
    guarantee: {ml.g5.xlarge: 1}
  - name: team-c
    guarantee: {ml.g5.xlarge: 2}      # 3: guarantees (2+2) above capacity 3
    borrow_limit_percent: -3          # 4: below -1
  - name: Bad_Team
    guarantee: {ml.p5.48xlarge: 1}
    fair_share_weight: 300            # 5: weight above 100
hyperpod:
  cluster_arn: arn:aws:sagemaker:us-east-1:123:cluster/x   # 6: malformed ARN
  capacity: {ml.p5.48xlarge: 1}
batch_quota:
  capacity: {ml.g5.xlarge: 3}
"""


# ---------------------------------------------------------------------------
# The organisation's tree


def group(name, gpu=None, *, parent=None, limit=None):
    """A group of the planner's input: its pool of ``gpu`` GPUs, its ``parent`` and borrow ``limit``."""
    out: dict = {"name": name}
    if parent is not None:
        out["parent"] = parent
    if gpu is not None:
        out["guarantee"] = {"gpu": gpu}
    if limit is not None:
        out["borrow_limit"] = {"gpu": limit}
    return out


def organisation(groups, teams, *, capacity=8):
    """A platform config on the fair-share fleet (1-GPU g5.xlarge) with ``groups`` and
    ``teams`` given as ``(name, instances, group)``."""
    return {
        "fairshare": {"capacity": {"g5.xlarge": capacity}},
        "groups": groups,
        "teams": [{"name": n, "guarantee": {"g5.xlarge": g}, **({"group": p} if p else {})} for n, g, p in teams],
    }


# ---------------------------------------------------------------------------
# Time windows

#: A fair-share platform of 3 GPUs with one night window (Berlin, weekdays 20:00-08:00): research
#: gives up one of its two GPUs at night (and may still borrow one), nightly takes two; the
#: reclaimer waits 60 s.
FAIRSHARE_NIGHT = """
platform: {name: gpu-share}
windows:
  - {name: night, days: [mon, tue, wed, thu, fri], start: "20:00", end: "08:00", timezone: Europe/Berlin}
teams:
  - name: research
    guarantee: {g5.xlarge: 2}
    borrow_limit_percent: 100
    windows: {night: {guarantee: {g5.xlarge: 1}}}
  - name: nightly
    guarantee: {g5.xlarge: 1}
    borrow_limit_percent: 0
    windows: {night: {guarantee: {g5.xlarge: 2}}}
fairshare:
  capacity: {g5.xlarge: 3}
  reclaim: {reclaim_after_seconds: 60}
"""
