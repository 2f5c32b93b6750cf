"""The stack spec's shared grammar: names, quantities, versions, image references,
credential-shaped flags and model paths, and the base of every spec model."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

from gpustrata.catalog.inputs import StrictModel

# vLLM flags that carry credentials: --api-key (vllm/entrypoints/openai/cli_args.py) and
# --hf-token (vllm/config/model.py ModelConfig.hf_token), and anything named like them.
SECRET_FLAG = re.compile(r"(^|[_-])(api[_-]?key|token|secret|password|passwd)$")
# vLLM's own flag grammar (EngineArgs field names, --kebab-case on the command line).
FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# Any part of a flag name that hints at a credential (hf-tokens, auth_header, ...).
SECRET_PART = re.compile(
    r"(^|[_-])(api[_-]?keys?|hf[_-]?tokens?)([_-]|$)"
    r"|(^|[_-])(secrets?|passwords?|passwd|credentials?|auth[a-z]*|bearer)$"
)
# Values that look like a credential whatever the flag is called.
TOKEN_VALUE = re.compile(
    r"(^|[\s=:])(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})|^\s*bearer\s",
    re.IGNORECASE,
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
# An image reference (distribution/reference grammar, simplified):
# [host[:port]/]path[:tag][@digest].
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REF = re.compile(
    rf"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
# A release version: 580.173.02, v26.7.0, 4.2.3-4.1.3-ubuntu22.04 (no '/', no '..').
_VERSION = re.compile(r"^v?[0-9]+(?:\.[0-9A-Za-z]+)*(?:[-+][0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*)?$")
# kubelet evictionHard: a quantity or a percentage (k8s.io/kubelet eviction signals).
EVICTION_THRESHOLD = re.compile(r"^[0-9]+(\.[0-9]+)?(%|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
)
# Longest name one path component may have (NAME_MAX on Linux and macOS), in bytes.
NAME_MAX = 255
MODEL_MAX = 1024


def model_path_problem(model: str) -> str | None:
    """Why *model* (a Hugging Face id or a path to a config.json) cannot be used, or None.

    A stack file from a pull request must not make ``plan`` open files outside the
    project (``/proc/self/environ``, ``../../etc/passwd``): absolute paths, ``~`` and
    ``..`` are refused, and so are names no file system accepts (a component over 255
    bytes raised ``OSError: File name too long``).
    """
    if len(model.encode("utf-8")) > MODEL_MAX:
        return f"is {len(model.encode('utf-8'))} bytes long (at most {MODEL_MAX}); use the model id"
    if any(len(part.encode("utf-8")) > NAME_MAX for part in model.replace("\\", "/").split("/")):
        return (
            f"has a path component over {NAME_MAX} bytes (no file system takes it); "
            "use the Hugging Face id (org/name) or a shorter path"
        )
    if model.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:", model):
        return (
            "is an absolute path; a stack may only name a config.json inside the project "
            "(a stack from a pull request must not read the runner's files): use a path "
            "relative to the project"
        )
    if ".." in model.replace("\\", "/").split("/"):
        return (
            "leaves the project through '..'; a stack may only name a config.json inside "
            "the project: use a path relative to the project without '..'"
        )
    return None


def is_model_path(model: str) -> bool:
    """Does *model* name a file or folder in the project (``acme-13b/config.json``,
    ``models/acme/``, ``./acme``) rather than a Hugging Face id (``org/name``)? A Hub id
    has at most one ``/`` and no ``.json`` suffix."""
    text = model.replace("\\", "/")
    return text.endswith((".json", "/")) or text.startswith("./") or text.count("/") > 1


Name = Annotated[
    str,
    Field(
        min_length=1,
        max_length=40,
        pattern=_DNS_LABEL.pattern,
        examples=["gpu-h100"],
        description="A lowercase DNS label (RFC 1123): letters, digits and '-'.",
    ),
]
Quantity = Annotated[
    str,
    Field(
        pattern=_QUANTITY.pattern,
        examples=["500m", "2Gi"],
        description="A Kubernetes resource quantity such as '500m' or '2Gi'.",
    ),
]


Version = Annotated[
    str,
    Field(
        max_length=64,
        pattern=_VERSION.pattern,
        examples=["580.173.02"],
        description="A release version such as '580.173.02' or 'v26.7.0'.",
    ),
]


class SpecModel(StrictModel):
    """Base of the stack's models (:class:`~gpustrata.catalog.inputs.StrictModel`: unknown
    keys, loose types and hidden characters are errors)."""
