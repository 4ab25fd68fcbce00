"""The pure-Python core: config model, reclaim planner, MIG catalog, simulator.

Nothing in this package imports aws-cdk-lib or boto3: the constructs, the Lambda
handlers and the CLI all use the same rules from here.
"""
