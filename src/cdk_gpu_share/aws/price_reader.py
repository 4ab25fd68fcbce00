"""Current on-demand prices of SageMaker real-time inference instances, from the AWS Price List API.

Read-only: ``pricing:GetProducts`` for service ``AmazonSageMaker``, one instance type at a time,
filtered to real-time inference (``component`` ``Hosting``) in the endpoint's region
(``regionCode``). The Price List API answers from three regions of its own
(:data:`PRICING_ENDPOINTS`), whatever region the prices are for; :func:`pricing_endpoint` picks
the nearest. The client is passed in (``boto3.client("pricing", region_name=...)``), so callers
choose the session, and tests answer it at botocore's ``before-send``.

A type the Price List does not price in that region is left out of the answer (the caller plans
it unpriced); a price is never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["ACTIONS", "PRICING_ENDPOINTS", "SERVICE_CODE", "pricing_endpoint", "read_prices", "hourly_price"]

#: The IAM actions :func:`read_prices` needs.
ACTIONS = ("pricing:GetProducts",)
#: The service whose products are SageMaker's instances.
SERVICE_CODE = "AmazonSageMaker"
#: The regions the Price List API itself answers in (its endpoints).
PRICING_ENDPOINTS = ("us-east-1", "eu-central-1", "ap-south-1")


def pricing_endpoint(region: str) -> str:
    """The Price List API endpoint nearest ``region``: Frankfurt for Europe, the Middle East and
    Africa, Mumbai for Asia Pacific, N. Virginia otherwise."""
    if region.startswith(("eu-", "me-", "af-", "il-")):
        return "eu-central-1"
    if region.startswith("ap-"):
        return "ap-south-1"
    return "us-east-1"


def _filters(instance_type: str, region: str) -> list[dict[str, str]]:
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value}
            for field, value in (("instanceName", instance_type), ("regionCode", region), ("component", "Hosting"))]


def hourly_price(product: dict[str, Any]) -> float | None:
    """The on-demand USD per hour of one Price List product, or None when it has no hourly price."""
    prices = []
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = dim.get("pricePerUnit", {}).get("USD")
            if str(dim.get("unit", "")).lower().startswith("hr") and usd is not None:
                try:
                    prices.append(float(usd))
                except ValueError:
                    continue
    positive = [p for p in prices if p > 0]
    return min(positive) if positive else None


def read_prices(client: Any, instance_types: Iterable[str], region: str, *,
                progress: Callable[[int, int], None] | None = None) -> dict[str, float]:
    """Each of ``instance_types`` the Price List prices for real-time inference in ``region``: its
    on-demand USD per instance-hour (the lowest positive hourly price among its products, which
    leaves out a free-tier row). Raises botocore's errors as they come."""
    types = list(instance_types)
    out: dict[str, float] = {}
    for done, instance_type in enumerate(types, 1):
        found: list[float] = []
        token = None
        while True:
            kwargs: dict[str, Any] = {"ServiceCode": SERVICE_CODE, "Filters": _filters(instance_type, region),
                                      "FormatVersion": "aws_v1"}
            if token:
                kwargs["NextToken"] = token
            page = client.get_products(**kwargs)
            for item in page.get("PriceList", []):
                product = json.loads(item) if isinstance(item, str) else item
                if product.get("product", {}).get("attributes", {}).get("instanceName") != instance_type:
                    continue
                price = hourly_price(product)
                if price is not None:
                    found.append(price)
            token = page.get("NextToken")
            if not token:
                break
        if found:
            out[instance_type] = min(found)
        if progress is not None:
            progress(done, len(types))
    return out
