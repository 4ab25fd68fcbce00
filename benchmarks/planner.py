"""Reclaim planner speed: one plan for 1,000 and for 10,000 running jobs.

Each state has 100 teams and 1,000 pending jobs, random but seeded: a full pool in
which some teams borrow what others lent, some teams are ``reserve`` or ``lend``, some
have borrow caps or in-team preemption, some running jobs are protected. Prints the
median time per plan (``plan``: validation + planning, as the Lambda and the CLI call
it; ``plan_state``: planning alone, as the simulator calls it) and the 10k/1k ratio.

Then the AWS calls of one reclaim cycle on a 10,000-job queue, cold and in steady state
(warm function, 1% new jobs a minute), next to their minimum.

Targets (measured, never asserted): a 10k plan under 100 ms; 10k/1k ratio <= 15; calls at
the minimum (list pages + ceil(new jobs / 100) + ceil(victims / 50)).

    python benchmarks/planner.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

from cdk_gpu_share.core.policy import reclaim

N_TEAMS = 100
N_PENDING = 1_000
NOW = 100_000


def make_state(n_running: int, seed: int = 7) -> dict:
    rnd = random.Random(seed)
    sizes = (1, 1, 1, 1, 2, 2, 4, 8)
    # Skewed activity: a quarter of the teams run most of the jobs (they borrow).
    weights = [rnd.choice((1, 1, 1, 6)) for _ in range(N_TEAMS)]
    names = [f"team-{i:03d}" for i in range(N_TEAMS)]
    running = []
    for i in range(n_running):
        t = rnd.choices(range(N_TEAMS), weights)[0]
        gpu = rnd.choice(sizes)
        running.append({
            "id": f"r{i:06d}", "team": names[t], "state": "running",
            "demand": {"gpu": gpu, "cpu": gpu * 8},
            "priority": rnd.randint(-1, 2), "since": rnd.uniform(0, NOW),
            "terminating": rnd.random() < 0.01,
        })
    total_gpu = sum(j["demand"]["gpu"] for j in running if not j["terminating"])
    # Guarantees: roughly even shares of a pool the running jobs fill completely.
    raw = [rnd.uniform(0.5, 1.5) for _ in range(N_TEAMS)]
    scale = total_gpu / sum(raw)
    guarantees = [int(r * scale) for r in raw]
    capacity_gpu = max(total_gpu, sum(guarantees))
    teams = []
    for i, name in enumerate(names):
        team = {"name": name, "guarantee": {"gpu": guarantees[i], "cpu": guarantees[i] * 8}}
        kind = rnd.random()
        if kind < 0.1:
            team["sharing"] = "reserve"
        elif kind < 0.2:
            team["sharing"] = "lend"
        elif kind < 0.35:
            team["borrow_limit_percent"] = rnd.choice((50, 100, 200))
        if rnd.random() < 0.2:
            team["in_team_preemption"] = True
        teams.append(team)
    pending = []
    for i in range(N_PENDING):
        t = rnd.randrange(N_TEAMS)
        gpu = rnd.choice(sizes)
        pending.append({
            "id": f"p{i:05d}", "team": names[t], "state": "pending",
            "demand": {"gpu": gpu, "cpu": gpu * 8},
            "priority": rnd.randint(-1, 3), "since": rnd.uniform(NOW - 3_600, NOW),
        })
    return {
        "now": NOW,
        "capacity": {"gpu": capacity_gpu, "cpu": capacity_gpu * 8},
        "settings": {"reclaim_after_seconds": 300, "min_runtime_seconds": 600},
        "teams": teams,
        "jobs": running + pending,
    }


def median_seconds(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def planner_section(repeat: int) -> None:
    print(f"Reclaim planner: {N_TEAMS} teams, {N_PENDING} pending jobs, 2 resources "
          f"(median of {repeat} runs)")
    results = {}
    for n in (1_000, 10_000):
        state = json.loads(json.dumps(make_state(n)))  # as the Lambda and the CLI see it
        parsed = reclaim.parse_state(state)
        out = reclaim.plan(state)
        t_plan = median_seconds(lambda: reclaim.plan(state), repeat)
        t_state = median_seconds(lambda: reclaim.plan_state(parsed), repeat)
        t_parse = median_seconds(lambda: reclaim.parse_state(state), repeat)
        results[n] = (t_plan, t_state)
        reasons = {}
        for p in out["preemptions"]:
            reasons[p["reason"]] = reasons.get(p["reason"], 0) + 1
        print(f"  {n:>6} running: plan {t_plan * 1e3:7.1f} ms  (parse_state {t_parse * 1e3:6.1f} ms, "
              f"plan_state {t_state * 1e3:6.1f} ms)  served {len(out['served'])}, "
              f"waiting {len(out['waiting'])}, preemptions {reasons}")
    r_plan = results[10_000][0] / results[1_000][0]
    r_state = results[10_000][1] / results[1_000][1]
    print(f"  10k/1k ratio: plan {r_plan:.1f}x, plan_state {r_state:.1f}x  "
          f"(targets: 10k plan < 100 ms, ratio <= 15)")


def _adversarial_states() -> dict:
    """States built to defeat a naive planner (each ~10,000 running, 1,000 pending)."""
    out = {}
    many_lenders = [{"name": f"l{i}", "guarantee": {"gpu": 2}} for i in range(50)]
    tiny = [{"id": f"v{i}", "team": "v", "state": "running", "demand": {"gpu": 0.1}, "since": i}
            for i in range(10_000)]
    out["one borrower, 10k tiny jobs; lenders needing more than reclaimable"] = {
        "now": NOW, "capacity": {"gpu": 1000}, "teams": [{"name": "v", "guarantee": {"gpu": 900}}] + many_lenders,
        "jobs": tiny + [{"id": f"p{i}", "team": f"l{i % 50}", "state": "pending", "demand": {"gpu": 50},
                         "since": i} for i in range(N_PENDING)],
    }
    out["one borrower, 10k tiny jobs; 1,000 successful reclaims"] = {
        "now": NOW, "capacity": {"gpu": 1000}, "teams": [{"name": "v", "guarantee": {"gpu": 900}}] + many_lenders,
        "jobs": tiny + [{"id": f"p{i}", "team": f"l{i % 50}", "state": "pending", "demand": {"gpu": 2},
                         "since": i} for i in range(N_PENDING)],
    }
    out["in-team: 5k low-priority own jobs, hopeless high-priority jobs"] = {
        "now": NOW, "capacity": {"gpu": 5100},
        "teams": [{"name": "a", "guarantee": {"gpu": 100}, "in_team_preemption": True},
                  {"name": "o", "guarantee": {"gpu": 5000}}],
        "jobs": [{"id": f"a{i}", "team": "a", "state": "running", "demand": {"gpu": 0.01}, "since": i}
                 for i in range(5000)]
        + [{"id": f"o{i}", "team": "o", "state": "running", "demand": {"gpu": 1}, "since": i} for i in range(5000)]
        + [{"id": f"p{i}", "team": "a", "state": "pending", "demand": {"gpu": 200}, "priority": 5, "since": i}
           for i in range(N_PENDING)],
    }
    out["2 resources: 9k ineligible (cpu-only) jobs first in victim order"] = {
        "now": NOW, "capacity": {"gpu": 1000, "cpu": 1500},
        "teams": [{"name": "v", "guarantee": {"gpu": 500, "cpu": 1000}}]
        + [{"name": f"l{i}", "guarantee": {"gpu": 10, "cpu": 10}} for i in range(50)],
        "jobs": [{"id": f"c{i}", "team": "v", "state": "running", "demand": {"cpu": 0.1}, "priority": -1,
                  "since": i} for i in range(9000)]
        + [{"id": f"g{i}", "team": "v", "state": "running", "demand": {"gpu": 1}, "since": i} for i in range(1000)]
        + [{"id": f"p{i}", "team": f"l{i % 50}", "state": "pending", "demand": {"gpu": 1}, "since": i}
           for i in range(N_PENDING)],
    }
    return out


def adversarial_section(repeat: int) -> None:
    print("Reclaim planner on adversarial states (plan_state, median):")
    for name, state in _adversarial_states().items():
        parsed = reclaim.parse_state(state)
        t = median_seconds(lambda: reclaim.plan_state(parsed), max(3, repeat // 3))
        print(f"  {t * 1e3:7.1f} ms  {name}")


def _batch_queue(state: dict) -> tuple[list[dict], dict]:
    """The planner benchmark's state as an AWS Batch queue: DescribeJobs details and the
    reclaim settings (GPUs only: the Lambda plans one resource, the fleet's GPUs)."""
    from cdk_gpu_share.aws import batch_reader as br

    queue = "arn:aws:batch:us-east-1:111122223333:job-queue/bench"
    jobs = []
    for j in state["jobs"]:
        running = j["state"] == "running"
        since_ms = int(j["since"] * 1000)
        jobs.append({
            "jobId": j["id"], "jobName": j["id"], "jobQueue": queue,
            "jobDefinition": "arn:aws:batch:us-east-1:111122223333:job-definition/bench-gpu:1",
            "status": "RUNNING" if running else "RUNNABLE",
            "shareIdentifier": br.share_identifier(j["team"]),
            "schedulingPriority": j.get("priority", 0),
            "createdAt": since_ms, "startedAt": since_ms,
            "isTerminated": bool(j.get("terminating")),
            "container": {"resourceRequirements": [{"type": "GPU", "value": str(j["demand"]["gpu"])}]},
        })
    teams = []
    for t in state["teams"]:
        entry = {"name": t["name"], "share_identifier": br.share_identifier(t["name"]),
                 "guarantee": {"gpu": t["guarantee"]["gpu"]}}
        for key in ("sharing", "borrow_limit_percent", "in_team_preemption"):
            if key in t:
                entry[key] = t[key]
        teams.append(entry)
    settings = {"queue": "bench", "capacity": {"gpu": state["capacity"]["gpu"]},
                "settings": state["settings"], "teams": teams}
    return jobs, settings


class _Queue:
    """A Batch queue answering a real botocore client from ``before-send`` (requests are
    validated and serialized by botocore; answers parsed as AWS's)."""

    def __init__(self, jobs: list[dict]) -> None:
        import botocore.session
        from botocore.config import Config

        self.jobs = {j["jobId"]: dict(j) for j in jobs}
        self.client = botocore.session.get_session().create_client(
            "batch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x",
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
        self.client.meta.events.register("before-send.batch", self._send)

    def _send(self, request, event_name, **_):
        from botocore.awsrequest import AWSResponse

        op = event_name.rsplit(".", 1)[-1]
        p = json.loads(request.body or b"{}")
        if op == "ListJobs":
            of_status = [j for j in self.jobs.values() if j["status"] == p["jobStatus"]]
            offset = int(p.get("nextToken") or 0)
            page = of_status[offset:offset + p["maxResults"]]
            body = {"jobSummaryList": [{k: j[k] for k in ("jobId", "jobName", "status", "createdAt", "startedAt")
                                        if k in j} for j in page]}
            if offset + len(page) < len(of_status):
                body["nextToken"] = str(offset + len(page))
        elif op == "DescribeJobs":
            body = {"jobs": [self.jobs[j] for j in p["jobs"] if j in self.jobs]}
        elif op == "TerminateJobs":
            for j in p["jobs"]:
                self.jobs[j]["isTerminated"] = True
            body = {"successful": p["jobs"], "errors": []}
        else:
            raise AssertionError(op)

        class Raw:
            def stream(self, **_):
                yield json.dumps(body).encode()

        return AWSResponse(request.url, 200, {}, Raw())


def aws_calls_section(n_running: int = 10_000, new_share: float = 0.01) -> None:
    """AWS calls one reclaim cycle makes on a 10,000-job queue, next to the minimum.

    The real handler (``run_cycle``: read, plan, stop) runs against a real botocore
    client answered from ``before-send``, which counts the requests. *Cold*: the first
    cycle of a function (every job described). *Steady*: the next minute on the warm
    function, after 1% of the jobs ended and as many new ones were submitted. Minimum:
    a ListJobs page per 1,000 jobs of each status read (at least one each), a
    DescribeJobs per 100 jobs not described before (all of them cold), a TerminateJobs
    per 50 victims. Not counted: the resubmission of each stopped job (on its FAILED
    event), which Batch requires because it never retries terminated jobs.
    """
    import contextlib
    import io

    from cdk_gpu_share.aws import batch_reader as br
    from cdk_gpu_share.lambdas.reclaim import handler

    state = make_state(n_running)
    jobs, settings = _batch_queue(state)
    queue_arn = jobs[0]["jobQueue"]
    queue = _Queue(jobs)
    cache = br.DescribeCache()
    rnd = random.Random(11)

    def cycle(label: str, new_jobs: int) -> None:
        by_status: dict[str, int] = {}
        for j in queue.jobs.values():
            by_status[j["status"]] = by_status.get(j["status"], 0) + 1
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            result = handler.run_cycle(queue.client, queue_arn, settings, now=NOW, emit=lambda line: None,
                                       cache=cache)
        elapsed = time.perf_counter() - t0
        calls = result["calls"]
        total = sum(calls.values())
        victims = len(result["planned"])
        minimum = br.minimum_calls(by_status, victims, new_jobs=new_jobs)
        print(f"  {label:>6}: " + ", ".join(f"{op} {n}" for op, n in calls.items()) + f" = {total} calls;"
              f" minimum {minimum} (list pages + ceil({new_jobs} new/100) + ceil({victims} victims/50))"
              f" -> {'equal' if total == minimum else f'{total - minimum:+d}'}; {elapsed * 1e3:.0f} ms")

    print(f"AWS calls of one reclaim cycle: {len(jobs)} jobs, {len(settings['teams'])} teams "
          f"(target: steady state at the minimum with {new_share:.0%} new jobs a minute; cold describes all)")
    cycle("cold", len(queue.jobs))
    # A minute later: 1% of the jobs ended, as many new ones submitted.
    n_new = int(len(jobs) * new_share)
    for jid in rnd.sample(sorted(j for j, d in queue.jobs.items() if d["status"] == "RUNNING"), n_new):
        del queue.jobs[jid]
    template = jobs[-1]
    for i in range(n_new):
        jid = f"n{i:05d}"
        queue.jobs[jid] = dict(template, jobId=jid, jobName=jid, status="RUNNABLE",
                               shareIdentifier=rnd.choice(settings["teams"])["share_identifier"])
    cycle("steady", n_new)
    print(f"  cache: {len(cache)} jobs held (bound {cache.max_jobs})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per measurement (default 15)")
    parser.add_argument("--calls-only", action="store_true", help="only the AWS calls of a reclaim cycle")
    args = parser.parse_args(argv)
    if args.calls_only:
        aws_calls_section()
        return 0
    planner_section(args.repeat)
    adversarial_section(args.repeat)
    aws_calls_section()
    return 0


if __name__ == "__main__":
    sys.exit(main())
