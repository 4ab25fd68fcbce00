"""What happened: the job archive's records, job traces, usage, waiting reasons and metrics.

Lives here: the archive's records and the jobs rebuilt from them (:mod:`.history`), job traces
(:mod:`.trace`), how close a replay comes to what ran (:mod:`.fidelity`), GPU-hour usage
(:mod:`.usage`), why a job waits (:mod:`.waiting`), the share monitor's readings
(:mod:`.share_monitor`) and the metrics' names (:mod:`.metrics`). May import: everything of
:mod:`cdk_gpu_share.core` beside it (the config, the policy, the scenario, the simulator);
nothing of :mod:`cdk_gpu_share.core` imports it back but the advisor and the commands.
"""
