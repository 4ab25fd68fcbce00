"""Property tests of the reclaim planner (docs/reclaim-planner.md).

Two kinds of checks on thousands of random states with one to three resources:

* a differential test against ``reference_plan`` below, a deliberately naive
  transcription of the contract that recomputes every quantity from scratch at every
  step (no incremental sums, no heaps, no shortcuts): the planner's optimisations
  must never change a decision;
* the invariants listed in the contract, checked on the planner's output alone by
  replaying its decisions.

Plus determinism: the same input gives the same bytes, whatever the order of the
input lists.
"""

from __future__ import annotations

import copy
import json
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core.policy import reclaim
from tests.builders import MUTATION, examples, grouped, shared_demands, states

TOL = 1e-9


# ---------------------------------------------------------------------------
# A naive transcription of the contract (the oracle)


def reference_plan(state: dict) -> dict:
    now = state["now"]
    capacity = state["capacity"]
    res = list(capacity)
    s = state.get("settings") or {}
    reclaim_after = s.get("reclaim_after_seconds", 0)
    min_runtime = s.get("min_runtime_seconds", 0)
    teams = {t["name"]: t for t in state["teams"]}
    jobs = [j for j in state["jobs"] if not j.get("terminating", False)]
    running = [j for j in jobs if j["state"] == "running"]
    pending = [j for j in jobs if j["state"] == "pending"]
    chosen: list[str] = []  # victim ids
    served: list[dict] = []

    def dem(j, r):
        return j["demand"].get(r, 0)

    def prio(j):
        return j.get("priority", 0)

    def G(t, r):
        return teams[t]["guarantee"].get(r, 0)

    def C(t, r):
        team = teams[t]
        if team.get("sharing", "lend_and_borrow") != "lend_and_borrow":
            return 0
        cap = None
        pct = team.get("borrow_limit_percent", -1)
        if pct != -1:
            cap = G(t, r) * pct / 100
        bl = team.get("borrow_limit") or {}
        if r in bl:
            cap = bl[r] if cap is None else min(cap, bl[r])
        return cap

    def U(t, r):
        return sum(dem(j, r) for j in running if j["team"] == t and j["id"] not in chosen) + sum(
            dem(p, r) for p in served if p["team"] == t
        )

    def B(t, r):
        return max(0, U(t, r) - G(t, r))

    def F(r):
        return capacity[r] - sum(U(t, r) for t in teams)

    def RI(T, r):
        return sum(
            max(0, G(t, r) - U(t, r))
            for t in teams
            if t != T and teams[t].get("sharing", "lend_and_borrow") == "reserve"
        )

    def needs(p):
        return [r for r in res if dem(p, r) > TOL]

    def fits(p):
        T = p["team"]
        for r in needs(p):
            if dem(p, r) > F(r) - RI(T, r) + TOL:
                return False
            if U(T, r) + dem(p, r) > G(T, r) + TOL:
                c = C(T, r)
                if c is not None and U(T, r) + dem(p, r) - G(T, r) > c + TOL:
                    return False
        return True

    def within(p):
        return all(U(p["team"], r) + dem(p, r) <= G(p["team"], r) + TOL for r in needs(p))

    def lacks(p):
        return [r for r in needs(p) if dem(p, r) > F(r) - RI(p["team"], r) + TOL]

    def age(j):
        return max(0, now - j["since"])

    def protected(j):
        return age(j) < min_runtime - TOL

    def eligible(j, p):
        V = j["team"]
        if V == p["team"]:
            return False
        such = [r for r in lacks(p) if B(V, r) > TOL]
        return any(dem(j, r) > TOL for r in such)

    def borrowed(j):
        # The contract: recorded, else derived from the state (the job and its team's
        # running, non-terminating jobs with a smaller (since, id)).
        if "borrowed" in j:
            return j["borrowed"]
        before = [k for k in running if k["team"] == j["team"] and (k["since"], k["id"]) <= (j["since"], j["id"])]
        return any(sum(dem(k, r) for k in before) > G(j["team"], r) + TOL for r in needs(j))

    def lost(j):
        M = s.get("max_checkpoint_seconds", 3600)
        a = max(0, now - j["since"])
        c = j.get("checkpoint_seconds", teams[j["team"]].get("checkpoint_seconds", 0))
        c1 = c if 0 < c <= M else M
        W = math.fmod(a, c1)
        if "last_checkpoint" in j:
            W = min(W, max(0, now - max(j["since"], j["last_checkpoint"])))
        return W

    def victim_order(js):
        out = sorted(js, key=lambda j: j["id"], reverse=True)
        if s.get("victim_order", "youngest") == "checkpoint":
            return sorted(out, key=lambda j: (not borrowed(j), lost(j), -j["since"]))
        return sorted(out, key=lambda j: (prio(j), -j["since"]))

    def candidates(pred):
        return [j for j in victim_order(running) if pred(j) and not protected(j) and j["id"] not in chosen]

    def exceeds(t):
        return any(C(t, r) is not None and B(t, r) > C(t, r) + TOL for r in res)

    preemptions = []
    # Rule 1
    for t in sorted(teams):
        if not exceeds(t):
            continue
        taken = []
        for j in candidates(lambda j: j["team"] == t):
            if not exceeds(t):
                break
            over = [r for r in res if C(t, r) is not None and B(t, r) > C(t, r) + TOL]
            if any(dem(j, r) > TOL for r in over):
                chosen.append(j["id"])
                taken.append(j)
        if not exceeds(t):
            for j in reversed(list(taken)):
                chosen.remove(j["id"])
                if exceeds(t):
                    chosen.append(j["id"])
                else:
                    taken.remove(j)
        for j in taken:
            preemptions.append({"job": j["id"], "team": t, "reason": "borrow_limit"})

    # Rule 2
    group1 = [p for p in pending if within(p)]
    group2 = [p for p in pending if not within(p)]

    def pkey(p):
        return (-prio(p), p["since"], p["id"])

    order = sorted(group1, key=pkey) + sorted(group2, key=pkey)

    def greedy(p, cands):
        """cands: list of (job, predicate evaluated when reached)."""
        taken = []
        for j, pred in cands:
            if fits(p):
                break
            if pred(j):
                chosen.append(j["id"])
                taken.append(j)
        if not fits(p):
            for j in taken:
                chosen.remove(j["id"])
            return None
        for j in reversed(list(taken)):
            chosen.remove(j["id"])
            if fits(p):
                taken.remove(j)
            else:
                chosen.append(j["id"])
        return taken

    served_ids, waiting = [], []
    for p in order:
        T = p["team"]
        victims = None
        if fits(p):
            victims = []
        else:
            waited = age(p) >= reclaim_after - TOL
            if waited and within(p):
                others = candidates(lambda j: j["team"] != T)
                victims = greedy(p, [(j, lambda j: eligible(j, p)) for j in others])
            if victims is None and waited and teams[T].get("in_team_preemption", False):
                own = candidates(lambda j: j["team"] == T and prio(j) < prio(p))
                others = candidates(lambda j: j["team"] != T)
                victims = greedy(
                    p,
                    [(j, lambda j: True) for j in own]
                    + [(j, lambda j: within(p) and eligible(j, p)) for j in others],
                )
        if victims is None:
            waiting.append(p["id"])
            continue
        for j in victims:
            preemptions.append({
                "job": j["id"], "team": j["team"],
                "reason": "in_team" if j["team"] == T else "reclaim", "beneficiary": p["id"],
            })
        served.append(p)
        served_ids.append(p["id"])

    report = {}
    for t in sorted(teams):
        report[t] = {
            "usage": {r: U(t, r) for r in res},
            "guarantee": {r: G(t, r) for r in res},
            "borrowed": {r: B(t, r) for r in res},
            "borrow_cap": {r: C(t, r) for r in res},
        }
    return {"preemptions": preemptions, "served": served_ids, "waiting": waiting, "teams": report}


