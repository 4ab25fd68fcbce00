"""MIG sizing: the partition each model needs, and the cheapest endpoints that hold them all.

Pure Python; ``gpu-share mig fit`` prints what this module decides.

What one copy of a model needs
------------------------------
Memory, in GiB (2**30 bytes), either a measured peak (``memory_gib``) or an estimate:

* weights = parameters x bytes of the weight dtype (fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.5);
* KV cache = 2 (keys and values) x layers x KV heads x head dimension x bytes of the KV-cache
  dtype x context tokens x concurrent sequences;
* runtime overhead (CUDA context, activations, the serving framework): ``overhead_gib``, by
  default 20 % of the weights, the "up to an additional 20 %" for inference that Hugging Face
  Accelerate's model memory estimator documents (after EleutherAI's transformer math);
* headroom, so that the total fits within ``gpu_memory_utilization`` of the partition: by
  default 0.9, vLLM's default share of GPU memory a server may take.

Compute: with a throughput need (the model's tokens/s on a whole GPU of the type it was measured
on, and the tokens/s it must serve), the compute slices needed are ``ceil(7 x needed / whole)``.
This is linear in the slices, an upper bound on what a MIG partition gives: a slice is a seventh
of the streaming multiprocessors MIG hands out, fewer than the whole GPU has (an A100 lists 14 per
slice and 98 in all under MIG, of 108), and a partition gets only its share of memory bandwidth and
cache. The need applies on the GPU model it was measured on only; without one, a copy needs one slice.

A copy's profile on a GPU is the smallest (fewest slices, then least memory) whose memory (the
number in its name, in GiB, as the MIG catalog reads it; ``nvidia-smi`` reports up to 5 % less,
which the headroom covers) and compute slices cover the need. The six
kinds of profile of every GPU in the catalog are nested: each has at least the memory and the
compute of the one before, so a copy fits every partition from its own kind up.

The cheapest endpoints
----------------------
A plan is a list of variants, each an instance type, one layout (applied by SageMaker to every
GPU of its instances) and an instance count. Each model goes whole to one variant and one profile
of its layout (at least the model's own), and takes there its ``copies.max`` plus the partitions
a rolling update starts first (:func:`~cdk_gpu_share.inference.config.rolling_update_batch`),
as the endpoint rules require. The plan minimizes the hourly price, then leaves the most compute
slices free (so no copy takes a larger partition than it must when that costs nothing), then the
instances, then the variants. Only maximal layouts are tried: the price is per instance, so a
layout with fewer partitions never costs less.

The saving is measured against whole GPUs packed by the same search with one layout, the whole
GPU (:func:`whole_gpu_cost`): the same candidate types and the same freedom to mix teams, so it
depends only on the types one of the two plans uses.

Unpriced types (:func:`choose`): the priced instance types are the candidates when every model
fits one of them; otherwise every chosen type is, each costing its GPUs, and the plan is the one
with the fewest GPUs, marked unpriced. A type without a price is never a reason to refuse.

Method: for each group of models, the cheapest single variant is found by trying every priced
instance type and every maximal layout; on each, the fewest instances come from a lower bound
(the models whose own profile is of kind ``t`` or larger need that many partitions of kind ``t``
or larger), met at once when each model takes its own profile, else by a depth-first search of
the profile choices for each count between the bound and that answer. The groups are combined by
dynamic programming over the subsets of models (``O(3**n)`` groups looked up), which is exact.
Beyond :data:`EXACT_MODELS` models, the groups are the teams (or everything together), and when
the search spends :data:`SEARCH_BUDGET` nodes, the layouts left keep each model on its own
profile; either way the plan is marked not exact and reports its gap to a lower bound: every copy
costs at least its share of a GPU (the larger of its compute and memory slices over 7 and 8) at
the cheapest price per GPU, so the plan is at most ``gap`` above the optimum.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.catalog import instances, mig
from cdk_gpu_share.inference.config import Copies, read_copies, rolling_update_batch

__all__ = [
    "DTYPE_BYTES",
    "DEFAULT_OVERHEAD_FRACTION",
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "EXACT_MODELS",
    "SEARCH_BUDGET",
    "ISOLATION_NOTE",
    "Throughput",
    "ModelSpec",
    "Memory",
    "Candidate",
    "Variant",
    "Plan",
    "FitInput",
    "parse_models",
    "memory",
    "compute_slices",
    "smallest_profile",
    "set_by",
    "candidates",
    "Choice",
    "choose",
    "demand",
    "plan",
    "whole_gpu_cost",
    "plan_types",
    "lower_bound",
    "check_fits",
]

GIB = 2**30
#: Bytes per value of each dtype a model may name.
DTYPE_BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
#: Runtime overhead as a share of the weights (Hugging Face Accelerate's estimator: "up to an
#: additional 20 %" for inference).
DEFAULT_OVERHEAD_FRACTION = 0.2
#: Share of a partition's memory a copy may fill (vLLM's ``gpu_memory_utilization`` default).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
#: Up to this many models, the plan is exact (dynamic programming over subsets).
EXACT_MODELS = 10
#: Nodes the depth-first search of profile choices may visit in one plan; a plan that spends them
#: keeps, for the layouts left, each model on its own profile, and is reported as not exact.
SEARCH_BUDGET = 200_000
#: What MIG does not isolate, printed when models of different teams share an instance.
ISOLATION_NOTE = (
    "MIG isolates each partition's GPU compute and memory; models on one instance still share its CPUs,"
    " system memory, storage, network and the endpoint's routing, and the layout adds to the endpoint's"
    " provisioning time"
)

_ESTIMATE_KEYS = ("params_billion", "weight_dtype", "layers", "kv_heads", "head_dim", "kv_dtype",
                  "context_tokens", "concurrent_sequences")
_SERVING_KEYS = ("image", "model_data_url", "environment", "memory_mb", "cpus", "invocations_per_copy",
                 "network_isolation")
_MODEL_KEYS = {"name", "copies", "team", "memory_gib", *_ESTIMATE_KEYS, "throughput", "overhead_gib",
               "gpu_memory_utilization", *_SERVING_KEYS}


@dataclass(frozen=True)
class Throughput:
    """Tokens per second of a model on a whole GPU of ``measured_on``, and what it must serve."""

    measured_on: str
    whole_gpu_tokens_per_s: float
    needed_tokens_per_s: float


@dataclass(frozen=True)
class ModelSpec:
    """One model of MODELS.yaml: its memory (measured or described), copies, team, throughput."""

    name: str
    copies: Copies = field(default_factory=Copies)
    team: str | None = None
    memory_gib: float | None = None
    params_billion: float | None = None
    weight_dtype: str = "bf16"
    layers: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    kv_dtype: str = "bf16"
    context_tokens: int = 0
    concurrent_sequences: int = 1
    overhead_gib: float | None = None
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    throughput: Throughput | None = None
    #: Fields passed to the ``inference:`` section as they are (image, memory_mb, ...).
    serving: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Memory:
    """One copy's memory in GiB; ``weights``, ``kv_cache`` and ``overhead`` are None for a measured peak."""

    weights_gib: float | None
    kv_cache_gib: float | None
    overhead_gib: float | None
    headroom_gib: float
    total_gib: float

    def to_dict(self) -> dict[str, float | None]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 2)

        return {"weights_gib": r(self.weights_gib), "kv_cache_gib": r(self.kv_cache_gib),
                "overhead_gib": r(self.overhead_gib), "headroom_gib": r(self.headroom_gib),
                "total_gib": r(self.total_gib)}


