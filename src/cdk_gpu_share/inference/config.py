"""The ``inference`` section of the platform config: MIG-partitioned SageMaker endpoints.

Pure Python. :func:`parse_inference` reads the section (called by
:func:`cdk_gpu_share.core.configuration.parse.parse_config`); :func:`check_endpoint` holds every
synth-time rule of a partitioned endpoint and is used by the config parser and by
the :class:`~cdk_gpu_share.inference.construct.MigInferenceEndpoint` construct
alike, so a rule exists once.

Schema::

    inference:
      kms_key_arn: arn:aws:kms:...     # optional: key of the model data in S3 (decrypt is granted)
      vpc:                             # optional: run the models in these subnets
        subnet_ids: [subnet-0123456789abcdef0]
        security_group_ids: [sg-0123456789abcdef0]
      endpoints:
        - name: small-models           # lower-case letters, digits, hyphens
          instance_type: ml.p4d.24xlarge
          instance_count: 1            # default 1
          layout: half                 # a preset (gpu-share mig layouts) or a list of profiles
          whole_gpu:                   # optional: a second endpoint, without partitions,
            instance_type: ml.p4d.24xlarge   # for the models that give `gpus` instead of `profile`
            instance_count: 1
          models:
            - name: summarizer
              image: 763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128
              model_data_url: s3://my-models/summarizer/model.tar.gz   # optional
              environment: {OPTION_MAX_MODEL_LEN: "4096"}
              profile: mig-3g.20gb     # the partition one copy occupies
              copies: {initial: 2, min: 1, max: 4}   # or a number: fixed copies
              memory_mb: 16384         # host memory one copy needs (required)
              cpus: 4                  # host CPU cores one copy needs (optional)
              team: team-a             # optional: the owning team (config teams)
              invocations_per_copy: 10 # autoscaling target when max > min (default 10)
              network_isolation: true  # default true: the container gets no network
            - name: big-model
              image: ...
              gpus: 2                  # whole GPUs: placed on the whole_gpu endpoint
              memory_mb: 65536

The rules (docs/backends/mig-inference.md, "What synth refuses"): the layout must fit the
instance type's GPU; a model's profile must be in the layout; the copies of a
profile (sum of the models' ``copies.max``) may not exceed the partitions that
exist (its count in the layout x GPUs per instance x instances); a model that needs
whole GPUs cannot sit on a partitioned variant. Host memory and CPU are shared by
all partitions of an instance (MIG isolates the GPU only), so their sums are
checked against the instance too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.catalog import instances, mig
from cdk_gpu_share.core.errors import ConfigError, Problem
from cdk_gpu_share.inference.model import (
    DEFAULT_INVOCATIONS_PER_COPY,
    MAX_COPIES,
    MAX_ENDPOINT_NAME_LENGTH,
    MAX_ENVIRONMENT_ENTRIES,
    MAX_NAME_LENGTH,
    MIN_CPUS,
    MIN_MEMORY_MB,
    NAME_PATTERN,
    ROLLING_UPDATE_BATCH_COPIES,
    AddProblem,
    Copies,
    InferenceConfig,
    InferenceEndpointConfig,
    InferenceModelConfig,
    InferenceVpcConfig,
    WholeGpuConfig,
    _copies,
    _layout_text,
    _plural,
    _Reader,
    endpoint_layout,
    model_profile,
    partitioned_models,
    rolling_update_batch,
    teams_sharing,
    whole_gpu_models,
)

__all__ = [
    "NAME_PATTERN",
    "MAX_ENDPOINT_NAME_LENGTH",
    "Copies",
    "InferenceModelConfig",
    "WholeGpuConfig",
    "InferenceVpcConfig",
    "InferenceEndpointConfig",
    "InferenceConfig",
    "parse_inference",
    "check_endpoint",
    "endpoint_problems",
    "rolling_update_problems",
    "read_copies",
    "ROLLING_UPDATE_BATCH_COPIES",
    "rolling_update_batch",
    "endpoint_layout",
    "model_profile",
    "partitioned_models",
    "whole_gpu_models",
    "teams_sharing",
    "NAME_PATTERN",
    "MAX_NAME_LENGTH",
    "MAX_COPIES",
    "DEFAULT_INVOCATIONS_PER_COPY",
]

# --------------------------------------------------------------------------- rules


class _Found:
    """The problems found in one endpoint, in the order they are found.

    ``pre`` prefixes every field path (``inference.endpoints[0].``), so the rules below
    write fields relative to the endpoint.
    """

    def __init__(self, where: str) -> None:
        self.pre = f"{where}." if where else ""
        self.items: list[Problem] = []

    def add(self, field_: str, value: object, message: str, fix: str = "") -> None:
        self.items.append(Problem(f"{self.pre}{field_}", value, message, fix))

    def add_mig(self, exc: mig.MigError) -> None:
        """The problems of a MIG lookup, whose fields are relative to the endpoint."""
        self.items.extend(Problem(f"{self.pre}{p.field}", p.value, p.message, p.fix) for p in exc.problems)


def check_endpoint(endpoint: InferenceEndpointConfig, *, where: str = "") -> list[Problem]:
    """Every synth-time problem of ``endpoint``; each names the model, the profile and the numbers.

    ``where`` prefixes the field paths (``inference.endpoints[0]``).
    """
    found = _Found(where)
    # The fields on their own: names, counts, sizes.
    _check_endpoint_name(endpoint, found)
    count = _instance_count(endpoint, found)
    seen: dict[str, int] = {}
    for i, m in enumerate(endpoint.models):
        _check_model_name(endpoint, i, m, seen, found)
        _check_model_fields(f"models[{i}] ({m.name})", m, found)

    # The layout and the GPU: without a known MIG instance type no other rule can be checked.
    try:
        gpu = mig.resolve_gpu(instance_type=endpoint.instance_type)
        info = mig.INSTANCE_TYPES[endpoint.instance_type.strip().lower()]
    except mig.MigError as exc:
        found.add_mig(exc)
        return found.items
    try:
        layout: list[str] | None = endpoint_layout(endpoint)
    except mig.MigError as exc:
        found.add_mig(exc)
        layout = None

    wanted = _place_models(endpoint, gpu, layout, found)
    if layout is not None:
        _check_partition_counts(wanted, Counter(layout), info.gpu_count, count, found)
        found.items.extend(rolling_update_problems(endpoint, where=where))
    _check_host_capacity(endpoint, count, found)
    _check_whole_gpu(endpoint, found)
    return found.items


def _check_endpoint_name(endpoint: InferenceEndpointConfig, found: _Found) -> None:
    if not isinstance(endpoint.name, str) or not re.match(NAME_PATTERN, endpoint.name):
        found.add("name", endpoint.name, "is not a valid endpoint name", "use lower-case letters, digits and hyphens")
    elif len(endpoint.name) > MAX_ENDPOINT_NAME_LENGTH:
        found.add(
            "name",
            endpoint.name,
            f"is {len(endpoint.name)} characters long; endpoint names take at most {MAX_ENDPOINT_NAME_LENGTH}",
            "shorten it (a generation suffix is appended to the SageMaker endpoint name)",
        )


def _instance_count(endpoint: InferenceEndpointConfig, found: _Found) -> int:
    """The endpoint's instance count; 1 when it is not usable (reported), so the capacity rules still run."""
    count = endpoint.instance_count
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        found.add("instance_count", count, "must be a whole number of at least 1", "use 1 or more")
        return 1
    return count


