"""What AWS offers, as data: the GPU instance types (GPUs, vCPUs, memory, MIG slices), the MIG
profiles and their placements, and the instance types and MIG profiles HyperPod's compute quotas take.

Lives here: :mod:`.instances` (the one instance catalog), :mod:`.mig` (the MIG catalog and
its packing rules), :mod:`.hyperpod_schema` (HyperPod's own lists). May import: the base modules
of :mod:`cdk_gpu_share.core` (errors, validation, text) only: no config, no policy.
"""
