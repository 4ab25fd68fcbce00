"""TeamConfig built in Python: the YAML's shorthand accepted, anything else refused.

``TeamConfig.__post_init__`` (and ``_python_amounts`` for its guarantee and borrow
limit) is all the validation the Python API gets before a construct uses the team.
Mutation testing (issue 13) found it unchecked by the config tests; every row names the
field, the value, the message and the fix.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.config import Amount, Sharing, TeamConfig
from cdk_gpu_share.core.errors import ConfigError

G = {"ml.g5.xlarge": 1}
AMOUNTS_FIX = 'pass {"ml.g5.xlarge": 1} or {"ml.p5.48xlarge": Amount(accelerators=4)}'
SHARING_FIX = 'pass Sharing.LEND or one of "reserve", "lend", "lend_and_borrow"'
T = "TeamConfig('t')"


def test_the_shorthand_of_the_yaml_is_accepted():
    team = TeamConfig(
        name="t",
        guarantee={"ml.g5.xlarge": 2, "ml.p5.48xlarge": {"accelerators": 4}, "ml.p4d.24xlarge": Amount(vcpu=2)},
        sharing="lend",
        borrow_limit={"ml.g5.xlarge": 1.0},
    )
    assert team.guarantee == {
        "ml.g5.xlarge": Amount(instances=2),
        "ml.p5.48xlarge": Amount(accelerators=4),
        "ml.p4d.24xlarge": Amount(vcpu=2),
    }
    assert team.borrow_limit == {"ml.g5.xlarge": Amount(instances=1)}
    assert type(team.borrow_limit["ml.g5.xlarge"].instances) is int
    assert team.sharing is Sharing.LEND
    defaults = TeamConfig(name="t", guarantee=G, borrow_limit=None, in_team_preemption=False, borrow_limit_percent=-1,
                          fair_share_weight=0, max_priority=0)
    assert (defaults.borrow_limit, defaults.sharing, defaults.in_team_preemption) == ({}, Sharing.LEND_AND_BORROW, False)
    assert (defaults.borrow_limit_percent, defaults.fair_share_weight, defaults.max_priority) == (-1, 0, 0)
    top = TeamConfig(name="t", guarantee=G, borrow_limit_percent=2**31 - 1, fair_share_weight=100, max_priority=9999)
    assert (top.borrow_limit_percent, top.fair_share_weight, top.max_priority) == (2**31 - 1, 100, 9999)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"name": ""}, [("TeamConfig('').name", "", "must be a non-empty string", 'pass name="team-a"')]),
        ({"name": 5}, [("TeamConfig.name", 5, "must be a non-empty string", 'pass name="team-a"')]),
        ({"guarantee": [("ml.g5.xlarge", 1)]},
         [(f"{T}.guarantee", [("ml.g5.xlarge", 1)], "must be a dict of instance type to amount, not a list", AMOUNTS_FIX)]),
        ({"borrow_limit": 5},
         [(f"{T}.borrow_limit", 5, "must be a dict of instance type to amount, not a number", AMOUNTS_FIX)]),
        ({"guarantee": {1: 1, "ml.g5.xlarge": 1}},
         [(f"{T}.guarantee[1]", 1, "is not an instance type name", 'use a string such as "ml.g5.xlarge"')]),
        ({"guarantee": {"ml.g5.xlarge": {"gpus": 1, "cpus": 2}}},
         [(f"{T}.guarantee['ml.g5.xlarge']", {"gpus": 1, "cpus": 2}, "names cpus, gpus, not a field of Amount",
           "use accelerators, instances, memory_gib, mig, vcpu")]),
        # the Amount's own problem, under the team's field path
        ({"guarantee": {"ml.g5.xlarge": {"instances": -1}}},
         [(f"{T}.guarantee['ml.g5.xlarge'].instances", -1, "must be at least 0", "pass instances=N, a whole number >= 0")]),
        ({"borrow_limit": {"ml.g5.xlarge": {"mig": 5}}},
         [(f"{T}.borrow_limit['ml.g5.xlarge'].mig", 5, "must map MIG profiles to counts", 'pass mig={"mig-3g.20gb": 4}')]),
        ({"guarantee": {"ml.g5.xlarge": -1}},
         [(f"{T}.guarantee['ml.g5.xlarge']", -1, "must be at least 0", "pass a whole number of instances, or an Amount")]),
        ({"guarantee": {"ml.g5.xlarge": 1.5}},
         [(f"{T}.guarantee['ml.g5.xlarge']", 1.5, "must be a whole number", "pass a whole number of instances, or an Amount")]),
        ({"guarantee": {"ml.g5.xlarge": True}},
         [(f"{T}.guarantee['ml.g5.xlarge']", True, "must be an Amount or a whole number of instances, not a boolean",
           "pass 2 or Amount(instances=2)")]),
        ({"guarantee": {"ml.g5.xlarge": "2"}},
         [(f"{T}.guarantee['ml.g5.xlarge']", "2", "must be an Amount or a whole number of instances, not a string",
           "pass 2 or Amount(instances=2)")]),
        ({"sharing": "borrow"}, [(f"{T}.sharing", "borrow", "is not a sharing strategy", SHARING_FIX)]),
        ({"sharing": None}, [(f"{T}.sharing", None, "is not a sharing strategy", SHARING_FIX)]),
        ({"sharing": ["lend"]}, [(f"{T}.sharing", ["lend"], "is not a sharing strategy", SHARING_FIX)]),
        ({"in_team_preemption": "yes"},
         [(f"{T}.in_team_preemption", "yes", "must be True, False or None", "pass a bool, or None for the service's default")]),
        ({"in_team_preemption": 1},
         [(f"{T}.in_team_preemption", 1, "must be True, False or None", "pass a bool, or None for the service's default")]),
        ({"borrow_limit_percent": -2}, [(f"{T}.borrow_limit_percent", -2, "must be at least -1", "use a value >= -1")]),
        ({"borrow_limit_percent": 2**31},
         [(f"{T}.borrow_limit_percent", 2**31, "must be at most 2,147,483,647", "use a value <= 2147483647")]),
        ({"fair_share_weight": -1}, [(f"{T}.fair_share_weight", -1, "must be at least 0", "use a value >= 0")]),
        ({"fair_share_weight": 101}, [(f"{T}.fair_share_weight", 101, "must be at most 100", "use a value <= 100")]),
        ({"max_priority": -1}, [(f"{T}.max_priority", -1, "must be at least 0", "use a value >= 0")]),
        ({"max_priority": 10000}, [(f"{T}.max_priority", 10000, "must be at most 9,999", "use a value <= 9999")]),
        ({"description": 5}, [(f"{T}.description", 5, "must be a string", 'pass description="..."')]),
        ({"sharing": "x", "description": None, "fair_share_weight": 101},
         [(f"{T}.sharing", "x", "is not a sharing strategy", SHARING_FIX),
          (f"{T}.fair_share_weight", 101, "must be at most 100", "use a value <= 100"),
          (f"{T}.description", None, "must be a string", 'pass description="..."')]),
    ],
)
def test_a_bad_team_argument_names_field_value_and_fix(kwargs, expected):
    with pytest.raises(ConfigError) as info:
        TeamConfig(**{"name": "t", "guarantee": G, **kwargs})
    assert [(p.field, p.value, p.message, p.fix) for p in info.value.problems] == expected
    assert str(info.value).startswith("invalid argument")
