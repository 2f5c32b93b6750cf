"""The environments rules are enforced for, and which one a run enforces."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

__all__ = ["ENVIRONMENTS", "Environment", "enforced_environment", "name_mismatch"]

Environment = Literal["dev", "staging", "prod"]
ENVIRONMENTS: tuple[Environment, ...] = ("dev", "staging", "prod")


def enforced_environment(
    claims: Iterable[object], stack: str, override: object = None
) -> Environment:
    """The environment rules are enforced for (``plan`` and the policy pack).

    *override* (``GPUSTRATA_ENVIRONMENT``, set by CI) wins. A stack named dev, staging or
    prod is a floor: *claims* made in files under review (a stack file's ``environment``,
    ``gpustrata:environment``) may only raise it, so a pull request cannot relax a named
    environment. A stack named like no environment (``s13``, ``alice``) follows the
    strictest claim, and counts as prod only when nothing claims one; callers say so in a
    warning (:func:`name_mismatch`), and CI pins such stacks with ``GPUSTRATA_ENVIRONMENT``.
    """
    for env in ENVIRONMENTS:
        if override == env:
            return env
    claimed = list(claims)
    named = [env for env in ENVIRONMENTS if env in claimed]
    if stack not in ENVIRONMENTS:
        return max(named, key=ENVIRONMENTS.index) if named else "prod"
    floor: Environment = "prod"
    for env in ENVIRONMENTS:
        if stack == env:
            floor = env
    return max([*named, floor], key=ENVIRONMENTS.index)


def name_mismatch(claim: object, stack: str, override: object = None) -> str | None:
    """A warning when the stack's name and the environment its file claims differ (and CI
    has not chosen one): which one :func:`enforced_environment` enforces, and how to pin it.
    ``None`` when they agree or CI chose."""
    if override in ENVIRONMENTS or claim not in ENVIRONMENTS or claim == stack:
        return None
    enforced = enforced_environment([claim], stack, override)
    if stack not in ENVIRONMENTS:
        return (
            f"stack '{stack}' is named like no environment: rules are enforced for "
            f"{enforced}, the environment its stack file states; in CI, pin it with "
            f"GPUSTRATA_ENVIRONMENT={enforced} (or name the stack dev, staging or prod)"
        )
    return (
        f"the stack file states environment {claim} but the stack is named '{stack}': rules "
        f"are enforced for {enforced} (a file may make its named environment stricter, never "
        "more relaxed); make the two agree"
    )
