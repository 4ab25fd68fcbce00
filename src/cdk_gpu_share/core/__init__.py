"""The pure-Python core: the rules of the shared GPU platform, used alike by the constructs, the
Lambda handlers and the CLI. Nothing here imports aws-cdk-lib or boto3.

By domain, each a package whose docstring says what it may import (arrows point down):

- :mod:`.catalog`: what AWS offers (GPU instance types, MIG profiles), as data;
- :mod:`.configuration`: the platform config, its loader, its rules and its schema, the
  registry of the backends' sections;
- :mod:`.policy`: the reclaim planner, the compilation of the organisation's tree, borrowing;
- :mod:`.simulate` (the simulator, its runs side by side), :mod:`.advise` (the advisor),
  :mod:`.eta` (expected starts);
- :mod:`.records`: the job archive's records, traces, usage, waiting reasons, metrics.

Beside them: the base every package reads (:mod:`.errors`, :mod:`.quoting`,
:mod:`.validation`, :mod:`.text`) and what joins them for the commands (:mod:`.scenario`: a
config as the simulator's input; :mod:`.plan`: what a config deploys).
"""

from cdk_gpu_share.core._moved import install as _install_moved_paths

_install_moved_paths()
