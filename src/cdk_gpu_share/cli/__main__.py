import sys

from cdk_gpu_share.cli import main

sys.exit(main())