def _check_model_name(
    endpoint: InferenceEndpointConfig, i: int, m: InferenceModelConfig, seen: dict[str, int], found: _Found
) -> None:
    """A model's name: unique on the endpoint, and short enough to name its inference component.

    ``seen`` maps each name to the first model that has it.
    """
    mwhere = f"models[{i}] ({m.name})"
    if m.name in seen:
        found.add(f"{mwhere}.name", m.name, f"duplicates the name of models[{seen[m.name]}]", "give every model a unique name")
    seen.setdefault(m.name, i)
    if not isinstance(m.name, str) or not re.match(NAME_PATTERN, m.name):
        found.add(f"{mwhere}.name", m.name, "is not a valid model name", "use lower-case letters, digits and hyphens")
    elif isinstance(endpoint.name, str) and len(endpoint.name) + 1 + len(m.name) > MAX_NAME_LENGTH:
        found.add(
            f"{mwhere}.name",
            m.name,
            f"endpoint and model names together take {len(endpoint.name) + 1 + len(m.name)} characters,"
            f" above the {MAX_NAME_LENGTH} an inference component name leaves",
            "shorten the model or the endpoint name",
        )


def _check_model_fields(mwhere: str, m: InferenceModelConfig, found: _Found) -> None:
    """The fields of one model that need nothing else: copies, host sizes, scaling target, container."""
    c = m.copies
    if not (1 <= c.min <= c.initial <= c.max):
        found.add(
            f"{mwhere}.copies",
            {"initial": c.initial, "min": c.min, "max": c.max},
            "needs 1 <= min <= initial <= max (SageMaker needs at least one copy at creation)",
            "for example copies: {initial: 1, min: 1, max: 2}",
        )
    if m.memory_mb < MIN_MEMORY_MB:
        found.add(f"{mwhere}.memory_mb", m.memory_mb, f"must be at least {MIN_MEMORY_MB}", "give the host memory one copy needs, in MB")
    if m.cpus is not None and m.cpus < MIN_CPUS:
        found.add(f"{mwhere}.cpus", m.cpus, f"must be at least {MIN_CPUS}", "give the CPU cores one copy needs, or leave it out")
    if m.invocations_per_copy <= 0:
        found.add(f"{mwhere}.invocations_per_copy", m.invocations_per_copy, "must be positive",
                  "use the invocations per copy per minute to scale at, such as 10")
    if len(m.environment) > MAX_ENVIRONMENT_ENTRIES:
        found.add(f"{mwhere}.environment", len(m.environment), f"SageMaker takes at most {MAX_ENVIRONMENT_ENTRIES} variables",
                  "drop some")
    if m.model_data_url is not None and not re.match(r"^s3://[a-z0-9.\-]{3,63}/.+", m.model_data_url):
        found.add(f"{mwhere}.model_data_url", m.model_data_url, "is not an S3 URL of a model archive",
                  "write s3://bucket/path/model.tar.gz")


