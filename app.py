#!/usr/bin/env python3
"""The default platform app: `cdk synth` (or `make synth`) reads one config file.

    cdk synth                               # platform.yaml
    cdk synth -c config=examples/hyperpod.yaml
    cdk synth -c nag=false                  # skip cdk-nag (the tests always run it)
"""

import sys
from pathlib import Path

import aws_cdk as cdk

from cdk_gpu_share import ConfigError, build_platform, load_config
from cdk_gpu_share.stacks.app import template_validator

app = cdk.App()
config_path = app.node.try_get_context("config") or "platform.yaml"
try:
    config = load_config(Path(config_path))
    nag = str(app.node.try_get_context("nag")).lower() not in ("false", "0", "no", "off")
    validator = template_validator()  # before any construct, on a small heap: see its docstring
    build_platform(app, config, checks=nag)
    if validator is not None:
        # After cdk-nag's plugin, where CDK puts its own: the report keeps its order.
        cdk.Validations.of(app).add_plugins(validator)
except ConfigError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
app.synth()