# ---------------------------------------------------------------------------
# Random states


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-7


def _same_plan(got: dict, want: dict) -> None:
    assert got["preemptions"] == want["preemptions"]
    assert got["served"] == want["served"]
    assert got["waiting"] == want["waiting"]
    assert list(got["teams"]) == list(want["teams"])
    for t, rep in want["teams"].items():
        for key, values in rep.items():
            assert list(got["teams"][t][key]) == list(values)
            for r, v in values.items():
                assert _close(got["teams"][t][key][r], v), (t, key, r, got["teams"][t][key][r], v)


# The invariant checks replay the planner's output; where the planner equals the naive
# transcription (the differential tests, which run), they can only fail if the
# transcription breaks the contract, which no mutant of the planner changes. So a
# mutation run skips them and spends the time on the differential tests.
not_under_mutation = pytest.mark.skipif(MUTATION, reason="implied by the differential tests (see MUTATION_SHARE)")


def FAST(max_examples: int):
    return settings(
        max_examples=examples(max_examples),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---------------------------------------------------------------------------
# Differential


@FAST(1200)
@given(states())
def test_planner_matches_the_naive_transcription_of_the_contract(state):
    _same_plan(reclaim.plan(state), reference_plan(state))


@FAST(150)
@given(states(max_jobs=40, max_teams=5))
def test_planner_matches_the_naive_transcription_on_larger_states(state):
    _same_plan(reclaim.plan(state), reference_plan(state))


@FAST(800)
@given(states(contended=True))
def test_planner_matches_the_naive_transcription_when_lenders_want_capacity_back(state):
    _same_plan(reclaim.plan(state), reference_plan(state))


@FAST(800)
@given(states(checkpoint=True))
def test_checkpoint_order_matches_the_naive_transcription(state):
    _same_plan(reclaim.plan(state), reference_plan(state))


@FAST(600)
@given(states(contended=True, checkpoint=True))
def test_checkpoint_order_matches_the_naive_transcription_when_lenders_want_capacity_back(state):
    _same_plan(reclaim.plan(state), reference_plan(state))
    _check_shared_and_grouped(state)


# ---------------------------------------------------------------------------
# Shared demands and pending groups (how the simulator passes its jobs)


def _check_shared_and_grouped(state: dict) -> None:
    want = reference_plan(state)
    parsed = reclaim.parse_state(state)
    _same_plan(reclaim.plan_state(shared_demands(parsed)), want)
    as_groups = grouped(parsed)
    out = reclaim.plan_state(as_groups)
    _same_plan(out, want)
    assert reclaim.plan_state(as_groups, full=False) == {"preemptions": out["preemptions"]}


@FAST(600)
@given(states())
def test_shared_demands_and_pending_groups_match_the_naive_transcription(state):
    _check_shared_and_grouped(state)


@FAST(600)
@given(states(contended=True))
def test_shared_demands_and_pending_groups_match_when_lenders_want_capacity_back(state):
    _check_shared_and_grouped(state)


@FAST(100)
@given(states(max_jobs=40, max_teams=5))
def test_shared_demands_and_pending_groups_match_on_larger_states(state):
    _check_shared_and_grouped(state)


# ---------------------------------------------------------------------------
# Invariants, checked by replaying the planner's own output


class Replay:
    """The cluster as the plan stands, recomputed from scratch."""

    def __init__(self, state: dict):
        self.state = state
        self.res = list(state["capacity"])
        self.teams = {t["name"]: t for t in state["teams"]}
        self.jobs = {j["id"]: j for j in state["jobs"]}
        self.live = [j for j in state["jobs"] if not j.get("terminating", False)]
        self.removed: set[str] = set()
        self.served: set[str] = set()
        s = state.get("settings") or {}
        self.min_runtime = s.get("min_runtime_seconds", 0)
        self.reclaim_after = s.get("reclaim_after_seconds", 0)

    def team(self, name):
        return self.teams[name]

    def U(self, t, r):
        return sum(
            j["demand"].get(r, 0)
            for j in self.live
            if j["team"] == t
            and ((j["state"] == "running" and j["id"] not in self.removed) or j["id"] in self.served)
        )

    def G(self, t, r):
        return self.teams[t]["guarantee"].get(r, 0)

    def B(self, t, r):
        return max(0, self.U(t, r) - self.G(t, r))

    def C(self, t, r):
        spec = reclaim.TeamSpec(
            name=t, guarantee=self.teams[t]["guarantee"],
            sharing=self.teams[t].get("sharing", "lend_and_borrow"),
            borrow_limit_percent=self.teams[t].get("borrow_limit_percent", -1),
            borrow_limit=self.teams[t].get("borrow_limit"),
        )
        return reclaim.borrow_cap(spec, r)

    def F(self, r):
        return self.state["capacity"][r] - sum(self.U(t, r) for t in self.teams)

    def RI(self, T, r):
        return sum(
            max(0, self.G(t, r) - self.U(t, r))
            for t in self.teams
            if t != T and self.teams[t].get("sharing", "lend_and_borrow") == "reserve"
        )

    def needs(self, p):
        return [r for r in self.res if p["demand"].get(r, 0) > TOL]

    def lacks(self, p):
        return [r for r in self.needs(p) if p["demand"][r] > self.F(r) - self.RI(p["team"], r) + TOL]

    def fits(self, p):
        T = p["team"]
        for r in self.needs(p):
            d = p["demand"][r]
            if d > self.F(r) - self.RI(T, r) + TOL:
                return False
            over = self.U(T, r) + d - self.G(T, r)
            c = self.C(T, r)
            if over > TOL and c is not None and over > c + TOL:
                return False
        return True

    def within(self, p):
        return all(self.U(p["team"], r) + p["demand"][r] <= self.G(p["team"], r) + TOL for r in self.needs(p))

    def age(self, j):
        return max(0, self.state["now"] - j["since"])

    def protected(self, j):
        return self.age(j) < self.min_runtime - TOL

    def waited(self, j):
        return self.age(j) >= self.reclaim_after - TOL

    def room_ok(self):
        return all(self.F(r) - self.RI(t, r) >= -TOL for t in self.teams for r in self.res)


def check_invariants(state: dict, out: dict) -> None:
    rp = Replay(state)
    jobs = rp.jobs
    live_pending = [j["id"] for j in rp.live if j["state"] == "pending"]
    # served and waiting: every live pending job once; terminating jobs nowhere.
    assert sorted(out["served"] + out["waiting"]) == sorted(live_pending)
    victims = [p["job"] for p in out["preemptions"]]
    assert len(victims) == len(set(victims)), "a job chosen twice"
    terminating = {j["id"] for j in state["jobs"] if j.get("terminating", False)}
    assert not terminating & (set(victims) | set(out["served"]) | set(out["waiting"]))
    for pre in out["preemptions"]:
        job = jobs[pre["job"]]
        assert job["state"] == "running"
        assert pre["team"] == job["team"]
        assert not rp.protected(job), "a protected job was chosen"
        assert ("beneficiary" in pre) == (pre["reason"] != "borrow_limit")
    initially_ok = rp.room_ok()
    initial_free_ok = all(rp.F(r) >= -TOL for r in rp.res)

    # Rule 1, replayed: minimal when the cap is reached, exhaustive otherwise.
    by_team: dict[str, list[str]] = {}
    for pre in out["preemptions"]:
        if pre["reason"] == "borrow_limit":
            by_team.setdefault(pre["team"], []).append(pre["job"])
    for t in by_team:
        assert any(rp.C(t, r) is not None and rp.B(t, r) > rp.C(t, r) + TOL for r in rp.res)
    for ids in by_team.values():
        rp.removed.update(ids)

    def over(t):
        return [r for r in rp.res if rp.C(t, r) is not None and rp.B(t, r) > rp.C(t, r) + TOL]

    for t in rp.teams:
        still = over(t)
        ids = by_team.get(t, [])
        if still:
            for j in rp.live:
                if j["team"] == t and j["state"] == "running" and j["id"] not in rp.removed and not rp.protected(j):
                    assert not any(j["demand"].get(r, 0) > TOL for r in still)
        else:
            for jid in ids:  # minimal: returning any one victim breaks the cap again
                rp.removed.discard(jid)
                assert over(t), f"borrow_limit victim {jid} was not needed"
                rp.removed.add(jid)

    # Rule 2, replayed in the order the pending jobs were considered.
    group1 = [jobs[i] for i in live_pending if rp.within(jobs[i])]
    group2 = [jobs[i] for i in live_pending if not rp.within(jobs[i])]

    def key(p):
        return (-p.get("priority", 0), p["since"], p["id"])

    order = [p["id"] for p in sorted(group1, key=key) + sorted(group2, key=key)]
    served = set(out["served"])
    assert [i for i in order if i in served] == out["served"]
    assert [i for i in order if i not in served] == out["waiting"]
    for pid in order:
        p = jobs[pid]
        mine = [pre for pre in out["preemptions"] if pre.get("beneficiary") == pid]
        if pid not in served:
            assert not mine
            assert not rp.fits(p)
            continue
        if mine:
            assert rp.waited(p), "a job that has not waited caused a preemption"
            assert not rp.fits(p)
        for pre in mine:
            v = jobs[pre["job"]]
            if pre["reason"] == "in_team":
                assert v["team"] == p["team"]
                assert v.get("priority", 0) < p.get("priority", 0)
                assert rp.team(p["team"]).get("in_team_preemption", False)
            else:
                assert pre["reason"] == "reclaim"
                assert v["team"] != p["team"]
                # Eligible: V borrows in a resource p lacks, and v uses that resource.
                such = [r for r in rp.lacks(p) if rp.B(v["team"], r) > TOL]
                assert any(v["demand"].get(r, 0) > TOL for r in such), "ineligible reclaim victim"
            rp.removed.add(pre["job"])
        assert rp.fits(p), f"{pid} served but does not fit"
        for pre in mine:  # minimal victim set
            rp.removed.discard(pre["job"])
            assert not rp.fits(p), f"victim {pre['job']} of {pid} was not needed"
            rp.removed.add(pre["job"])
        before = {(t, r): rp.F(r) - rp.RI(t, r) for t in rp.teams for r in rp.res}
        rp.served.add(pid)
        for (t, r), was in before.items():
            if was >= -TOL:
                assert rp.F(r) - rp.RI(t, r) >= -TOL, f"serving {pid} overcommitted {r}"

    # End state: the report, F >= 0 and room for every team.
    if initial_free_ok:
        assert all(rp.F(r) >= -TOL for r in rp.res)
    if initially_ok:
        assert rp.room_ok()
    for t, rep in out["teams"].items():
        for r in rp.res:
            assert _close(rep["usage"][r], rp.U(t, r))
            assert _close(rep["borrowed"][r], rp.B(t, r))
            assert _close(rep["guarantee"][r], rp.G(t, r))
            assert _close(rep["borrow_cap"][r], rp.C(t, r))
    assert sorted(out["teams"]) == sorted(rp.teams)


@not_under_mutation
@FAST(600)
@given(states())
def test_every_plan_satisfies_the_contract_invariants(state):
    check_invariants(state, reclaim.plan(state))


@not_under_mutation
@FAST(100)
@given(states(max_jobs=40, max_teams=5))
def test_invariants_hold_on_larger_states(state):
    check_invariants(state, reclaim.plan(state))


@not_under_mutation
@FAST(600)
@given(states(contended=True))
def test_invariants_hold_when_lenders_want_capacity_back(state):
    check_invariants(state, reclaim.plan(state))


# ---------------------------------------------------------------------------
# Determinism


@FAST(300)
@given(states(), st.randoms(use_true_random=False))
def test_same_input_gives_the_same_bytes_whatever_the_list_order(state, rnd: random.Random):
    first = json.dumps(reclaim.plan(state), sort_keys=False)
    assert json.dumps(reclaim.plan(copy.deepcopy(state)), sort_keys=False) == first
    shuffled = copy.deepcopy(state)
    rnd.shuffle(shuffled["jobs"])
    rnd.shuffle(shuffled["teams"])
    assert json.dumps(reclaim.plan(shuffled), sort_keys=False) == first


@FAST(200)
@given(states())
def test_plan_state_of_parse_state_equals_plan(state):
    assert reclaim.plan_state(reclaim.parse_state(state)) == reclaim.plan(state)


@FAST(200)
@given(states())
def test_planning_does_not_modify_the_input(state):
    before = copy.deepcopy(state)
    reclaim.plan(state)
    assert state == before
