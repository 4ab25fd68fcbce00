"""Every problem the reclaim planner reports for invalid input, exactly.

``plan()`` answers bad input with a :class:`ConfigError` listing each problem with its
field, the value as the user wrote it, the message and the fix (the brief: never a
traceback, never a silently wrong plan). The planner tests check that the field is
named; these tables pin the whole problem, one invalid field at a time on one valid
state, so that a changed message, value or fix is noticed; plus the validation paths
that depend on other parts of the state (capacity or teams missing, more than eight
teams, a job given as another mapping type).
"""

from __future__ import annotations

import types

import pytest

from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.core.policy.reclaim import JobSpec, Settings, TeamSpec, parse_state, plan
from tests.builders import DELETE, pend, run, set_path, state, team, valid_state


def _with(path, value):
    """The planner tests' valid state with one field set (or deleted)."""
    return set_path(path, value)(valid_state())


def problems(s):
    with pytest.raises(ConfigError) as info:
        plan(s)
    return [(p.field, p.value, p.message, p.fix) for p in info.value.problems]


# (case, path into the valid state, value written there (or deleted), every problem)
ONE_FIELD = [
    ('now missing', ["now"], DELETE, [
        ('now', None, 'is missing', 'write the current time in seconds, such as 10000'),
    ]),
    ('now a string', ["now"], "soon", [
        ('now', 'soon', 'must be a number, not a string', 'write the current time in seconds, such as 10000'),
    ]),
    ('now a boolean', ["now"], True, [
        ('now', True, 'must be a number, not a boolean', 'write the current time in seconds, such as 10000'),
    ]),
    ('capacity missing', ["capacity"], DELETE, [
        ('capacity', None, 'is missing', 'add the pool\'s capacity per resource, such as {"gpu": 16}'),
    ]),
    ('capacity a list', ["capacity"], [4], [
        ('capacity', [4], 'must be an object of resource amounts, not a list', 'write the capacity such as {"gpu": 1}'),
    ]),
    ('capacity amount a string', ["capacity","gpu"], "four", [
        ('capacity.gpu', 'four', 'must be a number, not a string', 'write a non-negative number such as 1 or 0.5'),
    ]),
    ('capacity resource not a string', ["capacity"], {1: 4, "gpu": 4}, [
        ('capacity.1', 1, 'resource names must be strings', 'write a name such as "gpu"'),
    ]),
    ('capacity amount negative', ["capacity","gpu"], -1, [
        ('capacity.gpu', -1, 'is a negative amount', 'use 0 or more'),
    ]),
    ('settings a number', ["settings"], 5, [
        ('settings', 5, 'must be an object, not a number', 'write {"reclaim_after_seconds": 0, "min_runtime_seconds": 0} or leave it out'),
    ]),
    ('reclaim_after_seconds a string', ["settings"], {"reclaim_after_seconds": "1m"}, [
        ('settings.reclaim_after_seconds', '1m', 'must be a number, not a string', 'use a number of seconds, 0 or more'),
    ]),
    ('min_runtime_seconds negative', ["settings"], {"min_runtime_seconds": -1}, [
        ('settings.min_runtime_seconds', -1, 'must not be below 0', 'use a number of seconds, 0 or more'),
    ]),
    ('min_runtime_seconds null', ["settings"], {"min_runtime_seconds": None}, [
        ('settings.min_runtime_seconds', None, 'must be a number, not null', 'use a number of seconds, 0 or more'),
    ]),
    ('teams missing', ["teams"], DELETE, [
        ('teams', None, 'is missing', 'add a list of teams, such as [{"name": "alpha", "guarantee": {"gpu": 1}}]'),
    ]),
    ('teams an object', ["teams"], {"a": {}}, [
        ('teams', {'a': {}}, 'must be a list of team objects, not an object', 'write [{"name": "alpha", "guarantee": {"gpu": 1}}]'),
    ]),
    ('team a string', ["teams", 0], "a", [
        ('teams[0]', 'a', 'must be a team object, not a string', 'write {"name": "alpha", "guarantee": {"gpu": 1}}'),
        ('jobs[0].team', 'a', 'is not a team of this state', "use one of the teams ('b') or add the team"),
    ]),
    ('team name missing', ["teams",0,"name"], DELETE, [
        ('teams[0].name', None, 'is missing', 'give the team a name'),
        ('jobs[0].team', 'a', 'is not a team of this state', "use one of the teams ('b') or add the team"),
    ]),
    ('team name a number', ["teams",0,"name"], 7, [
        ('teams[0].name', 7, 'must be a string, not a number', "write the team's name"),
        ('jobs[0].team', 'a', 'is not a team of this state', "use one of the teams ('b') or add the team"),
    ]),
    ('team name duplicate', ["teams",1,"name"], "a", [
        ('teams[1].name', 'a', 'is a duplicate team name (also teams[0].name)', 'give every team a unique name'),
        ('jobs[1].team', 'b', 'is not a team of this state', "use one of the teams ('a') or add the team"),
    ]),
    ('guarantee missing', ["teams",0,"guarantee"], DELETE, [
        ('teams[0].guarantee', None, 'is missing', 'add the team\'s guarantee, such as {"gpu": 1} ({} for none)'),
    ]),
    ('guarantee a list', ["teams",0,"guarantee"], [2], [
        ('teams[0].guarantee', [2], 'must be an object of resource amounts, not a list', 'write the guarantee such as {"gpu": 1}'),
    ]),
    ('guarantee unknown resource', ["teams",0,"guarantee","tpu"], 1, [
        ('teams[0].guarantee.tpu', 1, "names resource 'tpu', which capacity does not name", "use a resource of capacity (gpu) or add 'tpu' to capacity"),
    ]),
    ('sharing unknown', ["teams",0,"sharing"], "share", [
        ('teams[0].sharing', 'share', 'is not a sharing strategy', 'use reserve, lend or lend_and_borrow'),
    ]),
    ('sharing a list', ["teams",0,"sharing"], ["reserve"], [
        ('teams[0].sharing', ['reserve'], 'is not a sharing strategy', 'use reserve, lend or lend_and_borrow'),
    ]),
    ('percent a string', ["teams",1,"borrow_limit_percent"], "50%", [
        ('teams[1].borrow_limit_percent', '50%', 'must be a number, not a string', 'use -1 for unlimited, or a percentage >= 0'),
    ]),
    ('percent below -1', ["teams",1,"borrow_limit_percent"], -2, [
        ('teams[1].borrow_limit_percent', -2, 'is below -1', 'use -1 for unlimited, or a percentage >= 0'),
    ]),
    ('percent between -1 and 0', ["teams",1,"borrow_limit_percent"], -0.5, [
        ('teams[1].borrow_limit_percent', -0.5, 'is negative but not -1 (the only negative value, meaning unlimited)', 'use -1 for unlimited, or a percentage >= 0'),
    ]),
    ('borrow_limit a string', ["teams",1,"borrow_limit"], "1", [
        ('teams[1].borrow_limit', '1', 'must be an object of resource amounts, not a string', 'write the borrow limit such as {"gpu": 1}'),
    ]),
    ('borrow_limit negative', ["teams",1,"borrow_limit"], {"gpu": -2}, [
        ('teams[1].borrow_limit.gpu', -2, 'is a negative amount', 'use 0 or more'),
    ]),
    ('in_team_preemption a string', ["teams",1,"in_team_preemption"], "yes", [
        ('teams[1].in_team_preemption', 'yes', 'must be true or false, not a string', 'write true or false'),
    ]),
    ('guarantees above capacity', ["capacity","gpu"], 3, [
        ('teams[*].guarantee.gpu', 4.0, 'the guarantees sum to more than capacity.gpu (3)', 'lower the guarantees or raise capacity.gpu'),
    ]),
    ('jobs missing', ["jobs"], DELETE, [
        ('jobs', None, 'is missing', 'add the list of jobs ([] for none)'),
    ]),
    ('jobs an object', ["jobs"], {"j1": {}}, [
        ('jobs', {'j1': {}}, 'must be a list of job objects, not an object', 'write a list of jobs ([] for none)'),
    ]),
    ('job a string', ["jobs",0], "j1", [
        ('jobs[0]', 'j1', 'must be a job object, not a string', 'write {"id": "j1", "team": "alpha", "state": "running", "demand": {"gpu": 1}, "since": 0}'),
    ]),
    ('job id missing', ["jobs",0,"id"], DELETE, [
        ('jobs[0].id', None, 'is missing', 'give the job its id'),
    ]),
    ('job id a number', ["jobs",0,"id"], 7, [
        ('jobs[0].id', 7, 'must be a string, not a number', 'write the job id as a string, such as "j1"'),
    ]),
    ('job id duplicate', ["jobs",1,"id"], "j1", [
        ('jobs[1].id', 'j1', 'is a duplicate job id (also jobs[0].id)', 'list every job once, with a unique id'),
    ]),
    ('job team missing', ["jobs",0,"team"], DELETE, [
        ('jobs[0].team', None, 'is missing', "name the job's team"),
    ]),
    ('job team a number', ["jobs",0,"team"], 1, [
        ('jobs[0].team', 1, 'must be a string, not a number', "write the team's name"),
    ]),
    ('job team unknown', ["jobs",1,"team"], "zeta", [
        ('jobs[1].team', 'zeta', 'is not a team of this state', "use one of the teams ('a', 'b') or add the team"),
    ]),
    ('job state missing', ["jobs",0,"state"], DELETE, [
        ('jobs[0].state', None, 'is missing', 'add state: running or pending'),
    ]),
    ('job state unknown', ["jobs",1,"state"], "RUNNABLE", [
        ('jobs[1].state', 'RUNNABLE', 'is not a job state', 'use running (Batch STARTING or RUNNING) or pending (RUNNABLE)'),
    ]),
    ('demand missing', ["jobs",0,"demand"], DELETE, [
        ('jobs[0].demand', None, 'is missing', 'add the job\'s demand, such as {"gpu": 1}'),
    ]),
    ('demand a list', ["jobs",0,"demand"], [1], [
        ('jobs[0].demand', [1], 'must be an object of resource amounts, not a list', 'write the demand such as {"gpu": 1}'),
    ]),
    ('demand negative', ["jobs",0,"demand"], {"gpu": -0.5}, [
        ('jobs[0].demand.gpu', -0.5, 'is a negative amount', 'use 0 or more'),
    ]),
    ('demand unknown resource', ["jobs",1,"demand"], {"tpu": 1}, [
        ('jobs[1].demand.tpu', 1, "names resource 'tpu', which capacity does not name", "use a resource of capacity (gpu) or add 'tpu' to capacity"),
    ]),
    ('demand resource not a string', ["jobs",1,"demand"], {2: 1}, [
        ('jobs[1].demand.2', 2, 'resource names must be strings', 'write a name such as "gpu"'),
    ]),
    ('priority fractional', ["jobs",1,"priority"], 1.5, [
        ('jobs[1].priority', 1.5, 'must be an integer, not a number', 'write a whole number (higher is more important; negative allowed)'),
    ]),
    ('priority a string', ["jobs",1,"priority"], "high", [
        ('jobs[1].priority', 'high', 'must be an integer, not a string', 'write a whole number (higher is more important; negative allowed)'),
    ]),
    ('since missing', ["jobs",1,"since"], DELETE, [
        ('jobs[1].since', None, 'is missing', 'add the start time (running) or enqueue time (pending) in seconds'),
    ]),
    ('since a string', ["jobs",1,"since"], "yesterday", [
        ('jobs[1].since', 'yesterday', 'must be a number, not a string', 'write the start time (running) or enqueue time (pending) in seconds'),
    ]),
    ('terminating a string', ["jobs",1,"terminating"], "no", [
        ('jobs[1].terminating', 'no', 'must be true or false, not a string', 'write true or false'),
    ]),
    # Values the quick path for well-formed jobs passes on to the full checks.
    ('since a boolean', ["jobs", 1, "since"], True, [
        ('jobs[1].since', True, 'must be a number, not a boolean',
         'write the start time (running) or enqueue time (pending) in seconds'),
    ]),
    ('priority a boolean', ["jobs", 1, "priority"], True, [
        ('jobs[1].priority', True, 'must be an integer, not a boolean',
         'write a whole number (higher is more important; negative allowed)'),
    ]),
    ('terminating a number', ["jobs", 1, "terminating"], 1, [
        ('jobs[1].terminating', 1, 'must be true or false, not a number', 'write true or false'),
    ]),
    ('demand amount a boolean', ["jobs", 1, "demand"], {"gpu": True}, [
        ('jobs[1].demand.gpu', True, 'must be a number, not a boolean', 'write a non-negative number such as 1 or 0.5'),
    ]),
    ('demand amount a string', ["jobs", 1, "demand"], {"gpu": "1"}, [
        ('jobs[1].demand.gpu', '1', 'must be a number, not a string', 'write a non-negative number such as 1 or 0.5'),
    ]),
    ('percent a boolean', ["teams", 1, "borrow_limit_percent"], True, [
        ('teams[1].borrow_limit_percent', True, 'must be a number, not a boolean',
         'use -1 for unlimited, or a percentage >= 0'),
    ]),
    ('guarantee amount a string', ["teams", 1, "guarantee"], {"gpu": "2"}, [
        ('teams[1].guarantee.gpu', '2', 'must be a number, not a string', 'write a non-negative number such as 1 or 0.5'),
    ]),
]


