"""One validation path: each rule of the config, through a YAML file and through the Python API.

Every row gives the same input twice: as the mapping a config file holds (``parse_config``) and
as the constructs and dataclasses a Python app builds. Both must report the same problems: the
same field and the same message. Fields of the Python API name what the app passes: a construct's
``teams=[...]`` are ``teams[i] (name)`` as in the file; a lone ``TeamConfig`` is
``TeamConfig('name')``, an ``InferenceModelConfig`` ``InferenceModelConfig('name')`` and a
``MigInferenceEndpoint``'s fields are relative to the endpoint, which :func:`normal` maps to the
file's spelling.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest

from cdk_gpu_share import FairshareQueue, MigInferenceEndpoint, SharedGpuQuota
from cdk_gpu_share.core.configuration.parse import (
    Amount,
    BatchQuotaConfig,
    FairshareConfig,
    FairshareVpcConfig,
    GroupConfig,
    HyperPodConfig,
    PlatformConfig,
    PriorityClass,
    Sharing,
    TeamConfig,
    check_config,
    parse_config,
)
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.inference.config import Copies, InferenceModelConfig

ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
ROLE = "arn:aws:iam::111122223333:role/team-a-ci"

_APP = cdk.App()
_STACK = cdk.Stack(_APP, "S")
_IDS = iter(range(10**6))


def scope() -> tuple[cdk.Stack, str]:
    return _STACK, f"C{next(_IDS)}"


def normal(field: str) -> str:
    """A field in one spelling for both paths (see the module docstring)."""
    field = re.sub(r"^inference\.endpoints\[\d+\] \([^)]*\)\.", "", field)
    field = re.sub(r"teams\[\d+\] \(([^)]*)\)", r"team(\1)", field)
    field = re.sub(r"TeamConfig\('([^']*)'\)", r"team(\1)", field)
    field = re.sub(r"models\[\d+\] \(([^)]*)\)", r"model(\1)", field)
    field = re.sub(r"InferenceModelConfig\('([^']*)'\)", r"model(\1)", field)
    return re.sub(r"^FairshareVpcConfig\b", "fairshare.vpc", field)


def yaml_problems(raw: dict) -> list[tuple[str, str]]:
    try:
        parse_config(raw)
    except ConfigError as exc:
        return [(normal(p.field), p.message) for p in exc.problems]
    return []


def python_problems(build: Callable[[], Any]) -> list[tuple[str, str]]:
    try:
        build()
    except ConfigError as exc:
        return [(normal(p.field), p.message) for p in exc.problems]
    return []


# -- builders: a file's mapping and the same in Python


def team(name: str, guarantee: dict, **kw: Any) -> dict:
    return {"name": name, "guarantee": guarantee, **kw}


def py_team(name: str, guarantee: dict, **kw: Any) -> TeamConfig:
    return TeamConfig(name=name, guarantee=guarantee, **kw)


def batch_yaml(teams: list[dict], capacity: dict | None = None, **section: Any) -> dict:
    return {"teams": teams, "batch_quota": {"capacity": capacity or {"ml.g5.xlarge": 3}, **section}}


def batch_py(teams: list[Callable[[], TeamConfig]] | list[TeamConfig], capacity: dict | None = None, **section: Any):
    return lambda: SharedGpuQuota(*scope(), teams=[t() if callable(t) else t for t in teams],
                                  batch_quota=BatchQuotaConfig(capacity=capacity or {"ml.g5.xlarge": 3}, **section))


def hp_yaml(teams: list[dict], capacity: dict | None = None, **section: Any) -> dict:
    return {"teams": teams, "hyperpod": {"cluster_arn": ARN, "capacity": capacity or {"ml.p5.48xlarge": 2}, **section}}


def hp_py(teams: list, capacity: dict | None = None, **section: Any):
    return lambda: SharedGpuQuota(*scope(), teams=[t() if callable(t) else t for t in teams],
                                  hyperpod=HyperPodConfig(cluster_arn=section.pop("cluster_arn", ARN),
                                                          capacity=capacity or {"ml.p5.48xlarge": 2}, **section))


KUEUE_ROLE = "arn:aws:iam::111122223333:role/kubectl"


def kq_yaml(teams: list[dict], capacity: dict | None = None, **section: Any) -> dict:
    return {"teams": teams, "kueue": {"eks_cluster_name": "gpu-eks", "kubectl_role_arn": KUEUE_ROLE,
                                      "capacity": capacity or {"p5.48xlarge": 2}, **section}}


def kq_py(teams: list, capacity: dict | None = None, groups: tuple = (), **section: Any):
    from cdk_gpu_share.backends.kueue import KueueConfig
    from cdk_gpu_share.backends.kueue.construct import KueueQueues

    return lambda: KueueQueues(*scope(), teams=[t() if callable(t) else t for t in teams], groups=groups,
                               config=KueueConfig(eks_cluster_name="gpu-eks", kubectl_role_arn=KUEUE_ROLE,
                                                  capacity=capacity or {"p5.48xlarge": 2}, **section))


def fs_yaml(teams: list[dict], capacity: dict | None = None, **section: Any) -> dict:
    return {"teams": teams, "fairshare": {"capacity": capacity or {"g5.xlarge": 3}, **section}}


def fs_py(teams: list, capacity: dict | None = None, **section: Any):
    return lambda: FairshareQueue(*scope(), teams=[t() if callable(t) else t for t in teams],
                                  config=FairshareConfig(capacity=capacity or {"g5.xlarge": 3}, **section))


def later(name: str, guarantee: dict, **kw: Any) -> Callable[[], TeamConfig]:
    """A TeamConfig built when the row runs (inside the Python path, where its ConfigError belongs)."""
    return lambda: py_team(name, guarantee, **kw)


G1 = {"ml.g5.xlarge": 1}
P1 = {"ml.p5.48xlarge": 1}
F1 = {"g5.xlarge": 1}
SIX = {f"ml.g5.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")}
SIXTEEN = ["ml.p5.48xlarge", *[f"ml.g5.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                                                         "24xlarge", "48xlarge")],
           *[f"ml.g6.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")]]


def endpoint_yaml(models: list[dict], **endpoint: Any) -> dict:
    return {
        "teams": [team("team-a", {})],
        "inference": {"endpoints": [{"name": "small", "instance_type": "ml.p4d.24xlarge", "layout": "half",
                                     "models": models, **endpoint}]},
    }


def endpoint_py(models: list[Callable[[], InferenceModelConfig]], **endpoint: Any):
    kwargs = {"instance_type": "ml.p4d.24xlarge", "layout": "half", **endpoint}
    return lambda: MigInferenceEndpoint(_STACK, f"C{next(_IDS)}", endpoint_name="small", models=[m() for m in models],
                                        **kwargs)


def model(**kw: Any) -> dict:
    return {"name": "m", "image": IMAGE, "profile": "mig-3g.20gb", "memory_mb": 1024, **kw}


def py_model(**kw: Any) -> Callable[[], InferenceModelConfig]:
    return lambda: InferenceModelConfig(**{"name": "m", "image": IMAGE, "profile": "mig-3g.20gb", "memory_mb": 1024, **kw})


def platform_py(teams: list, **sections: Any):
    """A whole platform built in Python: what build_platform and PlatformStack check."""
    def build() -> None:
        config = PlatformConfig(name="gpu-share", teams=tuple(t() if callable(t) else t for t in teams), **sections)
        problems = check_config(config)
        if problems:
            raise ConfigError(problems)
    return build


# (id, the file's mapping, the Python app)
K1 = {"p5.48xlarge": 1}


def _kq_preemption(policy: str = "Never", max_priority_threshold: int | None = None, reclaim: str = "Never") -> Any:
    from cdk_gpu_share.backends.kueue import BorrowWithinCohort, KueuePreemption

    return KueuePreemption(reclaim_within_cohort=reclaim,
                           borrow_within_cohort=BorrowWithinCohort(policy, max_priority_threshold))


def _kq_controllers(**controllers: tuple[str, ...]) -> Any:
    from cdk_gpu_share.backends.kueue import KueueControllers

    return KueueControllers(**controllers)


ROWS: list[tuple[str, dict, Callable[[], Any]]] = [
    # guarantees above capacity, per backend
    ("batch guarantees above capacity",
     batch_yaml([team("a", {"ml.g5.xlarge": 2}), team("b", {"ml.g5.xlarge": 2})]),
     batch_py([py_team("a", {"ml.g5.xlarge": 2}), py_team("b", {"ml.g5.xlarge": 2})])),
    ("hyperpod guarantees above capacity (accelerators)",
     hp_yaml([team("a", {"ml.p5.48xlarge": {"accelerators": 9}}), team("b", {"ml.p5.48xlarge": {"accelerators": 8}})]),
     hp_py([py_team("a", {"ml.p5.48xlarge": Amount(accelerators=9)}),
            py_team("b", {"ml.p5.48xlarge": Amount(accelerators=8)})])),
    ("hyperpod guarantees above capacity (instances)",
     hp_yaml([team("a", {"ml.p5.48xlarge": 2}), team("b", {"ml.p5.48xlarge": 1})]),
     hp_py([py_team("a", {"ml.p5.48xlarge": 2}), py_team("b", {"ml.p5.48xlarge": 1})])),
    ("fairshare guarantees above capacity",
     fs_yaml([team("a", {"g5.xlarge": 2}), team("b", {"g5.xlarge": 2})]),
     fs_py([py_team("a", {"g5.xlarge": 2}), py_team("b", {"g5.xlarge": 2})])),
    # instance types: the one catalog
    ("batch typo", batch_yaml([team("a", G1)], {"ml.g5.xlarge": 3, "ml.g5.xlarg": 1}),
     batch_py([py_team("a", G1)], {"ml.g5.xlarge": 3, "ml.g5.xlarg": 1})),
    ("batch no GPU", batch_yaml([team("a", G1)], {"ml.g5.xlarge": 3, "ml.m5.xlarge": 3}),
     batch_py([py_team("a", G1)], {"ml.g5.xlarge": 3, "ml.m5.xlarge": 3})),
    ("batch EC2 type", batch_yaml([team("a", G1)], {"ml.g5.xlarge": 3, "g5.xlarge": 3}),
     batch_py([py_team("a", G1)], {"ml.g5.xlarge": 3, "g5.xlarge": 3})),
    ("batch capacity 0", batch_yaml([team("a", G1)], {"ml.g5.xlarge": 0}),
     batch_py([py_team("a", G1)], {"ml.g5.xlarge": 0})),
    ("batch capacity empty", batch_yaml([team("a", G1)], {}) | {"batch_quota": {"capacity": {}}},
     lambda: SharedGpuQuota(*scope(), teams=[py_team("a", G1)], batch_quota=BatchQuotaConfig(capacity={}))),
    ("hyperpod typo", hp_yaml([team("a", P1)], {"ml.p5.48xlarge": 2, "ml.p5.48xlarg": 1}),
     hp_py([py_team("a", P1)], {"ml.p5.48xlarge": 2, "ml.p5.48xlarg": 1})),
    ("hyperpod no GPU", hp_yaml([team("a", P1)], {"ml.p5.48xlarge": 2, "ml.m5.xlarge": 1}),
     hp_py([py_team("a", P1)], {"ml.p5.48xlarge": 2, "ml.m5.xlarge": 1})),
    ("hyperpod Trainium", hp_yaml([team("a", P1)], {"ml.p5.48xlarge": 2, "ml.trn1.32xlarge": 1}),
     hp_py([py_team("a", P1)], {"ml.p5.48xlarge": 2, "ml.trn1.32xlarge": 1})),
    ("fairshare typo", fs_yaml([team("a", F1)], {"g5.xlarge": 3, "g5.xlarg": 1}),
     fs_py([py_team("a", F1)], {"g5.xlarge": 3, "g5.xlarg": 1})),
    ("fairshare no GPU", fs_yaml([team("a", F1)], {"g5.xlarge": 3, "m5.xlarge": 1}),
     fs_py([py_team("a", F1)], {"g5.xlarge": 3, "m5.xlarge": 1})),
    ("fairshare SageMaker type", fs_yaml([team("a", F1)], {"g5.xlarge": 3, "ml.g5.xlarge": 1}),
     fs_py([py_team("a", F1)], {"g5.xlarge": 3, "ml.g5.xlarge": 1})),
    ("guarantee of an undeclared type", batch_yaml([team("a", {"ml.g5.xlarge": 1, "ml.g5.2xlarge": 1})]),
     batch_py([py_team("a", {"ml.g5.xlarge": 1, "ml.g5.2xlarge": 1})])),
    ("a type declared by batch_quota and hyperpod",
     {"teams": [team("a", G1)], "batch_quota": {"capacity": G1},
      "hyperpod": {"cluster_arn": ARN, "capacity": {"ml.g5.xlarge": 1, "ml.p5.48xlarge": 1}}},
     lambda: SharedGpuQuota(*scope(), teams=[py_team("a", G1)], batch_quota=BatchQuotaConfig(capacity=G1),
                            hyperpod=HyperPodConfig(cluster_arn=ARN, capacity={"ml.g5.xlarge": 1, "ml.p5.48xlarge": 1}))),
    # teams
    ("duplicate team names", batch_yaml([team("a", G1), team("a", G1)]), batch_py([py_team("a", G1), py_team("a", G1)])),
    ("borrow limit percent with reserve",
     batch_yaml([team("a", G1, sharing="reserve", borrow_limit_percent=50)]),
     batch_py([later("a", G1, sharing=Sharing.RESERVE, borrow_limit_percent=50)])),
    ("borrow limit with lend",
     hp_yaml([team("a", P1, sharing="lend", borrow_limit={"ml.p5.48xlarge": {"accelerators": 8}})]),
     hp_py([later("a", P1, sharing=Sharing.LEND, borrow_limit={"ml.p5.48xlarge": Amount(accelerators=8)})])),
    ("objective: unknown key", batch_yaml([team("a", G1, objectives={"wait_p95_minute": 60})]),
     batch_py([later("a", G1, objectives={"wait_p95_minute": 60})])),
    ("objective: target not above 0", fs_yaml([team("a", F1, objectives={"wait_p99_minutes": 0})]),
     fs_py([later("a", F1, objectives={"wait_p99_minutes": 0})])),
    ("objective: not a number", batch_yaml([team("a", G1, objectives={"max_preempted_per_day": "two"})]),
     batch_py([later("a", G1, objectives={"max_preempted_per_day": "two"})])),
    ("objectives not a mapping", batch_yaml([team("a", G1, objectives=[60])]),
     batch_py([later("a", G1, objectives=[60])])),
    ("description on two lines", batch_yaml([team("a", G1, description="one\ntwo")]),
     batch_py([later("a", G1, description="one\ntwo")])),
    ("assumed_by not an ARN", batch_yaml([team("a", G1, assumed_by=["team-a-ci"])]),
     batch_py([later("a", G1, assumed_by=("team-a-ci",))])),
    ("principal_tag with assumed_by", batch_yaml([team("a", G1, assumed_by=[ROLE], principal_tag="cost-center")]),
     batch_py([later("a", G1, assumed_by=(ROLE,), principal_tag="cost-center")])),
    ("principal_tag aws:", batch_yaml([team("a", G1, principal_tag="aws:team")]),
     batch_py([later("a", G1, principal_tag="aws:team")])),
    ("an amount that names nothing", hp_yaml([team("a", {"ml.p5.48xlarge": {}})]), hp_py([later("a", {"ml.p5.48xlarge": Amount()})])),
    ("MIG profile HyperPod refuses", hp_yaml([team("a", {"ml.p5.48xlarge": {"mig": {"mig-3g.40gbx": 1}}})]),
     hp_py([later("a", {"ml.p5.48xlarge": Amount(mig={"mig-3g.40gbx": 1})})])),
    ("team name the app's stack cannot hold", {"teams": [team("team a", G1)], "batch_quota": {"capacity": G1}},
     platform_py([py_team("team a", G1)], batch_quota=BatchQuotaConfig(capacity=G1))),
    # batch quota shares (_check_backend)
    ("batch more than 20 shares", batch_yaml([team(f"t{i}", G1) for i in range(21)], {"ml.g5.xlarge": 21}),
     batch_py([py_team(f"t{i}", G1) for i in range(21)], {"ml.g5.xlarge": 21})),
    ("batch more than 5 capacity limits", batch_yaml([team("a", SIX)], dict.fromkeys(SIX, 1)),
     batch_py([py_team("a", SIX)], dict.fromkeys(SIX, 1))),
    ("batch not whole instances", batch_yaml([team("a", {"ml.g5.xlarge": {"accelerators": 1}})]),
     batch_py([py_team("a", {"ml.g5.xlarge": Amount(accelerators=1)})])),
    ("batch share of 0 instances", batch_yaml([team("a", {"ml.g5.xlarge": 0})]), batch_py([py_team("a", {"ml.g5.xlarge": 0})])),
    ("batch absolute borrow limit", batch_yaml([team("a", G1, borrow_limit={"ml.g5.xlarge": 1})]),
     batch_py([py_team("a", G1, borrow_limit={"ml.g5.xlarge": 1})])),
    ("batch queue name", batch_yaml([team("a", G1)], queue_name="my queue"), batch_py([py_team("a", G1)], queue_name="my queue")),
    ("batch priority", batch_yaml([team("a", G1)], priority=1001), batch_py([py_team("a", G1)], priority=1001)),
    # HyperPod compute quotas (_check_backend)
    ("hyperpod team name", hp_yaml([team("TeamA", P1)]), hp_py([py_team("TeamA", P1)])),
    ("hyperpod team name too long for its namespace", hp_yaml([team("a" * 52, P1)]), hp_py([py_team("a" * 52, P1)])),
    ("hyperpod more than 15 resource entries", hp_yaml([team("a", dict.fromkeys(SIXTEEN, 1))], dict.fromkeys(SIXTEEN, 1)),
     hp_py([py_team("a", dict.fromkeys(SIXTEEN, 1))], dict.fromkeys(SIXTEEN, 1))),
    ("hyperpod borrow percent above 500", hp_yaml([team("a", P1, borrow_limit_percent=501)]),
     hp_py([py_team("a", P1, borrow_limit_percent=501)])),
    ("hyperpod borrow limit on an undeclared type",
     hp_yaml([team("a", P1, borrow_limit={"ml.p5e.48xlarge": {"accelerators": 8}})]),
     hp_py([py_team("a", P1, borrow_limit={"ml.p5e.48xlarge": Amount(accelerators=8)})])),
    ("hyperpod MIG profile of another GPU",
     hp_yaml([team("a", {"ml.p5.48xlarge": {"mig": {"mig-3g.20gb": 1}}})]),
     hp_py([py_team("a", {"ml.p5.48xlarge": Amount(mig={"mig-3g.20gb": 1})})])),
    ("hyperpod cluster ARN", hp_yaml([team("a", P1)], cluster_arn="arn:aws:sagemaker:us-east-1:1:cluster/x"),
     hp_py([py_team("a", P1)], cluster_arn="arn:aws:sagemaker:us-east-1:1:cluster/x")),
    ("hyperpod priority classes",
     hp_yaml([team("a", P1)], priority_classes=[{"name": "t", "weight": 5}, {"name": "t", "weight": 101}]),
     hp_py([py_team("a", P1)], priority_classes=(PriorityClass("t", 5), PriorityClass("t", 101)))),
    # classic Batch fair share (_check_backend)
    ("fairshare share identifiers collide", fs_yaml([team("team-a", F1), team("teama", F1)]),
     fs_py([py_team("team-a", F1), py_team("teama", F1)])),
    ("fairshare job definition names too long", fs_yaml([team("a" * 63, F1)], queue_name="q" * 90),
     fs_py([py_team("a" * 63, F1)], queue_name="q" * 90)),
    ("fairshare spot with best fit", fs_yaml([team("a", F1)], spot=True, allocation_strategy="BEST_FIT_PROGRESSIVE"),
     fs_py([py_team("a", F1)], spot=True, allocation_strategy="BEST_FIT_PROGRESSIVE")),
    ("fairshare allocation strategy", fs_yaml([team("a", F1)], allocation_strategy="CHEAPEST"),
     fs_py([py_team("a", F1)], allocation_strategy="CHEAPEST")),
    ("fairshare job attempts", fs_yaml([team("a", F1)], job_attempts=0), fs_py([py_team("a", F1)], job_attempts=0)),
    ("fairshare VPC id",
     fs_yaml([team("a", F1)], vpc={"vpc_id": "vpc-1", "subnet_ids": ["subnet-0123456789abcdef0"]}),
     lambda: FairshareConfig(capacity={"g5.xlarge": 3}, vpc=FairshareVpcConfig("vpc-1", ("subnet-0123456789abcdef0",)))),
    # Kueue (_check_backend)
    ("kueue team name", kq_yaml([team("TeamA", K1)]), kq_py([py_team("TeamA", K1)])),
    ("kueue reserved namespace", kq_yaml([team("kube-system", K1)]), kq_py([py_team("kube-system", K1)])),
    ("kueue team named as the window switcher's namespace", kq_yaml([team("gpu-share-windows", K1)]),
     kq_py([py_team("gpu-share-windows", K1)])),
    ("kueue group named as the section's cohort",
     {**kq_yaml([team("a", K1, group="gpu-share")]), "groups": [{"name": "gpu-share"}]},
     kq_py([py_team("a", K1, group="gpu-share")], groups=(GroupConfig("gpu-share"),))),
    ("kueue adopts a namespace that is no team", kq_yaml([team("a", K1)], adopt_namespaces=["b"]),
     kq_py([py_team("a", K1)], adopt_namespaces=("b",))),
    ("kueue runtime class name", kq_yaml([team("a", K1)], allowed_runtime_classes=["Nvidia"]),
     kq_py([py_team("a", K1)], allowed_runtime_classes=("Nvidia",))),
    ("kueue controller identity", kq_yaml([team("a", K1)], controllers={"job": ["argocd"]}),
     kq_py([py_team("a", K1)], controllers=_kq_controllers(job=("argocd",)))),
    ("kueue controller in a team's namespace",
     kq_yaml([team("a", K1)], controllers={"kuberay": ["system:serviceaccount:a:kuberay"]}),
     kq_py([py_team("a", K1)], controllers=_kq_controllers(kuberay=("system:serviceaccount:a:kuberay",)))),
    ("kueue device class of no quota resource", kq_yaml([team("a", K1)], device_classes={"gpu.nvidia.com": "example.com/gpu"}),
     kq_py([py_team("a", K1)], device_classes={"gpu.nvidia.com": "example.com/gpu"})),
    ("kueue guarantees above capacity", kq_yaml([team("a", {"p5.48xlarge": 3})]), kq_py([py_team("a", {"p5.48xlarge": 3})])),
    ("kueue reclaim Never with a borrow policy",
     kq_yaml([team("a", K1)], preemption={"borrow_within_cohort": {"policy": "LowerPriority"}}),
     kq_py([py_team("a", K1)], preemption=_kq_preemption(policy="LowerPriority"))),
    ("kueue priority threshold without a borrow policy",
     kq_yaml([team("a", K1)], preemption={"borrow_within_cohort": {"max_priority_threshold": 5}}),
     kq_py([py_team("a", K1)], preemption=_kq_preemption(max_priority_threshold=5))),
    ("kueue MIG profile of another GPU", kq_yaml([team("a", {"p5.48xlarge": {"mig": {"mig-3g.20gb": 1}}})]),
     kq_py([py_team("a", {"p5.48xlarge": Amount(mig={"mig-3g.20gb": 1})})])),
    ("kueue borrow limit on an undeclared type", kq_yaml([team("a", K1, borrow_limit={"p4d.24xlarge": 1})]),
     kq_py([py_team("a", K1, borrow_limit={"p4d.24xlarge": 1})])),
    ("kueue preemption value", kq_yaml([team("a", K1)], preemption={"reclaim_within_cohort": "Sometimes"}),
     kq_py([py_team("a", K1)], preemption=_kq_preemption(reclaim="Sometimes"))),
    # inference endpoints
    ("copies 0", endpoint_yaml([model(copies=0)]), endpoint_py([py_model(copies=0)])),
    ("memory below 128 MB", endpoint_yaml([model(memory_mb=64)]), endpoint_py([py_model(memory_mb=64)])),
    ("profile not in the layout", endpoint_yaml([model(profile="mig-1g.5gb")]), endpoint_py([py_model(profile="mig-1g.5gb")])),
    ("layout that does not fit", endpoint_yaml([model()], layout=["mig-4g.20gb", "mig-4g.20gb"]),
     endpoint_py([py_model()], layout=["mig-4g.20gb", "mig-4g.20gb"])),
    ("copies above the partitions", endpoint_yaml([model(copies={"initial": 1, "max": 17})]),
     endpoint_py([py_model(copies=Copies(1, 1, 17))])),
    ("image not a URI", endpoint_yaml([model(image="not an image")]), endpoint_py([py_model(image="not an image")])),
    ("endpoint instance type without MIG", endpoint_yaml([model()], instance_type="ml.g5.48xlarge"),
     endpoint_py([py_model()], instance_type="ml.g5.48xlarge")),
]


@pytest.mark.parametrize(("case", "raw", "build"), ROWS, ids=[r[0] for r in ROWS])
def test_yaml_and_python_report_the_same_problems(case, raw, build):
    expected = yaml_problems(raw)
    assert expected, f"{case}: the file is valid; the row tests nothing"
    assert python_problems(build) == expected


#: A config file never reaches this rule: a team name that a quota share refuses is refused first
#: for the team's stack name (every team of a platform gets a stack). A construct in an app of
#: one's own has no team stacks, so there the quota share's own rule speaks.
CONSTRUCT_ONLY = {"is not a valid quota share name"}


def _rule_sources() -> str:
    """The capacity check every backend shares, and the rules part of each backend's module."""
    import importlib
    import inspect

    from cdk_gpu_share.core.configuration import backends
    from cdk_gpu_share.core.configuration import parse as config

    parts = [inspect.getsource(config._guarantees_fit)]
    for name in backends.BUILTIN:
        module = inspect.getsource(importlib.import_module(name))
        rules = module.split("# -- rules")[1].split("\ndef schema")[0]
        parts.append(rules)
    return "\n".join(parts)