@dataclass(frozen=True)
class Candidate:
    """An instance type a plan may use: its GPU, GPUs per instance, hourly price (None: unpriced)
    and what one instance costs the plan: its price, or its GPUs when the plan is unpriced."""

    instance_type: str
    gpu: str
    gpus: int
    hourly_usd: float | None
    by_gpus: bool = False

    @property
    def cost(self) -> float:
        if self.by_gpus:
            return float(self.gpus)
        assert self.hourly_usd is not None, "a priced plan holds priced types only"
        return self.hourly_usd


@dataclass(frozen=True)
class Variant:
    """One production variant: instance type, layout, instance count and which model takes which profile."""

    candidate: Candidate
    layout: tuple[str, ...]
    instance_count: int
    profiles: tuple[tuple[str, str], ...]  # (model name, profile), in the group's order

    @property
    def cost(self) -> float:
        return self.candidate.cost * self.instance_count

    @property
    def gpus(self) -> int:
        return self.candidate.gpus * self.instance_count

    @property
    def hourly_usd(self) -> float | None:
        price = self.candidate.hourly_usd
        return None if price is None else price * self.instance_count


@dataclass(frozen=True)
class Plan:
    """The variants, their cost, and whether the search was exact (else its gap to a lower bound).

    ``priced``: the plan minimized the hourly price; otherwise the GPUs (some type had no price),
    and ``cost`` and ``lower_bound`` count GPUs."""

    variants: tuple[Variant, ...]
    exact: bool
    lower_bound: float
    priced: bool = True

    @property
    def cost(self) -> float:
        return sum(v.cost for v in self.variants)

    @property
    def hourly_usd(self) -> float | None:
        """The hourly price, or None when a variant's type has no price."""
        prices = [v.hourly_usd for v in self.variants]
        return None if None in prices else sum(p for p in prices if p is not None)

    @property
    def gpus(self) -> int:
        return sum(v.gpus for v in self.variants)

    @property
    def instances(self) -> int:
        return sum(v.instance_count for v in self.variants)

    @property
    def gap(self) -> float:
        """How far above the lower bound the plan may be, as a fraction (0 when exact)."""
        if self.exact or self.lower_bound <= 0:
            return 0.0
        return max(0.0, self.cost / self.lower_bound - 1)


