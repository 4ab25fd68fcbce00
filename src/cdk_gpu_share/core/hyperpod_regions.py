"""Where HyperPod task governance shares idle compute, and the one rule that follows from it.

SageMaker HyperPod task governance lends a team's idle compute to the teams that borrow only in
the AWS Regions its documentation lists (:data:`IDLE_SHARING_SOURCE`). A compute quota that
borrows (``sharing: lend_and_borrow``) in another region would deploy and never borrow, so:

* a stack whose region is known is refused when a HyperPod team borrows there
  (:func:`borrowing_problems`, called by the HyperPod construct at synth);
* a stack without a region (environment-agnostic: the region is resolved at deploy) cannot be
  checked at synth, and ``gpu-share plan`` says so (:func:`region_note`).

Lending alone (``sharing: lend``) and ``reserve`` never take idle compute, so they are accepted in
any region. Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdk_gpu_share.core.config import TeamConfig
from cdk_gpu_share.core.errors import Problem

__all__ = ["IDLE_SHARING_REGIONS", "IDLE_SHARING_SOURCE", "borrowing_problems", "region_note", "regions_text"]

#: The regions where HyperPod task governance shares idle compute, code -> AWS's name for it.
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


def borrowing_problems(region: str, teams: Sequence[TeamConfig], where: str = "team") -> list[Problem]:
    """One problem per team that borrows idle compute when ``region`` (resolved, not a token) is
    not a region where HyperPod task governance shares it; none in a listed region."""
    if region in IDLE_SHARING_REGIONS:
        return []
    return [Problem(f"{where}.sharing" if len(teams) == 1 else f"{where}.{t.name}.sharing", t.sharing.value,
                    f"borrows idle compute, which HyperPod task governance shares only in the regions AWS lists;"
                    f" the stack's region {region} is not one of them: {regions_text()}",
                    "deploy the stack in a listed region, or give this team sharing: lend or reserve (it then never"
                    " borrows)")
            for t in _borrowers(teams)]


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
        note += f". The cluster's ARN names {cluster_region}, which is not listed: these teams would never borrow"
    return note
