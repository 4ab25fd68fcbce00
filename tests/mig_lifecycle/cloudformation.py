"""CloudFormation and the CDK provider framework, as the MIG handler sees them.

:class:`Framework` follows aws-cdk-lib 2.275's ``custom-resources/lib/provider-framework/
runtime/framework.js`` and ``cfn-response.js``:

* ``safeHandler``: a Delete whose physical id is ``CREATE_FAILED_PHYSICAL_ID_MARKER``
  is answered SUCCESS without calling the handler; a failed Create without a physical id
  is answered with that marker.
* ``createResponseEvent``: the isComplete event is the request merged with on_event's
  result; a Delete may not change the physical id; the final Data is on_event's Data
  merged with is_complete's; ``Data`` with ``IsComplete: false`` is an error.
* The waiter: is_complete at once, then every ``query_interval`` for
  ``total_timeout / query_interval`` attempts; then ``onTimeout`` answers FAILED
  "Operation timed out" with the isComplete request's physical id.

:class:`Stack` plays CloudFormation for one endpoint and its components: creates and
updates in dependency order (independent components at the same time), a changed
physical id is a replacement whose old resource is deleted in the cleanup phase, a
failure rolls back (components before the endpoint: Delete for what was created, the
independent ones at the same time, Update with the previous properties for what was
updated, then the cleanup of the replacements), and CloudFormation's own
``ServiceTimeout`` fails a request that got no answer in time (the physical id is then
unknown to CloudFormation: *model*, a placeholder is sent with the rollback Delete).
Cleanup and rollback Deletes carry the template's *current* properties for the logical
id (the harsher case: they may describe another generation).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

CREATE_FAILED = "AWSCDK::CustomResourceProviderFramework::CREATE_FAILED"
STACK_ID = "arn:aws:cloudformation:us-east-1:111122223333:stack/mig-inference/4c1d7a40-0000-11ef-9f1d-0a1b2c3d4e5f"


@dataclass
class Response:
    status: str
    physical: str | None
    data: dict
    reason: str = ""


class Framework:
    def __init__(self, handler: Any, sm: Any, *, query_interval: float, total_timeout: float) -> None:
        self.h, self.sm = handler, sm
        self.interval = query_interval
        self.attempts = int(total_timeout / query_interval)
        pass

    def run(self, request: dict) -> Iterator[Response | None]:
        """Yields ``None`` between polls (the caller advances the clock), then the response."""
        request = copy.deepcopy(request)
        if request["RequestType"] == "Delete" and request.get("PhysicalResourceId") == CREATE_FAILED:
            yield Response("SUCCESS", CREATE_FAILED, {})
            return
        try:
            result = self.h.handle_on_event(copy.deepcopy(request), self.sm.client) or {}
        except Exception as exc:  # noqa: BLE001 - the framework reports any error
            physical = request.get("PhysicalResourceId") or (CREATE_FAILED if request["RequestType"] == "Create" else None)
            yield Response("FAILED", physical, {}, str(exc))
            return
        physical = result.get("PhysicalResourceId") or (
            request["RequestId"] if request["RequestType"] == "Create" else request["PhysicalResourceId"]
        )
        if request["RequestType"] == "Delete" and physical != request["PhysicalResourceId"]:
            yield Response("FAILED", request["PhysicalResourceId"], {}, "DELETE: cannot change the physical resource ID")
            return
        event = {**request, **result, "PhysicalResourceId": physical}
        for attempt in range(self.attempts):
            if attempt:
                yield None
            try:
                done = self.h.handle_is_complete(copy.deepcopy(event), self.sm.client)
            except Exception as exc:  # noqa: BLE001
                yield Response("FAILED", physical, event.get("Data") or {}, str(exc))
                return
            if done.get("IsComplete"):
                yield Response("SUCCESS", physical, {**(event.get("Data") or {}), **(done.get("Data") or {})})
                return
            if done.get("Data"):
                yield Response("FAILED", physical, {}, '"Data" is not allowed if "IsComplete" is "False"')
                return
        yield Response("FAILED", physical, event.get("Data") or {}, "Operation timed out")


@dataclass
class Resource:
    logical: str
    physical: str
    props: dict
    data: dict


@dataclass
class Stack:
    """CloudFormation for a template of one endpoint (``Endpoint``) and components."""

    handler: Any
    sm: Any
    query_interval: float
    total_timeout: float
    service_timeout: float
    resources: dict[str, Resource] = field(default_factory=dict)
    status: str = "NONE"
    events: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    template: dict[str, dict] = field(default_factory=dict)
    _requests: int = 0
    on_poll: Callable[[], None] | None = None

    # ------------------------------------------------------------------ plumbing

    def _framework(self) -> Framework:
        return Framework(self.handler, self.sm, query_interval=self.query_interval, total_timeout=self.total_timeout)

    def _resolve(self, props: dict) -> dict:
        out = copy.deepcopy(props)
        if out.get("EndpointName") == "${Endpoint.EndpointName}":
            out["EndpointName"] = self.resources["Endpoint"].data["EndpointName"]
        return out

    def _request(self, kind: str, logical: str, props: dict, *, physical: str | None = None, old: dict | None = None) -> dict:
        self._requests += 1
        request = {
            "RequestType": kind,
            "ServiceToken": "arn:aws:lambda:us-east-1:111122223333:function:framework-onEvent",
            "ResponseURL": "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/x",
            "StackId": STACK_ID,
            "RequestId": f"req-{self._requests}",
            "LogicalResourceId": logical,
            "ResourceType": "Custom::GpuShareMig" + ("Endpoint" if logical == "Endpoint" else "InferenceComponent"),
            "ResourceProperties": {"ServiceToken": "arn:aws:lambda:...", **copy.deepcopy(props)},
        }
        if physical is not None:
            request["PhysicalResourceId"] = physical
        if old is not None:
            request["OldResourceProperties"] = {"ServiceToken": "arn:aws:lambda:...", **copy.deepcopy(old)}
        return request

    def _run_all(self, requests: list[tuple[str, dict]]) -> dict[str, Response]:
        """Run requests at the same time (CloudFormation's parallel resources); the clock advances per round."""
        runs = {logical: self._framework().run(req) for logical, req in requests}
        started = self.sm.clock.t
        answers: dict[str, Response] = {}
        while runs:
            for logical, run in list(runs.items()):
                out = next(run)
                if out is not None:
                    answers[logical] = out
                    del runs[logical]
                    self.events.append(f"{requests_kind(requests, logical)} {logical} {out.status} {out.reason[:200]}".strip())
                    if out.status == "FAILED":
                        self.reasons.append(f"{logical}: {out.reason}")
            if not runs:
                break
            if self.sm.clock.t - started + self.query_interval > self.service_timeout:
                # CloudFormation gives up: no answer within ServiceTimeout. The physical id
                # the framework would have sent never arrives.
                for logical in list(runs):
                    answers[logical] = Response("FAILED", None, {}, "CloudFormation did not receive a response (ServiceTimeout)")
                    self.events.append(f"{requests_kind(requests, logical)} {logical} TIMEOUT")
                    self.reasons.append(f"{logical}: ServiceTimeout")
                    del runs[logical]
                break
            self.sm.advance(self.query_interval)
            if self.on_poll:
                self.on_poll()
        return answers

    # ------------------------------------------------------------------ operations

    def deploy(self, template: dict[str, dict]) -> str:
        """Create or update the stack to ``template`` (logical id -> properties)."""
        first = not self.resources
        previous = {k: copy.deepcopy(v) for k, v in self.resources.items()}
        old_template = self.template
        self.template = copy.deepcopy(template)
        created: list[str] = []
        updated: dict[str, tuple[str, dict]] = {}  # logical -> (old physical, old props)
        failed = False
        cleanup: list[Resource] = []
        for wave in (["Endpoint"], [k for k in template if k != "Endpoint"]):
            requests = []
            for logical in wave:
                if logical not in template:
                    continue
                props = self._resolve(template[logical])
                if logical not in self.resources:
                    requests.append((logical, self._request("Create", logical, props)))
                elif props != self.resources[logical].props:
                    r = self.resources[logical]
                    requests.append((logical, self._request("Update", logical, props, physical=r.physical, old=r.props)))
            answers = self._run_all(requests)
            for logical, req in requests:
                out = answers[logical]
                props = req["ResourceProperties"]
                if req["RequestType"] == "Create":
                    created.append(logical)
                    self.resources[logical] = Resource(logical, out.physical or f"mig-inference-{logical}-TIMEDOUT", props, out.data)
                    if out.status != "SUCCESS":
                        failed = True
                else:
                    if out.status != "SUCCESS":
                        failed = True
                        updated.setdefault(logical, (req["PhysicalResourceId"], req["OldResourceProperties"]))
                        self.resources[logical].__dict__["failed_props"] = props
                        continue
                    r = self.resources[logical]
                    updated[logical] = (r.physical, r.props)
                    if out.physical != r.physical:
                        cleanup.append(Resource(logical, r.physical, r.props, r.data))
                    self.resources[logical] = Resource(logical, out.physical, props, out.data)
            if failed:
                break
        removed = [k for k in previous if k not in template]
        if not failed:
            for r in sorted(cleanup, key=lambda r: r.logical == "Endpoint"):
                self._delete_quietly(r.logical, r.physical, self.resources[r.logical].props)
            for logical in sorted(removed, key=lambda k: k == "Endpoint"):
                r = self.resources.pop(logical)
                self._delete_quietly(logical, r.physical, r.props)
            self.status = "CREATE_COMPLETE" if first else "UPDATE_COMPLETE"
            return self.status
        # ---- rollback: components first, then the endpoint; the created ones of a group are
        # deleted at the same time (independent resources), then the updated ones go back.
        self.template = old_template
        ok = True
        rollback_cleanup: list[Resource] = []
        rolled_back = sorted(set(created) | set(updated), key=lambda k: (k == "Endpoint", k))
        for group in ([k for k in rolled_back if k != "Endpoint"], [k for k in rolled_back if k == "Endpoint"]):
            deletes = []
            for logical in (k for k in group if k in created):
                r = self.resources.pop(logical)
                deletes.append((logical, self._request("Delete", logical, r.props, physical=r.physical)))
            if deletes:
                answers = self._run_all(deletes)
                ok &= all(answers[logical].status == "SUCCESS" for logical, _ in deletes)
            for logical in group:
                if logical not in created:
                    ok &= self._roll_back_update(logical, updated[logical], rollback_cleanup)
        for r in sorted(rollback_cleanup, key=lambda r: r.logical == "Endpoint"):
            self._delete_quietly(r.logical, r.physical, self.resources[r.logical].props)
        if first:
            self.status = "ROLLBACK_COMPLETE" if ok else "ROLLBACK_FAILED"
        else:
            self.status = "UPDATE_ROLLBACK_COMPLETE" if ok else "UPDATE_ROLLBACK_FAILED"
        return self.status

    def _roll_back_update(self, logical: str, previous: tuple[str, dict], rollback_cleanup: list[Resource]) -> bool:
        """The rollback Update of ``logical`` to its previous properties; ``False`` when it failed."""
        old_physical, old_props = previous
        r = self.resources[logical]
        failed_props = r.__dict__.pop("failed_props", None)
        current = failed_props if failed_props is not None else r.props
        physical = old_physical if failed_props is not None else r.physical
        # The previous properties, resolved against the rolled-back endpoint.
        props = copy.deepcopy(old_props)
        answers = self._run_all([(logical, self._request("Update", logical, props, physical=physical, old=current))])
        out = answers[logical]
        if out.status != "SUCCESS":
            return False
        if out.physical != physical:
            rollback_cleanup.append(Resource(logical, physical, current, r.data))
        self.resources[logical] = Resource(logical, out.physical, props, out.data)
        return True

    def _delete(self, logical: str, physical: str, props: dict) -> bool:
        answers = self._run_all([(logical, self._request("Delete", logical, props, physical=physical))])
        return answers[logical].status == "SUCCESS"

    def _delete_quietly(self, logical: str, physical: str, props: dict) -> None:
        """Cleanup deletes: CloudFormation logs a failure and carries on (the resource is abandoned)."""
        self._delete(logical, physical, props)

    def delete_delivered_twice(self, logical: str, *, after: float) -> list[Response]:
        """A Delete of ``logical`` and the same request again ``after`` seconds later.

        Lambda's asynchronous invocation delivers an event at least once, and a stack delete
        retried after ``DELETE_FAILED`` sends the Delete again: the second may arrive while
        the first still waits, or once it is done. Both run to their answer, polled side by
        side; the resource leaves the stack when both succeeded.
        """
        r = self.resources[logical]
        request = self._request("Delete", logical, r.props, physical=r.physical)
        starts = [0.0, after]
        runs = [self._framework().run(request), self._framework().run(request)]
        answers: list[Response | None] = [None, None]
        started = self.sm.clock.t
        while True:
            elapsed = self.sm.clock.t - started
            for i, run in enumerate(runs):
                if answers[i] is None and elapsed >= starts[i]:
                    out = next(run)
                    if out is not None:
                        answers[i] = out
                        self.events.append(f"Delete {logical} {out.status} {out.reason[:200]}".strip())
                        if out.status == "FAILED":
                            self.reasons.append(f"{logical}: {out.reason}")
            if all(a is not None for a in answers):
                break
            if elapsed + self.query_interval > after + self.service_timeout:
                raise AssertionError(f"a Delete of {logical} got no answer within ServiceTimeout")
            self.sm.advance(self.query_interval)
        if all(a.status == "SUCCESS" for a in answers):
            del self.resources[logical]
        return [a for a in answers if a is not None]

    def delete(self) -> str:
        ok = True
        for logical in sorted(self.resources, key=lambda k: k == "Endpoint"):
            r = self.resources[logical]
            if self._delete(logical, r.physical, r.props):
                del self.resources[logical]
            else:
                ok = False
        self.status = "DELETE_COMPLETE" if ok else "DELETE_FAILED"
        if ok:
            self.template = {}
        return self.status


def requests_kind(requests: list[tuple[str, dict]], logical: str) -> str:
    return next(req["RequestType"] for lg, req in requests if lg == logical)