@pytest.mark.parametrize(("case", "path", "value", "want"), ONE_FIELD, ids=[c[0] for c in ONE_FIELD])
def test_each_invalid_field_gets_its_field_value_message_and_fix(case, path, value, want):
    assert problems(_with(path, value)) == want


def test_without_capacity_resource_names_are_not_checked():
    # Capacity is missing: the guarantee and demand name a resource nobody can check.
    s = valid_state()
    del s["capacity"]
    s["teams"][0]["guarantee"] = {"tpu": 1}
    s["jobs"][0]["demand"] = {"tpu": 1}
    assert problems(s) == [
        ("capacity", None, "is missing", 'add the pool\'s capacity per resource, such as {"gpu": 16}'),
    ]


def test_unknown_team_lists_at_most_eight_known_teams():
    s = state(9, [team(f"t{i}", 1) for i in range(9)], [pend("j", "zeta")])
    assert problems(s) == [
        ("jobs[0].team", "zeta", "is not a team of this state",
         "use one of the teams ('t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7', ... (9 in all)) or add the team"),
    ]


def test_unknown_team_lists_eight_teams_in_full():
    s = state(8, [team(f"t{i}", 1) for i in range(8)], [pend("j", "zeta")])
    assert problems(s) == [
        ("jobs[0].team", "zeta", "is not a team of this state",
         "use one of the teams ('t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7') or add the team"),
    ]


