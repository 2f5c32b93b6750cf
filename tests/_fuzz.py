"""Shared pieces of the property-based suites: odd values, mutations, and case counts.

Every property suite records each case it runs with :func:`record`; the session's
terminal summary (``tests/conftest.py``) prints cases tried and failures found per
suite, so CI logs show how much was exercised.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import strategies as st

# Suite -> cases tried / property failures (a failure is any case whose check raised).
CASES: Counter[str] = Counter()
FAILURES: Counter[str] = Counter()
SECONDS: Counter[str] = Counter()


@contextmanager
def record(suite: str) -> Iterator[None]:
    """Count one case of *suite*; a case that raises counts as a failure (and re-raises)."""
    import time

    CASES[suite] += 1
    start = time.perf_counter()
    try:
        yield
    except BaseException:
        FAILURES[suite] += 1
        raise
    finally:
        SECONDS[suite] += time.perf_counter() - start


def summary_lines() -> list[str]:
    """One line per suite: ``suite: N cases, F failures, S s``; then the totals."""
    if not CASES:
        return []
    width = max(len(s) for s in CASES)
    lines = [
        f"{suite:<{width}}  {CASES[suite]:>6} cases  {FAILURES[suite]:>3} failures  "
        f"{SECONDS[suite]:7.1f} s in checks"
        for suite in sorted(CASES)
    ]
    lines.append(
        f"{'total':<{width}}  {sum(CASES.values()):>6} cases  {sum(FAILURES.values()):>3} "
        f"failures  {sum(SECONDS.values()):7.1f} s in checks"
    )
    return lines


# --- odd values ----------------------------------------------------------------------------

# Pulumi's wire encodings (pulumi/runtime/rpc.py): a secret is a map with the special
# signature key; an unknown value is one of the sentinel strings pulumi-policy documents.
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def pulumi_secret(value: Any) -> dict[str, Any]:
    """A value as Pulumi's mock monitor hands secret inputs over (signature map)."""
    return {SECRET_SIG_KEY: SECRET_SIG, "value": value}


EXTREME_INTS = [
    0,
    -1,
    1,
    2**31 - 1,
    2**31,
    2**53 + 1,
    2**63 - 1,
    -(2**63),
    2**64,
    10**30,
    -(10**30),
]
EXTREME_FLOATS = [0.0, -0.0, 1e-320, 0.5, 1.0000001, 1e308, -1e308, math.inf, -math.inf, math.nan]
ODD_STRINGS = [
    "",
    " ",
    "\t",
    "null",
    "~",
    "yes",
    "0x1F",
    "1e3",
    "1e99999999",
    "inf",
    "NaN",
    "-0",
    "0.5",
    "500m",
    "-1",
    "1Ei",
    "9" * 400,
    "Ω≈ç√∫ 模型 🚀",
    "\u202eevil",
    "a\nb",
    "\x07\x1b[31m",
    "${HF_TOKEN}",
    "$(VAR)",
    "x" * 5000,
    "nvidia.com/gpu",
    "NoSchedule",
    "latest",
    "vllm/vllm-openai:latest",
]


def deep(depth: int, leaf: Any = 1) -> Any:
    """``depth`` levels of alternating list/map nesting around *leaf*."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def scalars() -> st.SearchStrategy[Any]:
    """Scalars of every YAML type, biased to edge cases."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from(EXTREME_INTS),
        st.integers(),
        st.sampled_from(EXTREME_FLOATS),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(ODD_STRINGS),
        st.text(max_size=40),
    )


def junk(*, secrets: bool = False, unknown: Any = None) -> st.SearchStrategy[Any]:
    """Any JSON/YAML-shaped value: scalars, nesting, empty and huge containers.

    With ``secrets``, Pulumi secret wrappers appear; with ``unknown`` given, that
    object (the UNKNOWN sentinel) appears too.
    """
    base = scalars()
    if secrets:
        base = st.one_of(base, scalars().map(pulumi_secret))
    if unknown is not None:
        base = st.one_of(base, st.just(unknown))
    nested = st.recursive(
        base,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=12), children, max_size=4),
        ),
        max_leaves=12,
    )
    return st.one_of(
        nested,
        st.builds(list),  # fresh objects: mutations must not reach a shared one
        st.builds(dict),
        st.integers(1, 3).map(lambda n: [None] * (2000 * n)),  # huge lists
        st.integers(50, 200).map(deep),  # deep nesting
    )