def test_every_rule_of_check_backend_has_a_row():
    """Each message a backend's rules can give is the message of some row."""
    # the first words of each message the rules write
    written = set(re.findall(r'[\s(,]f?"((?:is |a |the |names |Batch|HyperPod|makes )[^"{]{8,}?)(?:"|\{)', _rule_sources()))
    assert len(written) >= 13, written
    covered = " | ".join(msg for _, raw, _ in ROWS for _, msg in yaml_problems(raw))
    missing = sorted(w for w in written - CONSTRUCT_ONLY if w.strip() not in covered)
    assert not missing, missing


def test_a_team_name_meets_one_rule_on_a_construct_without_team_stacks():
    label = ("must be lower-case letters, digits and hyphens, starting and ending with a letter or digit, at most 63"
             " characters (a DNS-1123 label: every backend names resources after the team, Kubernetes namespaces"
             " included)")
    assert python_problems(batch_py([py_team("team a", G1)])) == [("team(team a).name", label)]
    assert yaml_problems(batch_yaml([team("team a", G1)])) == [("team(team a).name", label)]


# -- the shorthand: copies=3 is fixed copies in both


def test_bare_number_copies_are_fixed_copies_in_both():
    config = parse_config(endpoint_yaml([model(copies=3)]))
    from_yaml = config.inference.endpoints[0].models[0].copies
    from_python = InferenceModelConfig(name="m", image=IMAGE, profile="mig-3g.20gb", memory_mb=1024, copies=3).copies
    assert from_yaml == from_python == Copies(3, 3, 3)
    assert python_problems(endpoint_py([py_model(copies=3)])) == []


