"""The strict base of the models users write (the stack, the cluster profile) and the types
both share (a node taint).

In the catalogue layer because the cluster profile (:mod:`.profile`), which the rules'
view reads, uses them, and the view imports only core, catalogue and vLLM; the stack spec
(:mod:`gpustrata.spec.stack`) builds on the same base.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpustrata.core.terminal import has_userinfo

__all__ = [
    "GP3_BASELINE_MIBPS",
    "StorageKind",
    "StrictModel",
    "Taint",
    "TaintEffect",
    "WeightSource",
    "hidden_character",
]

TaintEffect = Literal["NoSchedule", "NoExecute", "PreferNoSchedule"]
WeightSource = Literal["huggingface", "s3", "pvc", "local-nvme"]
"""Where an engine reads its weights from: the Hugging Face Hub (or a mirror), an object
store, a PersistentVolume, the instance's local NVMe (stack ``weights.source``, profile
``storage.load_gbps``, the startup estimate's load paths)."""

StorageKind = Literal["not stated", "local-disk", "ebs", "network-volume"]
"""What vLLM's default loader reads the weights from (a published log's ``storage``, stack
``weights.storage``, profile ``storage.kind``):

* ``local-disk``: a disk in the host (instance NVMe, the host's own file system);
* ``ebs``: an AWS EBS volume (gp3, io2);
* ``network-volume``: a shared network file system (EFS, NFS, FSx, a cloud "volume");
* ``not stated``: unknown; the startup estimate gives a range for it.
"""

GP3_BASELINE_MIBPS = 125
"""Read throughput of an EBS gp3 volume with none provisioned: "gp3 volumes deliver a
consistent baseline throughput performance of 125 MiB/s" (docs.aws.amazon.com/ebs/latest/
userguide/general-purpose.html; 125 to 1,000 MiB/s may be provisioned, e.g. the EMR API's
VolumeSpecification.Throughput "can be a number from 125 - 1000 and is valid only for gp3
volumes"). The stack's model-cache StorageClass and node volumes set ``type: gp3`` and no
throughput (render/foundation.py, render/karpenter.py)."""


def hidden_character(text: str) -> str | None:
    """The first control, format (bidi, zero-width) or line-separator character, as U+XXXX."""
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs"):
            return f"U+{ord(char):04X}"
    return None


def _strings(value: Any) -> Iterator[str]:
    """Every string in *value*: itself, or the keys and values of its maps and lists."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for kv in value.items():
            for item in kv:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _hidden(value: Any) -> str | None:
    return next((h for s in _strings(value) if (h := hidden_character(s))), None)


class StrictModel(BaseModel):
    """Base of the models users write (stack, cluster profile): unknown keys are errors,
    values are validated on assignment.

    Strict: ``true`` is not a number and ``"true"`` not a boolean (YAML writes both
    without quotes). No text may hold control, bidi or zero-width characters, which
    render invisibly in a review and differently on the command line.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False, strict=True)

    @field_validator("*", mode="after")
    @classmethod
    def _no_hidden_characters(cls, value: Any) -> Any:
        found = _hidden(value)
        if found:
            raise ValueError(
                f"contains the invisible or control character {found} (a reviewer cannot "
                "see it; it can change what the text means): remove it"
            )
        if any(has_userinfo(s) for s in _strings(value)):
            raise ValueError(
                "holds a URI with credentials before the host (scheme://***@host, not shown): "
                "they would be printed by plan and written into the Pod spec; remove them and "
                "give the pod access through its service account (IRSA) or a Secret"
            )
        return value


class Taint(StrictModel):
    """A Kubernetes node taint (Kubernetes spelling of the effect)."""

    key: str = Field(min_length=1, examples=["nvidia.com/gpu"], description="Taint key.")
    value: str = Field(default="", description="Taint value ('' for none).")
    effect: TaintEffect = Field(
        default="NoSchedule", description="Taint effect in Kubernetes spelling."
    )
