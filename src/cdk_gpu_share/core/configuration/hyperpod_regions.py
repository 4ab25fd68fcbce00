"""Where HyperPod task governance exists, and the one rule that follows from it.

AWS documents SageMaker HyperPod task governance (its cluster policy,
``AWS::SageMaker::ClusterSchedulerConfig``, and its compute quotas, ``AWS::SageMaker::ComputeQuota``)
only in the AWS Regions of :data:`IDLE_SHARING_SOURCE`. So:

* a stack whose region is known and not listed is refused at synth, whatever its teams' sharing
  (:func:`region_problems`, called by the HyperPod construct): neither resource can be created there;
* in a listed region the construct acknowledges aws-cdk-lib's region table, which knows the types
  in fewer regions than AWS documents (finding F3006);
* a stack without a region (environment-agnostic: the region is resolved at deploy) cannot be
  checked at synth, and ``gpu-share plan`` says so (:func:`region_note`).

Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdk_gpu_share.core.configuration.parse import TeamConfig
from cdk_gpu_share.core.errors import Problem

__all__ = ["IDLE_SHARING_REGIONS", "IDLE_SHARING_SOURCE", "region_note", "region_problems", "regions_text"]

#: The regions where AWS documents HyperPod task governance, code -> AWS's name for it.
IDLE_SHARING_REGIONS: dict[str, str] = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "ap-south-1": "Asia Pacific (Mumbai)",
    "ap-southeast-1": "Asia Pacific (Singapore)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-southeast-3": "Asia Pacific (Jakarta)",
    "eu-central-1": "Europe (Frankfurt)",
    "eu-west-1": "Europe (Ireland)",
    "eu-west-2": "Europe (London)",
    "eu-north-1": "Europe (Stockholm)",
    "eu-south-2": "Europe (Spain)",
    "sa-east-1": "South America (São Paulo)",
}
#: Where the list comes from: the page of AWS's documentation that names the regions.
IDLE_SHARING_SOURCE = (
    "Amazon SageMaker AI Developer Guide, 'SageMaker HyperPod task governance'"
    " (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance.html)"
)


def regions_text() -> str:
    """The listed regions, codes first, and their source, as a message quotes them."""
    return ", ".join(IDLE_SHARING_REGIONS) + f" (source: {IDLE_SHARING_SOURCE})"


def _borrowers(teams: Sequence[TeamConfig]) -> list[TeamConfig]:
    return [t for t in teams if t.sharing.borrows]


def region_problems(region: str) -> list[Problem]:
    """One problem when ``region`` (resolved, not a token) is not a region where AWS documents
    HyperPod task governance; none in a listed region."""
    if region in IDLE_SHARING_REGIONS:
        return []
    return [Problem("env.region", region,
                    "is not a region where AWS offers HyperPod task governance, so its cluster policy and compute"
                    f" quotas cannot be created there; it is offered in {regions_text()}",
                    "give the stack the region of the HyperPod cluster, one of those listed"
                    " (env=cdk.Environment(region=...)), or use another backend in this region")]


def region_note(cluster_region: str | None, teams: Sequence[TeamConfig]) -> str | None:
    """What ``plan`` says when HyperPod teams borrow: synth checks the stack's region only when the
    stack has one; the cluster's own region (from its ARN) is checked here. None when no team borrows."""
    borrowers = _borrowers(teams)
    if not borrowers:
        return None
    names = ", ".join(t.name for t in borrowers)
    note = (f"{names} borrow idle compute, which HyperPod task governance shares only in {regions_text()}."
            " Synth refuses a stack whose region is set and not listed; an environment-agnostic stack"
            " (no region until deploy) is not checked there: deploy it in a listed region")
    if cluster_region and cluster_region not in IDLE_SHARING_REGIONS:
        note += f". The cluster's ARN names {cluster_region}, which is not listed: task governance, and so its quotas, is not offered there"
    return note
