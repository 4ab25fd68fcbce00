"""The sharing policy: who may use what, and who gives capacity back.

Lives here: the reclaim planner (:mod:`.reclaim`: what to stop so that a lender gets its
guarantee back), the compilation of the organisation's tree to the flat quotas a backend deploys
(:mod:`.organisation`), what a team may borrow (:mod:`.borrowing`), the fair-share identifiers
and reclaim settings (:mod:`.fairshare`) and the identity tag guard (:mod:`.guard`). May import:
the base modules of :mod:`cdk_gpu_share.core`, :mod:`~cdk_gpu_share.core.catalog` and
:mod:`~cdk_gpu_share.core.configuration`; never the records or the simulator. The reclaim
Lambda runs this code, so nothing here loads the CDK or boto3.
"""