@dataclass(frozen=True)
class FitInput:
    """MODELS.yaml: the models and the prices that replace the catalog's."""

    models: tuple[ModelSpec, ...]
    prices: Mapping[str, float]


# --------------------------------------------------------------------------- reading MODELS.yaml

AddProblem = Callable[[str, object, str, str], None]


def _dtype(value: Any, where: str, add: AddProblem) -> str | None:
    if isinstance(value, str) and value.strip().lower() in DTYPE_BYTES:
        return value.strip().lower()
    add(where, value, "is not a dtype this estimate knows", f"use one of {', '.join(DTYPE_BYTES)}")
    return None


def _positive(value: Any, where: str, add: AddProblem, example: str) -> float | None:
    return V.read_number(value, where, add, above=0, maximum=V.MAX_INT, type_fix=f"write a number such as {example}")


def _throughput(raw: Any, where: str, add: AddProblem) -> Throughput | None:
    data = V.read_mapping(raw, where, add)
    if data is None:
        return None
    V.unknown_keys(data, {"measured_on", "whole_gpu_tokens_per_s", "needed_tokens_per_s"}, where, add)
    gpu = data.get("measured_on")
    known = {g.lower(): g for g in mig.GPUS}
    if not isinstance(gpu, str) or gpu.strip().lower() not in known:
        add(f"{where}.measured_on", gpu, "is not a GPU of the MIG catalog", f"use one of {', '.join(mig.GPUS)}")
        gpu = None
    whole = _positive(data.get("whole_gpu_tokens_per_s"), f"{where}.whole_gpu_tokens_per_s", add, "2400")
    need = _positive(data.get("needed_tokens_per_s"), f"{where}.needed_tokens_per_s", add, "600")
    if gpu is None or whole is None or need is None:
        return None
    return Throughput(known[gpu.strip().lower()], whole, need)


def _model(raw: Any, where: str, add: AddProblem) -> ModelSpec | None:
    data = V.read_mapping(raw, where, add, required=True, required_fix="give the model's name, copies and memory")
    if data is None:
        return None
    V.unknown_keys(data, _MODEL_KEYS, where, add)
    before = [0]

    def counting(*a: Any) -> None:
        before[0] += 1
        add(*a)

    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        counting(f"{where}.name", name, "must be a non-empty string", "name the model, e.g. llama3-8b")
    copies = read_copies(data.get("copies"), f"{where}.copies", counting)
    team = data.get("team")
    if team is not None and (not isinstance(team, str) or not team.strip()):
        counting(f"{where}.team", team, "must be a team name", "give the owning team's name, or leave team out")
    kwargs: dict[str, Any] = {}
    if data.get("memory_gib") is not None:
        kwargs["memory_gib"] = _positive(data["memory_gib"], f"{where}.memory_gib", counting, "20")
    else:
        missing = [k for k in ("params_billion", "layers", "kv_heads", "head_dim", "context_tokens") if k not in data]
        if missing:
            counting(f"{where}.memory_gib", None, f"is missing, and so is the estimate's {', '.join(missing)}",
                     "give memory_gib (a measured peak), or params_billion, layers, kv_heads, head_dim and"
                     " context_tokens to estimate it")
        else:
            kwargs["params_billion"] = _positive(data["params_billion"], f"{where}.params_billion", counting, "8.03")
            for key in ("layers", "kv_heads", "head_dim", "context_tokens"):
                kwargs[key] = V.read_int(data[key], f"{where}.{key}", counting, minimum=1)
            kwargs["concurrent_sequences"] = V.read_int(data.get("concurrent_sequences", 1),
                                                        f"{where}.concurrent_sequences", counting, minimum=1)
            for key in ("weight_dtype", "kv_dtype"):
                kwargs[key] = _dtype(data.get(key, "bf16"), f"{where}.{key}", counting)
    if data.get("overhead_gib") is not None:
        kwargs["overhead_gib"] = V.read_number(data["overhead_gib"], f"{where}.overhead_gib", counting, minimum=0,
                                               maximum=V.MAX_INT, type_fix="write GiB such as 2")
    if data.get("gpu_memory_utilization") is not None:
        kwargs["gpu_memory_utilization"] = V.read_number(
            data["gpu_memory_utilization"], f"{where}.gpu_memory_utilization", counting, above=0, maximum=1,
            fix="give the share of the partition's memory a copy may fill, above 0 and at most 1, e.g. 0.9")
    if data.get("throughput") is not None:
        kwargs["throughput"] = _throughput(data["throughput"], f"{where}.throughput", counting)
    if before[0] or copies is None or any(v is None for v in kwargs.values()):
        return None
    serving = {k: data[k] for k in _SERVING_KEYS if k in data}
    return ModelSpec(name=str(name), copies=copies, team=team, serving=serving, **kwargs)


