"""The one instance catalog (core/catalog/instances.py): consistent entries, both spellings, the refusals."""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.catalog import hyperpod_schema as hp
from cdk_gpu_share.core.catalog import instances, mig
from cdk_gpu_share.core.configuration.parse import parse_config
from cdk_gpu_share.core.errors import ConfigError

CATALOG = instances.CATALOG


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_entry_has_gpus_cpus_and_memory(name):
    info = CATALOG[name]
    assert info.name == name
    assert info.gpus > 0 and info.vcpus > 0 and info.memory_gib > 0 and info.gpu_memory_gib > 0
    assert info.gpus in (1, 2, 4, 8)
    assert info.family == name.split(".")[0]
    assert not name.startswith("ml.")
    # the GPU model names its memory where the catalog's other tables do (A100-40GB, H200-141GB)
    if "-" in info.gpu_model and info.gpu_model.endswith("GB"):
        assert info.gpu_model.rsplit("-", 1)[1] == f"{info.gpu_memory_gib}GB"


def test_one_family_has_one_gpu_model():
    models: dict[str, set[str]] = {}
    for info in CATALOG.values():
        models.setdefault(info.family, set()).add(info.gpu_model)
    assert all(len(m) == 1 for m in models.values()), models


@pytest.mark.parametrize(
    "name, gpus, model",
    [
        ("p4d.24xlarge", 8, "A100-40GB"),
        ("p4de.24xlarge", 8, "A100-80GB"),
        ("p5.48xlarge", 8, "H100-80GB"),
        ("p5.4xlarge", 1, "H100-80GB"),
        ("p5e.48xlarge", 8, "H200-141GB"),
        ("p5en.48xlarge", 8, "H200-141GB"),
        ("p6-b200.48xlarge", 8, "B200-180GB"),
        ("g5.xlarge", 1, "A10G"),
        ("g5.12xlarge", 4, "A10G"),
        ("g5.48xlarge", 8, "A10G"),
        ("g6.xlarge", 1, "L4"),
        ("g6e.48xlarge", 8, "L40S"),
        ("g4dn.12xlarge", 4, "T4"),
    ],
)
def test_published_gpu_counts(name, gpus, model):
    assert (CATALOG[name].gpus, CATALOG[name].gpu_model) == (gpus, model)


def test_mig_support_is_the_mig_catalogs_gpu_models():
    for name, info in CATALOG.items():
        if info.mig:
            assert info.sagemaker, name
            assert info.gpu_model in mig.GPUS, name
    # every GPU the MIG catalog partitions is the GPU of some catalogued instance type
    assert set(mig.GPUS) <= {info.gpu_model for info in CATALOG.values() if info.mig}
    assert {t: (i.gpu, i.gpu_count) for t, i in mig.INSTANCE_TYPES.items()} == {
        f"ml.{name}": (info.gpu_model, info.gpus) for name, info in CATALOG.items() if info.mig
    }


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_the_ml_spelling_is_the_ec2_type_where_sagemaker_offers_it(name):
    info = CATALOG[name]
    assert instances.lookup(name) is info
    assert instances.lookup(f"ml.{name}") is (info if info.sagemaker else None)
    assert (f"ml.{name}" in instances.sagemaker_types()) is info.sagemaker
    assert name in instances.known_types()


def test_every_hyperpod_gpu_type_is_catalogued_and_every_other_is_refused_for_a_reason():
    uncatalogued = set()
    for it in sorted(hp.HYPERPOD_INSTANCE_TYPES):
        problem = instances.instance_type_problem(it, sagemaker=True)
        if problem is None:
            assert instances.lookup(it).sagemaker
        elif problem[0] not in ("has no GPU", "has AWS Trainium or Inferentia accelerators, not GPUs;"
                                                 " this library shares NVIDIA GPUs"):
            uncatalogued.add(it)
    # G7 (RTX PRO 4500): no published per-size GPU figures to catalogue yet.
    assert uncatalogued == {f"ml.g7.{s}" for s in ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")}


@pytest.mark.parametrize(
    "it, sagemaker, expected",
    [
        ("ml.g5.xlarg", True, ("is not a GPU instance type this library knows", "did you mean 'ml.g5.xlarge'?")),
        ("g5.xlarg", False, ("is not a GPU instance type this library knows", "did you mean 'g5.xlarge'?")),
        ("ml.m5.xlarge", True, ("has no GPU", "use a GPU instance type such as ml.g5.xlarge or ml.p5.48xlarge")),
        ("m5.xlarge", False, ("has no GPU", "use a GPU instance type such as g5.xlarge or g6e.xlarge")),
        ("ml.c7g.large", True, ("has no GPU", "use a GPU instance type such as ml.g5.xlarge or ml.p5.48xlarge")),
        ("ml.trn1.32xlarge", True, ("has AWS Trainium or Inferentia accelerators, not GPUs; this library shares NVIDIA GPUs",
                                    "use a GPU instance type such as ml.g5.xlarge or ml.p5.48xlarge")),
        ("ml.g4dn.metal", True, ("is not a GPU instance type this library knows", "did you mean 'ml.g4dn.xlarge'?")),
        ("g4dn.metal", False, None),
        ("ml.p5.48xlarge", True, None),
    ],
)
def test_instance_type_problem(it, sagemaker, expected):
    assert instances.instance_type_problem(it, sagemaker=sagemaker) == expected


ARN = "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456"
SECTIONS = {
    "batch_quota": lambda it: {"capacity": {it: 1}},
    "hyperpod": lambda it: {"cluster_arn": ARN, "capacity": {it: 1}},
    "fairshare": lambda it: {"capacity": {it: 1}},
}


@pytest.mark.parametrize(
    "backend, it, message",
    [
        ("batch_quota", "ml.g5.xlarg", "is not a GPU instance type this library knows"),
        ("batch_quota", "ml.m5.xlarge", "has no GPU"),
        ("hyperpod", "ml.m5.xlarge", "has no GPU"),
        ("hyperpod", "ml.trn2.48xlarge", "has AWS Trainium or Inferentia accelerators, not GPUs; this library shares NVIDIA GPUs"),
        ("fairshare", "g5.xlarg", "is not a GPU instance type this library knows"),
        ("fairshare", "m5.xlarge", "has no GPU"),
    ],
)
def test_every_backend_refuses_a_type_the_catalog_refuses(backend, it, message):
    raw = {"teams": [{"name": "team-a", "guarantee": {it: 1}}], backend: SECTIONS[backend](it)}
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert [(p.field, p.value, p.message) for p in info.value.problems] == [(f"{backend}.capacity.{it}", it, message)]