def _place_models(
    endpoint: InferenceEndpointConfig, gpu: str, layout: list[str] | None, found: _Found
) -> dict[str, list[tuple[str, int]]]:
    """The partitioned models by the canonical profile they occupy, each with its ``copies.max``.

    A model that gives both or neither of ``profile`` and ``gpus``, or a profile the layout
    lacks, is reported and left out; so are the models that give ``gpus`` (checked against
    the whole-GPU endpoint).
    """
    partitions = Counter(layout or [])
    wanted: dict[str, list[tuple[str, int]]] = {}
    for i, m in enumerate(endpoint.models):
        mwhere = f"models[{i}] ({m.name})"
        if m.profile is not None and m.gpus is not None:
            found.add(
                f"{mwhere}.gpus",
                m.gpus,
                "is set together with profile",
                "give profile (a MIG partition per copy) or gpus (whole GPUs per copy, on the whole_gpu endpoint), not both",
            )
        elif m.profile is None and m.gpus is None:
            found.add(
                f"{mwhere}.profile",
                None,
                "is required: a copy on this endpoint occupies one MIG partition",
                f"set profile to one of the layout's profiles ({', '.join(sorted(partitions)) or 'see gpu-share mig layouts'}),"
                " or gpus for a model that needs whole GPUs",
            )
        elif m.gpus is not None:
            _check_gpus_have_an_endpoint(endpoint, layout, mwhere, m, found)
        else:
            name = _profile_in_layout(gpu, layout, partitions, mwhere, m, found)
            if name is not None:
                wanted.setdefault(name, []).append((m.name, m.copies.max))
    return wanted


def _check_gpus_have_an_endpoint(
    endpoint: InferenceEndpointConfig, layout: list[str] | None, mwhere: str, m: InferenceModelConfig, found: _Found
) -> None:
    """A model that gives ``gpus`` needs a whole number of them, and the endpoint's ``whole_gpu``."""
    if isinstance(m.gpus, bool) or not isinstance(m.gpus, int) or m.gpus < 1:
        found.add(f"{mwhere}.gpus", m.gpus, "must be a whole number of at least 1", "give the GPUs one copy needs")
    elif endpoint.whole_gpu is None:
        found.add(
            f"{mwhere}.gpus",
            m.gpus,
            f"model {m.name} needs {_plural(m.gpus, 'whole GPU')} per copy; a partitioned variant gives each copy"
            f" one MIG partition of one GPU ({endpoint.instance_type}, layout {_layout_text(endpoint, layout)})",
            "add whole_gpu: {instance_type: ..., instance_count: ...} to the endpoint for models that need whole"
            " GPUs, or give the model a profile that holds it",
        )


def _profile_in_layout(
    gpu: str, layout: list[str] | None, partitions: Counter[str], mwhere: str, m: InferenceModelConfig, found: _Found
) -> str | None:
    """The canonical name of a model's profile when the layout has it (``None`` and reported when not)."""
    try:
        name = mig.profile(gpu, m.profile or "", field=f"{found.pre}{mwhere}.profile").name
    except mig.MigError as exc:
        found.items.extend(exc.problems)  # their field is the full path already
        return None
    if layout is not None and name not in partitions:
        found.add(
            f"{mwhere}.profile",
            m.profile,
            f"model {m.name} wants {name}, which layout {' '.join(layout)} does not have",
            f"use one of {', '.join(sorted(partitions))}, or add {name} to the layout",
        )
        return None
    return name


