"""Values that are not known yet (Pulumi preview) and how rules meet them.

During ``pulumi preview`` some inputs depend on resources that do not exist yet.
The engine sends them as sentinel strings; the adapters turn those into the
:data:`UNKNOWN` singleton. A rule that needs such a value raises
:class:`UnknownInput` (via :func:`known`), and the engine records "not evaluated"
instead of a violation or a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, final

__all__ = [
    "PULUMI_SECRET_SIG",
    "PULUMI_SIG_KEY",
    "PULUMI_UNKNOWN_SENTINELS",
    "SECRET_PLACEHOLDER",
    "UNKNOWN",
    "UnknownInput",
    "is_unknown",
    "known",
    "replace_pulumi_unknowns",
]


@final
class _Unknown:
    """The type of :data:`UNKNOWN`; a singleton that is falsy and prints as ``<unknown>``."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown>"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Final = _Unknown()
"""A value that is not known until the deployment runs."""

# pulumi/pulumi-policy sdk/python/lib/pulumi_policy/proxy.py (UNKNOWN_*_VALUE).
PULUMI_UNKNOWN_SENTINELS: Final = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)


# pulumi/pulumi sdk/python/lib/pulumi/runtime/rpc.py (_special_sig_key, _special_secret_sig):
# Pulumi's mocks and the engine's wire format mark a secret as {SIG_KEY: SECRET_SIG, value}.
PULUMI_SIG_KEY: Final = "4dabf18193072939515e22adb298388d"
PULUMI_SECRET_SIG: Final = "1b47061264138c4ac30d75fd1eb44270"
SECRET_PLACEHOLDER: Final = "[secret]"
"""What rules see instead of a Pulumi secret value: they can tell a literal is there
(K014) but can never quote it."""


class UnknownInput(Exception):
    """Raised by a rule when an input it needs is unknown (Pulumi preview)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def is_unknown(value: object) -> bool:
    """True when *value* is the :data:`UNKNOWN` sentinel."""
    return value is UNKNOWN


def known(value: Any, what: str) -> Any:
    """Return *value*, or raise :class:`UnknownInput` naming *what* if it is unknown."""
    if value is UNKNOWN:
        raise UnknownInput(what)
    return value


def replace_pulumi_unknowns(value: Any) -> Any:
    """Copy a JSON-like value, turning Pulumi's unknown sentinels into :data:`UNKNOWN`.

    Anything that is not JSON-like (an unresolved ``Output``, an asset) also
    becomes :data:`UNKNOWN`: a rule cannot read it. A Pulumi secret becomes
    :data:`SECRET_PLACEHOLDER`, so no rule message can quote it. Whole floats
    become ints, as the engine sends every number as a double.
    """
    if isinstance(value, str):
        return UNKNOWN if value in PULUMI_UNKNOWN_SENTINELS else value
    if isinstance(value, float) and value.is_integer():
        return int(value)  # protobuf Structs carry every number as a double
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        if value.get(PULUMI_SIG_KEY) == PULUMI_SECRET_SIG:
            return SECRET_PLACEHOLDER
        return {str(k): replace_pulumi_unknowns(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [replace_pulumi_unknowns(v) for v in value]
    return UNKNOWN
