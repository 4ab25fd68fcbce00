"""One metric factory per backend, used by the constructs' ``metric_*`` methods and the dashboards.

- :class:`ReclaimerMetrics`: what the fair-share queue's reclaim Lambda emits (namespace
  :data:`cdk_gpu_share.core.records.metrics.NAMESPACE`, per queue and team). Used by
  :class:`~cdk_gpu_share.backends.fairshare.construct.FairshareQueue` and
  :class:`~cdk_gpu_share.constructs.dashboard.GpuShareDashboard`.
- :class:`InferenceComponentMetrics`: what SageMaker publishes per inference component
  (``AWS/SageMaker``, dimension ``InferenceComponentName``). Used by
  :class:`~cdk_gpu_share.inference.construct.MigInferenceEndpoint` and
  :class:`~cdk_gpu_share.constructs.dashboard.InferenceDashboard`.

Batch quota management and HyperPod task governance have no per-team CloudWatch metrics
(``docs/operations.md``, "What the dashboards cover"), so they have no factory here. For Batch quota
management (SageMaker Training service jobs in quota shares) the sources checked were:

* https://docs.aws.amazon.com/batch/latest/userguide/using_cloudwatch_metrics.html -- AWS Batch
  publishes job state-transition and duration metrics in ``AWS/Batch``, "All metrics are
  published with the JobQueueName dimension": no quota-share (team) dimension, and the page
  speaks of jobs, array jobs and multi-node parallel jobs, not of service jobs.
* https://docs.aws.amazon.com/batch/latest/userguide/track-capacity-utilization-service-jobs.html
  -- per-share usage of service jobs comes from ``GetJobQueueSnapshot`` and ``ListServiceJobs``
  (what ``gpu-share status`` reads, :mod:`cdk_gpu_share.aws.quota_reader`), not from CloudWatch.
* https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html ("SageMaker AI job
  metrics") -- SageMaker's training metrics are per training job instance, not per quota share.

A factory here would have to name metrics no source gives per share; it would graph nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw

from cdk_gpu_share.core.records import metrics as m

#: The label of each reclaimer metric in graphs ("team-a used"; per-queue metrics unprefixed).
LABELS = {
    m.USAGE: "used",
    m.GUARANTEE: "guarantee",
    m.BORROWED: "borrowed",
    m.PENDING: "pending",
    m.PREEMPTIONS: "preempted",
    m.RECLAIMS: "reclaimed",
    m.LENDER_WAIT_SECONDS: "wait",
    m.CYCLE_ERRORS: "reclaim errors",
    m.CYCLE_DURATION_MS: "cycle ms (max)",
}


def _dimensions(queue_name: str, team: str | None) -> dict[str, str]:
    dims = {m.DIM_QUEUE: queue_name}
    if team is not None:
        dims[m.DIM_TEAM] = team
    return dims


def reclaimer_metric(queue_name: str, metric_name: str, team: str | None = None, **options: Any) -> cw.Metric:
    """A metric the reclaim Lambda emits for ``queue_name`` (and ``team`` when given).

    :param options: passed to :class:`aws_cdk.aws_cloudwatch.Metric`. Default statistic: the one
        :data:`cdk_gpu_share.core.records.metrics.STATISTIC` names for the metric.
    """
    options.setdefault("statistic", m.STATISTIC.get(metric_name, "Average"))
    return cw.Metric(namespace=m.NAMESPACE, metric_name=metric_name, dimensions_map=_dimensions(queue_name, team),
                     **options)


def graph_line(namespace: str, metric_name: str, dimensions: dict[str, str], *, statistic: str,
               period_seconds: int, color: str | None = None, label: str | None = None) -> list[Any]:
    """One entry of a graph widget's ``metrics``, as aws-cdk-lib's ``GraphWidget`` renders a
    :class:`aws_cdk.aws_cloudwatch.Metric` of these props on the left axis (same stack, no account or
    region of its own): namespace, name, the dimensions' name/value pairs, then the options that
    differ from CloudWatch's defaults, in aws-cdk-lib's order: color, label, period unless
    300 s, statistic unless Average.

    Why not a ``Metric``: a dashboard graphs eight metrics per team, and each ``Metric`` is a jsii
    round trip to create and is rendered again in Node at every resolution of the dashboard body.
    """
    line: list[Any] = [namespace, metric_name]
    for name, value in dimensions.items():
        line += [name, value]
    options: dict[str, Any] = {}
    if color is not None:
        options["color"] = color
    if label is not None:
        options["label"] = label
    if period_seconds != 300:
        options["period"] = period_seconds
    if statistic != "Average":
        options["stat"] = statistic
    if options:
        line.append(options)
    return line


class ReclaimerMetrics:
    """The reclaimer's metrics of one queue.

    :param queue_name: the ``Queue`` dimension.
    :param period: default period of every metric.
    :param check_team: called with a team name before a per-team metric is built (raise for an
        unknown team). Default: no check.
    :param labels: give each metric a label naming the team ("team-a used"), for graphs.
        Default: False.
    """

    def __init__(self, queue_name: str, *, period: cdk.Duration, check_team: Callable[[str], Any] | None = None,
                 labels: bool = False) -> None:
        self.queue_name = queue_name
        self.period = period
        self._check_team = check_team
        self._labels = labels

    def metric(self, metric_name: str, team: str | None = None, **options: Any) -> cw.Metric:
        """A metric of the reclaimer for this queue (and ``team`` when given).

        :param options: passed to :class:`aws_cdk.aws_cloudwatch.Metric` (``statistic``, ``period``,
            ``label``...). Default period: the factory's; default statistic: the metric's own
            (Maximum for gauges, Sum for counts).
        """
        if team is not None and self._check_team is not None:
            self._check_team(team)
        options.setdefault("period", self.period)
        return reclaimer_metric(self.queue_name, metric_name, team, **options)

    def _label(self, name: str, team: str | None) -> str | None:
        if not self._labels:
            return None
        return f"{team} {LABELS[name]}" if team else LABELS[name]

    def _labelled(self, name: str, team: str | None, options: dict[str, Any]) -> cw.Metric:
        if self._labels:
            options = {"label": self._label(name, team), **options}
        return self.metric(name, team, **options)

    def graph_line(self, metric_name: str, team: str | None = None, *, period_seconds: int,
                   color: str | None = None) -> list[Any]:
        """What a graph widget lists for ``metric_*(team, color=color)`` of this factory, built in
        Python (see :func:`graph_line`): the same dimensions, statistic and label.

        :param period_seconds: the factory's ``period`` in seconds (read once by the caller).
        """
        if team is not None and self._check_team is not None:
            self._check_team(team)
        return graph_line(m.NAMESPACE, metric_name, _dimensions(self.queue_name, team),
                          statistic=m.STATISTIC.get(metric_name, "Average"), period_seconds=period_seconds,
                          color=color, label=self._label(metric_name, team))

    def metric_usage(self, team: str, **options: Any) -> cw.Metric:
        """GPUs held by ``team``'s running jobs. Default statistic: Maximum."""
        return self._labelled(m.USAGE, team, options)

    def metric_guarantee(self, team: str, **options: Any) -> cw.Metric:
        """GPUs guaranteed to ``team``. Default statistic: Maximum."""
        return self._labelled(m.GUARANTEE, team, options)

    def metric_borrowed(self, team: str, **options: Any) -> cw.Metric:
        """GPUs ``team`` uses beyond its guarantee (lent by others). Default statistic: Maximum."""
        return self._labelled(m.BORROWED, team, options)

    def metric_pending_jobs(self, team: str, **options: Any) -> cw.Metric:
        """Jobs of ``team`` waiting in the queue (RUNNABLE). Default statistic: Maximum."""
        return self._labelled(m.PENDING, team, options)

    def metric_preemptions(self, team: str, **options: Any) -> cw.Metric:
        """Jobs of ``team`` stopped by the reclaimer. Default statistic: Sum."""
        return self._labelled(m.PREEMPTIONS, team, options)

    def metric_reclaims(self, team: str, **options: Any) -> cw.Metric:
        """Jobs of ``team`` that got lent capacity back by a reclaim. Default statistic: Sum."""
        return self._labelled(m.RECLAIMS, team, options)

    def metric_lender_wait(self, team: str, **options: Any) -> cw.Metric:
        """The longest a job of ``team`` within its guarantee has waited (seconds). Default: Maximum."""
        return self._labelled(m.LENDER_WAIT_SECONDS, team, options)

    def metric_reclaim_errors(self, **options: Any) -> cw.Metric:
        """Reclaim cycles of this queue that failed. Default statistic: Sum."""
        return self._labelled(m.CYCLE_ERRORS, None, options)

    def metric_cycle_duration(self, **options: Any) -> cw.Metric:
        """Duration of a reclaim cycle (milliseconds). Default statistic: Maximum."""
        return self._labelled(m.CYCLE_DURATION_MS, None, options)

    def metric_requeue_oldest_open(self, **options: Any) -> cw.Metric:
        """How long past its settle time the oldest requeue still open in the ledger is
        (seconds; 0 when none is). Default statistic: Maximum."""
        return self._labelled(m.REQUEUE_OLDEST_OPEN_SECONDS, None, options)


