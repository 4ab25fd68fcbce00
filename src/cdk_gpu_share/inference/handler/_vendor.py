"""Vendor the part of botocore's SageMaker service model that the handler needs.

The Lambda runtime's boto3 may predate ``ProductionVariant.AcceleratorPartitionLayouts``
and ``InferenceComponentComputeResourceRequirements.AcceleratorPartitionType``. The
handler's asset therefore ships ``data/sagemaker/<api-version>/service-2.json`` and the
function sets ``AWS_DATA_PATH`` to ``data/``: botocore searches that path before its
own models, so the runtime's botocore validates and serializes with this model.

Only the operations the handler calls and the shapes they reach are kept, without
documentation (about 46 KB instead of 2.6 MB uncompressed; bundling all of botocore
would add 32 MB and about 1.3 s of copying to every synth), so the asset stays small and
synth copies nothing at run time. Regenerate after upgrading botocore::

    python -m cdk_gpu_share.inference.handler._vendor

Not part of the Lambda asset (excluded by the construct).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

OPERATIONS = (
    "CreateEndpointConfig",
    "DescribeEndpointConfig",
    "DeleteEndpointConfig",
    "CreateEndpoint",
    "DescribeEndpoint",
    "UpdateEndpoint",
    "DeleteEndpoint",
    "CreateInferenceComponent",
    "DescribeInferenceComponent",
    "UpdateInferenceComponent",
    "UpdateInferenceComponentRuntimeConfig",
    "DeleteInferenceComponent",
    "ListInferenceComponents",
    "AddTags",
)
HERE = Path(__file__).resolve().parent
DATA = HERE / "data"


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return OrderedDict((k, _strip(v)) for k, v in value.items() if k not in ("documentation", "documentationUrl"))
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def trimmed_model(loader: Any = None) -> tuple[str, dict]:
    """(api_version, model) of the installed botocore's SageMaker model, cut to ``OPERATIONS``."""
    import botocore.session

    session = botocore.session.get_session()
    loader = loader or session.get_component("data_loader")
    api_version = loader.determine_latest_version("sagemaker", "service-2")
    full = loader.load_service_model("sagemaker", "service-2", api_version)
    shapes = full["shapes"]
    keep: set[str] = set()

    def reach(name: str) -> None:
        if name in keep:
            return
        keep.add(name)
        shape = shapes[name]
        for member in shape.get("members", {}).values():
            reach(member["shape"])
        for key in ("member", "key", "value"):
            if key in shape:
                reach(shape[key]["shape"])

    ops = OrderedDict()
    for op in OPERATIONS:
        model = full["operations"][op]
        ops[op] = model
        for key in ("input", "output"):
            if key in model:
                reach(model[key]["shape"])
        for err in model.get("errors", []):
            reach(err["shape"])
    out = OrderedDict()
    out["version"] = full.get("version", "2.0")
    out["metadata"] = full["metadata"]
    out["operations"] = ops
    out["shapes"] = OrderedDict((k, shapes[k]) for k in sorted(keep))
    return api_version, _strip(out)


def model_path(api_version: str) -> Path:
    return DATA / "sagemaker" / api_version / "service-2.json"


def write(dest: Path | None = None) -> Path:
    api_version, model = trimmed_model()
    path = dest or model_path(api_version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(model, indent=None, separators=(",", ":"), sort_keys=False) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":  # pragma: no cover
    p = write()
    print(f"wrote {p} ({p.stat().st_size} bytes)")
