"""Where the benchmarks find the Alibaba GPU trace (cluster-trace-gpu-v2023), and the
scenario they replay it against.

The repository does not carry the trace: ``--data DIR`` (default: ``$GPU_SHARE_TRACE_DIR``)
is the folder holding its CSV files, ``openb_pod_list_default.csv`` ... (where to get them:
docs/simulator.md). The scenario is ``examples/alibaba-openb.yaml``: the trace's four QoS
classes as four teams on 32 GPUs, guaranteed 16, 8, 4 and 4, reclaim after 60 s.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = ["CONFIG", "POD_LIST", "TRACE_ENV", "add_data_argument", "missing", "scenario"]

ROOT = Path(__file__).resolve().parents[1]
TRACE_ENV = "GPU_SHARE_TRACE_DIR"
POD_LIST = "openb_pod_list_default.csv"
CONFIG = ROOT / "examples" / "alibaba-openb.yaml"


def add_data_argument(ap: argparse.ArgumentParser) -> None:
    env = os.environ.get(TRACE_ENV)
    ap.add_argument("--data", type=Path, default=Path(env) if env else None,
                    help=f"the folder of the Alibaba GPU trace's CSV files (default: ${TRACE_ENV})")


def missing(data: Path | None) -> str | None:
    """Why the trace cannot be read from ``data`` (one line), or None when it can."""
    if data is None:
        return f"skipped: the Alibaba GPU trace is not configured: pass --data DIR or set {TRACE_ENV} (see docs/simulator.md)"
    if not (data / POD_LIST).is_file():
        return f"skipped: {POD_LIST} is not in {data} (the Alibaba GPU trace, see docs/simulator.md)"
    return None


def scenario() -> dict[str, Any]:
    """The simulator scenario of ``examples/alibaba-openb.yaml`` (a dict)."""
    from cdk_gpu_share.core import scenario as sc
    from cdk_gpu_share.core.configuration.parse import load_config

    config = load_config(CONFIG)
    return sc.scenario_from_config(config, sc.choose_backend(config, None))