def test_every_problem_of_a_team_and_a_job_is_reported_in_field_order():
    s = valid_state()
    s["teams"][0] = {"guarantee": {"gpu": "x"}, "sharing": "all", "borrow_limit_percent": -3,
                     "borrow_limit": {"gpu": -1}, "in_team_preemption": 1}
    s["jobs"][1] = {"id": 3, "team": 5, "state": "queued", "demand": {"gpu": -1}, "priority": "p",
                    "since": "s", "terminating": "t"}
    assert problems(s) == [
        ("teams[0].name", None, "is missing", "give the team a name"),
        ("teams[0].guarantee.gpu", "x", "must be a number, not a string", "write a non-negative number such as 1 or 0.5"),
        ("teams[0].sharing", "all", "is not a sharing strategy", "use reserve, lend or lend_and_borrow"),
        ("teams[0].borrow_limit_percent", -3, "is below -1", "use -1 for unlimited, or a percentage >= 0"),
        ("teams[0].borrow_limit.gpu", -1, "is a negative amount", "use 0 or more"),
        ("teams[0].in_team_preemption", 1, "must be true or false, not a number", "write true or false"),
        # The team without a name is no team: its job is reported too.
        ("jobs[0].team", "a", "is not a team of this state", "use one of the teams ('b') or add the team"),
        ("jobs[1].id", 3, "must be a string, not a number", 'write the job id as a string, such as "j1"'),
        ("jobs[1].team", 5, "must be a string, not a number", "write the team's name"),
        ("jobs[1].state", "queued", "is not a job state", "use running (Batch STARTING or RUNNING) or pending (RUNNABLE)"),
        ("jobs[1].demand.gpu", -1, "is a negative amount", "use 0 or more"),
        ("jobs[1].priority", "p", "must be an integer, not a string",
         "write a whole number (higher is more important; negative allowed)"),
        ("jobs[1].since", "s", "must be a number, not a string",
         "write the start time (running) or enqueue time (pending) in seconds"),
        ("jobs[1].terminating", "t", "must be true or false, not a string", "write true or false"),
    ]


