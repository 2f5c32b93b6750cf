"""The environments rules are enforced for, and which one a run enforces."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

__all__ = ["ENVIRONMENTS", "Environment", "enforced_environment"]

Environment = Literal["dev", "staging", "prod"]
ENVIRONMENTS: tuple[Environment, ...] = ("dev", "staging", "prod")


def enforced_environment(
    claims: Iterable[object], stack: str, override: object = None
) -> Environment:
    """The environment rules are enforced for (``plan`` and the policy pack).

    *override* (``GPUSTRATA_ENVIRONMENT``, set by CI) wins. Otherwise the stack's name is
    a floor, and a name other than dev, staging or prod counts as prod; *claims* made in
    files under review (a stack file's ``environment``, ``gpustrata:environment``) may
    only raise it, so a pull request cannot relax enforcement.
    """
    for env in ENVIRONMENTS:
        if override == env:
            return env
    floor: Environment = "prod"
    for env in ENVIRONMENTS:
        if stack == env:
            floor = env
    claimed = list(claims)
    named = [env for env in ENVIRONMENTS if env in claimed]
    return max([*named, floor], key=ENVIRONMENTS.index)
