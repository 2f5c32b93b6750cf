"""Generate the typed ``stack`` input of InferenceStack from the pydantic spec.

``python -m gpustrata.cli.codegen`` writes ``gpustrata/components/stack_args.py``: one
``TypedDict`` per model of :class:`gpustrata.spec.stack.StackSpec` (``StackArgs``,
``StackClusterArgs``, ...) and one ``Enum`` per closed set (the spec's ``Literal``
aliases), with the spec's field descriptions as docstrings. Pulumi's component analyzer
(``pulumi.provider.experimental.analyzer``) reads annotations and docstrings, not
pydantic models, and supports neither ``Literal`` nor unions; so the spec is translated
into what it reads, once, by this generator. ``--check`` exits 1 when the file is stale
(``tests/test_stack_args.py`` runs it), so the spec stays the one source of truth.

Translation: a nested model becomes a reference to its TypedDict, a ``Literal`` an Enum
(the type checker still accepts the literal strings), ``X | None`` and fields with a
default ``NotRequired``, any other union ``Any``. Constraints the schema cannot carry
(patterns, bounds) stay in the spec, which validates the document at construction.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import textwrap
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["TARGET", "generate", "main", "stack_args_source"]

TARGET = Path(__file__).resolve().parent.parent / "components" / "stack_args.py"
"""The generated module."""

_WIDTH = 100


class _Gen:
    def __init__(self) -> None:
        import gpustrata.catalog.hardware as hardware
        import gpustrata.core.environments as environments
        import gpustrata.spec.stack as stack

        # The spec's own names for its closed sets (ClusterMode, TaintEffect, ...).
        self.alias: dict[tuple[Any, ...], str] = {}
        for module in (stack, environments, hardware):
            for name, value in vars(module).items():
                if get_origin(value) is Literal and not name.startswith("_"):
                    self.alias.setdefault(get_args(value), name)
        self.enums: dict[str, tuple[tuple[Any, ...], str]] = {}
        self.models: dict[str, str] = {}  # TypedDict name -> source
        self.order: list[str] = []

    def type_name(self, model: type[BaseModel]) -> str:
        base = model.__name__.removesuffix("Spec")
        return "StackArgs" if model.__name__ == "StackSpec" else f"Stack{base}Args"

    def enum(self, values: tuple[Any, ...], owner: str, field: str) -> str:
        name = self.alias.get(values) or owner + "".join(p.title() for p in field.split("_"))
        if name not in self.enums:
            self.enums[name] = (values, f"Accepted values of ``{owner}.{field}``.")
        return name

    def annotation(self, tp: Any, owner: str, field: str) -> str:
        origin = get_origin(tp)
        if origin is typing.Annotated:  # Quantity, Name ...: the constraints stay in the spec
            return self.annotation(get_args(tp)[0], owner, field)
        if tp in (str, int, float, bool):
            return str(tp.__name__)
        if tp is datetime.date:  # JSON Schema's string/date: an ISO date is a string
            return "str"
        if tp is Any:
            return "Any"
        if origin is Literal:
            return "_" + self.enum(get_args(tp), owner, field)
        if origin in (typing.Union, types.UnionType):
            rest = [a for a in get_args(tp) if a is not type(None)]
            return self.annotation(rest[0], owner, field) if len(rest) == 1 else "Any"
        if origin is list:
            return f"list[{self.annotation(get_args(tp)[0], owner, field)}]"
        if origin is dict:
            key, value = get_args(tp)
            assert key is str, f"{owner}.{field}: map keys must be strings"
            return f"dict[str, {self.annotation(value, owner, field)}]"
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return self.model(tp)
        raise TypeError(f"{owner}.{field}: no schema type for {tp!r}")

    def model(self, model: type[BaseModel]) -> str:
        name = self.type_name(model)
        if name in self.models:
            return name
        self.models[name] = ""  # reserved: a model refers to itself at most once
        lines = [f"class {name}(TypedDict):", *_docstring(_doc(model), 4), ""]
        for field_name, info in model.model_fields.items():
            ann = self.annotation(info.annotation, model.__name__, field_name)
            if not info.is_required() or _optional(info.annotation):
                ann = f"NotRequired[{ann}]"
            lines.append(f"    {field_name}: {ann}")
            lines += _docstring(_field_doc(info), 4)
        self.models[name] = "\n".join(lines)
        self.order.append(name)
        return name

    def source(self) -> str:
        from gpustrata.spec.stack import StackSpec

        self.model(StackSpec)
        out = [
            '"""The ``stack`` input of InferenceStack as typed dicts, generated from the spec.',
            "",
            "Generated by ``python -m gpustrata.cli.codegen`` from",
            ":class:`gpustrata.spec.stack.StackSpec`; do not edit. Pulumi's component analyzer",
            "reads these annotations and docstrings into the component schema (types,",
            "descriptions, enums for TypeScript, Go and YAML); the spec validates the document.",
            '"""',
            "",
            "from enum import IntEnum, StrEnum",
            "from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict",
            "",
            "__all__ = [",
            *(f'    "{n}",' for n in sorted([*self.enums, *self.order])),
            "]",
            "",
        ]
        for name, (values, doc) in sorted(self.enums.items()):
            base = "IntEnum" if all(isinstance(v, int) for v in values) else "StrEnum"
            out += ["", f"class {name}({base}):", *_docstring(doc, 4), ""]
            out += [f"    {_member(v)} = {json.dumps(v)}" for v in values]
            out.append("")
        out += ["", "if TYPE_CHECKING:  # a type checker also takes the literal values"]
        for name, (values, _) in sorted(self.enums.items()):
            literal = ", ".join(json.dumps(v) for v in values)
            line = f"    _{name} = Literal[{literal}] | {name}"
            if len(line) > _WIDTH:  # split the way ruff format does
                inner = f"        Literal[{literal}] | {name}"
                if len(inner) > _WIDTH:
                    inner = f"        Literal[{literal}]\n        | {name}"
                line = f"    _{name} = (\n{inner}\n    )"
            out.append(line)
        out.append("else:")
        out += [f"    _{name} = {name}" for name in sorted(self.enums)]
        out.append("")
        for name in self.order:
            out += ["", self.models[name], ""]
        return "\n".join(out).rstrip() + "\n"


