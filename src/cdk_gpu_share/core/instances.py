"""A small catalog of the GPU instance types this library plans capacity for.

Figures are per instance, from the Amazon EC2 accelerated-computing instance
pages (G4dn, G5, G6, G6e, P4d/P4de, P5/P5e/P5en, P6-B200). SageMaker's
``ml.`` types have the same hardware as the EC2 type of the same name, so one
table serves both: :func:`lookup` accepts either spelling.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuInstanceType:
    """One instance type: its GPUs, vCPUs, memory and GPU model."""

    name: str
    gpus: int
    vcpus: int
    memory_gib: int
    gpu_model: str
    gpu_memory_gib: int

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]


def _family(family: str, model: str, gpu_mem: int, rows: list[tuple[str, int, int, int]]):
    return {
        f"{family}.{size}": GpuInstanceType(f"{family}.{size}", gpus, vcpus, mem, model, gpu_mem)
        for size, gpus, vcpus, mem in rows
    }


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
    **_family("p4d", "A100-40GB", 40, [("24xlarge", 8, 96, 1152)]),
    **_family("p4de", "A100-80GB", 80, [("24xlarge", 8, 96, 1152)]),
    **_family("p5", "H100-80GB", 80, [("48xlarge", 8, 192, 2048), ("4xlarge", 1, 16, 256)]),
    **_family("p5e", "H200-141GB", 141, [("48xlarge", 8, 192, 2048)]),
    **_family("p5en", "H200-141GB", 141, [("48xlarge", 8, 192, 2048)]),
    **_family("p6-b200", "B200-180GB", 180, [("48xlarge", 8, 192, 2048)]),
}


def ec2_name(instance_type: str) -> str:
    """``ml.g5.xlarge`` -> ``g5.xlarge``; an EC2 name is returned unchanged."""
    return instance_type[3:] if instance_type.startswith("ml.") else instance_type


def lookup(instance_type: str) -> GpuInstanceType | None:
    """The catalog entry for an EC2 or SageMaker (``ml.``) type, or ``None``."""
    return CATALOG.get(ec2_name(instance_type))


def known_types(prefix: str = "") -> list[str]:
    """Every catalogued type, with ``prefix`` (``"ml."``) put in front."""
    return sorted(prefix + name for name in CATALOG)
