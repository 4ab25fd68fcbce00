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

#: The statistic that reads each metric correctly: gauges by their maximum, counts summed.
STATISTIC = {
    USAGE: "Maximum",
    GUARANTEE: "Maximum",
    BORROWED: "Maximum",
    PENDING: "Maximum",
    LENDER_WAIT_SECONDS: "Maximum",
    CYCLE_DURATION_MS: "Maximum",
    REQUEUE_OLDEST_OPEN_SECONDS: "Maximum",
    PREEMPTIONS: "Sum",
    RECLAIMS: "Sum",
    CYCLE_ERRORS: "Sum",
}
