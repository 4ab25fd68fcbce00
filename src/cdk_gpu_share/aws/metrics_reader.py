"""Read the platform's per-team metrics back from CloudWatch (``GetMetricData``, paged).

Used by ``gpu-share usage``. The caller passes a boto3 ``cloudwatch`` client; one query per
team and metric (at most 500 a request), one value per minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from cdk_gpu_share.core.records import metrics

__all__ = ["MAX_QUERIES", "GAUGES", "read_series"]

#: GetMetricData takes at most 500 queries a request.
MAX_QUERIES = 500
#: What ``gpu-share usage`` reads per team: the gauges by their average over each minute, preemptions summed.
GAUGES = (metrics.USAGE, metrics.GUARANTEE, metrics.BORROWED, metrics.IDLE_GUARANTEE, metrics.LENT)


def read_series(client: Any, queue: str, teams: Sequence[str], start: float, end: float, *,
                period: int = 60) -> tuple[dict[str, dict[str, dict[int, float]]], int]:
    """team -> metric -> minute (epoch seconds) -> value, for ``queue`` between ``start`` and
    ``end`` (epoch seconds); and the number of requests made."""
    queries = []
    names: dict[str, tuple[str, str]] = {}
    for i, team in enumerate(teams):
        for j, name in enumerate((*GAUGES, metrics.PREEMPTIONS)):
            qid = f"m{i}_{j}"
            names[qid] = (team, name)
            queries.append({"Id": qid, "ReturnData": True, "MetricStat": {
                "Metric": {"Namespace": metrics.NAMESPACE, "MetricName": name,
                           "Dimensions": [{"Name": metrics.DIM_QUEUE, "Value": queue},
                                          {"Name": metrics.DIM_TEAM, "Value": team}]},
                "Period": period, "Stat": "Sum" if name == metrics.PREEMPTIONS else "Average"}})
    out: dict[str, dict[str, dict[int, float]]] = {team: {} for team in teams}
    calls = 0
    for k in range(0, len(queries), MAX_QUERIES):
        token = None
        while True:
            params: dict[str, Any] = {"MetricDataQueries": queries[k:k + MAX_QUERIES],
                                      "StartTime": datetime.fromtimestamp(start, timezone.utc),
                                      "EndTime": datetime.fromtimestamp(end, timezone.utc),
                                      "ScanBy": "TimestampAscending"}
            if token:
                params["NextToken"] = token
            page = client.get_metric_data(**params)
            calls += 1
            for result in page.get("MetricDataResults", []):
                key = names.get(result.get("Id", ""))
                if key is None:
                    continue
                team, name = key
                values = out[team].setdefault(name, {})
                for ts, v in zip(result.get("Timestamps", []), result.get("Values", [])):
                    values[int(ts.timestamp())] = float(v)
            token = page.get("NextToken")
            if not token:
                break
    return out, calls
