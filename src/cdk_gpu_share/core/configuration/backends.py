"""What every layer asks of a backend, and the one list of backends.

A backend (AWS Batch quota management, HyperPod task governance, the classic fair-share
queue, ...) is a package under :mod:`cdk_gpu_share.backends` whose module holds one
:class:`BackendSpec`. The config parser, the validator, ``plan``, the simulator's
scenario, the JSON schema, the platform and team stacks, ``gpu-share summary`` and
``gpu-share status`` loop over :func:`registered` and name no backend; each asks the spec
for its part. The construct and the status reader are named by dotted paths
(:attr:`BackendSpec.construct`, :attr:`BackendSpec.status`), so that this module, like the
rest of ``core``, never loads the CDK or boto3.

The built-in backends are listed once, in :data:`BUILTIN`, in the order every output
shows them; :func:`register` adds one at run time (a test's toy backend, a plugin)::

    from cdk_gpu_share.core.configuration.backends import register
    register(MyBackend())        # its section key becomes a top-level key of platform.yaml
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cdk_gpu_share.core.configuration.model import EXTRA_SECTIONS
from cdk_gpu_share.core.errors import Problem

if TYPE_CHECKING:
    from cdk_gpu_share.core.configuration.model import PlatformConfig, TeamConfig
    from cdk_gpu_share.core.configuration.windows import Window
    from cdk_gpu_share.core.validation import Problems

#: The built-in backends: the module of each holds its spec as ``SPEC``. A new backend is a
#: package under ``cdk_gpu_share/backends/`` and one line here.
BUILTIN: tuple[str, ...] = (
    "cdk_gpu_share.backends.batch_quota",
    "cdk_gpu_share.backends.hyperpod",
    "cdk_gpu_share.backends.fairshare",
    "cdk_gpu_share.backends.kueue",
)


@dataclass(frozen=True)
class SectionCheck:
    """What a backend's rules see: its section, the teams and where each team is in the input."""

    key: str
    section: Any
    #: Every team of the config, and those whose guarantee names an instance type of the section.
    teams: Sequence[TeamConfig]
    members: Sequence[TeamConfig]
    #: The field path of each team (``teams[1] (team-b)``), by name.
    paths: Mapping[str, str]
    platform: str
    #: The names an earlier rule refused: a bad name is reported once, there.
    refused: frozenset[str] = frozenset()
    #: The organisation's tree (the config's ``groups``), for the rules that name its groups.
    groups: Sequence[Any] = ()

    @property
    def named(self) -> list[TeamConfig]:
        """The members whose name no earlier rule refused."""
        return [t for t in self.members if t.name not in self.refused]


#: A rule of one backend: the problems it finds, each naming the field, the value and the fix.
Rule = Callable[[SectionCheck], Iterable[Problem]]