#: SageMaker's invocation metrics per inference component (namespace AWS/SageMaker).
SAGEMAKER_NAMESPACE = "AWS/SageMaker"
DIM_INFERENCE_COMPONENT = "InferenceComponentName"


class InferenceComponentMetrics:
    """SageMaker's metrics of inference components, by ``InferenceComponentName``.

    :param component_name: maps a model name to its inference component name (and raises for
        an unknown model).
    :param period: default period. Default: 1 minute.
    """

    def __init__(self, component_name: Callable[[str], str], *, period: cdk.Duration | None = None) -> None:
        self._component_name = component_name
        self.period = period or cdk.Duration.minutes(1)

    def metric(self, model: str, metric_name: str, **props: Any) -> cw.Metric:
        """A CloudWatch metric of ``model``'s inference component (``AWS/SageMaker``). Default: sum."""
        defaults: dict[str, Any] = {"period": self.period, "statistic": "Sum"}
        defaults.update(props)
        return cw.Metric(namespace=SAGEMAKER_NAMESPACE, metric_name=metric_name,
                         dimensions_map={DIM_INFERENCE_COMPONENT: self._component_name(model)}, **defaults)

    def metric_invocations(self, model: str, **props: Any) -> cw.Metric:
        """Requests sent to ``model``. Default: sum."""
        return self.metric(model, "Invocations", **props)

    def metric_invocations_per_copy(self, model: str, **props: Any) -> cw.Metric:
        """Requests per copy: what the autoscaling policy tracks. Default: sum."""
        return self.metric(model, "InvocationsPerCopy", **props)

    def metric_model_latency(self, model: str, **props: Any) -> cw.Metric:
        """Time the model took to answer, in microseconds. Default: p90."""
        return self.metric(model, "ModelLatency", **{"statistic": "p90", "unit": cw.Unit.MICROSECONDS, **props})

    def metric_invocation_4xx_errors(self, model: str, **props: Any) -> cw.Metric:
        """Requests of ``model`` answered with a 4xx. Default: sum."""
        return self.metric(model, "Invocation4XXErrors", **props)

    def metric_invocation_5xx_errors(self, model: str, **props: Any) -> cw.Metric:
        """Requests of ``model`` answered with a 5xx. Default: sum."""
        return self.metric(model, "Invocation5XXErrors", **props)

    def metric_model_errors(self, model: str, **props: Any) -> cw.Metric:
        """Requests the model container failed (``InvocationModelErrors``). Default: sum."""
        return self.metric(model, "InvocationModelErrors", **props)

    def metric_copies(self, model: str, **props: Any) -> cw.MathExpression:
        """Copies serving ``model``: Invocations / InvocationsPerCopy over the period.

        SageMaker publishes no copy-count metric; each request adds 1/copies to
        InvocationsPerCopy, so the ratio is the (request-weighted) number of copies. It is
        empty while the model gets no requests.
        """
        period = props.pop("period", self.period)
        label = props.pop("label", f"{model} copies")
        return cw.MathExpression(
            expression="IF(perCopy > 0, invocations / perCopy, 0)",
            using_metrics={
                "invocations": self.metric_invocations(model, period=period),
                "perCopy": self.metric_invocations_per_copy(model, period=period),
            },
            label=label,
            period=period,
            **props,
        )
