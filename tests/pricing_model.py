"""The AWS Price List API behind a real boto3 client, for ``mig fit --prices aws``.

``GetProducts`` is answered at botocore's ``before-send``, so botocore validates and serializes
every request and parses every answer as it would AWS's. The products are SageMaker
``ML Instance`` products in the Price List's own shape (``product.attributes``, ``terms.OnDemand``
with ``priceDimensions`` in USD per ``Hrs``), one per instance type, region and component, paged
by ``MaxResults``/``NextToken``; a request whose filters match none gets an empty ``PriceList``,
as the API gives. ``fault`` makes every request fail with an AWS error code, or ``"network"`` with no connection.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError

from tests.history_model import _Raw, new_client


def product(instance_type: str, region: str, usd: str, *, component: str = "Hosting") -> dict[str, Any]:
    """One SageMaker instance product of the Price List, with its on-demand hourly price."""
    sku = f"{abs(hash((instance_type, region, component))) % 10**12:012d}"
    return {
        "product": {
            "productFamily": "ML Instance",
            "attributes": {"servicecode": "AmazonSageMaker", "regionCode": region, "component": component,
                           "instanceName": instance_type, "instanceType": f"{instance_type}-{component}",
                           "usagetype": f"Host:{instance_type}", "operation": "RunInstance"},
            "sku": sku,
        },
        "serviceCode": "AmazonSageMaker",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "sku": sku,
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": {"USD": usd},
                "description": f"${usd} per {component} {instance_type} in {region}"}},
        }}},
        "version": "20261201000000",
        "publicationDate": "2026-12-01T00:00:00Z",
    }


@dataclass
class PricingModel:
    """Products answered by ``GetProducts``; ``requests`` records each request's parameters."""

    products: list[dict[str, Any]]
    endpoint: str = "us-east-1"
    page_size: int = 1
    fault: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = new_client("pricing")
        self.client.meta.events.register("before-send.pricing", self._on_send)

    def _on_send(self, request: Any, **_: Any) -> AWSResponse:
        body = json.loads(request.body)
        self.requests.append(body)
        if self.fault == "network":
            raise EndpointConnectionError(endpoint_url=request.url)
        if self.fault:
            return self._answer(request, 400, {"__type": self.fault, "message": f"{self.fault} for the test"})
        wanted = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
        matches = [json.dumps(p) for p in self.products
                   if all(p["product"]["attributes"].get(k) == v for k, v in wanted.items())]
        start = int(body.get("NextToken") or 0)
        size = min(int(body.get("MaxResults") or self.page_size), self.page_size)
        page: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": matches[start:start + size]}
        if start + size < len(matches):
            page["NextToken"] = str(start + size)
        return self._answer(request, 200, page)

    @staticmethod
    def _answer(request: Any, status: int, payload: dict[str, Any]) -> AWSResponse:
        return AWSResponse(request.url, status, {"Content-Type": "application/x-amz-json-1.1"},
                           _Raw(json.dumps(payload).encode()))
