"""The module paths of ``cdk_gpu_share.core`` before it was split by domain, kept importable for one release.

``import cdk_gpu_share.core.config`` (or ``.reclaim``, ``.mig``, ...) still works: it gives the
module at its new path (the same module object, so its names are the same objects) with a
:class:`DeprecationWarning` that names the new path. Nothing in the package imports an old
path (``tests/test_import_graph.py`` checks it); the table goes in the next release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

#: Old module path -> the module it is now.
MOVED: dict[str, str] = {
    "cdk_gpu_share.core.alerts_config": "cdk_gpu_share.core.configuration.alerts",
    "cdk_gpu_share.core.backends": "cdk_gpu_share.core.configuration.backends",
    "cdk_gpu_share.core.borrowing": "cdk_gpu_share.core.policy.borrowing",
    "cdk_gpu_share.core.compare": "cdk_gpu_share.core.simulate.compare",
    "cdk_gpu_share.core.config": "cdk_gpu_share.core.configuration.parse",
    "cdk_gpu_share.core.config_fields": "cdk_gpu_share.core.configuration.fields",
    "cdk_gpu_share.core.config_model": "cdk_gpu_share.core.configuration.model",
    "cdk_gpu_share.core.config_schema": "cdk_gpu_share.core.configuration.schema",
    "cdk_gpu_share.core.fairshare": "cdk_gpu_share.core.policy.fairshare",
    "cdk_gpu_share.core.fidelity": "cdk_gpu_share.core.records.fidelity",
    "cdk_gpu_share.core.guard": "cdk_gpu_share.core.policy.guard",
    "cdk_gpu_share.core.hierarchy": "cdk_gpu_share.core.configuration.hierarchy",
    "cdk_gpu_share.core.history": "cdk_gpu_share.core.records.history",
    "cdk_gpu_share.core.history_config": "cdk_gpu_share.core.configuration.archive",
    "cdk_gpu_share.core.hyperpod_regions": "cdk_gpu_share.core.configuration.hyperpod_regions",
    "cdk_gpu_share.core.hyperpod_schema": "cdk_gpu_share.core.catalog.hyperpod_schema",
    "cdk_gpu_share.core.inference_config": "cdk_gpu_share.inference.config",
    "cdk_gpu_share.core.instances": "cdk_gpu_share.core.catalog.instances",
    "cdk_gpu_share.core.metrics": "cdk_gpu_share.core.records.metrics",
    "cdk_gpu_share.core.mig": "cdk_gpu_share.core.catalog.mig",
    "cdk_gpu_share.core.objectives": "cdk_gpu_share.core.configuration.objectives",
    "cdk_gpu_share.core.organisation": "cdk_gpu_share.core.policy.organisation",
    "cdk_gpu_share.core.reclaim": "cdk_gpu_share.core.policy.reclaim",
    "cdk_gpu_share.core.security_config": "cdk_gpu_share.core.configuration.security",
    "cdk_gpu_share.core.share_monitor": "cdk_gpu_share.core.records.share_monitor",
    "cdk_gpu_share.core.trace": "cdk_gpu_share.core.records.trace",
    "cdk_gpu_share.core.usage": "cdk_gpu_share.core.records.usage",
    "cdk_gpu_share.core.waiting": "cdk_gpu_share.core.records.waiting",
    "cdk_gpu_share.core.windows": "cdk_gpu_share.core.configuration.windows",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path (when no module of the package has it) and loads the module it moved to."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        # stacklevel: past this loader, to the code that imported the old path (the import
        # machinery's own frames are skipped by the warnings module).
        warnings.warn(f"{spec.name} is deprecated: import {new} (the old path goes in the next release)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module is the new one, already run."""


def install() -> None:
    """Put the finder of the old paths last on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
