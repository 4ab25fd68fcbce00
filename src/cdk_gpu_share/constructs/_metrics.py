"""One builder for the reclaimer's CloudWatch metrics, shared by FairshareQueue and the dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_cloudwatch as cw

from cdk_gpu_share.core import metrics as m


def reclaimer_metric(queue_name: str, metric_name: str, team: str | None = None, **options: Any) -> cw.Metric:
    """A metric the reclaim Lambda emits for ``queue_name`` (and ``team`` when given).

    :param options: passed to :class:`aws_cdk.aws_cloudwatch.Metric`. Default statistic: the one
        :data:`cdk_gpu_share.core.metrics.STATISTIC` names for the metric.
    """
    dims = {m.DIM_QUEUE: queue_name}
    if team is not None:
        dims[m.DIM_TEAM] = team
    options.setdefault("statistic", m.STATISTIC.get(metric_name, "Average"))
    return cw.Metric(namespace=m.NAMESPACE, metric_name=metric_name, dimensions_map=dims, **options)
