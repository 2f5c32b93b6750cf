"""K013 pinned-images."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.unknown import UNKNOWN, known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.kubeai import kubeai_default_images
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import moving_tag, split_image


def _unpinned(image: str) -> str | None:
    """Why *image* is not pinned (``no-tag``, ``latest``, ``moving-tag``), or None."""
    _, tag, digest = split_image(image)
    if digest:
        return None
    if tag is None:
        return "no-tag"
    if tag == "latest":
        return "latest"
    return "moving-tag" if moving_tag(tag) is not None else None


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Images carry a tag other than ``latest`` (or a digest)."""
    for c in obj.containers():
        defaults = kubeai_default_images(obj) if c.image is UNKNOWN else ()
        if defaults and not any(_unpinned(i) for i in defaults):
            continue  # pinned on every KubeAI chart release's default image
        image = known(c.image, f"image of {c.label}")
        if not isinstance(image, str) or not image:
            continue  # filled in by a controller (KServe presets) or invalid anyway
        reason = _unpinned(image)
        if reason is None:
            continue
        _, tag, _ = split_image(image)
        word = moving_tag(tag)
        yield Verdict(
            "violation",
            reason,
            values={"container": c.label, "image": image, "tag": tag, "channel": word},
            path=(*c.path, "image"),
        )


RULE = folder_rule(__name__, worded(judge))
