"""Every config problem, table-driven: the field path, the value, the message and the fix.

One row per rule of core/configuration/parse.py, each a small edit of a valid config, written out in
full so a changed word is a failing test. Rows marked ``None`` check only where and what: their wording
belongs to the shared validation toolkit and may improve.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.errors import ConfigError

#: The one rule of team names, on every backend.
LABEL = ('must be lower-case letters, digits and hyphens, starting and ending with a letter or digit, at most '
         '63 characters (a DNS-1123 label: every backend names resources after the team, Kubernetes namespaces included)')

ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"


def B() -> dict:
    """A valid Batch quota config."""
    return {"teams": [{"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}}], "batch_quota": {"capacity": {"ml.g5.xlarge": 3}}}


def H() -> dict:
    """A valid HyperPod config."""
    return {
        "teams": [{"name": "research", "guarantee": {"ml.p5.48xlarge": 1}}],
        "hyperpod": {"cluster_arn": ARN, "capacity": {"ml.p5.48xlarge": 2}},
    }


def F() -> dict:
    """A valid classic fair-share config."""
    return {"teams": [{"name": "team-a", "guarantee": {"g5.xlarge": 1}}], "fairshare": {"capacity": {"g5.xlarge": 2}}}


def t(base, **team) -> dict:
    """``base`` with the first team's keys set."""
    raw = base()
    raw["teams"][0].update(team)
    return raw


def sec(base, key: str, **section) -> dict:
    """``base`` with keys of section ``key`` set."""
    raw = base()
    raw[key].update(section)
    return raw


def g(base, instance_type: str, amount) -> dict:
    """``base`` with the first team guaranteeing ``amount`` of ``instance_type`` only."""
    raw = base()
    raw["teams"][0]["guarantee"] = {instance_type: amount}
    return raw


def top(base, **keys) -> dict:
    raw = base()
    raw.update(keys)
    return raw


def rm(base, *path) -> dict:
    """``base`` without the key at ``path``."""
    raw = base()
    node = raw
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return raw