def _check_partition_counts(
    wanted: dict[str, list[tuple[str, int]]], partitions: Counter[str], gpus: int, count: int, found: _Found
) -> None:
    """Each profile's copies at max may not exceed its partitions: per GPU x GPUs x instances."""
    for name, users in sorted(wanted.items()):
        total = sum(n for _, n in users)
        available = partitions[name] * gpus * count
        if total > available:
            who = ", ".join(f"{model} max {n}" for model, n in users)
            found.add(
                "models",
                who,
                f"{total} {'copy' if total == 1 else 'copies'} of {name} wanted ({who}) but only {available} exist:"
                f" {partitions[name]} per GPU x {gpus} GPUs x {_plural(count, 'instance')}",
                "lower copies.max, raise instance_count, or put more of this profile in the layout",
            )


def _check_host_capacity(endpoint: InferenceEndpointConfig, count: int, found: _Found) -> None:
    """Host memory and CPU are shared by every partition of an instance: MIG isolates the GPU only."""
    host = instances.lookup(endpoint.instance_type)
    parts = partitioned_models(endpoint)
    if host is None or not parts:
        return
    mem = sum(m.memory_mb * m.copies.max for m in parts)
    cap = host.memory_gib * 1024 * count
    if mem > cap:
        found.add(
            "models",
            f"{mem} MB",
            f"the models' memory_mb x copies.max sum to {mem} MB, above the {cap} MB of host memory of"
            f" {_plural(count, 'instance')} of {endpoint.instance_type} (MIG isolates the GPU only; host memory is shared)",
            "lower memory_mb or copies.max, or raise instance_count",
        )
    cpus = sum((m.cpus or 0) * m.copies.max for m in parts)
    vcap = host.vcpus * count
    if cpus > vcap:
        found.add(
            "models",
            f"{cpus:g} cpus",
            f"the models' cpus x copies.max sum to {cpus:g}, above the {vcap} vCPUs of {_plural(count, 'instance')}"
            f" of {endpoint.instance_type} (host CPUs are shared by all partitions)",
            "lower cpus or copies.max, or raise instance_count",
        )


def _check_whole_gpu(endpoint: InferenceEndpointConfig, found: _Found) -> None:
    """The endpoint without a layout: a known GPU instance type, used by some model, large enough."""
    wg = endpoint.whole_gpu
    if wg is None:
        return
    whole = whole_gpu_models(endpoint)
    winfo = instances.lookup(wg.instance_type) if isinstance(wg.instance_type, str) else None
    if not isinstance(wg.instance_type, str) or not wg.instance_type.startswith("ml.") or winfo is None:
        known = ", ".join(t for t in instances.known_types("ml.") if t.startswith("ml.p") or t.startswith("ml.g"))
        found.add("whole_gpu.instance_type", wg.instance_type, "is not a known SageMaker GPU instance type", f"use one of {known}")
    elif not whole:
        found.add(
            "whole_gpu",
            wg.instance_type,
            "is declared but no model gives gpus",
            "remove whole_gpu, or give gpus (instead of profile) to the models that need whole GPUs",
        )
    else:
        _check_whole_gpu_capacity(endpoint, wg, winfo.gpus, whole, found)


def _check_whole_gpu_capacity(
    endpoint: InferenceEndpointConfig, wg: WholeGpuConfig, gpus: int, whole: list[InferenceModelConfig], found: _Found
) -> None:
    """Each whole-GPU model fits one instance (``gpus`` GPUs each), and all of them at max fit the instances."""
    wcount = wg.instance_count if isinstance(wg.instance_count, int) and wg.instance_count >= 1 else 1
    if wcount != wg.instance_count:
        found.add("whole_gpu.instance_count", wg.instance_count, "must be a whole number of at least 1", "use 1 or more")
    for i, m in enumerate(endpoint.models):
        if m.partitioned or not isinstance(m.gpus, int) or m.gpus < 1:
            continue
        if m.gpus > gpus:
            found.add(
                f"models[{i}] ({m.name}).gpus",
                m.gpus,
                f"model {m.name} needs {_plural(m.gpus, 'GPU')} per copy; {wg.instance_type} has {gpus}",
                "choose a larger whole_gpu.instance_type",
            )
    need = sum(m.gpus * m.copies.max for m in whole if isinstance(m.gpus, int) and m.gpus >= 1)
    have = gpus * wcount
    if need > have:
        who = ", ".join(f"{m.name} {m.gpus} x max {m.copies.max}" for m in whole)
        found.add(
            "whole_gpu.instance_count",
            wg.instance_count,
            f"the whole-GPU models want {need} GPUs ({who}) but {_plural(wcount, 'instance')} of {wg.instance_type}"
            f" have {have}",
            "raise whole_gpu.instance_count or lower copies.max",
        )


