"""MIG inference: several models on MIG partitions of shared GPUs behind SageMaker endpoints.

One package for the feature, split by layer as a backend's package is:

* :mod:`~cdk_gpu_share.inference.config` (the level of ``core``: pure Python) reads the
  ``inference:`` section and holds every synth-time rule of a partitioned endpoint;
* :mod:`~cdk_gpu_share.inference.fit` (the level of ``core``) sizes each model's partition and
  finds the cheapest layouts and instances that hold every copy (``gpu-share mig fit``);
* :mod:`~cdk_gpu_share.inference.construct` (the level of ``constructs``) is the
  :class:`~cdk_gpu_share.inference.construct.MigInferenceEndpoint` construct;
* :mod:`cdk_gpu_share.inference.handler` (the level of ``lambdas``) is the custom resource's
  Lambda handler, shipped as the construct's asset;
* :mod:`~cdk_gpu_share.inference.cli` (the level of ``cli``) is ``gpu-share mig`` (check, layouts, fit).

It sits beside ``backends/``, not under it: a backend is a scheduler of training jobs with team
quotas, lending and reclaim, registered as a ``BackendSpec``; inference registers none of that
and has its own section, construct, Lambda and command. The MIG catalog (profiles, placement,
layouts) stays in :mod:`cdk_gpu_share.core.catalog.mig`, beside the instance catalog: it is a fact table
of the hardware, read by the Kueue and HyperPod backends' MIG guarantees as much as by inference.

Importing this package loads nothing: each module is imported by the layer that needs it.
"""

__all__: list[str] = []
