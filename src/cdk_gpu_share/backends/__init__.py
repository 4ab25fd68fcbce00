"""The backends: one package each, holding everything that is particular to one service.

Each package's module holds its :class:`~cdk_gpu_share.core.configuration.backends.BackendSpec` as
``SPEC``: its section's parser, its rules, its rows of ``plan``, its scenario for the
simulator and its JSON-schema fragment, all pure (no CDK, no boto3), and the dotted path
of its construct. :data:`cdk_gpu_share.core.configuration.backends.BUILTIN` lists them.
"""