def rolling_update_problems(endpoint: InferenceEndpointConfig, *, where: str = "") -> list[Problem]:
    """The profiles that leave no partition for a rolling update at max copies.

    A model or image change updates an inference component in place, rolling: SageMaker
    starts ``ROLLING_UPDATE_BATCH_COPIES`` new copies, then stops as many old ones (the
    handler sends that batch as ``DeploymentConfig``, for the rollback too). CloudFormation
    may update every component at once, so each partitioned model of a profile needs that
    many free partitions of it while its copies are at ``copies.max``. Profiles already
    short of partitions are reported by :func:`check_endpoint` instead.
    """
    pre = f"{where}." if where else ""
    try:
        gpu = mig.resolve_gpu(instance_type=endpoint.instance_type)
        info = mig.INSTANCE_TYPES[endpoint.instance_type.strip().lower()]
        layout = endpoint_layout(endpoint)
    except mig.MigError:
        return []
    count = endpoint.instance_count if isinstance(endpoint.instance_count, int) and endpoint.instance_count >= 1 else 1
    by_profile: dict[str, list[InferenceModelConfig]] = {}
    for m in partitioned_models(endpoint):
        try:
            by_profile.setdefault(mig.profile(gpu, m.profile or "", field="profile").name, []).append(m)
        except mig.MigError:
            continue
    problems: list[Problem] = []
    partitions = Counter(layout)
    for name, users in sorted(by_profile.items()):
        available = partitions[name] * info.gpu_count * count
        at_max = sum(m.copies.max for m in users)
        batches = [rolling_update_batch(m.copies.max) for m in users]
        reserve = sum(batches)
        if at_max > available or at_max + reserve <= available:
            continue
        who = ", ".join(f"{m.name} max {m.copies.max}" for m in users)
        starts = (
            f"{batches[0]} new copy of each model before stopping an old one"
            if set(batches) == {1}
            else "new copies before stopping as many old ones ("
            + ", ".join(f"{m.name} {b}" for m, b in zip(users, batches))
            + ")"
        )
        problems.append(
            Problem(
                f"{pre}models",
                who,
                f"{at_max} of the {available} {name} partitions are taken at max copies ({who}), leaving"
                f" {available - at_max} for rolling updates; a model or image change starts {starts} and needs {reserve}",
                f"lower copies.max so that they sum to at most {available - reserve}, raise instance_count, or put more"
                " of this profile in the layout",
            )
        )
    return problems


# --------------------------------------------------------------------------- parsing

_TOP_KEYS = {"endpoints", "vpc", "kms_key_arn"}
_ENDPOINT_KEYS = {"name", "instance_type", "instance_count", "layout", "models", "whole_gpu"}
_MODEL_KEYS = {
    "name",
    "image",
    "model_data_url",
    "environment",
    "profile",
    "gpus",
    "copies",
    "memory_mb",
    "cpus",
    "team",
    "invocations_per_copy",
    "network_isolation",
}
_IMAGE_PATTERN = r"^[\w.\-]+(:\d+)?(/[\w.\-]+)+(:[\w.\-]+|@sha256:[0-9a-f]{64})?$"
_KMS_PATTERN = r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$"

_T = TypeVar("_T")






def read_copies(value: Any, where: str, add: AddProblem) -> Copies | None:
    """A model's ``copies`` (a number, fixed, or ``{initial, min, max}``), as the section reads it."""
    return _copies(value, where, _Reader(add))


def _at(where: str, name: str) -> str:
    """The path of ``name`` under ``where`` (``name`` alone at the top of a construct's props)."""
    return f"{where}.{name}" if where else name


class _Usable:
    """Whether every field an entry is built from was usable.

    The readers return ``None`` after recording a problem; :meth:`need` notes it, and the
    reading goes on, so that every problem of an entry is reported at once.
    """

    def __init__(self, ok: bool = True) -> None:
        self.ok = ok

    def need(self, value: _T | None) -> _T | None:
        if value is None:
            self.ok = False
        return value


def _model(raw: Any, where: str, team_names: set[str] | None, r: _Reader) -> InferenceModelConfig | None:
    data = r.mapping(raw, where)
    if data is None:
        return None
    name = r.string(data.get("name"), f"{where}.name", "name the model, such as summarizer")
    if name:
        where = f"{where} ({name})"
    r.keys(data, _MODEL_KEYS, where)
    usable = _Usable(ok=name is not None)
    # Read in the order of the schema, so that the problems are listed in that order.
    fields = {
        **_model_container(data, where, r, usable),
        **_model_capacity(data, where, r, usable),
        **_model_serving(data, where, team_names, r, usable),
    }
    if not usable.ok:
        return None
    assert name is not None  # usable.ok says so
    return InferenceModelConfig(name=name, **fields)