@pytest.mark.parametrize("copies", [0, -1, True, "3", 2.5, {"max": 0}])
def test_bad_copies_name_the_field_in_both(copies):
    assert yaml_problems(endpoint_yaml([model(copies=copies)])) == python_problems(py_model(copies=copies))


# -- the constructs refuse bad props before they build anything


@pytest.mark.parametrize(
    "build",
    [
        lambda s: SharedGpuQuota(s, "Bad", teams=[py_team("a", {"ml.g5.xlarge": 2}), py_team("b", {"ml.g5.xlarge": 2})],
                                 batch_quota=BatchQuotaConfig(capacity={"ml.g5.xlarge": 3})),
        lambda s: FairshareQueue(s, "Bad", config=FairshareConfig(capacity={"g5.xlarg": 1})),
        lambda s: MigInferenceEndpoint(s, "Bad", instance_type="ml.p4d.24xlarge", layout="half",
                                       models=[py_model(memory_mb=1)()]),
    ],
    ids=["SharedGpuQuota", "FairshareQueue", "MigInferenceEndpoint"],
)
def test_a_construct_with_bad_props_leaves_nothing_behind(build):
    stack = cdk.Stack(cdk.App(), "Clean")
    with pytest.raises(ConfigError) as info:
        build(stack)
    assert info.value.source == "Clean/Bad"
    assert stack.node.try_find_child("Bad") is None


