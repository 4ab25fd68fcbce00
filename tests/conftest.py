from __future__ import annotations

import os
from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

ROOT = Path(__file__).resolve().parents[1]

# jsii needs a supported Node: prefer the Node 22 that package.json installs.
_node_bin = ROOT / "node_modules" / ".bin"
if _node_bin.is_dir() and str(_node_bin) not in os.environ.get("PATH", ""):
    os.environ["PATH"] = f"{_node_bin}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")


@pytest.fixture
def template_snapshot(snapshot):
    """A syrupy snapshot for a template dict; scrub it with tests.helpers.scrub first."""
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.fixture(autouse=True)
def _fresh_mig_layouts():
    """Every test computes MIG layouts itself (about 10 ms a GPU).

    ``core.mig`` caches them per process; a cache filled by an earlier test would hide
    a change to ``layouts()`` from later ones (and from a forking mutation runner).
    """
    from cdk_gpu_share.core import mig

    mig.clear_layout_cache()
    yield
