"""K013 pinned-images."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.unknown import known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import moving_tag, split_image


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Images carry a tag other than ``latest`` (or a digest)."""
    for c in obj.containers():
        image = known(c.image, f"image of {c.label}")
        if not isinstance(image, str) or not image:
            continue  # filled in by a controller (KServe presets) or invalid anyway
        _, tag, digest = split_image(image)
        if digest:
            continue
        word = moving_tag(tag)
        if tag is None:
            reason = "no-tag"
        elif tag == "latest":
            reason = "latest"
        elif word is not None:
            reason = "moving-tag"
        else:
            continue
        yield Verdict(
            "violation",
            reason,
            values={"container": c.label, "image": image, "tag": tag, "channel": word},
            path=(*c.path, "image"),
        )


RULE = folder_rule(__name__, worded(judge))
