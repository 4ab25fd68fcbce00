"""``Amount`` built in Python: what it takes from the YAML's shorthand, and every refusal.

The YAML path validates an amount before it builds one (core/config.py ``_amount``);
the Python API (``Amount(...)`` passed to TeamConfig or a construct) relies on
``Amount.__post_init__`` alone. Mutation testing (issue 13) found its rules unchecked by
the config tests; each row here names the field, value, message and fix.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.config import Amount
from cdk_gpu_share.core.errors import ConfigError

MIG_FIX = 'pass mig={"mig-3g.20gb": 4}'
MIG_MSG = "must map MIG profiles to counts"


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"instances": 2.0}, Amount(instances=2)),
        ({"accelerators": 3.0, "vcpu": 2.5, "memory_gib": 10_000_000}, Amount(accelerators=3, vcpu=2.5, memory_gib=10_000_000)),
        ({"instances": 0, "accelerators": 0, "vcpu": 0, "memory_gib": 0}, Amount(instances=0, accelerators=0, vcpu=0, memory_gib=0)),
        # a mapping is sorted by profile name (not by count, not as given)
        ({"mig": {"mig-3g.40gb": 1, "mig-1g.10gb": 2}}, Amount(mig=(("mig-1g.10gb", 2), ("mig-3g.40gb", 1)))),
        ({"mig": [("mig-3g.40gb", 2.0)]}, Amount(mig=(("mig-3g.40gb", 2),))),
        ({"mig": [["mig-1g.10gb", 0]]}, Amount(mig=(("mig-1g.10gb", 0),))),
    ],
)
def test_an_amount_takes_whole_floats_and_a_mig_mapping(kwargs, expected):
    amount = Amount(**kwargs)
    assert amount == expected
    for name in ("instances", "accelerators"):
        value = getattr(amount, name)
        assert value is None or type(value) is int, (name, value)  # 2.0 is stored as 2
    assert all(type(count) is int for _, count in amount.mig)
    assert type(amount.mig) is tuple


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"instances": -1}, [("Amount.instances", -1, "must be at least 0", "pass instances=N, a whole number >= 0")]),
        ({"accelerators": -2},
         [("Amount.accelerators", -2, "must be at least 0", "pass accelerators=N, a whole number >= 0")]),
        ({"instances": "x"},
         [("Amount.instances", "x", "must be a whole number, not a string", "pass instances=N, a whole number >= 0")]),
        ({"accelerators": 1.5},
         [("Amount.accelerators", 1.5, "must be a whole number", "pass accelerators=N, a whole number >= 0")]),
        ({"vcpu": -1}, [("Amount.vcpu", -1, "must be at least 0", "pass vcpu=N, a number >= 0")]),
        ({"memory_gib": -0.5}, [("Amount.memory_gib", -0.5, "must be at least 0", "pass memory_gib=N, a number >= 0")]),
        ({"memory_gib": 10_000_001},
         [("Amount.memory_gib", 10_000_001, "must be at most 10,000,000", "pass memory_gib=N, a number >= 0")]),
        ({"vcpu": "x"}, [("Amount.vcpu", "x", "must be a number, not a string", "pass vcpu=N, a number >= 0")]),
        ({"mig": 5}, [("Amount.mig", 5, MIG_MSG, MIG_FIX)]),
        ({"mig": "mig-1g.10gb"}, [("Amount.mig", "mig-1g.10gb", MIG_MSG, MIG_FIX)]),
        ({"mig": [("mig-1g.10gb", 1, 2)]}, [("Amount.mig", [("mig-1g.10gb", 1, 2)], MIG_MSG, MIG_FIX)]),
        # a two-character string is not a (profile, count) pair
        ({"mig": ["ab"]}, [("Amount.mig", ["ab"], MIG_MSG, MIG_FIX)]),
        ({"mig": {"mig-1g.10gb": -1}},
         [("Amount.mig.mig-1g.10gb", -1, "must be at least 0", "pass a whole number of partitions")]),
        # profile names of mixed types still sort (by their text), and each bad one is named
        ({"mig": {"mig-1g.10gb": 1, 3: 1}},
         [("Amount.mig[3]", 3, "is not a MIG profile name", 'pass a name such as "mig-3g.20gb"')]),
        ({"instances": -1, "vcpu": -1, "mig": 5},
         [("Amount.instances", -1, "must be at least 0", "pass instances=N, a whole number >= 0"),
          ("Amount.vcpu", -1, "must be at least 0", "pass vcpu=N, a number >= 0"),
          ("Amount.mig", 5, MIG_MSG, MIG_FIX)]),
    ],
)
def test_a_bad_amount_names_field_value_and_fix(kwargs, expected):
    with pytest.raises(ConfigError) as info:
        Amount(**kwargs)
    assert [(p.field, p.value, p.message, p.fix) for p in info.value.problems] == expected