def _prices(raw: Any, add: AddProblem) -> dict[str, float]:
    data = V.read_mapping(raw, "prices", add)
    out: dict[str, float] = {}
    for key, value in (data or {}).items():
        name = str(key).strip().lower()
        if name not in mig.INSTANCE_TYPES:
            add(V.key("prices", key), value, "is not a MIG-capable SageMaker instance type",
                f"use one of {', '.join(mig.INSTANCE_TYPES)}")
            continue
        usd = V.read_number(value, V.key("prices", key), add, above=0, maximum=V.MAX_INT,
                            type_fix="write the on-demand USD per instance-hour, e.g. 37.688")
        if usd is not None:
            out[name] = usd
    return out


def parse_models(raw: object, *, source: str | None = None) -> FitInput:
    """MODELS.yaml as data; a :class:`ConfigError` naming every bad field, its value and the fix."""
    problems = V.Problems()
    data = V.read_mapping(raw, "models file", problems.add, required=True,
                          required_fix="write models: [...] (see docs/backends/mig-inference.md)")
    models: list[ModelSpec] = []
    prices: dict[str, float] = {}
    if data is not None:
        V.unknown_keys(data, {"models", "prices"}, "models file", problems.add)
        entries = data.get("models")
        if not isinstance(entries, list) or not entries:
            problems.add("models", entries, "must be a non-empty list", "list the models to serve, each with a name")
            entries = []
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            m = _model(entry, f"models[{i}]", problems.add)
            if m is None:
                continue
            if m.name in seen:
                problems.add(f"models[{i}].name", m.name, f"duplicates models[{seen[m.name]}]", "give every model a unique name")
                continue
            seen[m.name] = i
            models.append(m)
        prices = _prices(data.get("prices"), problems.add)
    problems.raise_if_any(source=source, label="invalid models file")
    return FitInput(tuple(models), prices)


# --------------------------------------------------------------------------- what one copy needs


def memory(model: ModelSpec) -> Memory:
    """One copy's memory: weights, KV cache, overhead and the headroom to ``gpu_memory_utilization``."""
    if model.memory_gib is not None:
        total = model.memory_gib / model.gpu_memory_utilization
        return Memory(None, None, None, total - model.memory_gib, total)
    weights = (model.params_billion or 0) * 1e9 * DTYPE_BYTES[model.weight_dtype] / GIB
    kv = (2 * model.layers * model.kv_heads * model.head_dim * DTYPE_BYTES[model.kv_dtype]
          * model.context_tokens * model.concurrent_sequences) / GIB
    overhead = model.overhead_gib if model.overhead_gib is not None else DEFAULT_OVERHEAD_FRACTION * weights
    used = weights + kv + overhead
    total = used / model.gpu_memory_utilization
    return Memory(weights, kv, overhead, total - used, total)


def compute_slices(model: ModelSpec) -> int:
    """Compute slices one copy needs: ``ceil(7 x needed / whole-GPU throughput)``, at least 1."""
    t = model.throughput
    if t is None:
        return 1
    return max(1, math.ceil(mig.COMPUTE_SLICES * t.needed_tokens_per_s / t.whole_gpu_tokens_per_s - 1e-9))