def _model_container(data: Mapping, where: str, r: _Reader, usable: _Usable) -> dict[str, Any]:
    """What a model's container runs: ``image``, ``model_data_url`` and ``environment``."""
    image = usable.need(r.string(
        data.get("image"),
        f"{where}.image",
        "give the container image URI, such as 111122223333.dkr.ecr.us-east-1.amazonaws.com/repo:tag",
        pattern=_IMAGE_PATTERN,
        message="is not a container image URI",
    ))
    url = None
    if data.get("model_data_url") is not None:
        url = usable.need(r.string(
            data["model_data_url"],
            f"{where}.model_data_url",
            "write s3://bucket/path/model.tar.gz",
            pattern=r"^s3://[a-z0-9.\-]{3,63}/.+",
            message="is not an S3 URL of a model archive",
        ))
    env = _environment(data.get("environment"), f"{where}.environment", r, usable)
    return {"image": image, "model_data_url": url, "environment": env}


def _environment(raw: Any, where: str, r: _Reader, usable: _Usable) -> dict[str, str]:
    """The container's variables, as strings; a YAML boolean must be quoted (SageMaker wants text)."""
    env: dict[str, str] = {}
    for key, value in (r.mapping(raw, where) or {}).items():
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            env[str(key)] = str(value)
        elif isinstance(value, bool):
            r.add(f"{where}.{key}", value, "is a YAML boolean", f'quote it: "{str(value).lower()}"')
            usable.ok = False
        else:
            r.add(f"{where}.{key}", value, "must be a string", "environment values are strings")
            usable.ok = False
    return env


def _model_capacity(data: Mapping, where: str, r: _Reader, usable: _Usable) -> dict[str, Any]:
    """What one copy occupies (``profile`` or ``gpus``, ``memory_mb``, ``cpus``) and how many copies run."""
    profile = None
    if data.get("profile") is not None:
        profile = usable.need(r.string(data["profile"], f"{where}.profile", "name a MIG profile such as mig-3g.20gb"))
    gpus = None
    if data.get("gpus") is not None:
        gpus = usable.need(r.integer(data["gpus"], f"{where}.gpus", minimum=1, fix="give the whole GPUs one copy needs"))
    copies = usable.need(_copies(data.get("copies"), f"{where}.copies", r))
    memory = usable.need(r.integer(
        data.get("memory_mb"),
        f"{where}.memory_mb",
        minimum=MIN_MEMORY_MB,
        fix="give the host memory one copy needs, in MB, such as 16384",
    ))
    cpus = None
    if data.get("cpus") is not None:
        cpus = usable.need(
            r.number(data["cpus"], f"{where}.cpus", minimum=MIN_CPUS, fix="give the CPU cores one copy needs, such as 4")
        )
    return {"profile": profile, "gpus": gpus, "copies": copies, "memory_mb": memory, "cpus": cpus}


def _model_serving(
    data: Mapping, where: str, team_names: set[str] | None, r: _Reader, usable: _Usable
) -> dict[str, Any]:
    """Who owns a model and how it serves: ``team``, ``invocations_per_copy``, ``network_isolation``."""
    team = None
    if data.get("team") is not None:
        team = r.string(data["team"], f"{where}.team", "name one of the config's teams")
        # team_names is None for an endpoint built in Python: it belongs to no config.
        if team is not None and team_names is not None and team not in team_names:
            r.add(f"{where}.team", team, "is not a team of this config", f"use one of {', '.join(sorted(team_names)) or '(no teams)'}")
            usable.ok = False
    target = DEFAULT_INVOCATIONS_PER_COPY
    if data.get("invocations_per_copy") is not None:
        t = usable.need(
            r.number(data["invocations_per_copy"], f"{where}.invocations_per_copy", minimum=1e-9, fix="use a positive number such as 10")
        )
        target = t if t is not None else target
    isolation = True
    if "network_isolation" in data:
        if isinstance(data["network_isolation"], bool):
            isolation = data["network_isolation"]
        else:
            r.add(f"{where}.network_isolation", data["network_isolation"], "must be true or false", "write true or false")
            usable.ok = False
    return {"team": team, "invocations_per_copy": target, "network_isolation": isolation}