@runtime_checkable
class BackendSpec(Protocol):
    """What a backend tells every layer. Attributes are data; methods are pure (no CDK, no boto3)."""

    #: The top-level key of its section in platform.yaml (``batch_quota``) and the name
    #: ``PlatformConfig.backend(key)``, ``gpu-share simulate --backend`` and the JSON use.
    key: str
    #: One line naming the service and how it shares (``plan``, ``validate`` and ``summary``).
    strategy: str
    #: How the "names an instance type that no backend declares" fix names this section,
    #: such as ``hyperpod (ml. types)``.
    capacity_hint: str
    #: The borrow limit the service applies to a team that gives no ``borrow_limit_percent``
    #: (percent of its guarantee); None: unlimited.
    default_borrow_percent: int | None
    #: True when the service lends and borrows whole instances (a Batch quota share's capacity
    #: units): what a team may borrow is then a whole number of instances, rounded down.
    borrows_whole_instances: bool
    #: The least guarantee, in instances of a type of its section, that a team may have on it (a
    #: Batch quota share's capacity limit is at least 1): the advisor searches from there.
    least_guarantee_instances: int
    #: True when its jobs are AWS Batch service jobs (SageMaker Training jobs submitted through a
    #: quota-management queue): the job archive then adds a details record per job, which costs.
    service_jobs: bool
    #: ``module:Class`` of the construct that deploys the section (loaded by the stacks only).
    construct: str
    #: The module that reads a running queue of the backend for ``gpu-share status``
    #: (:func:`cdk_gpu_share.cli.status_cmd.readers`), or None.
    status: str | None
    #: Its rules across teams and section, each a small named function (see :class:`SectionCheck`).
    rules: tuple[Rule, ...]
    #: The CloudFormation types ``gpu-share summary`` counts for it, each with its label (plural).
    resource_labels: tuple[tuple[str, str], ...]
    #: The keys of each object its section holds, by the name the schema's descriptions use
    #: (``{"fairshare": ..., "reclaim": ...}``); the schema's test compares them with the descriptions.
    section_keys: Mapping[str, frozenset[str]]
    #: The words an editor shows on hover for the section (key ``""``: its top-level key) and the
    #: keys of each object it holds, by the same names as :attr:`section_keys`.
    descriptions: Mapping[str, Mapping[str, str]]

    def parse(self, raw: Any, problems: Problems) -> Any | None:
        """The section read from ``raw`` (None when absent); every problem recorded in ``problems``."""
        ...

    def schema(self) -> dict[str, Any]:
        """The JSON-schema fragment of the section."""
        ...

    def to_mapping(self, section: Any) -> Any:
        """The section as the config file writes it (:meth:`parse` reads it back): how a config
        built in Python meets the same rules as one read from YAML."""
        ...

    def describe_resource(self, resource: Mapping[str, Any]) -> list[str]:
        """``gpu-share summary``'s lines for one resource of a synthesized template (a share, a quota), or none."""
        ...

    def plan_extras(self, section: Any) -> dict[str, Any]:
        """Lines ``plan`` shows under the backend's table besides the teams (key: text)."""
        ...

    def plan_team_extras(self, section: Any, teams: Sequence[TeamConfig]) -> dict[str, Any]:
        """Lines ``plan`` shows under the backend's table that depend on its teams (key: text)."""
        ...

    def window_deployment(self, section: Any, windows: Sequence[Window]) -> list[str]:
        """How the backend's deployment follows the config's time windows, a line each (``plan``)."""
        ...

    def deployed_guarantee(self, resource: Mapping[str, Any]) -> dict[str, float]:
        """What a synthesized resource of the backend guarantees a team, in instances per type
        (as ``plan`` counts them): ``gpu-share summary`` adds them up to the fleet's guarantee."""
        ...

    def idle_costs(self, config: PlatformConfig, section: Any) -> list[dict[str, str]]:
        """What the section costs while no job runs: one ``{backend, resource, what}`` per billed resource."""
        ...

    def in_team_preemption_text(self, team: TeamConfig) -> str:
        """What a team's higher-priority jobs may do to its lower ones, and whose default that is."""
        ...

    def scenario_settings(self, section: Any) -> dict[str, int]:
        """The reclaim settings (``reclaim_after_seconds``, ``min_runtime_seconds``) the simulator uses."""
        ...

    def poll_seconds(self, section: Any) -> float | None:
        """The reclaim planner's period on this backend, or None when the service preempts by itself."""
        ...