def smallest_profile(model: ModelSpec, gpu: str) -> str | None:
    """The smallest profile of ``gpu`` that holds one copy, or None (more than a whole GPU, or a
    throughput measured on another GPU model)."""
    if model.throughput is not None and model.throughput.measured_on != gpu:
        return None
    need, slices = memory(model).total_gib, compute_slices(model)
    for name in mig.GPUS[gpu]:
        p = mig.profile(gpu, name)
        if p.memory_gb >= need - 1e-9 and p.compute_slices >= slices:
            return p.name
    return None


def set_by(model: ModelSpec) -> str:
    """What sets a copy's partition: ``memory``, ``compute`` (its throughput needs more slices than
    the partition its memory needs has) or ``memory and compute`` (both need that partition). A model
    without a throughput need asks one slice, which every partition has: memory sets it."""
    t = model.throughput
    if t is None:
        return "memory"
    need, slices = memory(model).total_gib, compute_slices(model)
    profiles = [mig.profile(t.measured_on, name) for name in mig.GPUS[t.measured_on]]
    by_memory = next((i for i, p in enumerate(profiles) if p.memory_gb >= need - 1e-9), len(profiles))
    by_compute = next((i for i, p in enumerate(profiles) if p.compute_slices >= slices), len(profiles))
    if by_memory == by_compute:
        return "memory and compute"
    return "memory" if by_memory > by_compute else "compute"


def demand(model: ModelSpec) -> int:
    """Partitions a model takes: ``copies.max`` and the first batch of a rolling update."""
    return model.copies.max + rolling_update_batch(model.copies.max)


def candidates(prices: Mapping[str, float], *, gpu: str | None = None, instance_types: Sequence[str] = (),
               catalog: Mapping[str, float] = instances.ON_DEMAND_USD_PER_HOUR) -> tuple[list[Candidate], list[Candidate]]:
    """The MIG-capable instance types a plan may use, restricted to ``gpu`` or ``instance_types``:
    those with a price (``prices``, else ``catalog``: the dated catalog, or none when the prices
    were read from AWS), and those without one."""
    chosen = [t.strip().lower() for t in instance_types] or list(mig.INSTANCE_TYPES)
    priced, unpriced = [], []
    for name in chosen:
        info = mig.INSTANCE_TYPES[name]
        if gpu is not None and info.gpu != gpu:
            continue
        price = prices.get(name, catalog.get(name))
        if price is None:
            unpriced.append(Candidate(name, info.gpu, info.gpu_count, None, by_gpus=True))
        else:
            priced.append(Candidate(name, info.gpu, info.gpu_count, price))
    return priced, unpriced


@dataclass(frozen=True)
class Choice:
    """The candidates a plan is made of, and the unpriced types left out of a priced plan."""

    candidates: tuple[Candidate, ...]
    priced: bool
    left_out: tuple[str, ...]


def choose(models: Sequence[ModelSpec], priced: Sequence[Candidate], unpriced: Sequence[Candidate]) -> Choice:
    """The priced types, when every model fits one of them (the unpriced left out); otherwise every
    type, each costing its GPUs, so that a type without a price still gets an answer."""
    if not unpriced or (priced and all(any(smallest_profile(m, c.gpu) for c in priced) for m in models)):
        return Choice(tuple(priced), True, tuple(c.instance_type for c in unpriced))
    order = list(mig.INSTANCE_TYPES)
    every = sorted((Candidate(c.instance_type, c.gpu, c.gpus, c.hourly_usd, by_gpus=True) for c in [*priced, *unpriced]),
                   key=lambda c: order.index(c.instance_type))
    return Choice(tuple(every), False, ())


# --------------------------------------------------------------------------- packing


@dataclass(frozen=True)
class _Item:
    """A model as the search sees it: partitions it takes, and its own profile's index per GPU."""

    name: str
    demand: int
    own: Mapping[str, int | None]


@dataclass(frozen=True)
class _Shape:
    """A maximal layout of a GPU: its profiles and how many of each kind (smallest kind first)."""

    profiles: tuple[str, ...]
    per_kind: tuple[int, ...]


def _shapes(gpu: str, whole_gpus: bool = False) -> list[_Shape]:
    """The maximal layouts of ``gpu``; with ``whole_gpus``, only the whole GPU (the largest kind)."""
    kinds = mig.GPUS[gpu]
    if whole_gpus:
        return [_Shape((kinds[-1],), tuple(int(k == kinds[-1]) for k in kinds))]
    return [_Shape(layout.profiles, tuple(layout.profiles.count(k) for k in kinds)) for layout in mig.layouts(gpu)]