def _endpoint(raw: Any, where: str, team_names: set[str] | None, r: _Reader) -> InferenceEndpointConfig | None:
    data = r.mapping(raw, where)
    if data is None:
        return None
    name = r.string(
        data.get("name"),
        _at(where, "name"),
        "use lower-case letters, digits and hyphens",
        pattern=NAME_PATTERN,
        message="is not a valid endpoint name",
    )
    if name and where:
        where = f"{where} ({name})"
    r.keys(data, _ENDPOINT_KEYS, where)
    instance_type = r.string(
        data.get("instance_type"),
        _at(where, "instance_type"),
        f"use a MIG instance type: {', '.join(mig.INSTANCE_TYPES)}",
    )
    count: int | None = 1
    if "instance_count" in data:
        count = r.integer(data["instance_count"], _at(where, "instance_count"), minimum=1, fix="use 1 or more")
    layout_raw = data.get("layout")
    layout: str | tuple[str, ...] | None = None
    if isinstance(layout_raw, str) and layout_raw.strip():
        layout = layout_raw
    elif isinstance(layout_raw, list) and layout_raw and all(isinstance(p, str) for p in layout_raw):
        layout = tuple(layout_raw)
    else:
        r.add(
            _at(where, "layout"),
            layout_raw,
            "is required: a preset name or a list of MIG profiles",
            f"for example layout: half, or layout: [mig-3g.20gb, mig-3g.20gb]; presets: {', '.join(mig.PRESETS)}",
        )
    whole = None
    wraw = r.mapping(data.get("whole_gpu"), _at(where, "whole_gpu"))
    if wraw is not None:
        r.keys(wraw, {"instance_type", "instance_count"}, _at(where, "whole_gpu"))
        wtype = r.string(wraw.get("instance_type"), _at(where, "whole_gpu.instance_type"),
                         "give an ml. GPU instance type such as ml.p4d.24xlarge")
        wcount: int | None = 1
        if "instance_count" in wraw:
            wcount = r.integer(wraw["instance_count"], _at(where, "whole_gpu.instance_count"), minimum=1, fix="use 1 or more")
        if wtype is not None and wcount is not None:
            whole = WholeGpuConfig(wtype, wcount)
    models: list[InferenceModelConfig] = []
    mraw = data.get("models")
    if not isinstance(mraw, list) or not mraw:
        r.add(_at(where, "models"), mraw, "must be a non-empty list", "list the models this endpoint serves")
        mraw = []
    for i, entry in enumerate(mraw):
        m = _model(entry, _at(where, f"models[{i}]"), team_names, r)
        if m is not None:
            models.append(m)
    if name is None or instance_type is None or count is None or layout is None:
        return None
    if wraw is not None and whole is None:
        return None
    endpoint = InferenceEndpointConfig(
        name=name, instance_type=instance_type, instance_count=count, layout=layout, models=tuple(models), whole_gpu=whole
    )
    # Check what parsed, so the layout's problems show up together with the models'.
    complete = len(models) == len(mraw)
    for p in check_endpoint(endpoint, where=where):
        if not complete and p.field.endswith(".whole_gpu") and "no model gives gpus" in p.message:
            continue  # the model that gives gpus may be one that did not parse
        r.add(p.field, p.value, p.message, p.fix)
    return endpoint if complete else None


def model_mapping(model: InferenceModelConfig) -> object:
    """``model`` as an entry of an endpoint's ``models`` list in the config file."""
    if not isinstance(model, InferenceModelConfig):
        return model
    c = model.copies
    out: dict[str, Any] = {
        "name": model.name,
        "image": model.image,
        "memory_mb": model.memory_mb,
        "model_data_url": model.model_data_url,
        "environment": dict(model.environment) if isinstance(model.environment, Mapping) else model.environment,
        "profile": model.profile,
        "gpus": model.gpus,
        "copies": {"initial": c.initial, "min": c.min, "max": c.max} if isinstance(c, Copies) else c,
        "cpus": model.cpus,
        "team": model.team,
        "invocations_per_copy": model.invocations_per_copy,
        "network_isolation": model.network_isolation,
    }
    return {k: v for k, v in out.items() if v is not None}


def endpoint_mapping(endpoint: InferenceEndpointConfig) -> object:
    """``endpoint`` as an entry of the config file's ``inference.endpoints``."""
    if not isinstance(endpoint, InferenceEndpointConfig):
        return endpoint
    models = endpoint.models
    out: dict[str, Any] = {
        "name": endpoint.name,
        "instance_type": endpoint.instance_type,
        "instance_count": endpoint.instance_count,
        "layout": list(endpoint.layout) if isinstance(endpoint.layout, (tuple, list)) else endpoint.layout,
        "models": [model_mapping(m) for m in models] if isinstance(models, (tuple, list)) else models,
    }
    wg = endpoint.whole_gpu
    if wg is not None:
        out["whole_gpu"] = {"instance_type": wg.instance_type, "instance_count": wg.instance_count} \
            if isinstance(wg, WholeGpuConfig) else wg
    return out