# ---------------------------------------------------------------------------
# What a valid state becomes (parse_state is also the simulator's entry point)


def test_parse_state_keeps_every_field_and_fills_the_defaults():
    s = state({"gpu": 8, "cpu": 64}, [
        team("a", 2),
        {"name": "b", "guarantee": {"gpu": 2, "cpu": 8}, "sharing": "lend", "borrow_limit_percent": 50,
         "borrow_limit": {"gpu": 1}, "in_team_preemption": True},
    ], [
        {"id": "r", "team": "a", "state": "running", "demand": {"gpu": 1}, "since": 5},
        {"id": "p", "team": "b", "state": "pending", "demand": {"gpu": 1, "cpu": 2}, "since": 7.5,
         "priority": -3, "terminating": True},
    ], now=123, reclaim_after_seconds=30, min_runtime_seconds=60)
    got = parse_state(s)
    assert got.now == 123
    assert got.capacity == {"gpu": 8, "cpu": 64}
    assert got.settings == Settings(reclaim_after_seconds=30, min_runtime_seconds=60)
    assert got.teams == (
        TeamSpec("a", {"gpu": 2}, "lend_and_borrow", -1, None, False),
        TeamSpec("b", {"gpu": 2, "cpu": 8}, "lend", 50, {"gpu": 1}, True),
    )
    assert got.jobs == (
        JobSpec("r", "a", "running", {"gpu": 1}, 0, 5, False),
        JobSpec("p", "b", "pending", {"gpu": 1, "cpu": 2}, -3, 7.5, True),
    )


