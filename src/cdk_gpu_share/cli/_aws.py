"""What the commands that read AWS share: the one-line message of an AWS error and the queues of a config.

``gpu-share status``, ``usage``, ``trace export`` and ``mig check`` read AWS; each turns a
botocore error into one line naming what was read and the fix (:func:`aws_error`), and the first
three find the Batch queues of a platform config the same way (:func:`queues_of`).
"""

from __future__ import annotations

from typing import Any

from cdk_gpu_share.aws import batch_reader as br
from cdk_gpu_share.cli._region import no_region
from cdk_gpu_share.core.errors import GpuShareError

__all__ = ["aws_error", "batch_quota_queue", "queues_of"]


def aws_error(exc: Exception, queue: str, region: str | None, actions: tuple[str, ...], *,
              what: str | None = None, service: str = "AWS Batch") -> GpuShareError | None:
    """A one-line :class:`GpuShareError` for an AWS/botocore error, or None if ``exc`` is not one.

    ``actions``: the IAM actions to name when access is denied. ``what`` names what was read
    (default: the job queue), ``service`` the service that answered.
    """
    from botocore import exceptions as bx  # botocore is loaded when an error is explained, not at start-up

    where = f" in region {region}" if region else ""
    q = what or f"job queue {queue!r}"
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError)):
        return GpuShareError(
            f"no AWS credentials to read {q}{where}; configure them (aws configure, AWS_PROFILE, "
            "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and retry"
        )
    if isinstance(exc, bx.ProfileNotFound):
        profile = getattr(exc, "kwargs", {}).get("profile")
        return GpuShareError(
            f"the AWS profile {profile!r} (AWS_PROFILE) is not in your AWS configuration, so {q} cannot be read;"
            " set AWS_PROFILE to a configured profile (aws configure list-profiles) or unset it"
        )
    if isinstance(exc, bx.NoRegionError):
        return no_region(q)
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return GpuShareError(f"cannot reach {service}{where} to read {q}: {_one_line(str(exc))}; check --region and the network")
    if isinstance(exc, bx.ParamValidationError):
        return GpuShareError(f"{q} was rejected before sending: {_one_line(str(exc))}; pass a queue name or ARN")
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code = err.get("Code", "Unknown")
        message = _one_line(err.get("Message", "") or str(exc))
        op = getattr(exc, "operation_name", "") or "the request"
        if code in ("AccessDeniedException", "AccessDenied", "UnauthorizedOperation") or "not authorized" in message.lower():
            return GpuShareError(
                f"access denied reading {q}{where} ({op}); grant your identity {', '.join(actions)}"
            )
        if code in ("ExpiredTokenException", "ExpiredToken", "RequestExpired"):
            return GpuShareError(f"AWS credentials expired while reading {q}; refresh them (aws sso login, new keys) and retry")
        if code in ("UnrecognizedClientException", "InvalidSignatureException", "InvalidClientTokenId"):
            return GpuShareError(f"AWS rejected the credentials used to read {q}{where} ({code}); check your profile or keys")
        if code in ("ThrottlingException", "TooManyRequestsException", "Throttling"):
            return GpuShareError(f"{service} throttled the reads of {q}{where} ({op}); retry in a minute")
        if code == "ClientException":
            return GpuShareError(
                f"AWS Batch rejected {op} for {q}{where}: {message}; check the queue name and --region"
            )
        return GpuShareError(f"AWS error {code} in {op} reading {q}{where}: {message}")
    if isinstance(exc, bx.BotoCoreError):
        return GpuShareError(f"cannot read {q}{where}: {_one_line(str(exc))}")
    return None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def batch_quota_queue(config: Any) -> str:
    """The name of the quota-management queue of ``config``'s ``batch_quota`` section."""
    return config.batch_quota.queue_name or f"{config.name}-training"


def queues_of(config: Any) -> dict[str, tuple[list[str], float | None]]:
    """queue name -> (its teams, its pool in GPUs when lending must be attributed here)."""
    out: dict[str, tuple[list[str], float | None]] = {}
    if config.batch_quota is not None:
        out[batch_quota_queue(config)] = ([t.name for t in config.teams_for("batch_quota")], None)
    if config.fairshare is not None:
        settings = br.settings_from_config(config)
        out[settings["queue"]] = ([t.name for t in config.teams_for("fairshare")],
                                  float(settings["capacity"][br.RESOURCE]))
    return out