@functools.cache
def _kind_slices(gpu: str) -> tuple[int, ...]:
    """Compute slices of each kind of ``gpu`` (smallest kind first)."""
    return tuple(mig.profile(gpu, name).compute_slices for name in mig.GPUS[gpu])


#: The order of plans: (cost, compute slices left free negated, instances, variants). At equal cost
#: the plan that leaves the most slices free wins: no copy takes a partition larger than it must
#: when a layout of smaller partitions costs the same, and what is left free can serve more copies.
Key = tuple[float, int, int, int]
_NO_PLAN: Key = (math.inf, 0, 0, 0)


def _instances_needed(items: Sequence[_Item], kinds: Sequence[int], per_kind: Sequence[int], gpus: int) -> int:
    load = [0] * len(per_kind)
    for it, k in zip(items, kinds):
        load[k] += it.demand
    return max(math.ceil(load[k] / (per_kind[k] * gpus)) for k in range(len(load)) if load[k])


def _fewest_instances(items: Sequence[_Item], gpu: str, gpus: int, shape: _Shape,
                      budget: list[int], worth: int | None = None) -> tuple[int, tuple[int, ...]] | None:
    """The fewest instances with ``shape`` on every GPU that hold ``items`` (each model whole on one
    kind at least its own), and the kinds that use the fewest compute slices at that count; None
    when some model fits no partition of the layout.

    A lower bound first (Hall: the models whose own kind is ``t`` or larger need the partitions of
    kind ``t`` or larger); if each model on its own kind meets it, that is the answer (no choice
    uses fewer slices). Otherwise a depth-first search tries each count between the two; ``budget``
    (nodes left, shared by a plan) bounds it, and a spent budget leaves the best answer found (the
    greedy one at worst), which the plan then reports as not exact. Above ``worth`` instances (a
    count that costs more than a variant already found) the first fit is enough.
    """
    per_kind, n_kinds = shape.per_kind, len(shape.per_kind)
    own = [it.own[gpu] for it in items]
    options = []
    for o in own:
        if o is None:
            return None
        fits = tuple(k for k in range(o, n_kinds) if per_kind[k])
        if not fits:
            return None
        options.append(fits)
    low = 1
    for t in range(n_kinds):
        need = sum(it.demand for it, o in zip(items, own) if o is not None and o >= t)
        if need:
            low = max(low, math.ceil(need / (sum(per_kind[t:]) * gpus)))
    greedy = tuple(o[0] for o in options)
    high = _instances_needed(items, greedy, per_kind, gpus)
    if high == low:
        return high, greedy
    order = sorted(range(len(items)), key=lambda i: -items[i].demand)
    slices = _kind_slices(gpu)
    for count in range(low, high):
        if budget[0] <= 0:
            break  # a spent budget answers greedily at once: the time never grows with the counts
        chosen = _assign(items, options, order, [per_kind[k] * gpus * count for k in range(n_kinds)], slices, budget,
                         fewest_slices=worth is None or count <= worth)
        if chosen is not None:
            return count, chosen
    return high, greedy


def _assign(items: Sequence[_Item], options: Sequence[tuple[int, ...]], order: Sequence[int], left: list[int],
            slices: Sequence[int], budget: list[int], fewest_slices: bool = True) -> tuple[int, ...] | None:
    """Each model on one kind of its ``options`` within the partitions ``left`` per kind, using the
    fewest compute slices (depth first, largest models first, smallest kinds first, a branch cut
    once even its smallest kinds cannot beat the best found), or None. Without ``fewest_slices``,
    the first that fits."""
    chosen = [0] * len(items)
    # The fewest slices the models from each position on can use: each on its smallest option.
    floor = [0] * (len(order) + 1)
    for pos in range(len(order) - 1, -1, -1):
        i = order[pos]
        floor[pos] = floor[pos + 1] + items[i].demand * slices[options[i][0]]
    best: list[Any] = [math.inf, None]

    def place(pos: int, used: int) -> None:
        if used + floor[pos] >= best[0]:
            return
        if pos == len(order):
            best[:] = [used if fewest_slices else -math.inf, tuple(chosen)]
            return
        if budget[0] <= 0:
            return
        budget[0] -= 1
        i = order[pos]
        d = items[i].demand
        for k in options[i]:
            if left[k] >= d:
                left[k] -= d
                chosen[i] = k
                place(pos + 1, used + d * slices[k])
                left[k] += d
                if best[0] <= used + floor[pos]:
                    return  # no choice left can use fewer slices (or the first fit was enough)

    place(0, 0)
    return best[1]