# --- paths and mutations -------------------------------------------------------------------

PathT = tuple[str | int, ...]


def paths(doc: Any, prefix: PathT = ()) -> list[PathT]:
    """Every path into *doc* (maps by key, lists by index), the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out += paths(value, (*prefix, index))
    return out


def get(doc: Any, path: PathT) -> Any:
    """The value at *path*."""
    for part in path:
        doc = doc[part]
    return doc


def put(doc: Any, path: PathT, value: Any) -> Any:
    """*doc* with *path* set to *value* (the root replaced when *path* is empty)."""
    if not path:
        return value
    get(doc, path[:-1])[path[-1]] = value
    return doc


MUTATIONS = (
    "replace",
    "delete",
    "add-key",
    "empty",
    "duplicate",
    "wrap-list",
    "wrap-map",
    "stringify",
    "bump",
)


@st.composite
def mutated(draw: st.DrawFn, base: Any, value: st.SearchStrategy[Any], max_steps: int = 3) -> Any:
    """A deep copy of *base* with 1..max_steps random mutations at random paths."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_steps))):
        where = draw(st.sampled_from(paths(doc)))
        op = draw(st.sampled_from(MUTATIONS))
        current = get(doc, where)
        parent = get(doc, where[:-1]) if where else None
        if op == "replace":
            doc = put(doc, where, draw(value))
        elif op == "delete" and where:
            del parent[where[-1]]  # type: ignore[index]
        elif op == "add-key" and isinstance(current, dict):
            known = sorted(map(str, current))
            names = [st.sampled_from(known)] if known else []
            key = draw(st.one_of(st.text(max_size=30), *names))
            current[key + draw(st.sampled_from(["", "_", "s", "x"]))] = draw(value)
        elif op == "empty" and isinstance(current, dict | list | str):
            doc = put(doc, where, type(current)())
        elif op == "duplicate" and isinstance(current, list) and current:
            current.append(copy.deepcopy(current[draw(st.integers(0, len(current) - 1))]))
        elif op == "wrap-list":
            doc = put(doc, where, [current])
        elif op == "wrap-map":
            doc = put(doc, where, {"value": current})
        elif op == "stringify" and not isinstance(current, dict | list):
            doc = put(doc, where, str(current))
        elif op == "bump" and isinstance(current, int | float) and not isinstance(current, bool):
            doc = put(doc, where, draw(st.sampled_from([0, -1, current * 1000, -current])))
    return doc


# Characters and tokens that change what YAML means: structure, anchors, tags, document
# markers, byte-order marks and line breaks YAML treats specially, special scalars.
YAML_PIECES = [
    ":", "- ", "  ", "\t", "{", "[", "]", "'", '"', "&a ", "*a", "!!", "!!str ", "!!binary ",
    "!!python/object:os.system", "<<: *a\n", "\n", "---\n", "...\n", "#", "%", "@", "`", "|",
    ">", "? ", "\ufeff", "\x00", "\x85", "\u2028", "null", "~", ".nan", "1e99999", "-.inf",
]  # fmt: skip

TEXT_EDITS = ("insert", "delete", "replace", "truncate", "indent")


def damage(draw: st.DrawFn, text: str, edits: tuple[str, ...] = TEXT_EDITS) -> str:
    """*text* with 1-4 random edits (of the kinds in *edits*) at random places."""
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(edits))
        piece = draw(st.one_of(st.sampled_from(YAML_PIECES), st.text(max_size=8)))
        if op == "insert":
            text = text[:at] + piece + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)) :]
        elif op == "replace":
            text = text[:at] + piece + text[at + len(piece) :]
        elif op == "truncate":
            text = text[:at]
        else:
            line_start = text.rfind("\n", 0, at) + 1
            text = text[:line_start] + " " * draw(st.integers(1, 3)) + text[line_start:]
    return text
