"""Values that are not known yet (Pulumi preview) and how rules meet them.

During ``pulumi preview`` some inputs depend on resources that do not exist yet.
The engine sends them as sentinel strings; the adapters turn those into the
:data:`UNKNOWN` singleton. A rule that needs such a value raises
:class:`UnknownInput` (via :func:`known`), and the engine records "not evaluated"
instead of a violation or a crash.

Rules need not test for the sentinel at each read: :func:`track_unknowns` wraps an
object that holds one so that every read of an unknown value (a mapping value or a list
item, however reached) is noted inside :func:`reading_unknowns`, and the engine turns a
violation a rule reports after such a read into "not evaluated": an unknown input makes a
rule not applicable, never violated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, SupportsIndex, TypeVar, final, overload

__all__ = [
    "ABSENT",
    "PULUMI_SECRET_SIG",
    "PULUMI_SIG_KEY",
    "PULUMI_UNKNOWN_SENTINELS",
    "SECRET_PLACEHOLDER",
    "TAINTED",
    "UNKNOWN",
    "UnknownInput",
    "contains_unknown",
    "handled_unknowns",
    "is_tracked",
    "is_unknown",
    "known",
    "memoised",
    "reading_unknowns",
    "replace_pulumi_unknowns",
    "replay_reads",
    "track_unknowns",
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
    """Raised by a rule when an input it needs is unknown (Pulumi preview).

    *reason* is the "not evaluated" record's text; by default that *what* is unknown until
    the deployment runs. An input that is unknown for another cause (a ConfigMap it refers
    to is not among the inputs) states that cause instead.
    """

    def __init__(self, what: str, reason: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.reason = reason or f"{what} is unknown until the deployment runs"


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


# --------------------------------------------------------------------------- read tracking

_READS: ContextVar[list[str] | None] = ContextVar("gpustrata_unknown_reads", default=None)


def _note(path: tuple[str | int, ...], owner: str) -> None:
    reads = _READS.get()
    if reads is not None:
        where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")
        reads.append(f"{where} of {owner}" if owner else where)


@contextmanager
def reading_unknowns() -> Iterator[list[str]]:
    """Collect, in the yielded list, where each unknown value read inside the block sits
    (``spec.template.spec.tolerations[0] of Deployment/default/vllm``); reads of nested
    blocks are theirs only (:func:`replay_reads` passes them on)."""
    reads: list[str] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


@contextmanager
def handled_unknowns() -> Iterator[None]:
    """A block whose :class:`UnknownInput` the caller catches and accounts for itself (an
    unknown autoscaler spoils only its own target): when the block raises it, the unknown
    reads inside are dropped; when it ends normally they count as usual."""
    with reading_unknowns() as reads:
        yield
    replay_reads(reads)


def replay_reads(reads: Iterable[str]) -> None:
    """Note *reads* in the enclosing :func:`reading_unknowns` block: a cached value built
    from unknowns is as unknown to every later reader as to the first."""
    current = _READS.get()
    if current is not None:
        current.extend(reads)


_T = TypeVar("_T")


@final
class _Tainted:
    """A :func:`memoised` entry whose factory read an unknown value or raised
    :class:`UnknownInput`: every later caller replays the reads and gets the error again.
    An entry that read no unknown is kept bare in the memo, so a hit is one dict read."""

    __slots__ = ("error", "reads", "value")

    def __init__(self, value: Any, error: UnknownInput | None, reads: tuple[str, ...]) -> None:
        self.value = value
        self.error = error
        self.reads = reads

    def replay(self) -> Any:
        """The kept value, after noting its reads (and raising its error)."""
        replay_reads(self.reads)
        if self.error is not None:
            raise self.error
        return self.value


TAINTED: Final = _Tainted
"""The type of a :func:`memoised` entry that read an unknown or raised one (an entry of
any other type is the value itself)."""

ABSENT: Final = object()
"""The ``dict.get`` default that tells a memo miss from a kept ``None``."""


def memoised(memo: dict[Any, Any], key: Any, factory: Callable[..., _T], *args: Any) -> _T:
    """``factory(*args)`` once per *memo* and *key*. Every later caller counts as having
    read the unknown values the first call read (:func:`replay_reads`), and gets the
    :class:`UnknownInput` it raised again: a cache must not launder an unknown.

    A value that read no unknown is kept as it is, so a hit is one dict read and a type
    test (issue 18: hot paths call this directly, with *args* rather than a closure); one
    that read an unknown, or an error, is kept as a :data:`TAINTED` entry that replays
    them."""
    found = memo.get(key, ABSENT)
    if found is not ABSENT:
        if type(found) is _Tainted:
            tainted: _T = found.replay()
            return tainted
        known: _T = found
        return known
    # reading_unknowns() inlined: a generator context manager costs more than most
    # factories that hit this path (issue 18 profile: 610 k calls).
    reads: list[str] = []
    token = _READS.set(reads)
    error: UnknownInput | None = None
    try:
        value = factory(*args)
    except UnknownInput as exc:
        error = exc
    finally:
        _READS.reset(token)
    if error is not None:
        memo[key] = _Tainted(None, error, tuple(reads))
        replay_reads(reads)
        raise error
    if reads:
        memo[key] = _Tainted(value, None, tuple(reads))
        replay_reads(reads)
    else:
        memo[key] = value
    return value


_PLAIN_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def contains_unknown(value: Any) -> bool:
    """Does *value* hold :data:`UNKNOWN` anywhere (iterative: any depth)?"""
    stack = [value]
    while stack:
        item = stack.pop()
        if item is UNKNOWN:
            return True
        kind = type(item)  # exact types first: the ABC checks below cost 10x
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind in _PLAIN_SCALARS:
            continue
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def track_unknowns(raw: Mapping[str, Any], owner: str = "") -> Mapping[str, Any]:
    """*raw*, read-only, with every read of an unknown value noted (see
    :func:`reading_unknowns`); *raw* itself when it holds no unknown. *owner* names the
    object in the notes."""
    if isinstance(raw, _TrackedMap) or not contains_unknown(raw):
        return raw
    tracked = _wrap(raw, (), owner)
    assert isinstance(tracked, _TrackedMap)
    return tracked


def is_tracked(raw: object) -> bool:
    """Is *raw* read through :func:`track_unknowns` (it holds an unknown value)?"""
    return isinstance(raw, _TrackedMap)


def _wrap(value: Any, path: tuple[str | int, ...], owner: str) -> Any:
    if isinstance(value, Mapping):
        return _TrackedMap(value, path, owner)
    if isinstance(value, list | tuple):
        return _TrackedList(value, path, owner)
    return value


class _TrackedMap(Mapping[str, Any]):
    """A read-only mapping that notes each read of an unknown value."""

    __slots__ = ("_data", "_owner", "_path")

    def __init__(self, data: Mapping[str, Any], path: tuple[str | int, ...], owner: str) -> None:
        self._path = path
        self._owner = owner
        self._data = {k: _wrap(v, (*path, k), owner) for k, v in data.items()}

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        if value is UNKNOWN:
            _note((*self._path, key), self._owner)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        if key in self._data:
            return self[key]
        return default

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)


class _TrackedList(list[Any]):
    """A list (``isinstance(x, list)`` holds) that notes each read of an unknown item."""

    __slots__ = ("_owner", "_path")

    def __init__(self, data: Iterable[Any], path: tuple[str | int, ...], owner: str) -> None:
        super().__init__(_wrap(v, (*path, i), owner) for i, v in enumerate(data))
        self._path = path
        self._owner = owner

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        value = super().__getitem__(index)
        if value is UNKNOWN:
            position = index.__index__()
            _note((*self._path, position % len(self) if position < 0 else position), self._owner)
        return value

    def __iter__(self) -> Iterator[Any]:
        for index in range(len(self)):
            yield self[index]
