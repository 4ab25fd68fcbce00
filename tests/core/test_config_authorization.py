"""A team's authorization fields in the config: max_priority, assumed_by, principal_tag.

``core/configuration/parse.py``'s ``_team_authorization`` decides who may act as a team and how far;
the IAM suite under tests/auth proves the policies built from it. These tables
pin the config side through ``parse_config``: what is accepted (and the value the team
ends up with), and every refusal with its field path, value, message and fix.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.errors import ConfigError

ROLE = "arn:aws:iam::111122223333:role/team-a-ci"
USER = "arn:aws:iam::111122223333:user/alice"


def batch(**team) -> dict:
    """A valid Batch config whose second team (team-a) has ``team``'s keys set.

    The first team is there so that a wrong index or a lost team name in a field path
    shows: team-a's fields read ``teams[1] (team-a)``.
    """
    return {
        "teams": [
            {"name": "other", "guarantee": {"ml.g5.xlarge": 1}},
            {"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}, **team},
        ],
        "batch_quota": {"capacity": {"ml.g5.xlarge": 3}},
    }


MAX_PRIORITY_FIX = "use a whole number from 0 to 9999 (default 100)"
ASSUMED_BY_MSG = "must be a non-empty list of IAM role or user ARNs"
ASSUMED_BY_FIX = (
    "write e.g. [arn:aws:iam::111122223333:role/team-a-ci], or remove it to trust principals tagged"
    " gpu-share:team=<team>"
)
ARN_MSG = "is not an IAM role or user ARN"
ARN_FIX = "write arn:aws:iam::ACCOUNT:role/NAME (no wildcards: trust policies refuse them)"
TAG_MSG = "is not a tag key IAM accepts"
TAG_FIX = "use up to 128 letters, digits, spaces and _.:/=+-@, not starting with aws: (default gpu-share:team)"
P = "teams[1] (team-a)"


@pytest.mark.parametrize(
    "team, expected",
    [
        # (max_priority, assumed_by, principal_tag) of team-a
        ({}, (100, (), "gpu-share:team")),
        ({"max_priority": None, "assumed_by": None, "principal_tag": None}, (100, (), "gpu-share:team")),
        ({"max_priority": 0}, (0, (), "gpu-share:team")),
        ({"max_priority": 250}, (250, (), "gpu-share:team")),
        ({"max_priority": 9999}, (9999, (), "gpu-share:team")),
        ({"max_priority": 7.0}, (7, (), "gpu-share:team")),
        # one ARN may be written without a list
        ({"assumed_by": ROLE}, (100, (ROLE,), "gpu-share:team")),
        ({"assumed_by": [ROLE, USER]}, (100, (ROLE, USER), "gpu-share:team")),
        # a repeated ARN is kept once, in first-seen order
        ({"assumed_by": [USER, ROLE, USER]}, (100, (USER, ROLE), "gpu-share:team")),
        ({"assumed_by": ["arn:aws-cn:iam::111122223333:role/path/ci"]},
         (100, ("arn:aws-cn:iam::111122223333:role/path/ci",), "gpu-share:team")),
        ({"principal_tag": "ml-team"}, (100, (), "ml-team")),
        ({"principal_tag": "a b_.:/=+@-9"}, (100, (), "a b_.:/=+@-9")),
        ({"principal_tag": "t" * 128}, (100, (), "t" * 128)),
        # only the aws: prefix is reserved, not every key starting with aws
        ({"principal_tag": "aws-team"}, (100, (), "aws-team")),
        ({"max_priority": 500, "assumed_by": [ROLE]}, (500, (ROLE,), "gpu-share:team")),
    ],
)
def test_accepted_authorization_fields_reach_the_team(team, expected):
    config = parse_config(batch(**team))
    t = config.team("team-a")
    assert (t.max_priority, t.assumed_by, t.principal_tag) == expected
    other = config.team("other")
    assert (other.max_priority, other.assumed_by, other.principal_tag) == (100, (), "gpu-share:team")


@pytest.mark.parametrize(
    "team, expected",
    [
        pytest.param({"max_priority": -1}, [(f"{P}.max_priority", -1, "must be at least 0", MAX_PRIORITY_FIX)],
                     id="max-priority-negative"),
        pytest.param({"max_priority": 10000},
                     [(f"{P}.max_priority", 10000, "must be at most 9,999", MAX_PRIORITY_FIX)],
                     id="max-priority-above-batch"),
        pytest.param({"max_priority": "high"},
                     [(f"{P}.max_priority", "high", "must be a whole number, not a string", MAX_PRIORITY_FIX)],
                     id="max-priority-string"),
        pytest.param({"max_priority": 1.5}, [(f"{P}.max_priority", 1.5, "must be a whole number", MAX_PRIORITY_FIX)],
                     id="max-priority-fraction"),
        pytest.param({"assumed_by": []}, [(f"{P}.assumed_by", [], ASSUMED_BY_MSG, ASSUMED_BY_FIX)],
                     id="assumed-by-empty-list"),
        pytest.param({"assumed_by": {"role": ROLE}},
                     [(f"{P}.assumed_by", {"role": ROLE}, ASSUMED_BY_MSG, ASSUMED_BY_FIX)],
                     id="assumed-by-mapping"),
        pytest.param({"assumed_by": 5}, [(f"{P}.assumed_by", 5, ASSUMED_BY_MSG, ASSUMED_BY_FIX)],
                     id="assumed-by-number"),
        pytest.param({"assumed_by": "arn:aws:iam::1111:role/x"},
                     [(f"{P}.assumed_by[0]", "arn:aws:iam::1111:role/x", ARN_MSG, ARN_FIX)],
                     id="assumed-by-string-short-account"),
        pytest.param({"assumed_by": ["arn:aws:iam::111122223333:role/*"]},
                     [(f"{P}.assumed_by[0]", "arn:aws:iam::111122223333:role/*", ARN_MSG, ARN_FIX)],
                     id="assumed-by-wildcard"),
        pytest.param({"assumed_by": [ROLE, 5, "arn:aws:iam::111122223333:group/g"]},
                     [(f"{P}.assumed_by[1]", 5, ARN_MSG, ARN_FIX),
                      (f"{P}.assumed_by[2]", "arn:aws:iam::111122223333:group/g", ARN_MSG, ARN_FIX)],
                     id="assumed-by-each-bad-item"),
        pytest.param({"principal_tag": "aws:team"}, [(f"{P}.principal_tag", "aws:team", TAG_MSG, TAG_FIX)],
                     id="principal-tag-aws-prefix"),
        pytest.param({"principal_tag": "AWS:team"}, [(f"{P}.principal_tag", "AWS:team", TAG_MSG, TAG_FIX)],
                     id="principal-tag-aws-prefix-any-case"),
        pytest.param({"principal_tag": ""}, [(f"{P}.principal_tag", "", TAG_MSG, TAG_FIX)],
                     id="principal-tag-empty"),
        pytest.param({"principal_tag": 5}, [(f"{P}.principal_tag", 5, TAG_MSG, TAG_FIX)],
                     id="principal-tag-number"),
        pytest.param({"principal_tag": "t" * 129}, [(f"{P}.principal_tag", "t" * 129, TAG_MSG, TAG_FIX)],
                     id="principal-tag-too-long"),
        pytest.param({"principal_tag": "team#a"}, [(f"{P}.principal_tag", "team#a", TAG_MSG, TAG_FIX)],
                     id="principal-tag-bad-character"),
        pytest.param({"principal_tag": "team", "assumed_by": [ROLE]},
                     [(f"{P}.principal_tag", "team", "is set together with assumed_by, which replaces it",
                       "keep one: assumed_by (named principals) or principal_tag (tagged principals)")],
                     id="principal-tag-with-assumed-by"),
        # an invalid tag is reported as invalid, not also as conflicting
        pytest.param({"principal_tag": "aws:team", "assumed_by": [ROLE]},
                     [(f"{P}.principal_tag", "aws:team", TAG_MSG, TAG_FIX)],
                     id="bad-principal-tag-with-assumed-by"),
        # both given: the conflict is reported even when assumed_by itself is bad
        pytest.param({"max_priority": -5, "assumed_by": [], "principal_tag": "team"},
                     [(f"{P}.max_priority", -5, "must be at least 0", MAX_PRIORITY_FIX),
                      (f"{P}.assumed_by", [], ASSUMED_BY_MSG, ASSUMED_BY_FIX),
                      (f"{P}.principal_tag", "team", "is set together with assumed_by, which replaces it",
                       "keep one: assumed_by (named principals) or principal_tag (tagged principals)")],
                     id="every-field-at-once"),
    ],
)
def test_a_bad_authorization_field_names_field_value_and_fix(team, expected):
    with pytest.raises(ConfigError) as info:
        parse_config(batch(**team))
    assert [(p.field, p.value, p.message, p.fix) for p in info.value.problems] == expected