CASES = [
    # top level
    pytest.param(
        ["teams"],
        [('config', ['teams'], 'must be a mapping, not a list', 'write key: value pairs')],
        id='config-not-mapping',
    ),
    pytest.param(
        None,
        [('config', None, 'is required', 'add it (`gpu-share init` writes a complete example)')],
        id='config-none',
    ),
    pytest.param(
        top(B, team=[1]),
        [('team', [1], 'unknown key', "did you mean 'teams'?")],
        id='unknown-top-key-close',
    ),
    pytest.param(
        top(B, zzz=1),
        [('zzz', 1, 'unknown key', 'allowed keys: alerts, batch_quota, fairshare, groups, history, hyperpod, inference, kueue, platform, security, teams, windows')],
        id='unknown-top-key-far',
    ),
    pytest.param(
        top(B, platform="x"),
        [('platform', 'x', 'must be a mapping, not a string', 'write key: value pairs')],
        id='platform-not-mapping',
    ),
    pytest.param(
        top(B, platform={"nam": "x"}),
        [('platform.nam', 'x', 'unknown key', "did you mean 'name'?")],
        id='platform-unknown-key',
    ),
    pytest.param(
        top(B, platform={"name": "1abc"}),
        [('platform.name',
          '1abc',
          'does not match ^[A-Za-z][A-Za-z0-9-]{0,39}$',
          'start with a letter; use up to 40 letters, digits and hyphens')],
        id='platform-name-pattern',
    ),
    pytest.param(
        top(B, platform={"name": ""}),
        [('platform.name',
          '',
          'must be a non-empty string',
          'start with a letter; use up to 40 letters, digits and hyphens')],
        id='platform-name-empty',
    ),
    pytest.param(
        rm(B, "teams"),
        [('teams', None, 'must be a non-empty list', 'list at least one team with a name and a guarantee')],
        id='teams-missing',
    ),
    pytest.param(
        top(B, teams=[]),
        [('teams', [], 'must be a non-empty list', 'list at least one team with a name and a guarantee')],
        id='teams-empty',
    ),
    pytest.param(
        top(B, teams={"name": "a"}),
        [('teams', {'name': 'a'}, 'must be a non-empty list', 'list at least one team with a name and a guarantee')],
        id='teams-not-list',
    ),
    pytest.param(
        top(B, teams=["team-a"]),
        [('teams[0]', 'team-a', 'must be a mapping, not a string', 'write key: value pairs')],
        id='team-not-mapping',
    ),
    pytest.param(
        t(B, sharin="lend"),
        [('teams[0].sharin', 'lend', 'unknown key', "did you mean 'sharing'?")],
        id='team-unknown-key',
    ),
    pytest.param(
        rm(B, "teams", 0, "name"),
        [('teams[0].name', None, 'must be a non-empty string', 'give the team a name such as team-a')],
        id='team-no-name',
    ),
    pytest.param(
        t(B, name=5),
        [('teams[0].name', 5, 'must be a non-empty string', 'give the team a name such as team-a')],
        id='team-name-int',
    ),
    pytest.param(
        rm(B, "teams", 0, "guarantee"),
        [('teams[0] (team-a).guarantee', None, 'is required', 'add it (`gpu-share init` writes a complete example)')],
        id='guarantee-missing',
    ),
    pytest.param(
        t(B, guarantee={}),
        [('teams[0] (team-a).guarantee',
          {},
          'is empty',
          'guarantee at least one instance type, such as ml.g5.xlarge: 1')],
        id='guarantee-empty',
    ),
    pytest.param(
        t(B, guarantee=[1]),
        [('teams[0] (team-a).guarantee', [1], 'must be a mapping, not a list', 'write key: value pairs')],
        id='guarantee-not-mapping',
    ),
    pytest.param(
        g(B, "ml.p5.48xlarge", 1),
        [('teams[0] (team-a).guarantee.ml.p5.48xlarge',
          'ml.p5.48xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='guarantee-undeclared',
    ),
    pytest.param(
        t(B, sharing="share"),
        [('teams[0] (team-a).sharing', 'share', 'is not a sharing strategy', 'use reserve, lend or lend_and_borrow')],
        id='sharing-bad',
    ),
    pytest.param(
        t(B, sharing=None),
        [('teams[0] (team-a).sharing', None, 'is not a sharing strategy', 'use reserve, lend or lend_and_borrow')],
        id='sharing-none',
    ),
    pytest.param(
        t(B, sharing="reserve", borrow_limit_percent=10),
        [('teams[0] (team-a).borrow_limit_percent',
          10,
          'is set but sharing is reserve, which never borrows',
          'remove borrow_limit_percent, or set sharing: lend_and_borrow')],
        id='borrow-pct-reserve',
    ),
    pytest.param(
        t(B, sharing="lend", borrow_limit_percent=0),
        [('teams[0] (team-a).borrow_limit_percent',
          0,
          'is set but sharing is lend, which never borrows',
          'remove borrow_limit_percent, or set sharing: lend_and_borrow')],
        id='borrow-pct-lend',
    ),
    pytest.param(
        t(B, borrow_limit_percent=-2),
        [('teams[0] (team-a).borrow_limit_percent',
          -2,
          'must be at least -1',
          'use -1 for unlimited, or a percentage >= 0')],
        id='borrow-pct-below',
    ),
    pytest.param(
        t(B, borrow_limit_percent="10"),
        [('teams[0] (team-a).borrow_limit_percent',
          '10',
          'must be a whole number, not a string',
          'use -1 for unlimited, or a percentage >= 0')],
        id='borrow-pct-str',
    ),
    pytest.param(
        t(H, sharing="lend", borrow_limit={"ml.p5.48xlarge": 1}),
        [('teams[0] (research).borrow_limit',
          {'ml.p5.48xlarge': 1},
          'is set but sharing is lend, which never borrows',
          'remove borrow_limit, or set sharing: lend_and_borrow')],
        id='borrow-limit-lend',
    ),
    pytest.param(
        t(H, borrow_limit=[1]),
        [('teams[0] (research).borrow_limit', [1], 'must be a mapping, not a list', 'write key: value pairs')],
        id='borrow-limit-not-mapping',
    ),
    pytest.param(
        t(H, borrow_limit={"ml.p5.48xlarge": "1"}),
        [('teams[0] (research).borrow_limit.ml.p5.48xlarge', '1', None, None)],
        id='borrow-limit-bad-amount',
    ),
    pytest.param(
        t(B, in_team_preemption="yes"),
        [('teams[0] (team-a).in_team_preemption', 'yes', 'must be true or false', 'write true or false')],
        id='preempt-not-bool',
    ),
    pytest.param(
        t(H, fair_share_weight=101),
        [('teams[0] (research).fair_share_weight',
          101,
          'must be at most 100',
          'HyperPod fair-share weights run from 0 to 100')],
        id='weight-101',
    ),
    pytest.param(
        t(H, fair_share_weight=-1),
        [('teams[0] (research).fair_share_weight',
          -1,
          'must be at least 0',
          'HyperPod fair-share weights run from 0 to 100')],
        id='weight-neg',
    ),
    pytest.param(
        t(H, fair_share_weight="5"),
        [('teams[0] (research).fair_share_weight',
          '5',
          'must be a whole number, not a string',
          'HyperPod fair-share weights run from 0 to 100')],
        id='weight-str',
    ),
    pytest.param(
        t(B, checkpoint_seconds=-1),
        [('teams[0] (team-a).checkpoint_seconds', -1, 'must be at least 0',
          "give the seconds between two checkpoints of the team's jobs, 0 (never) to 604800 (7 days)")],
        id='checkpoint-neg',
    ),
    pytest.param(
        t(B, checkpoint_seconds=604801),
        [('teams[0] (team-a).checkpoint_seconds', 604801, 'must be at most 604,800',
          "give the seconds between two checkpoints of the team's jobs, 0 (never) to 604800 (7 days)")],
        id='checkpoint-over-a-week',
    ),
    pytest.param(
        t(B, checkpoint_seconds="10m"),
        [('teams[0] (team-a).checkpoint_seconds', '10m', 'must be a whole number, not a string',
          "give the seconds between two checkpoints of the team's jobs, 0 (never) to 604800 (7 days)")],
        id='checkpoint-str',
    ),
    pytest.param(
        t(B, preemption_retries=1001),
        [('teams[0] (team-a).preemption_retries', 1001, 'must be at most 1,000',
          'give how many times a preempted job is queued again before it fails, 0 to 1000; leave it out to queue it'
          ' again every time')],
        id='preemption-retries-over',
    ),
    pytest.param(
        t(B, preemption_retries=True),
        [('teams[0] (team-a).preemption_retries', True, 'must be a whole number, not a boolean',
          'give how many times a preempted job is queued again before it fails, 0 to 1000; leave it out to queue it'
          ' again every time')],
        id='preemption-retries-bool',
    ),
    pytest.param(
        t(H, description=5),
        [('teams[0] (research).description', 5, 'must be a string', 'quote it')],
        id='description-int',
    ),
    pytest.param(
        t(H, description="x" * 1025),
        [("teams[0] (research).description", "x" * 1025, 'must be at most 1024 characters on one line, without control characters', 'shorten it, and write it on one line (no `|` block)')],
        id='description-long',
    ),
    pytest.param(
        t(H, description="a\tb"),
        [('teams[0] (research).description',
          'a\tb',
          'must be at most 1024 characters on one line, without control characters',
          'shorten it, and write it on one line (no `|` block)')],
        id='description-tab',
    ),
    # amounts
    pytest.param(
        g(B, "ml.g5.xlarge", "1"),
        [('teams[0] (team-a).guarantee.ml.g5.xlarge', '1', None, None)],
        id='amount-str',
    ),
    pytest.param(
        g(B, "ml.g5.xlarge", [1]),
        [('teams[0] (team-a).guarantee.ml.g5.xlarge', [1], None, None)],
        id='amount-list',
    ),
    pytest.param(
        g(B, "ml.g5.xlarge", True),
        [('teams[0] (team-a).guarantee.ml.g5.xlarge', True, None, None)],
        id='amount-bool',
    ),
    pytest.param(
        g(B, "ml.g5.xlarge", -1),
        [('teams[0] (team-a).guarantee.ml.g5.xlarge',
          -1,
          'must be at least 0',
          'write a whole number of instances, such as 1')],
        id='amount-negative',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge',
          {},
          'names no capacity',
          'give instances, accelerators, vcpu, memory_gib or mig')],
        id='amount-empty-mapping',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"gpus": 1}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.gpus',
          1,
          'unknown key',
          'allowed keys: accelerators, instances, memory_gib, mig, vcpu')],
        id='amount-unknown-key',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"instance": 1}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.instance', 1, 'unknown key', "did you mean 'instances'?")],
        id='amount-unknown-key-close',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"instances": -1}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.instances', -1, 'must be at least 0', 'use a value >= 0')],
        id='amount-instances-neg',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"accelerators": -1}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.accelerators', -1, 'must be at least 0', 'use a value >= 0')],
        id='amount-accel-neg',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"mig": 3}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.mig',
          3,
          'must be a mapping, not a number',
          'write key: value pairs')],
        id='amount-mig-not-mapping',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"mig": {"mig-3g.40g": 1}}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.mig.mig-3g.40g',
          'mig-3g.40g',
          'is not a MIG profile that HyperPod accepts',
          "did you mean 'mig-3g.40gb'?")],
        id='amount-mig-unknown-close',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"mig": {"zzz": 1}}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.mig.zzz',
          'zzz',
          'is not a MIG profile that HyperPod accepts',
          'use a profile such as mig-3g.40gb')],
        id='amount-mig-unknown-far',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"mig": {"mig-3g.40gb": -1}}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.mig.mig-3g.40gb',
          -1,
          'must be at least 0',
          'use a value >= 0')],
        id='amount-mig-count-neg',
    ),
    pytest.param(
        g(H, "ml.p5.48xlarge", {"mig": {"mig-3g.20gb": 1}}),
        [('teams[0] (research).guarantee.ml.p5.48xlarge.mig.mig-3g.20gb',
          'mig-3g.20gb',
          'is not a MIG profile of ml.p5.48xlarge (H100-80GB)',
          'run `gpu-share mig layouts --instance-type ml.p5.48xlarge` for the profiles it has')],
        id='amount-mig-other-gpu',
    ),
    pytest.param(
        {"teams": [{"name": "research", "guarantee": {"ml.g5.xlarge": {"mig": {"mig-1g.5gb": 1}}}}], "hyperpod": {"cluster_arn": ARN, "capacity": {"ml.g5.xlarge": 2}}},
        [('teams[0] (research).guarantee.ml.g5.xlarge.mig.mig-1g.5gb',
          'mig-1g.5gb',
          'is not a MIG profile of ml.g5.xlarge (A10G)',
          'run `gpu-share mig layouts --instance-type ml.g5.xlarge` for the profiles it has')],
        id='amount-mig-no-mig-type',
    ),
    # batch section
    pytest.param(
        top(B, batch_quota=[1]),
        [('batch_quota', [1], 'must be a mapping, not a list', 'write key: value pairs'),
         ('config',
          ['batch_quota', 'teams'],
          'declares no backend',
          'add one of batch_quota, hyperpod, fairshare, kueue (`gpu-share init --backend NAME` writes one)'),
         ('teams[0] (team-a).guarantee.ml.g5.xlarge',
          'ml.g5.xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='batch-not-mapping',
    ),
    pytest.param(
        sec(B, "batch_quota", queue="q"),
        [('batch_quota.queue', 'q', 'unknown key', "did you mean 'queue_name'?")],
        id='batch-unknown-key',
    ),
    pytest.param(
        rm(B, "batch_quota", "capacity"),
        [('batch_quota.capacity', None, 'is required', 'add it (`gpu-share init` writes a complete example)'),
         ('teams[0] (team-a).guarantee.ml.g5.xlarge',
          'ml.g5.xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='batch-capacity-missing',
    ),
    pytest.param(
        sec(B, "batch_quota", capacity={}),
        [('batch_quota.capacity', {}, 'declares no instance type', 'list at least one, such as ml.g5.xlarge: 3'),
         ('teams[0] (team-a).guarantee.ml.g5.xlarge',
          'ml.g5.xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='batch-capacity-empty',
    ),
    pytest.param(
        sec(B, "batch_quota", capacity={"g5.xlarge": 3}),
        [('batch_quota.capacity.g5.xlarge', 'g5.xlarge', 'is not a SageMaker instance type', 'write ml.g5.xlarge'),
         ('teams[0] (team-a).guarantee.ml.g5.xlarge',
          'ml.g5.xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='batch-capacity-ec2',
    ),
    pytest.param(
        sec(B, "batch_quota", capacity={"ml.g5.xlarge": 0}),
        [('batch_quota.capacity.ml.g5.xlarge',
          0,
          'must be at least 1',
          'declare at least 1 instance, or remove the type')],
        id='batch-capacity-zero',
    ),
    pytest.param(
        sec(B, "batch_quota", queue_name="a b"),
        [('batch_quota.queue_name',
          'a b',
          'does not match ^[A-Za-z0-9_-]{1,128}$',
          'use up to 128 letters, digits, hyphens and underscores')],
        id='batch-queue-name',
    ),
    pytest.param(
        sec(B, "batch_quota", service_environment_name=""),
        [('batch_quota.service_environment_name',
          '',
          'must be a non-empty string',
          'use up to 128 letters, digits, hyphens and underscores')],
        id='batch-env-name',
    ),
    pytest.param(
        sec(B, "batch_quota", priority=1001),
        [('batch_quota.priority', 1001, 'must be at most 1,000', 'use a value <= 1000')],
        id='batch-priority-1001',
    ),
    pytest.param(
        sec(B, "batch_quota", priority=-1),
        [('batch_quota.priority', -1, 'must be at least 0', 'use a value >= 0')],
        id='batch-priority-neg',
    ),
    pytest.param(
        g(B, "ml.g5.xlarge", {"accelerators": 1}),
        [('teams[0] (team-a).guarantee.ml.g5.xlarge',
          '1 accelerators',
          'Batch quota shares count whole instances',
          'write ml.g5.xlarge: N (a number of instances)')],
        id='batch-guarantee-accel',
    ),
    pytest.param(
        g(B, "ml.g5.xlarge", 0),
        [('teams[0] (team-a).guarantee.ml.g5.xlarge',
          0,
          "a quota share's capacity limit must be at least 1 instance",
          'guarantee at least 1, or remove the instance type')],
        id='batch-guarantee-zero',
    ),
    pytest.param(
        g(B, "ml.g5.xlarge", {"instances": 0}),
        [('teams[0] (team-a).guarantee.ml.g5.xlarge',
          0,
          "a quota share's capacity limit must be at least 1 instance",
          'guarantee at least 1, or remove the instance type')],
        id='batch-guarantee-instances-map-zero',
    ),
    pytest.param(
        t(B, name="team a"),
        [('teams[0] (team a).name',
          'team a',
          LABEL,
          "write 'team-a'")],
        id='team-name-not-a-label',
    ),
    pytest.param(
        t(B, borrow_limit={"ml.g5.xlarge": 1}),
        [('teams[0] (team-a).borrow_limit.ml.g5.xlarge',
          '1 instance',
          'Batch quota shares take only a percentage borrow limit',
          'use borrow_limit_percent for batch_quota instance types')],
        id='batch-borrow-limit',
    ),
    # hyperpod section
    pytest.param(
        top(H, hyperpod="x"),
        [('hyperpod', 'x', 'must be a mapping, not a string', 'write key: value pairs'),
         ('config',
          ['hyperpod', 'teams'],
          'declares no backend',
          'add one of batch_quota, hyperpod, fairshare, kueue (`gpu-share init --backend NAME` writes one)'),
         ('teams[0] (research).guarantee.ml.p5.48xlarge',
          'ml.p5.48xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='hp-not-mapping',
    ),
    pytest.param(
        sec(H, "hyperpod", fair_shar=True),
        [('hyperpod.fair_shar', True, 'unknown key', "did you mean 'fair_share'?")],
        id='hp-unknown-key',
    ),
    pytest.param(
        rm(H, "hyperpod", "cluster_arn"),
        [('hyperpod.cluster_arn',
          None,
          'is not a HyperPod cluster ARN',
          'write arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID with a 12-digit account and a 12-character lower-case '
          'cluster id')],
        id='hp-arn-missing',
    ),
    pytest.param(
        sec(H, "hyperpod", cluster_arn="arn:aws:sagemaker:us-east-1:1:cluster/x"),
        [('hyperpod.cluster_arn',
          'arn:aws:sagemaker:us-east-1:1:cluster/x',
          'is not a HyperPod cluster ARN',
          'write arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID with a 12-digit account and a 12-character lower-case '
          'cluster id')],
        id='hp-arn-bad',
    ),
    pytest.param(
        sec(H, "hyperpod", capacity={"ml.p5.48xlarge": 2, "ml.p5.24xlarge": 1}),
        [('hyperpod.capacity.ml.p5.24xlarge',
          'ml.p5.24xlarge',
          'is not an instance type HyperPod accepts',
          "did you mean 'ml.p5.4xlarge'?")],
        id='hp-capacity-unknown-close',
    ),
    pytest.param(
        sec(H, "hyperpod", capacity={"ml.p5.48xlarge": 2, "ml.zzz": 1}),
        [('hyperpod.capacity.ml.zzz',
          'ml.zzz',
          'is not an instance type HyperPod accepts',
          'use a HyperPod instance type such as ml.p5.48xlarge')],
        id='hp-capacity-unknown-far',
    ),
    pytest.param(
        sec(H, "hyperpod", capacity={"p5.48xlarge": 2}),
        [('hyperpod.capacity.p5.48xlarge', 'p5.48xlarge', 'is not a SageMaker instance type', 'write ml.p5.48xlarge'),
         ('teams[0] (research).guarantee.ml.p5.48xlarge',
          'ml.p5.48xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='hp-capacity-ec2',
    ),
    pytest.param(
        sec(H, "hyperpod", fair_share="yes"),
        [('hyperpod.fair_share', 'yes', 'must be true or false', 'write true or false')],
        id='hp-fair-share-str',
    ),
    pytest.param(
        sec(H, "hyperpod", idle_resource_sharing=1),
        [('hyperpod.idle_resource_sharing', 1, 'must be true or false', 'write true or false')],
        id='hp-idle-str',
    ),
    pytest.param(
        sec(H, "hyperpod", priority_classes=[{"name": f"c{i}", "weight": i} for i in range(11)]),
        [('hyperpod.priority_classes',
          '11 classes',
          'HyperPod allows at most 10 priority classes',
          'merge classes with similar weights')],
        id='hp-classes-11',
    ),
    pytest.param(
        sec(H, "hyperpod", priority_classes=["x"]),
        [('hyperpod.priority_classes[0]', 'x', 'must be a mapping, not a string', 'write key: value pairs')],
        id='hp-class-not-mapping',
    ),
    pytest.param(
        sec(H, "hyperpod", priority_classes=[{"name": "a", "weight": 1, "prio": 1}]),
        [('hyperpod.priority_classes[0].prio', 1, 'unknown key', 'allowed keys: name, weight')],
        id='hp-class-unknown-key',
    ),
    pytest.param(
        sec(H, "hyperpod", priority_classes=[{"name": "A_b", "weight": 1}]),
        [('hyperpod.priority_classes[0].name',
          'A_b',
          'does not match ^[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?$',
          'use lower-case letters, digits and hyphens, starting and ending with a letter or digit')],
        id='hp-class-name',
    ),
    pytest.param(
        sec(H, "hyperpod", priority_classes=[{"name": "a"}]),
        [('hyperpod.priority_classes[0].weight', None, 'must be a whole number, not null', 'write a whole number such as 1')],
        id='hp-class-weight-missing',
    ),
    pytest.param(
        sec(H, "hyperpod", priority_classes=[{"name": "a", "weight": 101}]),
        [('hyperpod.priority_classes[0].weight', 101, 'must be at most 100', 'use a value <= 100')],
        id='hp-class-weight-101',
    ),
    pytest.param(
        sec(H, "hyperpod", priority_classes=[{"name": "a", "weight": 1}, {"name": "a", "weight": 2}]),
        [('hyperpod.priority_classes[1].name', 'a', 'is a duplicate priority class', 'give each class its own name')],
        id='hp-class-dup',
    ),
    pytest.param(
        sec(H, "hyperpod", scheduler_config_name="a_b"),
        [('hyperpod.scheduler_config_name',
          'a_b',
          'does not match ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$',
          'use up to 63 letters, digits and hyphens')],
        id='hp-scheduler-name',
    ),
    pytest.param(
        t(H, name="Research"),
        [('teams[0] (Research).name',
          'Research',
          LABEL,
          "write 'research'")],
        id='hp-team-name',
    ),
    pytest.param(
        t(H, name="a" * 52),
        [('teams[0] (aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa).name',
          'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
          'is too long for HyperPod, where a team becomes the Kubernetes namespace hyperpod-ns-<name> (at most'
          ' 63 characters)',
          'use at most 51 characters')],
        id='hp-team-name-long',
    ),
    pytest.param(
        t(H, borrow_limit={"ml.p4d.24xlarge": 1}),
        [('teams[0] (research).borrow_limit.ml.p4d.24xlarge',
          'ml.p4d.24xlarge',
          'names an instance type the hyperpod capacity does not declare',
          'declare it in hyperpod.capacity or remove it; declared: ml.p5.48xlarge')],
        id='hp-borrow-limit-undeclared',
    ),
    # fairshare section
    pytest.param(
        top(F, fairshare=1),
        [('fairshare', 1, 'must be a mapping, not a number', 'write key: value pairs'),
         ('config',
          ['fairshare', 'teams'],
          'declares no backend',
          'add one of batch_quota, hyperpod, fairshare, kueue (`gpu-share init --backend NAME` writes one)'),
         ('teams[0] (team-a).guarantee.g5.xlarge',
          'g5.xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='fs-not-mapping',
    ),
    pytest.param(
        sec(F, "fairshare", spt=True),
        [('fairshare.spt', True, 'unknown key', "did you mean 'spot'?")],
        id='fs-unknown-key',
    ),
    pytest.param(
        sec(F, "fairshare", capacity={"ml.g5.xlarge": 2}),
        [('fairshare.capacity.ml.g5.xlarge',
          'ml.g5.xlarge',
          'is a SageMaker type; this fleet runs EC2 instances',
          'write g5.xlarge'),
         ('teams[0] (team-a).guarantee.g5.xlarge',
          'g5.xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='fs-capacity-ml',
    ),
    pytest.param(
        sec(F, "fairshare", capacity={"g5.xlarge": 2, "g5.xlarg": 1}),
        [('fairshare.capacity.g5.xlarg',
          'g5.xlarg',
          'is not a GPU instance type this library knows',
          "did you mean 'g5.xlarge'?")],
        id='fs-capacity-unknown-close',
    ),
    pytest.param(
        sec(F, "fairshare", capacity={"g5.xlarge": 2, "zzz": 1}),
        [('fairshare.capacity.zzz',
          'zzz',
          'is not a GPU instance type this library knows',
          'use one of g4dn.12xlarge, g4dn.16xlarge, g4dn.2xlarge, g4dn.4xlarge, g4dn.8xlarge, g4dn.metal, '
          'g4dn.xlarge, g5.12xlarge, g5.16xlarge, g5.24xlarge, g5.2xlarge, g5.48xlarge, g5.4xlarge, g5.8xlarge, '
          'g5.xlarge, g6.12xlarge, g6.16xlarge, g6.24xlarge, g6.2xlarge, g6.48xlarge, g6.4xlarge, g6.8xlarge, '
          'g6.xlarge, g6e.12xlarge, g6e.16xlarge, g6e.24xlarge, g6e.2xlarge, g6e.48xlarge, g6e.4xlarge, g6e.8xlarge, '
          'g6e.xlarge, g7e.12xlarge, g7e.24xlarge, g7e.2xlarge, g7e.48xlarge, g7e.4xlarge, g7e.8xlarge, gr6.4xlarge, '
          'gr6.8xlarge, p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5.4xlarge, p5e.48xlarge, p5en.48xlarge, '
          'p6-b200.48xlarge, p6-b300.48xlarge, p6e-gb200.36xlarge')],
        id='fs-capacity-unknown-far',
    ),
    pytest.param(
        sec(F, "fairshare", queue_name="a b"),
        [('fairshare.queue_name',
          'a b',
          'does not match ^[A-Za-z0-9_-]{1,128}$',
          'use up to 128 letters, digits, - and _')],
        id='fs-queue-name',
    ),
    pytest.param(
        sec(F, "fairshare", share_decay_seconds=604801),
        [('fairshare.share_decay_seconds', 604801, 'must be at most 604,800', 'use a value <= 604800')],
        id='fs-decay-big',
    ),
    pytest.param(
        sec(F, "fairshare", compute_reservation=100),
        [('fairshare.compute_reservation', 100, 'must be at most 99', 'use a value <= 99')],
        id='fs-reservation',
    ),
    pytest.param(
        sec(F, "fairshare", min_instances=10001),
        [('fairshare.min_instances', 10001, 'must be at most 10,000', 'use a value <= 10000')],
        id='fs-min-instances',
    ),
    pytest.param(
        sec(F, "fairshare", allocation_strategy="BEST_FIT"),
        [('fairshare.allocation_strategy',
          'BEST_FIT',
          'is not a Batch allocation strategy',
          'use one of BEST_FIT_PROGRESSIVE, SPOT_CAPACITY_OPTIMIZED, SPOT_PRICE_CAPACITY_OPTIMIZED')],
        id='fs-strategy',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim=True),
        [('fairshare.reclaim', True, 'must be a mapping, not a boolean', 'write key: value pairs')],
        id='fs-reclaim-not-mapping',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"victim_order": "oldest"}),
        [('fairshare.reclaim.victim_order', 'oldest', 'is not a victim order',
          'use youngest (the default: lowest priority, then the most recent start) or checkpoint (runs started on'
          ' borrowed capacity, then the least work lost since the last checkpoint)')],
        id='fs-reclaim-victim-order',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"victim_order": "checkpoint", "max_checkpoint_seconds": 0}),
        [('fairshare.reclaim.max_checkpoint_seconds', 0, 'must be at least 1',
          'give the longest checkpoint interval the checkpoint order believes, 1 to 604800 seconds (default 3600);'
          ' a job declaring none, 0 or more is ordered as if it saved that often')],
        id='fs-reclaim-max-checkpoint-zero',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"max_checkpoint_seconds": 604801}),
        [('fairshare.reclaim.max_checkpoint_seconds', 604801, 'must be at most 604,800',
          'give the longest checkpoint interval the checkpoint order believes, 1 to 604800 seconds (default 3600);'
          ' a job declaring none, 0 or more is ordered as if it saved that often')],
        id='fs-reclaim-max-checkpoint-above-a-week',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"max_checkpoint_seconds": "1h"}),
        [('fairshare.reclaim.max_checkpoint_seconds', '1h', 'must be a whole number, not a string',
          'give the longest checkpoint interval the checkpoint order believes, 1 to 604800 seconds (default 3600);'
          ' a job declaring none, 0 or more is ordered as if it saved that often')],
        id='fs-reclaim-max-checkpoint-string',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"enable": True}),
        [('fairshare.reclaim.enable', True, 'unknown key', "did you mean 'enabled'?")],
        id='fs-reclaim-unknown',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"enabled": "no"}),
        [('fairshare.reclaim.enabled', 'no', 'must be true or false', 'write true or false')],
        id='fs-reclaim-enabled',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"dry_run": 0}),
        [('fairshare.reclaim.dry_run', 0, 'must be true or false', 'write true or false')],
        id='fs-reclaim-dry',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"schedule_minutes": 0}),
        [('fairshare.reclaim.schedule_minutes', 0, 'must be at least 1', 'use a value >= 1')],
        id='fs-reclaim-schedule',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"schedule_minutes": 1441}),
        [('fairshare.reclaim.schedule_minutes', 1441, 'must be at most 1,440', 'use a value <= 1440')],
        id='fs-reclaim-schedule-big',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"reclaim_after_seconds": 86401}),
        [('fairshare.reclaim.reclaim_after_seconds', 86401, 'must be at most 86,400', 'use a value <= 86400')],
        id='fs-reclaim-after',
    ),
    pytest.param(
        sec(F, "fairshare", reclaim={"min_runtime_seconds": -1}),
        [('fairshare.reclaim.min_runtime_seconds', -1, 'must be at least 0', 'use a value >= 0')],
        id='fs-reclaim-min-runtime',
    ),
    pytest.param(
        top(B, teams=[{"name": "team-a", "guarantee": {"ml.g5.xlarge": 1}}, None]),
        [('teams[1]', None, 'is empty', 'give the team a name and a guarantee, or remove the entry')],
        id='team-empty-entry',
    ),
    pytest.param(
        t(F, name="---"),
        [('teams[0] (---).name',
          '---',
          LABEL,
          "write 'team-a'")],
        id='fs-share-id-empty',
    ),
    pytest.param(
        {"teams": [{"name": "research", "guarantee": {"ml.g6e.48xlarge": {"mig": {"mig-1g.5gb": 1}}}}], "hyperpod": {"cluster_arn": ARN, "capacity": {"ml.g6e.48xlarge": 2}}},
        [('teams[0] (research).guarantee.ml.g6e.48xlarge.mig.mig-1g.5gb',
          'mig-1g.5gb',
          'is not a MIG profile of ml.g6e.48xlarge (L40S)',
          'run `gpu-share mig layouts --instance-type ml.g6e.48xlarge` for the profiles it has')],
        id='amount-mig-unknown-gpu',
    ),
    pytest.param(
        {"teams": [{"name": "a", "guarantee": {"ml.g5.xlarge": 1}}]},
        [('config',
          ['teams'],
          'declares no backend',
          'add one of batch_quota, hyperpod, fairshare, kueue (`gpu-share init --backend NAME` writes one)'),
         ('teams[0] (a).guarantee.ml.g5.xlarge',
          'ml.g5.xlarge',
          'names an instance type that no backend declares in its capacity',
          'add it to the capacity of batch_quota, hyperpod (ml. types), fairshare (EC2 types) or kueue (EC2 types)')],
        id='no-backend',
    ),
]


@pytest.mark.parametrize("raw, expected", CASES)
def test_problem_names_field_value_and_fix(raw, expected):
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    got = [(p.field, p.value, p.message, p.fix) for p in info.value.problems]
    if all(e[2] is None for e in expected):
        got = [(f, v, None, None) for f, v, _, _ in got]
    assert got == expected