def inference_mapping(inference: InferenceConfig) -> object:
    """``inference`` as the config file writes it (:func:`parse_inference` reads it back)."""
    if not isinstance(inference, InferenceConfig):
        return inference
    endpoints = inference.endpoints
    out: dict[str, Any] = {
        "endpoints": [endpoint_mapping(e) for e in endpoints] if isinstance(endpoints, (tuple, list)) else endpoints,
    }
    if inference.vpc is not None:
        out["vpc"] = vpc_mapping(inference.vpc)
    if inference.kms_key_arn is not None:
        out["kms_key_arn"] = inference.kms_key_arn
    return out


def endpoint_problems(endpoint: InferenceEndpointConfig, *, vpc: InferenceVpcConfig | None = None) -> list[Problem]:
    """Every problem of one endpoint built in Python, by the rules of the config's ``inference``
    section (fields relative to the endpoint: ``models[0] (summarizer).memory_mb``, ``vpc_config``)."""
    problems = V.Problems()
    r = _Reader(problems.add)
    _endpoint(endpoint_mapping(endpoint), "", None, r)
    if vpc is not None:
        _vpc(vpc_mapping(vpc), "vpc_config", r)
    return problems.items


def _vpc(raw: Any, where: str, r: _Reader) -> InferenceVpcConfig | None:
    vraw = r.mapping(raw, where)
    if vraw is None:
        return None
    r.keys(vraw, {"subnet_ids", "security_group_ids"}, where)
    lists: dict[str, tuple[str, ...]] = {}
    for key, prefix in (("subnet_ids", "subnet-"), ("security_group_ids", "sg-")):
        value = vraw.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.startswith(prefix) for v in value):
            r.add(f"{where}.{key}", value, f"must be a non-empty list of {prefix}... ids", f"for example [{prefix}0123456789abcdef0]")
        else:
            lists[key] = tuple(value)
    if len(lists) != 2:
        return None
    return InferenceVpcConfig(lists["subnet_ids"], lists["security_group_ids"])


def vpc_mapping(vpc: InferenceVpcConfig) -> object:
    """``vpc`` as the config file's ``inference.vpc``."""
    if not isinstance(vpc, InferenceVpcConfig):
        return vpc
    return {k: list(v) if isinstance(v, (tuple, list)) else v
            for k, v in (("subnet_ids", vpc.subnet_ids), ("security_group_ids", vpc.security_group_ids))}


def parse_inference(raw: object, teams: Sequence[object], add_problem: AddProblem) -> InferenceConfig | None:
    """Parse the ``inference`` section; record every problem with ``add_problem``.

    ``teams`` are the config's parsed teams (``TeamConfig``): a model's ``team`` must
    name one. Returns ``None`` when the section is unusable (problems recorded).
    """
    r = _Reader(add_problem)
    data = r.mapping(raw, "inference", required=True)
    if data is None:
        return None
    r.keys(data, _TOP_KEYS, "inference")
    team_names = {str(getattr(t, "name", t)) for t in teams}
    endpoints: list[InferenceEndpointConfig] = []
    eraw = data.get("endpoints")
    if not isinstance(eraw, list) or not eraw:
        r.add("inference.endpoints", eraw, "must be a non-empty list", "declare at least one endpoint (see examples/inference.yaml)")
        eraw = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(eraw):
        e = _endpoint(entry, f"inference.endpoints[{i}]", team_names, r)
        if e is None:
            continue
        if e.name in seen:
            r.add(
                f"inference.endpoints[{i}].name",
                e.name,
                f"duplicates the name of inference.endpoints[{seen[e.name]}]",
                "give every endpoint a unique name",
            )
            continue
        seen[e.name] = i
        endpoints.append(e)
    vpc = _vpc(data.get("vpc"), "inference.vpc", r)
    kms = None
    if data.get("kms_key_arn") is not None:
        kms = r.string(
            data["kms_key_arn"],
            "inference.kms_key_arn",
            "give a KMS key ARN: arn:aws:kms:REGION:ACCOUNT:key/ID",
            pattern=_KMS_PATTERN,
            message="is not a KMS key ARN",
        )
    if len(endpoints) != len(eraw):
        return None
    return InferenceConfig(endpoints=tuple(endpoints), vpc=vpc, kms_key_arn=kms)


def check_or_raise(endpoint: InferenceEndpointConfig, *, source: str | None = None) -> None:
    """Raise one ``ConfigError`` listing every problem of ``endpoint``."""
    problems = check_endpoint(endpoint)
    if problems:
        raise ConfigError(problems, source=source)