def test_a_team_stack_takes_a_team_config_only():
    from cdk_gpu_share import TeamStack

    app = cdk.App()
    with pytest.raises(ConfigError, match=r"team: must be a TeamConfig, not a mapping"):
        TeamStack(app, "gpu-share-team-a", team={"name": "team-a"})  # type: ignore[arg-type]
    assert app.node.try_find_child("gpu-share-team-a") is None


def test_a_platform_built_in_python_meets_the_rules_of_the_file():
    from cdk_gpu_share import PlatformStack, build_platform

    config = PlatformConfig(name="gpu-share", teams=(py_team("a", {"ml.g5.xlarge": 2}), py_team("b", {"ml.g5.xlarge": 2})),
                            batch_quota=BatchQuotaConfig(capacity={"ml.g5.xlarge": 3}))
    app = cdk.App()
    for build in (lambda: build_platform(app, config, checks=False), lambda: PlatformStack(app, "P", config=config)):
        with pytest.raises(ConfigError, match=r"batch_quota\.capacity\.ml\.g5\.xlarge: the teams' guarantees sum to 4"):
            build()
    assert app.node.children == []


@pytest.mark.parametrize("path", ["platform.yaml", "examples/hyperpod.yaml", "examples/inference.yaml",
                                  "examples/alibaba-openb.yaml"])
def test_a_config_written_back_as_a_mapping_reads_as_itself(path):
    from cdk_gpu_share.core.configuration.parse import config_mapping, load_config
    from tests.helpers import ROOT

    config = load_config(ROOT / path)
    assert parse_config(config_mapping(config), source=config.source) == config
    assert check_config(config) == []
