"""MIG inference's model: the dataclasses the ``inference:`` section is read into, their limits
and the helpers that read them (an endpoint's layout, its models by kind).

The section's rules and its reader are :mod:`cdk_gpu_share.inference.config`, which is where
every name here is imported from too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.catalog import mig

__all__ = [
    "Copies",
    "DEFAULT_INVOCATIONS_PER_COPY",
    "InferenceConfig",
    "InferenceEndpointConfig",
    "InferenceModelConfig",
    "InferenceVpcConfig",
    "MAX_COPIES",
    "MAX_ENDPOINT_NAME_LENGTH",
    "MAX_ENVIRONMENT_ENTRIES",
    "MAX_NAME_LENGTH",
    "MIN_CPUS",
    "MIN_MEMORY_MB",
    "NAME_PATTERN",
    "ROLLING_UPDATE_BATCH_COPIES",
    "WholeGpuConfig",
    "endpoint_layout",
    "model_profile",
    "partitioned_models",
    "rolling_update_batch",
    "teams_sharing",
    "whole_gpu_models",
]

#: Endpoint and model names: they become parts of SageMaker resource names.
NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
#: SageMaker names take 63 characters; the construct adds ``-`` and a 6-character
#: generation suffix to endpoint and component names, so endpoint + model <= 55.
MAX_NAME_LENGTH = 55
MAX_ENDPOINT_NAME_LENGTH = 40
DEFAULT_INVOCATIONS_PER_COPY = 10.0
#: Copies a rolling update of an inference component starts before stopping as many old
#: ones (the MIG handler's ROLLING_BATCH_COPIES): free partitions reserved per model; above
#: 20 copies SageMaker's 5 % minimum batch applies (:func:`rolling_update_batch`).
ROLLING_UPDATE_BATCH_COPIES = 1


#: The most copies of one model (``copies`` and each of ``initial``, ``min``, ``max``). SageMaker
#: documents no maximum for an inference component's ``CopyCount``, so the bound is what the
#: largest endpoint plausibly holds: a MIG copy takes one MIG instance, a GPU holds at most 7 and a
#: MIG instance type at most 8 GPUs, so 56 copies an instance, and 10,000 copies fill about 180
#: instances of 8 GPUs, past the endpoint instance quotas AWS accounts start with. A larger
#: number is a typo, refused, rather than a plan whose search grows with it.
MAX_COPIES = 10_000


def rolling_update_batch(copies: int) -> int:
    """Copies per rolling batch at ``copies`` copies (the MIG handler's ``rolling_batch``)."""
    return max(ROLLING_UPDATE_BATCH_COPIES, -(-copies * 5 // 100))
MAX_ENVIRONMENT_ENTRIES = 16
MIN_MEMORY_MB = 128
MIN_CPUS = 0.25


@dataclass(frozen=True)
class Copies:
    """Copies of a model: ``initial`` at deploy, autoscaled between ``min`` and ``max``."""

    initial: int = 1
    min: int = 1
    max: int = 1

    @property
    def autoscaled(self) -> bool:
        """True when the copies scale between ``min`` and ``max`` (``max > min``)."""
        return self.max > self.min


@dataclass(frozen=True)
class InferenceModelConfig:
    """One model served by inference components.

    Give ``profile`` (a MIG partition per copy) or ``gpus`` (whole GPUs per copy, on
    the endpoint's ``whole_gpu`` variant), not both.
    """

    name: str
    image: str
    memory_mb: int
    model_data_url: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    profile: str | None = None
    gpus: int | None = None
    copies: Copies = field(default_factory=Copies)
    cpus: float | None = None
    team: str | None = None
    invocations_per_copy: float = DEFAULT_INVOCATIONS_PER_COPY
    network_isolation: bool = True

    def __post_init__(self) -> None:
        # The config file's shorthand: copies=3 is 3 fixed copies, a mapping is read as there.
        if not isinstance(self.copies, Copies):
            problems = V.Problems()
            copies = _copies(self.copies, f"InferenceModelConfig({self.name!r}).copies", _Reader(problems.add))
            problems.raise_if_any(label="invalid argument")
            object.__setattr__(self, "copies", copies)

    @property
    def partitioned(self) -> bool:
        """True when a copy occupies one MIG partition (``profile``), False for whole GPUs (``gpus``)."""
        return self.gpus is None


@dataclass(frozen=True)
class WholeGpuConfig:
    """The endpoint without a partition layout, for models that need whole GPUs."""

    instance_type: str
    instance_count: int = 1


@dataclass(frozen=True)
class InferenceVpcConfig:
    """Subnets and security groups the models run in (``inference.vpc``)."""
    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]


@dataclass(frozen=True)
class InferenceEndpointConfig:
    """One partitioned endpoint and the models on it."""

    name: str
    instance_type: str
    layout: str | tuple[str, ...]
    models: tuple[InferenceModelConfig, ...]
    instance_count: int = 1
    whole_gpu: WholeGpuConfig | None = None


@dataclass(frozen=True)
class InferenceConfig:
    """The validated ``inference`` section."""

    endpoints: tuple[InferenceEndpointConfig, ...]
    vpc: InferenceVpcConfig | None = None
    kms_key_arn: str | None = None

    def endpoint(self, name: str) -> InferenceEndpointConfig:
        for e in self.endpoints:
            if e.name == name:
                return e
        raise KeyError(name)


# --------------------------------------------------------------------------- helpers


def endpoint_layout(endpoint: InferenceEndpointConfig, *, field: str = "layout") -> list[str]:
    """The canonical profile names of the endpoint's layout (raises ``MigError``)."""
    gpu = mig.resolve_gpu(instance_type=endpoint.instance_type)
    layout = endpoint.layout if isinstance(endpoint.layout, str) else list(endpoint.layout)
    return mig.resolve_layout(gpu, layout, field=field)


def model_profile(endpoint: InferenceEndpointConfig, model: InferenceModelConfig) -> str:
    """The canonical MIG profile of a partitioned model (raises ``MigError``)."""
    gpu = mig.resolve_gpu(instance_type=endpoint.instance_type)
    return mig.profile(gpu, model.profile or "", field="profile").name


def partitioned_models(endpoint: InferenceEndpointConfig) -> list[InferenceModelConfig]:
    return [m for m in endpoint.models if m.partitioned]


def whole_gpu_models(endpoint: InferenceEndpointConfig) -> list[InferenceModelConfig]:
    return [m for m in endpoint.models if not m.partitioned]


def teams_sharing(models: Sequence[InferenceModelConfig]) -> list[str]:
    """The distinct teams of ``models``, when more than one team shares their instances."""
    teams = sorted({m.team for m in models if m.team})
    return teams if len(teams) > 1 else []


def _layout_text(endpoint: InferenceEndpointConfig, layout: list[str] | None) -> str:
    if layout:
        return " ".join(layout)
    return endpoint.layout if isinstance(endpoint.layout, str) else " ".join(endpoint.layout)


def _plural(n: float, word: str) -> str:
    return f"{n:g} {word}{'' if n == 1 else 's'}"


#: What records a problem: ``add(field, value, message, fix)``.
AddProblem = Callable[[str, object, str, str], None]


# The reader of one field, shared with the section's parser (inference/config.py).


class _Reader:
    def __init__(self, add_problem: AddProblem) -> None:
        self.add = add_problem

    def keys(self, raw: Mapping, allowed: set[str], where: str) -> None:
        V.unknown_keys(raw, allowed, where, self.add)

    def mapping(self, value: Any, where: str, *, required: bool = False) -> Mapping | None:
        return V.read_mapping(value, where, self.add, required=required,
                              required_fix="add it (see examples/inference.yaml for an example)")

    def string(self, value: Any, where: str, fix: str, *, pattern: str | None = None, message: str = "") -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.add(where, value, "must be a non-empty string", fix)
            return None
        if pattern and not re.match(pattern, value):
            self.add(where, value, message or f"does not match {pattern}", fix)
            return None
        return value

    def integer(self, value: Any, where: str, *, minimum: int, fix: str, maximum: int = V.MAX_INT) -> int | None:
        return V.read_int(value, where, self.add, minimum=minimum, maximum=maximum, fix=fix)

    def number(self, value: Any, where: str, *, minimum: float, fix: str) -> float | None:
        # Finite and bounded: `.inf` would pass here and crash synth inside jsii.
        return V.read_number(value, where, self.add, minimum=minimum, maximum=V.MAX_INT, fix=fix)


def _copies(value: Any, where: str, r: _Reader) -> Copies | None:
    if value is None:
        return Copies()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        n = r.integer(value, where, minimum=1, maximum=MAX_COPIES,
                      fix=f"give 1 to {MAX_COPIES:,} copies, or {{initial, min, max}}")
        return None if n is None else Copies(n, n, n)
    data = r.mapping(value, where)
    if data is None:
        return None
    r.keys(data, {"initial", "min", "max"}, where)
    vals: dict[str, int] = {}
    for key in ("initial", "min", "max"):
        if key in data:
            n = r.integer(data[key], f"{where}.{key}", minimum=1, maximum=MAX_COPIES,
                          fix=f"use 1 to {MAX_COPIES:,} copies (SageMaker needs at least one)")
            if n is None:
                return None
            vals[key] = n
    # {initial: 2} is fixed at 2; {max: 4} scales from 1 to 4; {initial: 2, max: 4} from 1.
    if "min" in vals:
        lo = vals["min"]
    elif "max" in vals:
        lo = 1
    else:
        lo = vals.get("initial", 1)
    initial = vals.get("initial", lo)
    hi = vals.get("max", max(initial, lo))
    return Copies(initial=initial, min=lo, max=hi)
