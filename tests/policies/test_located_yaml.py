"""The one-walk YAML reader (``manifests._located``) gives what the general path gives:
the same values, the same line of every key and item, the same errors."""

from __future__ import annotations

from typing import Any

import pytest

from gpustrata.core.errors import InputError
from gpustrata_policies.inputs import manifests

DOCS = [
    "kind: Pod\nmetadata: {name: a, labels: {x: 'y'}}\nspec:\n  containers:\n  - name: c\n",
    "a: 0x1F\nb: 0o17\nc: 1_000\nd: -12\ne: 1.5e3\nf: .inf\ng: .nan\nh: ~\ni: yes\nj: Off\n",
    "1: int key\n'2': str key\ntrue: bool key\n~: null key\n3.5: float key\n",
    "a:\n- - 1\n  - [2, 3]\n- {b: [c, {d: e}]}\n- ''\n- \"quoted\\n\"\n",
    "---\nkind: A\n---\n---\n- 1\n- 2\n---\nplain scalar\n",
    "base: &b {x: 1}\nuse: *b\n",  # an alias: the general path
    "base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2\n",  # a merge key
    "when: 2024-01-02\n",  # a timestamp
    "bin: !!binary aGVsbG8=\n",
    "s: !!set {a, b}\n",
    "a: 1\na: 2\n",  # a repeated key
    "1: a\n'1': b\n",  # the same key text, two tags
    "x: !Ref y\n",  # a tag the safe loader refuses
    "n: " + "9" * 5000 + "\n",  # an integer too long to read
    "a: &a [*a]\n",  # a self-referencing alias
    "[" * 3000 + "]" * 3000 + "\n",  # deeper than the interpreter's recursion
    "? [a, b]\n: complex key\n",
]


def _load(text: str) -> Any:
    try:
        objs = manifests.load_text(text, "in.yaml")
    except InputError as exc:
        return ("error", str(exc))
    # Lines by path, in one order (the walks visit paths in different orders).
    return [(o.raw, o.line, sorted((o.lines or {}).items(), key=repr)) for o in objs]


@pytest.mark.parametrize("text", DOCS)
def test_same_as_the_general_path(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _load(text)

    def slow(*_args: Any) -> Any:
        raise manifests._Slow

    monkeypatch.setattr(manifests, "_located", slow)
    general = _load(text)
    assert repr(fast) == repr(general)  # repr: NaN is not equal to itself
