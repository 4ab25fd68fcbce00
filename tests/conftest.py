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
    from cdk_gpu_share.core.catalog import mig

    mig.clear_layout_cache()
    yield


# Hypothesis profiles. ``make test`` uses the default (each test's own example count,
# random examples). ``mutation`` is for tools/mutation.py, which sets
# HYPOTHESIS_PROFILE=mutation for the reclaim run: derandomized (every mutant sees the
# same examples, so a score is reproducible), no example database (a failure found for
# one mutant must not be replayed for the next), no deadline (the machine is shared).
# Tests that draw many examples scale their count with ``examples()`` below.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

MUTATION_PROFILE = "mutation"
_hypothesis_settings.register_profile(
    MUTATION_PROFILE, derandomize=True, database=None, deadline=None, print_blob=False
)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(session, config, items):
    """Under the mutation profile, property tests run after the example tests.

    mutmut passes each mutant's covering tests in no particular order and stops at the
    first failure (-x); the example tests take milliseconds, the property tests seconds,
    so most killed mutants are caught before a property test starts.
    """
    if _hypothesis_settings.get_current_profile_name() != MUTATION_PROFILE:
        return
    items.sort(key=lambda item: bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False)))