@pytest.mark.parametrize("settings", [None, {}], ids=["null", "empty"])
def test_settings_left_out_are_zero(settings):
    s = valid_state()
    s["settings"] = settings
    assert parse_state(s).settings == Settings(0, 0)


def test_an_integral_float_priority_becomes_an_int():
    s = valid_state()
    s["jobs"][1] = types.MappingProxyType({**s["jobs"][1], "priority": 2.0})
    (job,) = [j for j in parse_state(s).jobs if j.id == "j2"]
    assert job.priority == 2 and type(job.priority) is int


def test_any_mapping_is_a_job_and_lists_may_be_tuples():
    # A read-only mapping takes the full checks (not the quick path for dicts); same state.
    s = valid_state()
    want = parse_state(s)
    s["teams"] = tuple(types.MappingProxyType(t) for t in s["teams"])
    s["jobs"] = tuple(types.MappingProxyType(j) for j in s["jobs"])
    got = parse_state(s)
    assert got.teams == want.teams and got.jobs == want.jobs
    assert plan(s) == plan(valid_state())


def test_a_job_of_a_state_without_teams_names_no_team():
    s = state(4, [], [run("j1", "a", 1)])
    assert problems(s) == [
        ("jobs[0].team", "a", "is not a team of this state", "use one of the teams (none) or add the team"),
    ]


@pytest.mark.parametrize(("path", "value", "field"), [
    (["jobs", 1, "since"], float("inf"), "jobs[1].since"),
    (["jobs", 1, "since"], float("nan"), "jobs[1].since"),
    (["jobs", 1, "demand", "gpu"], float("inf"), "jobs[1].demand.gpu"),
    (["jobs", 1, "demand", "gpu"], float("nan"), "jobs[1].demand.gpu"),
    (["teams", 1, "borrow_limit_percent"], float("inf"), "teams[1].borrow_limit_percent"),
    (["capacity", "gpu"], float("inf"), "capacity.gpu"),
], ids=["since inf", "since nan", "demand inf", "demand nan", "percent inf", "capacity inf"])
def test_non_finite_numbers_are_rejected(path, value, field):
    (got,) = problems(_with(path, value))
    assert got[0] == field
    assert got[1] == value or (value != value and got[1] != got[1])
    assert got[2] == ("must be a number, not NaN" if value != value else "must be a finite number, not infinity")


def test_every_bad_amount_of_one_mapping_is_reported():
    s = valid_state()
    s["teams"][0]["guarantee"] = {5: 1, "gpu": "two", "cpu": -1, "tpu": 1, "ok": 0, "npu": 2}
    s["capacity"]["ok"] = 1
    assert problems(s) == [
        ("teams[0].guarantee.5", 5, "resource names must be strings", 'write a name such as "gpu"'),
        ("teams[0].guarantee.gpu", "two", "must be a number, not a string", "write a non-negative number such as 1 or 0.5"),
        ("teams[0].guarantee.cpu", -1, "is a negative amount", "use 0 or more"),
        ("teams[0].guarantee.tpu", 1, "names resource 'tpu', which capacity does not name",
         "use a resource of capacity (gpu, ok) or add 'tpu' to capacity"),
        ("teams[0].guarantee.npu", 2, "names resource 'npu', which capacity does not name",
         "use a resource of capacity (gpu, ok) or add 'npu' to capacity"),
    ]


def test_an_empty_capacity_names_no_resource():
    s = state({}, [team("a", guarantee={"gpu": 1})], [])
    assert problems(s) == [
        ("teams[0].guarantee.gpu", 1, "names resource 'gpu', which capacity does not name",
         "use a resource of capacity (none) or add 'gpu' to capacity"),
    ]


