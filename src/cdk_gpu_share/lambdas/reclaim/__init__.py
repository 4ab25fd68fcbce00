"""The reclaim Lambda (handler: ``cdk_gpu_share.lambdas.reclaim.handler.handler``)."""
