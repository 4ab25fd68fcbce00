"""The platform config: what a ``platform.yaml`` (or a few lines of Python) may say, and its rules.

Lives here: the field readers and value types (:mod:`.fields`), the dataclasses (:mod:`.model`),
the loader that reads and checks a whole file (:mod:`.parse`: ``load_config``), the registry of
the backends' sections (:mod:`.backends`), the JSON schema (:mod:`.schema`), the sections other
modules own (:mod:`.alerts`, :mod:`.security`, :mod:`.archive`), a team's objectives
(:mod:`.objectives`), the shape of the organisation's tree (:mod:`.hierarchy`), the quotas' time
windows (:mod:`.windows`) and the regions
of HyperPod task governance (:mod:`.hyperpod_regions`). May import: the base modules of
:mod:`cdk_gpu_share.core` and :mod:`cdk_gpu_share.core.catalog`; never the policy, the records
or the simulator, which all read a config.
"""
