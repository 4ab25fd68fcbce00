"""Names of the CloudWatch metrics the reclaimer emits and the dashboard reads.

One place, so the Lambda (embedded metric format), the dashboard construct and
the alarms cannot drift apart.
"""

NAMESPACE = "GpuShare"

#: Dimensions of every per-team metric.
DIM_QUEUE = "Queue"
DIM_TEAM = "Team"

#: Per team, per resource "gpu", emitted once per reclaim cycle (gauges).
USAGE = "UsageGpus"  # GPUs held by the team's running jobs
GUARANTEE = "GuaranteeGpus"
BORROWED = "BorrowedGpus"  # max(0, usage - guarantee)
PENDING = "PendingJobs"
#: Per team, counts per cycle.
PREEMPTIONS = "Preemptions"  # the team's jobs stopped by the reclaimer
RECLAIMS = "Reclaims"  # jobs of the team that got capacity back by a reclaim
#: Per team: the longest a pending job of the team, within its guarantee, has waited (seconds).
LENDER_WAIT_SECONDS = "LenderWaitSeconds"
#: Per queue (no team dimension): reclaimer health.
CYCLE_ERRORS = "ReclaimErrors"
CYCLE_DURATION_MS = "ReclaimCycleMs"
#: Per queue: how long past its settle time the oldest requeue still open in the ledger is
#: (seconds; 0 when none is). Above a few minutes, Batch or DynamoDB has been failing.
REQUEUE_OLDEST_OPEN_SECONDS = "RequeueOldestOpenSeconds"

#: Per team of a Batch quota-management queue, from the share monitor (gauges, every run).
USED_INSTANCES = "UsedInstances"  # instances the team's service jobs hold
LENT = "LentGpus"  # the team's idle guarantee that other teams use
IDLE_GUARANTEE = "IdleGuaranteeGpus"  # the team's guarantee nobody uses
OLDEST_WAIT_SECONDS = "OldestWaitSeconds"  # the longest a waiting job of the team has waited
#: The longest a job of the team that would be within the team's guarantee has waited.
GUARANTEE_WAIT_SECONDS = "GuaranteeWaitSeconds"
#: Per team and cause (dimension ``Cause``: cross_share, in_share, unknown): service jobs
#: of the team that Batch preempted (counts, from its preemption events).
DIM_CAUSE = "Cause"
#: Per queue: "Batch Service Job Queue Blocked" events (counts).
QUEUE_BLOCKED = "QueueBlockedEvents"
#: Per queue: monitor runs that could not read the queue (counts).
MONITOR_ERRORS = "ShareMonitorErrors"
#: Per queue: 1 for each reading the monitor published (its heartbeat; missing is an alarm).
MONITOR_HEARTBEAT = "ShareMonitorReadings"
#: Per queue: quota shares whose waiting jobs a reading did not read to the end (its page cap
#: or its deadline came first); their waiting figures are those of the jobs read.
MONITOR_UNREAD = "ShareMonitorUnreadShares"

#: The statistic that reads each metric correctly: gauges by their maximum, counts summed.
STATISTIC = {
    USAGE: "Maximum",
    GUARANTEE: "Maximum",
    BORROWED: "Maximum",
    PENDING: "Maximum",
    LENDER_WAIT_SECONDS: "Maximum",
    CYCLE_DURATION_MS: "Maximum",
    REQUEUE_OLDEST_OPEN_SECONDS: "Maximum",
    USED_INSTANCES: "Maximum",
    LENT: "Maximum",
    IDLE_GUARANTEE: "Maximum",
    OLDEST_WAIT_SECONDS: "Maximum",
    GUARANTEE_WAIT_SECONDS: "Maximum",
    QUEUE_BLOCKED: "Sum",
    MONITOR_ERRORS: "Sum",
    MONITOR_HEARTBEAT: "Sum",
    MONITOR_UNREAD: "Maximum",
    PREEMPTIONS: "Sum",
    RECLAIMS: "Sum",
    CYCLE_ERRORS: "Sum",
}


def emf_line(dimensions: dict[str, str], values: dict[str, tuple[float, str]], timestamp_ms: int,
             **properties: object) -> str:
    """One CloudWatch embedded-metric-format record (one JSON line on standard output of a
    Lambda becomes the metrics ``values``: name -> (value, unit), with ``dimensions``)."""
    import json

    record: dict[str, object] = {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [list(dimensions)],
                "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in values.items()],
            }],
        },
        **dimensions,
        **{name: value for name, (value, _) in values.items()},
        **properties,
    }
    return json.dumps(record, separators=(",", ":"))