def _free_slices(items: Sequence[_Item], gpu: str, gpus: int, shape: _Shape, count: int, kinds: Sequence[int]) -> int:
    """Compute slices of the partitions no copy takes, on ``count`` instances with ``shape``."""
    slices = _kind_slices(gpu)
    total = count * gpus * sum(n * s for n, s in zip(shape.per_kind, slices))
    return total - sum(it.demand * slices[k] for it, k in zip(items, kinds))


def _cheapest_variant(items: Sequence[_Item], cands: Sequence[Candidate], budget: list[int],
                      whole_gpus: bool = False) -> tuple[Key, Variant | None]:
    """The cheapest single variant for ``items``: every candidate type and maximal layout (or only
    whole GPUs)."""
    best: tuple[Key, Variant | None] = (_NO_PLAN, None)
    for c in cands:
        kinds = mig.GPUS[c.gpu]
        for shape in _shapes(c.gpu, whole_gpus):
            # Only a count that can cost no more than the best so far is worth the fewest slices.
            worth = None if math.isinf(best[0][0]) else math.floor(best[0][0] / c.cost + 1e-9)
            found = _fewest_instances(items, c.gpu, c.gpus, shape, budget, worth)
            if found is None:
                continue
            count, chosen = found
            key = (round(c.cost * count, 6), -_free_slices(items, c.gpu, c.gpus, shape, count, chosen), count, 1)
            if key < best[0]:
                profiles = tuple((it.name, kinds[k]) for it, k in zip(items, chosen))
                best = (key, Variant(c, shape.profiles, count, profiles))
    return best


def _add(a: Key, b: Key) -> Key:
    return (round(a[0] + b[0], 6), a[1] + b[1], a[2] + b[2], a[3] + b[3])


def plan(models: Sequence[ModelSpec], cands: Sequence[Candidate], *, isolate_teams: bool = False,
         whole_gpus: bool = False, progress: Callable[[float], None] | None = None) -> Plan | None:
    """The cheapest variants that hold every copy of ``models`` (None when some model fits no candidate).

    ``whole_gpus``: every GPU unpartitioned (one whole-GPU partition each), the baseline the saving
    is measured against, searched the same way. ``progress``: called with the share of the search
    done (the subsets of models planned), for a command's progress bar."""
    models = list(models)
    if not models:
        return Plan((), True, 0.0)
    gpus = {c.gpu for c in cands}
    items = []
    for m in models:
        own = {g: smallest_profile(m, g) for g in gpus}
        items.append(_Item(m.name, demand(m), {g: None if p is None else mig.GPUS[g].index(p) for g, p in own.items()}))
    budget = [SEARCH_BUDGET]
    memo: dict[frozenset[int], tuple[Key, Variant | None]] = {}

    def group_cost(ids: frozenset[int]) -> tuple[Key, Variant | None]:
        if ids not in memo:
            if isolate_teams and len({models[i].team for i in ids}) > 1:
                memo[ids] = (_NO_PLAN, None)
            else:
                memo[ids] = _cheapest_variant([items[i] for i in sorted(ids)], cands, budget, whole_gpus)
        return memo[ids]

    if len(models) <= EXACT_MODELS:
        variants, exact = _subset_dp(len(models), group_cost, progress), True
    else:
        variants, exact = _by_team(models, group_cost, isolate_teams), False
    if variants is None:
        return None
    priced = not any(c.by_gpus for c in cands)
    return Plan(tuple(variants), exact and budget[0] > 0, lower_bound(models, cands), priced)


def _subset_dp(n: int, group_cost: Callable[[frozenset[int]], tuple[Key, Variant | None]],
               progress: Callable[[float], None] | None = None) -> list[Variant] | None:
    """Exact: the best split of the models into groups, over every subset (``O(3**n)``)."""
    full = (1 << n) - 1
    best: dict[int, tuple[Key, list[Variant]]] = {0: ((0.0, 0, 0, 0), [])}
    for mask in range(1, full + 1):
        if progress is not None and mask % 16 == 0:
            progress(mask / full)
        low = mask & -mask
        rest = mask ^ low
        found: tuple[Key, list[Variant]] | None = None
        sub = rest
        while True:
            group = sub | low
            key, variant = group_cost(frozenset(i for i in range(n) if group >> i & 1))
            tail = best.get(mask ^ group)
            if variant is not None and tail is not None:
                total = _add(key, tail[0])
                if found is None or total < found[0]:
                    found = (total, [*tail[1], variant])
            if sub == 0:
                break
            sub = (sub - 1) & rest
        if found is not None:
            best[mask] = found
    result = best.get(full)
    return None if result is None else result[1]


