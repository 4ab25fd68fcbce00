"""Data the repository does not carry: the Alibaba GPU trace (cluster-trace-gpu-v2023).

A test that replays it finds it through ``GPU_SHARE_TRACE_DIR``, the folder holding the trace's
CSV files (``openb_pod_list_default.csv`` ...; where to get them: docs/simulator.md), and skips
with one line saying so when it is not set or the file is not there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["TRACE_ENV", "alibaba_trace"]

#: The environment variable naming the folder of the Alibaba trace's CSV files.
TRACE_ENV = "GPU_SHARE_TRACE_DIR"


def alibaba_trace(name: str = "openb_pod_list_default.csv") -> Path:
    """The path of one CSV file of the Alibaba GPU trace, or skip the test."""
    folder = os.environ.get(TRACE_ENV)
    if not folder:
        pytest.skip(f"the Alibaba GPU trace is not configured: set {TRACE_ENV} to the folder of its CSV files "
                    "(see docs/simulator.md)")
    path = Path(folder) / name
    if not path.is_file():
        pytest.skip(f"{name} is not in {TRACE_ENV}={folder} (the Alibaba GPU trace, see docs/simulator.md)")
    return path