class Backend:
    """The defaults a spec may keep: no rules, no plan lines, no idle costs, the reclaim
    settings of the simulator at zero, no reclaim planner; a spec subclasses it and sets
    ``key``, ``strategy``, ``capacity_hint``, ``construct`` and its parser and schema."""

    capacity_hint = ""
    default_borrow_percent: int | None = None
    borrows_whole_instances = False
    least_guarantee_instances = 0
    service_jobs = False
    rules: tuple[Rule, ...] = ()
    section_keys: Mapping[str, frozenset[str]] = {}
    descriptions: Mapping[str, Mapping[str, str]] = {}
    resource_labels: tuple[tuple[str, str], ...] = ()
    status: str | None = None

    def describe_resource(self, resource: Mapping[str, Any]) -> list[str]:
        return []

    def to_mapping(self, section: Any) -> Any:
        # A dataclass section: its fields, those left at None left out; anything else as it is.
        if dataclasses.is_dataclass(section) and not isinstance(section, type):
            return {k: v for k, v in dataclasses.asdict(section).items() if v is not None}
        return section

    def plan_extras(self, section: Any) -> dict[str, Any]:
        return {}

    def plan_team_extras(self, section: Any, teams: Sequence[TeamConfig]) -> dict[str, Any]:
        return {}

    def window_deployment(self, section: Any, windows: Sequence[Window]) -> list[str]:
        return []

    def deployed_guarantee(self, resource: Mapping[str, Any]) -> dict[str, float]:
        return {}

    def idle_costs(self, config: PlatformConfig, section: Any) -> list[dict[str, str]]:
        return []

    def in_team_preemption_text(self, team: TeamConfig) -> str:
        if team.in_team_preemption:
            return "enabled"
        return "disabled" + (" (default)" if team.in_team_preemption is None else "")

    def scenario_settings(self, section: Any) -> dict[str, int]:
        return {"reclaim_after_seconds": 0, "min_runtime_seconds": 0}

    def poll_seconds(self, section: Any) -> float | None:
        return None


#: Every member of a BackendSpec, which :func:`register` checks a spec has.
_MEMBERS = ("key", "strategy", "capacity_hint", "default_borrow_percent", "borrows_whole_instances",
            "least_guarantee_instances", "service_jobs", "construct",
            "status", "rules", "section_keys",
            "descriptions",
            "resource_labels", "parse", "schema", "to_mapping", "describe_resource", "deployed_guarantee", "plan_extras",
            "plan_team_extras", "window_deployment", "idle_costs",
            "in_team_preemption_text", "scenario_settings", "poll_seconds")
_registry: dict[str, BackendSpec] = {}
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN:
        spec = importlib.import_module(module).SPEC
        _registry.setdefault(spec.key, spec)


def register(spec: BackendSpec) -> BackendSpec:
    """Add ``spec`` after the registered backends (its key must be new); return it.

    A key that the config already uses for another section (``teams``, ``inference``, ...)
    or another backend is refused, so one platform.yaml key never means two things.
    """
    _load_builtin()
    missing = sorted(name for name in _MEMBERS if not hasattr(spec, name))
    if missing:
        raise ValueError(f"{type(spec).__name__} lacks {', '.join(missing)} of a BackendSpec: subclass"
                         " cdk_gpu_share.core.configuration.backends.Backend, which gives the defaults, and set the rest")
    if spec.key in _registry or spec.key in ("platform", "teams", *EXTRA_SECTIONS):
        raise ValueError(f"backend key {spec.key!r} is taken; give the backend another section key")
    _registry[spec.key] = spec
    return spec


def unregister(key: str) -> None:
    """Remove the backend ``key`` added by :func:`register` (a test's cleanup); built-ins stay."""
    if key in (importlib.import_module(m).SPEC.key for m in BUILTIN):
        raise ValueError(f"{key!r} is a built-in backend")
    _registry.pop(key, None)


def registered() -> tuple[BackendSpec, ...]:
    """Every backend, the built-in ones first, in the order outputs show them."""
    _load_builtin()
    return tuple(_registry.values())


def keys() -> tuple[str, ...]:
    """The section key of every backend (``batch_quota``, ``hyperpod``, ``fairshare``, ...)."""
    return tuple(spec.key for spec in registered())


def spec(key: str) -> BackendSpec:
    """The backend whose section key is ``key`` (``KeyError`` when none is)."""
    _load_builtin()
    return _registry[key]


__all__ = ["BUILTIN", "Backend", "BackendSpec", "Rule", "SectionCheck", "keys", "register", "registered", "spec", "unregister"]
