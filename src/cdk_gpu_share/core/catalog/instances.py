"""The one catalog of the GPU instance types this library plans capacity for.

Every backend reads its instance types here: the classic Batch fleet its EC2 types
(``g5.xlarge``), Batch quota management and HyperPod their SageMaker types
(``ml.g5.xlarge``), and the MIG catalog (:mod:`cdk_gpu_share.core.catalog.mig`) the SageMaker
types whose GPUs it partitions. Figures are per instance, from the Amazon EC2
accelerated-computing instance pages (G4dn, G5, G6, G6e, Gr6, G7e, P4d/P4de,
P5/P5e/P5en, P6-B200, P6-B300, P6e-GB200). A SageMaker ``ml.`` type has the hardware
of the EC2 type of the same name, so one row serves both spellings.

:func:`instance_type_problem` is the one rule for an instance type a config names:
a typo gets the closest catalogued name, a CPU-only type (``ml.m5.xlarge``) or a
Trainium/Inferentia type is refused for having no GPU.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CATALOG",
    "GPU_RESOURCE",
    "MIG_COMPUTE_SLICES",
    "mig_compute_slices",
    "mig_slices",
    "GpuInstanceType",
    "ec2_name",
    "get",
    "instance_type_problem",
    "known_types",
    "lookup",
    "mig_types",
    "not_a_gpu_family",
    "ON_DEMAND_USD_PER_HOUR",
    "PRICES_AS_OF",
    "PRICE_SOURCE",
    "sagemaker_types",
]


@dataclass(frozen=True)
class GpuInstanceType:
    """One instance type: its GPUs, vCPUs, memory and GPU model.

    ``sagemaker``: SageMaker offers it as ``ml.<name>``. ``mig``: SageMaker Inference
    partitions its GPUs with MIG (the MIG catalog's instance types).
    """

    name: str
    gpus: int
    vcpus: int
    memory_gib: int
    gpu_model: str
    gpu_memory_gib: int
    sagemaker: bool = True
    mig: bool = False

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]


def _family(
    family: str,
    model: str,
    gpu_mem: int,
    rows: list[tuple[str, int, int, int]],
    *,
    ec2_only: tuple[str, ...] = (),
    mig: tuple[str, ...] = (),
) -> dict[str, GpuInstanceType]:
    return {
        f"{family}.{size}": GpuInstanceType(
            f"{family}.{size}", gpus, vcpus, mem, model, gpu_mem, sagemaker=size not in ec2_only, mig=size in mig
        )
        for size, gpus, vcpus, mem in rows
    }


#: EC2 name -> figures. Rows: (size, GPUs, vCPUs, memory GiB).
CATALOG: dict[str, GpuInstanceType] = {
    **_family(
        "g4dn",
        "T4",
        16,
        [
            ("xlarge", 1, 4, 16),
            ("2xlarge", 1, 8, 32),
            ("4xlarge", 1, 16, 64),
            ("8xlarge", 1, 32, 128),
            ("16xlarge", 1, 64, 256),
            ("12xlarge", 4, 48, 192),
            ("metal", 8, 96, 384),
        ],
        ec2_only=("metal",),
    ),
    **_family(
        "g5",
        "A10G",
        24,
        [
            ("xlarge", 1, 4, 16),
            ("2xlarge", 1, 8, 32),
            ("4xlarge", 1, 16, 64),
            ("8xlarge", 1, 32, 128),
            ("16xlarge", 1, 64, 256),
            ("12xlarge", 4, 48, 192),
            ("24xlarge", 4, 96, 384),
            ("48xlarge", 8, 192, 768),
        ],
    ),
    **_family(
        "g6",
        "L4",
        24,
        [
            ("xlarge", 1, 4, 16),
            ("2xlarge", 1, 8, 32),
            ("4xlarge", 1, 16, 64),
            ("8xlarge", 1, 32, 128),
            ("16xlarge", 1, 64, 256),
            ("12xlarge", 4, 48, 192),
            ("24xlarge", 4, 96, 384),
            ("48xlarge", 8, 192, 768),
        ],
    ),
    **_family(
        "g6e",
        "L40S",
        48,
        [
            ("xlarge", 1, 4, 32),
            ("2xlarge", 1, 8, 64),
            ("4xlarge", 1, 16, 128),
            ("8xlarge", 1, 32, 256),
            ("16xlarge", 1, 64, 512),
            ("12xlarge", 4, 48, 384),
            ("24xlarge", 4, 96, 768),
            ("48xlarge", 8, 192, 1536),
        ],
    ),
    **_family("gr6", "L4", 24, [("4xlarge", 1, 16, 128), ("8xlarge", 1, 32, 256)]),
    **_family(
        "g7e",
        "RTX-PRO-6000-96GB",
        96,
        [
            ("2xlarge", 1, 8, 64),
            ("4xlarge", 1, 16, 128),
            ("8xlarge", 1, 32, 256),
            ("12xlarge", 2, 48, 512),
            ("24xlarge", 4, 96, 1024),
            ("48xlarge", 8, 192, 2048),
        ],
    ),
    **_family("p4d", "A100-40GB", 40, [("24xlarge", 8, 96, 1152)], mig=("24xlarge",)),
    **_family("p4de", "A100-80GB", 80, [("24xlarge", 8, 96, 1152)], mig=("24xlarge",)),
    **_family("p5", "H100-80GB", 80, [("48xlarge", 8, 192, 2048), ("4xlarge", 1, 16, 256)], mig=("48xlarge",)),
    **_family("p5e", "H200-141GB", 141, [("48xlarge", 8, 192, 2048)], mig=("48xlarge",)),
    **_family("p5en", "H200-141GB", 141, [("48xlarge", 8, 192, 2048)], mig=("48xlarge",)),
    **_family("p6-b200", "B200-180GB", 180, [("48xlarge", 8, 192, 2048)], mig=("48xlarge",)),
    **_family("p6-b300", "B300-288GB", 288, [("48xlarge", 8, 192, 4096)]),
    **_family("p6e-gb200", "GB200-186GB", 186, [("36xlarge", 4, 144, 960)]),
}

#: Instance families without a GPU: general purpose, compute, memory, storage, burstable,
#: HPC and Mac instances (``m5``, ``c7g``, ``r6i``, ``i3en``, ``t3``, ``hpc7a`` ...).
_CPU_FAMILY = re.compile(r"^(?:a1|[cmrtxzidh]\d+[a-z-]*|u\d*-[a-z0-9-]+|hpc\d+[a-z]*|mac\d*[a-z0-9-]*|im4gn|is4gen)$")
#: AWS's own accelerators: Trainium and Inferentia.
_AWS_ACCELERATOR_FAMILY = re.compile(r"^(?:trn|inf)\d+[a-z]*$")


def ec2_name(instance_type: str) -> str:
    """``ml.g5.xlarge`` -> ``g5.xlarge``; an EC2 name is returned unchanged."""
    return instance_type[3:] if instance_type.startswith("ml.") else instance_type


#: The resource under which the reclaim planner, the simulator and the reclaim Lambda count GPUs.
GPU_RESOURCE = "gpu"
#: Compute slices of a MIG-capable GPU: a ``mig-<k>g.*`` profile takes k of them.
MIG_COMPUTE_SLICES = 7


def mig_compute_slices(profile: str) -> int:
    """The compute slices of a MIG profile: ``mig-3g.40gb`` -> 3 (of :data:`MIG_COMPUTE_SLICES`)."""
    return int(profile.split("-", 1)[1].split("g", 1)[0])


def mig_slices(partitions: Iterable[tuple[str, int]]) -> int:
    """The compute slices of ``(profile, count)`` partitions, summed."""
    return sum(mig_compute_slices(profile) * count for profile, count in partitions)


def lookup(instance_type: str) -> GpuInstanceType | None:
    """The catalog entry for an EC2 or SageMaker (``ml.``) type, or ``None``."""
    info = CATALOG.get(ec2_name(instance_type))
    if info is not None and instance_type.startswith("ml.") and not info.sagemaker:
        return None
    return info


def get(instance_type: str) -> GpuInstanceType:
    """The catalog entry of a type a checked config declares (``KeyError`` for any other)."""
    info = lookup(instance_type)
    if info is None:
        raise KeyError(instance_type)
    return info


def known_types(prefix: str = "") -> list[str]:
    """Every catalogued type, with ``prefix`` (``"ml."``) put in front; with ``"ml."``,
    the types SageMaker offers only."""
    return sorted(prefix + name for name, info in CATALOG.items() if info.sagemaker or prefix != "ml.")


def sagemaker_types() -> list[str]:
    """The catalogued SageMaker types, ``ml.`` names."""
    return known_types("ml.")


def mig_types() -> dict[str, GpuInstanceType]:
    """The SageMaker types whose GPUs SageMaker Inference partitions with MIG, in catalog order."""
    return {f"ml.{name}": info for name, info in CATALOG.items() if info.mig}


def not_a_gpu_family(instance_type: str) -> str | None:
    """Why ``instance_type`` has no NVIDIA GPU when its family says so (Trainium, Inferentia, CPU families), else None."""
    family = ec2_name(instance_type).split(".", 1)[0].lower()
    if _AWS_ACCELERATOR_FAMILY.match(family):
        return "has AWS Trainium or Inferentia accelerators, not GPUs; this library shares NVIDIA GPUs"
    if _CPU_FAMILY.match(family):
        return "has no GPU"
    return None


def instance_type_problem(instance_type: str, *, sagemaker: bool) -> tuple[str, str] | None:
    """``(message, fix)`` when ``instance_type`` is not a catalogued GPU type, else ``None``.

    ``sagemaker``: the backend takes ``ml.`` types (Batch quota management, HyperPod);
    otherwise EC2 types (the classic Batch fleet). The prefix itself is checked by the
    caller; this rule says why a name is not usable and what to write instead.
    """
    if lookup(instance_type) is not None and instance_type.startswith("ml.") == sagemaker:
        return None
    choices = sagemaker_types() if sagemaker else known_types()
    example = "ml.g5.xlarge or ml.p5.48xlarge" if sagemaker else "g5.xlarge or g6e.xlarge"
    why = not_a_gpu_family(instance_type)
    if why is not None:
        return why, f"use a GPU instance type such as {example}"
    close = difflib.get_close_matches(instance_type, choices, n=1)
    if close:
        return "is not a GPU instance type this library knows", f"did you mean '{close[0]}'?"
    return "is not a GPU instance type this library knows", f"use one of {', '.join(choices)}"


#: When :data:`ON_DEMAND_USD_PER_HOUR` was read from :data:`PRICE_SOURCE`.
PRICES_AS_OF = "2026-03"
#: Where the prices come from. They move (and differ by region): ``gpu-share mig fit`` takes
#: the file's own ``prices:`` over these.
PRICE_SOURCE = "Amazon SageMaker AI pricing, real-time inference, on-demand, US East (N. Virginia)"
#: On-demand price per instance-hour of the MIG-capable SageMaker types that have one here; a type
#: missing from this table is priced only by a ``prices:`` entry of the file that names it.
ON_DEMAND_USD_PER_HOUR: dict[str, float] = {
    "ml.p4d.24xlarge": 37.688,
}