def test_problems_of_later_jobs_are_reported_after_a_job_that_is_no_object():
    s = valid_state()
    s["jobs"] = ["j0", {**run("j1", "a", 1), "state": "queued"}]
    assert problems(s) == [
        ("jobs[0]", "j0", "must be a job object, not a string",
         'write {"id": "j1", "team": "alpha", "state": "running", "demand": {"gpu": 1}, "since": 0}'),
        ("jobs[1].state", "queued", "is not a job state", "use running (Batch STARTING or RUNNING) or pending (RUNNABLE)"),
    ]


def test_a_duplicate_of_a_job_given_as_another_mapping_names_the_first():
    # The first job is a read-only mapping (the full checks, not the quick path for dicts).
    s = valid_state()
    s["jobs"][0] = types.MappingProxyType(s["jobs"][0])
    s["jobs"][1]["id"] = "j1"
    assert problems(s) == [
        ("jobs[1].id", "j1", "is a duplicate job id (also jobs[0].id)", "list every job once, with a unique id"),
    ]


def test_a_state_that_is_no_object():
    assert problems([valid_state()]) == [
        ("state", "a list", "must be a JSON object", "pass an object with now, capacity, teams and jobs"),
    ]


def test_a_negative_reclaim_after_seconds():
    assert problems(_with(["settings"], {"reclaim_after_seconds": -5})) == [
        ("settings.reclaim_after_seconds", -5, "must not be below 0", "use a number of seconds, 0 or more"),
    ]


def test_a_job_given_as_another_mapping_keeps_every_field():
    # Read-only mappings take the full checks (not the quick path for dicts).
    s = valid_state()
    s["jobs"] = [
        types.MappingProxyType({"id": "x", "team": "a", "state": "running", "demand": {"gpu": 1},
                                "priority": 2.0, "since": 7, "terminating": True}),
        types.MappingProxyType({"id": "y", "team": "b", "state": "pending", "demand": {"gpu": 0.5}, "since": 9}),
    ]
    assert parse_state(s).jobs == (
        JobSpec("x", "a", "running", {"gpu": 1}, 2, 7, True),
        JobSpec("y", "b", "pending", {"gpu": 0.5}, 0, 9, False),
    )


# A job given as a plain dict takes the planner's fast path; any other mapping takes the
# full checks. Both must accept and refuse exactly the same jobs (the fast path once took
# a `since` or a demand beyond 2**53 that the full checks refuse).
OUT_OF_RANGE = [
    ("since beyond 2**53", "since", 2**53 + 1, "jobs[1].since", "is too large (at most 9,007,199,254,740,992)"),
    ("since below -2**53", "since", -(2**53) - 1, "jobs[1].since", "is too large (at most 9,007,199,254,740,992)"),
    ("since a huge float", "since", 1e300, "jobs[1].since", "is too large (at most 9,007,199,254,740,992)"),
    ("since infinite", "since", float("inf"), "jobs[1].since", "must be a finite number, not infinity"),
    ("since NaN", "since", float("nan"), "jobs[1].since", "must be a number, not NaN"),
    ("demand beyond 2**53", "demand", {"gpu": 2**60}, "jobs[1].demand.gpu", "is too large (at most 9,007,199,254,740,992)"),
    ("demand infinite", "demand", {"gpu": float("inf")}, "jobs[1].demand.gpu", "must be a finite number, not infinity"),
    ("demand NaN", "demand", {"gpu": float("nan")}, "jobs[1].demand.gpu", "must be a number, not NaN"),
]


@pytest.mark.parametrize("as_mapping", [False, True], ids=["dict", "read-only mapping"])
@pytest.mark.parametrize(("case", "key", "value", "field", "message"), OUT_OF_RANGE, ids=[c[0] for c in OUT_OF_RANGE])
def test_fast_and_full_checks_refuse_the_same_numbers(case, key, value, field, message, as_mapping):
    s = valid_state()
    job = {**s["jobs"][1], key: value}
    s["jobs"][1] = types.MappingProxyType(job) if as_mapping else job
    [(got_field, _, got_message, _)] = problems(s)
    assert got_field == field
    assert got_message == message  # the validation toolkit's number_problem, as everywhere else


@pytest.mark.parametrize("as_mapping", [False, True], ids=["dict", "read-only mapping"])
def test_the_largest_safe_numbers_are_accepted_on_both_paths(as_mapping):
    s = valid_state()
    job = {**s["jobs"][1], "since": -(2**53), "demand": {"gpu": 0}}
    s["jobs"][1] = types.MappingProxyType(job) if as_mapping else job
    assert parse_state(s).jobs[1].since == -(2**53)