def _by_team(models: Sequence[ModelSpec], group_cost: Callable[[frozenset[int]], tuple[Key, Variant | None]],
             isolate_teams: bool) -> list[Variant] | None:
    """Many models: one group per team (or all together, if cheaper and allowed), smallest profiles."""
    teams: dict[str | None, list[int]] = {}
    for i, m in enumerate(models):
        teams.setdefault(m.team, []).append(i)
    options = [[frozenset(ids) for ids in teams.values()]]
    if not isolate_teams:
        options.append([frozenset(range(len(models)))])
    best: tuple[Key, list[Variant]] | None = None
    for groups in options:
        key: Key = (0.0, 0, 0, 0)
        variants: list[Variant] = []
        for ids in groups:
            gkey, variant = group_cost(ids)
            if variant is None:
                break
            key, variants = _add(key, gkey), [*variants, variant]
        else:
            if best is None or key < best[0]:
                best = (key, variants)
    return None if best is None else best[1]


def lower_bound(models: Sequence[ModelSpec], cands: Sequence[Candidate]) -> float:
    """No plan costs less: each copy pays at least its share of a GPU at the cheapest cost per GPU."""
    total = 0.0
    for m in models:
        shares = []
        for c in cands:
            own = smallest_profile(m, c.gpu)
            if own is not None:
                p = mig.profile(c.gpu, own)
                share = max(p.compute_slices / mig.COMPUTE_SLICES, p.memory_slices / mig.MEMORY_SLICES)
                shares.append(share * c.cost / c.gpus)
        total += demand(m) * min(shares, default=0.0)
    return total


def whole_gpu_cost(models: Sequence[ModelSpec], cands: Sequence[Candidate], *,
                   isolate_teams: bool = False) -> tuple[float, dict[str, int]]:
    """Each copy (and its rolling-update spare) on a whole GPU, packed with the freedom the MIG plan
    has (the given candidate types, models of different teams together unless ``isolate_teams``):
    the cost (the hourly price, or the GPUs of an unpriced plan) and the instances per type.

    The saving compares a plan with this packing on the plan's own types (:func:`plan_types`), so
    it never depends on a listed type the plan does not use; every whole-GPU packing is also a MIG
    plan (the whole-GPU layout), so the MIG plan never costs more on its own types."""
    fitting = [m for m in models if any(smallest_profile(m, c.gpu) is not None for c in cands)]
    found = plan(fitting, cands, isolate_teams=isolate_teams, whole_gpus=True)
    if found is None:
        return 0.0, {}
    count: Counter[str] = Counter()
    for v in found.variants:
        count[v.candidate.instance_type] += v.instance_count
    return found.cost, dict(count)


def plan_types(found: Plan, cands: Sequence[Candidate]) -> list[Candidate]:
    """The candidates of the instance types ``found`` uses: what its whole-GPU comparison may use."""
    used = {v.candidate.instance_type for v in found.variants}
    return [c for c in cands if c.instance_type in used]


def check_fits(models: Sequence[ModelSpec], cands: Sequence[Candidate]) -> None:
    """Raise a :class:`ConfigError` naming each model no candidate GPU can hold, with what it needs."""
    problems = V.Problems()
    for i, m in enumerate(models):
        if any(smallest_profile(m, c.gpu) is not None for c in cands):
            continue
        mem = memory(m)
        gpus = sorted({c.gpu for c in cands})
        if m.throughput is not None and m.throughput.measured_on not in gpus:
            problems.add(f"models[{i}].throughput.measured_on", m.throughput.measured_on,
                         f"is none of the candidate GPUs ({', '.join(gpus) or 'none'})",
                         "measure it on one of them, or choose its instance type with --gpu/--instance-type")
            continue
        problems.add(f"models[{i}]", m.name,
                     f"needs {mem.total_gib:.1f} GiB and {compute_slices(m)} of {mig.COMPUTE_SLICES} compute slices"
                     f" per copy, more than a whole GPU of {', '.join(gpus) or 'no candidate type'}: MIG cannot serve it",
                     "serve it on whole GPUs (a model with gpus: on the endpoint's whole_gpu variant), quantize it,"
                     " or lower context_tokens or concurrent_sequences")
    problems.raise_if_any(label="cannot be served on MIG")