def _optional(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType) and type(None) in get_args(tp)


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or model.__name__).split("\n\n")[0].split())


def _field_doc(info: FieldInfo) -> str:
    text = " ".join((info.description or "").split())
    default = info.get_default(call_default_factory=False) if info.default_factory is None else None
    if default is not None and isinstance(default, str | int | float | bool):
        text += f" Default: ``{json.dumps(default)}``."
    return text.strip()


def _member(value: Any) -> str:
    text = re.sub(r"\W+", "_", str(value)).strip("_").upper()
    return f"VALUE_{text}" if not text or text[0].isdigit() else text


def _docstring(text: str, indent: int) -> list[str]:
    pad = " " * indent
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    one = f'{pad}"""{text}"""'
    if len(one) <= _WIDTH:
        return [one]
    body = textwrap.wrap(
        text,
        _WIDTH,
        initial_indent=f'{pad}"""',
        subsequent_indent=pad,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [*body, f'{pad}"""']


def stack_args_source() -> str:
    """The text of the generated module (a pure function of the spec)."""
    return _Gen().source()


def generate(check: bool = False) -> bool:
    """Write (or with ``check``, compare) the module; True when it was stale."""
    text = stack_args_source()
    stale = not TARGET.is_file() or TARGET.read_text(encoding="utf-8") != text
    if stale and not check:
        TARGET.write_text(text, encoding="utf-8")
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpustrata.cli.codegen [--check]``."""
    parser = argparse.ArgumentParser(prog="python -m gpustrata.cli.codegen")
    parser.add_argument("--check", action="store_true", help="only report a stale file (exit 1)")
    args = parser.parse_args(argv)
    stale = generate(check=args.check)
    if stale:
        print(f"{'stale' if args.check else 'wrote'}: {TARGET}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
