"""Extract the engine flags a vLLM release's ``vllm serve`` accepts, from its own source.

Reads a vLLM source tree without importing it (no torch, no GPU): either a git directory
at a tag (``--git DIR --tag vX.Y.Z``, files read with ``git show``) or an unpacked source
tree (``--tree DIR``, e.g. the release's PyPI sdist, whose ``vllm/`` is the tag's) or a
wheel (``--wheel FILE``, for a release published without an sdist, such as 0.15.x: its
``vllm/*.py`` are the tag's Python sources). It follows what the release's OpenAI server
parser does:

- ``make_arg_parser`` (``vllm/entrypoints/openai/cli_args.py``, or
  ``vllm/entrypoints/common/cli_args.py`` in later releases): its literal
  ``parser.add_argument("--x", "-x", ...)`` names, then each ``Cls.add_cli_args(parser)``
  it calls (``FrontendArgs``, ``AsyncEngineArgs``), recursively (``super()`` and
  ``EngineArgs.add_cli_args`` included);
- inside an ``add_cli_args``: literal ``add_argument`` names; a call spreading
  ``**kw["field"]`` where ``kw = get_kwargs(Config)`` also gets ``--no-<name>`` when that
  field is a bool (``get_kwargs`` makes it ``argparse.BooleanOptionalAction``; from the
  release where ``get_kwargs`` special-cases ``bool | str | None`` such a field has no
  ``--no-`` form); an explicit ``action=argparse.BooleanOptionalAction`` likewise;
- an ``add_cli_args`` that loops over ``get_kwargs(cls)`` and adds ``--{key}`` (the
  frontend dataclasses of 0.10+) yields one flag per dataclass field, bases included.

Writes one sorted flag per line to ``components/gpustrata/catalog/data/vllm-flags/
<version>.txt`` (``--out DIR``), headed by a comment that says what was read. Anything
the extractor cannot follow is printed as a warning (and fails with ``--strict``).

    python tools/vllm_flags.py --tree /tmp/vllm-0.8.5 --version 0.8.5 --out DIR
    python tools/vllm_flags.py --git /path/vllm.git --tag v0.8.5 --out DIR
    python tools/vllm_flags.py --wheel vllm-0.15.1-cp38-abi3-manylinux_2_31_x86_64.whl --out DIR
    python tools/vllm_flags.py --add DIR/X.Y.Z.txt   # into catalog/data/vllm-flags.txt
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

SERVE = "vllm/entrypoints/cli/serve.py"
"""``vllm serve``: the module it imports ``make_arg_parser`` from is the parser's."""
SERVE_FILES = (SERVE, "vllm/scripts.py")
"""Where the ``serve`` subcommand is built (``vllm/scripts.py`` before 0.8)."""
PARSER_FILES = (
    "vllm/entrypoints/openai/cli_args.py",
    "vllm/entrypoints/common/cli_args.py",
    "vllm/entrypoints/launchers/cli_args.py",
)
"""Where ``make_arg_parser`` lives when ``vllm serve`` does not say (older releases)."""
CLASS_ROOTS = (
    "vllm/config",
    "vllm/config.py",
    "vllm/engine/arg_utils.py",
    "vllm/entrypoints",
    "vllm/utils/argparse_utils.py",
)
"""Files and folders whose classes ``get_kwargs`` / ``add_cli_args`` may name."""

Reader = Callable[[str], str | None]


def tree_reader(root: Path) -> tuple[Reader, Callable[[str], list[str]]]:
    """Read files of an unpacked source tree."""

    def read(path: str) -> str | None:
        p = root / path
        return p.read_text("utf-8") if p.is_file() else None

    def listing(prefix: str) -> list[str]:
        base = root / prefix
        if base.is_file():
            return [prefix]
        if not base.is_dir():
            return []
        return sorted(str(p.relative_to(root)) for p in base.rglob("*.py"))

    return read, listing


def wheel_reader(wheel: Path) -> tuple[Reader, Callable[[str], list[str]]]:
    """Read the Python files of a wheel (a zip whose ``vllm/`` is the package)."""
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())

    def read(path: str) -> str | None:
        return archive.read(path).decode("utf-8") if path in names else None

    def listing(prefix: str) -> list[str]:
        if prefix in names:
            return [prefix]
        folder = prefix.rstrip("/") + "/"
        return sorted(n for n in names if n.startswith(folder) and n.endswith(".py"))

    return read, listing


def git_reader(git_dir: Path, tag: str) -> tuple[Reader, Callable[[str], list[str]]]:
    """Read files of a git directory at a tag."""

    def run(*args: str) -> str | None:
        done = subprocess.run(
            ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True
        )
        return done.stdout if done.returncode == 0 else None

    def read(path: str) -> str | None:
        return run("show", f"{tag}:{path}")

    def listing(prefix: str) -> list[str]:
        out = run("ls-tree", "-r", "--name-only", tag, "--", prefix) or ""
        return [p for p in out.splitlines() if p.endswith(".py")]

    return read, listing


@dataclass
class ClassInfo:
    """One class: its bases' names, annotated fields and methods."""

    name: str
    path: str
    bases: list[str]
    fields: dict[str, ast.expr] = field(default_factory=dict)
    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)


@dataclass
class Extraction:
    """The flags found and what could not be followed."""

    flags: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)


def _names(node: ast.expr) -> set[str]:
    """Every name in an annotation (``bool | None`` -> {bool, None}; strings parsed)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _names(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return set()
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
        elif isinstance(sub, ast.Constant) and sub.value is None:
            out.add("None")
    return out


class Release:
    """The classes of one vLLM release and the flag extraction over them."""

    def __init__(self, read: Reader, listing: Callable[[str], list[str]]) -> None:
        self.read = read
        self.classes: dict[str, list[ClassInfo]] = {}
        self.result = Extraction()
        self.bool_str_special = False
        self.enable_disable = False
        for root in CLASS_ROOTS:
            for path in listing(root):
                self._index(path)

    def _index(self, path: str) -> None:
        text = self.read(path)
        if text is None:
            return
        try:
            tree = ast.parse(text)
        except SyntaxError:
            self.result.warnings.append(f"{path}: does not parse")
            return
        if path.endswith("engine/arg_utils.py") and "{bool, str, type(None)}" in text:
            # This release's get_kwargs gives ``bool | str | None`` fields no --no- form.
            self.bool_str_special = True
        if path.endswith("argparse_utils.py") and "class EnableDisableAction" in text:
            # The parser registers EnableDisableAction for BooleanOptionalAction.
            self.enable_disable = True
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            info = ClassInfo(node.name, path, [_base_name(b) for b in node.bases])
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    if "ClassVar" not in _names(item.annotation):
                        info.fields[item.target.id] = item.annotation
                elif isinstance(item, ast.FunctionDef):
                    info.methods[item.name] = item
            self.classes.setdefault(node.name, []).append(info)

    def cls(self, name: str) -> ClassInfo | None:
        """The class of that name (the arg_utils / cli_args one where several)."""
        found = self.classes.get(name) or []
        for info in found:
            if "arg_utils" in info.path or "cli_args" in info.path:
                return info
        return found[0] if found else None

    def fields(self, name: str) -> dict[str, ast.expr]:
        """Annotated fields of a class and its bases (bases first, as dataclasses do)."""
        info = self.cls(name)
        if info is None:
            self.result.warnings.append(f"class {name} not found")
            return {}
        out: dict[str, ast.expr] = {}
        for base in info.bases:
            if base in self.classes:
                out.update(self.fields(base))
        out.update(info.fields)
        return out

    def is_bool_flag(self, annotation: ast.expr) -> bool:
        """Does get_kwargs make this field a BooleanOptionalAction?"""
        names = _names(annotation)
        if "bool" not in names:
            return False
        if self.bool_str_special and names == {"bool", "str", "None"}:
            return False
        # A dataclass-typed field is parsed as JSON, whatever else it allows.
        return not any(n.endswith("Config") for n in names)

    def method(self, cls_name: str, method: str) -> tuple[ClassInfo, ast.FunctionDef] | None:
        """A method of a class or its first base that defines it."""
        info = self.cls(cls_name)
        if info is None:
            return None
        if method in info.methods:
            return info, info.methods[method]
        for base in info.bases:
            found = self.method(base, method)
            if found is not None:
                return found
        return None

    # ------------------------------------------------------------------ the walk

    def make_arg_parser(self) -> None:
        """Follow ``make_arg_parser`` of the OpenAI server."""
        for path in (*_serve_parser_module(self.read), *PARSER_FILES):
            text = self.read(path)
            if text is None:
                continue
            tree = ast.parse(text)
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name == "make_arg_parser":
                    self.result.files.add(path)
                    self._body(node, None, path)
                    self._serve_subcommand()
                    return
        raise SystemExit("make_arg_parser not found in " + ", ".join(PARSER_FILES))

    def _serve_subcommand(self) -> None:
        """Literal flags the ``serve`` subcommand adds around ``make_arg_parser``
        (``--config`` before it moved into ``make_arg_parser``)."""
        for path in SERVE_FILES:
            text = self.read(path)
            if text is None:
                continue
            for fn in ast.walk(ast.parse(text)):
                if not isinstance(fn, ast.FunctionDef):
                    continue
                calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
                if not any(_call_name(c) == "make_arg_parser" for c in calls):
                    continue
                self.result.files.add(path)
                for call in calls:
                    if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
                        self._add_argument(call, {}, {}, path, None)
            return

    def add_cli_args(self, cls_name: str, seen: set[str]) -> None:
        """Follow ``Cls.add_cli_args``."""
        found = self.method(cls_name, "add_cli_args")
        if found is None:
            self.result.warnings.append(f"{cls_name}.add_cli_args not found")
            return
        info, fn = found
        key = f"{info.path}:{info.name}"
        if key in seen:
            return
        seen.add(key)
        self.result.files.add(info.path)
        self._body(fn, info, info.path, seen, cls_name)

    def _body(
        self,
        fn: ast.FunctionDef,
        info: ClassInfo | None,
        path: str,
        seen: set[str] | None = None,
        owner: str | None = None,
    ) -> None:
        seen = seen if seen is not None else set()
        loops = _loop_names(fn)
        kwargs_of: dict[str, str] = {}
        """Local name -> the class ``get_kwargs`` read (``model_kwargs = get_kwargs(M)``)."""
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                called = _call_name(node.value)
                if called == "get_kwargs" and node.value.args:
                    arg = node.value.args[0]
                    cls_name = _base_name(arg)
                    if cls_name == "cls" and owner:
                        cls_name = owner
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            kwargs_of[target.id] = cls_name
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "add_cli_args":
                target = func.value
                if isinstance(target, ast.Call) and _call_name(target) == "super":
                    if info is not None:
                        for base in info.bases:
                            self.add_cli_args(base, seen)
                elif isinstance(target, ast.Name):
                    name = owner if target.id == "cls" and owner else target.id
                    self.add_cli_args(name, seen)
                continue
            if isinstance(func, ast.Attribute) and func.attr == "add_argument":
                self._add_argument(node, kwargs_of, loops, path, owner)

    def _add_argument(
        self,
        call: ast.Call,
        kwargs_of: dict[str, str],
        loops: dict[str, list[str]],
        path: str,
        owner: str | None,
    ) -> None:
        names: list[str] = []
        loop_fields = False
        for arg in call.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if arg.value.startswith("-"):
                    names.append(arg.value)
            elif isinstance(arg, ast.JoinedStr):
                loop_fields = True
            elif isinstance(arg, ast.Starred):
                continue
            elif isinstance(arg, ast.Name) and arg.id in loops:
                names.extend(loops[arg.id])
            else:
                self.result.warnings.append(
                    f"{path}:{call.lineno}: add_argument name {ast.unparse(arg)} not followed"
                )
        if loop_fields:
            # ``add_argument(f"--{key.replace('_', '-')}", **value)`` over get_kwargs(cls).
            if owner is None:
                self.result.warnings.append(f"{path}:{call.lineno}: f-string flag outside a class")
                return
            for name, annotation in self.fields(owner).items():
                flag = "--" + name.replace("_", "-")
                self.result.flags.add(flag)
                if self.is_bool_flag(annotation):
                    self._boolean([flag])
            return
        self.result.flags.update(names)
        boolean = False
        for kw in call.keywords:
            if kw.arg == "action" and ast.unparse(kw.value).endswith("BooleanOptionalAction"):
                boolean = True
            if kw.arg is None:
                spread = kw.value
                if isinstance(spread, ast.Dict):
                    # ``**{**kw["field"], "default": None}``
                    inner = [
                        v for k, v in zip(spread.keys, spread.values, strict=True) if k is None
                    ]
                    spread = inner[0] if inner else spread
                if (
                    isinstance(spread, ast.Subscript)
                    and isinstance(spread.value, ast.Name)
                    and spread.value.id in kwargs_of
                    and isinstance(spread.slice, ast.Constant)
                ):
                    fields = self.fields(kwargs_of[spread.value.id])
                    annotation = fields.get(str(spread.slice.value))
                    if annotation is None:
                        self.result.warnings.append(
                            f"{path}:{call.lineno}: field {spread.slice.value} of "
                            f"{kwargs_of[spread.value.id]} not found"
                        )
                    elif self.is_bool_flag(annotation):
                        boolean = True
        if boolean:
            self._boolean(names)

    def _boolean(self, names: list[str]) -> None:
        """The negative forms a BooleanOptionalAction adds (``--no-x``; with the
        release's EnableDisableAction also ``--enable-x`` <-> ``--disable-x``)."""
        for name in [n for n in names if n.startswith("--")]:
            self.result.flags.add("--no-" + name[2:])
            if not self.enable_disable:
                continue
            for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
                if name.startswith(prefix):
                    self.result.flags.add(inverse + name.removeprefix(prefix))


def _serve_parser_module(read: Reader) -> list[str]:
    """The file ``vllm serve`` imports ``make_arg_parser`` from, if it says."""
    text = read(SERVE)
    if text is None:
        return []
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and any(a.name == "make_arg_parser" for a in node.names)
        ):
            return [node.module.replace(".", "/") + ".py"]
    return []


def _loop_names(fn: ast.FunctionDef) -> dict[str, list[str]]:
    """Loop variables bound to literal flag names: ``for arg, t in [("--x", str), ...]``."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(fn):
        if not isinstance(node, ast.For) or not isinstance(node.iter, ast.List | ast.Tuple):
            continue
        target = node.target
        first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
        if not isinstance(first, ast.Name):
            continue
        names = []
        for item in node.iter.elts:
            value = item.elts[0] if isinstance(item, ast.Tuple) and item.elts else item
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                names.append(value.value)
        if names and all(n.startswith("-") for n in names):
            out[first.id] = names
    return out


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _base_name(node.value)
    return ast.unparse(node)


def _call_name(call: ast.Call) -> str:
    return _base_name(call.func)


def extract(read: Reader, listing: Callable[[str], list[str]]) -> Extraction:
    """The flag set of a release's OpenAI server parser."""
    release = Release(read, listing)
    # argparse's own -h/--help (add_help=True on every release's parser).
    release.result.flags.update({"-h", "--help"})
    release.make_arg_parser()
    return release.result


def memory_default(read: Reader, listing: Callable[[str], list[str]]) -> tuple[float, str] | None:
    """The release's default ``gpu_memory_utilization`` and the file it is written in:
    ``CacheConfig``'s field default where ``EngineArgs`` takes it from there, else
    ``EngineArgs``' own literal default."""
    release = Release(read, listing)
    for cls_name in ("EngineArgs", "CacheConfig"):
        info = release.cls(cls_name)
        if info is None:
            continue
        text = release.read(info.path) or ""
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.name == cls_name:
                for item in node.body:
                    if (
                        isinstance(item, ast.AnnAssign)
                        and isinstance(item.target, ast.Name)
                        and item.target.id == "gpu_memory_utilization"
                        and item.value is not None
                    ):
                        value = _literal_default(item.value)
                        if value is not None:
                            return value, info.path
    return None


def block_size_choices(
    read: Reader, listing: Callable[[str], list[str]]
) -> tuple[list[int] | None, str] | None:
    """The values ``--block-size`` parses (``choices=[...]``, or the ``Literal`` alias of
    ``CacheConfig.block_size`` that get_kwargs turns into choices; None: any int), and the
    file that says so."""
    release = Release(read, listing)
    path = "vllm/engine/arg_utils.py"
    text = read(path)
    if text is None:
        return None
    for call in ast.walk(ast.parse(text)):
        if not (isinstance(call, ast.Call) and _call_name(call) == "add_argument"):
            continue
        if not any(isinstance(a, ast.Constant) and a.value == "--block-size" for a in call.args):
            continue
        for kw in call.keywords:
            if kw.arg == "choices" and isinstance(kw.value, ast.List):
                return [int(ast.literal_eval(e)) for e in kw.value.elts], path
        info = release.cls("CacheConfig")
        annotation = info.fields.get("block_size") if info else None
        if info is None or annotation is None:
            return None
        names = _names(annotation)
        module = ast.parse(release.read(info.path) or "")
        for node in module.body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in names
                and isinstance(node.value, ast.Subscript)
                and _base_name(node.value.value) == "Literal"
            ):
                items = node.value.slice
                elts = items.elts if isinstance(items, ast.Tuple) else [items]
                return [int(ast.literal_eval(e)) for e in elts], info.path
        return None, info.path
    return None


def _literal_default(node: ast.expr) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.Call) and _call_name(node) == "Field":
        for kw in node.keywords:
            if kw.arg == "default":
                return _literal_default(kw.value)
    return None


def pack(flag_files: list[Path]) -> str:
    """Many ``<version>.txt`` files as one: the first release in full, each later one as
    ``+ flag`` / ``- flag`` against the release before it (``@ version`` heads a section,
    followed by its provenance comment)."""
    from gpustrata.core.versions import parse_version

    def key(p: Path) -> tuple[int, ...]:
        return parse_version(p.stem)

    out = [
        "# Engine flags each vLLM release's `vllm serve` accepts, generated by",
        "# tools/vllm_flags.py (pack) from one extraction per release; do not edit.",
        "# `@ X.Y.Z` starts a release; the first lists its flags, each later one the flags",
        "# added (`+ flag`) and removed (`- flag`) since the release above it.",
    ]
    previous: set[str] | None = None
    for path in sorted(flag_files, key=key):
        text = path.read_text("utf-8")
        flags = set(_iter_lines(text))
        header = [line for line in text.splitlines() if line.startswith("# from")]
        out.append(f"@ {path.stem}")
        out.extend(header)
        if previous is None:
            out.extend(sorted(flags))
        else:
            out.extend(f"+ {f}" for f in sorted(flags - previous))
            out.extend(f"- {f}" for f in sorted(previous - flags))
        previous = flags
    return "\n".join(out) + "\n"


PACKED = Path(__file__).resolve().parents[1] / "components/gpustrata/catalog/data/vllm-flags.txt"
"""The packed flag list the catalogue reads."""


def add(flag_file: Path, packed: Path = PACKED) -> str:
    """*packed* with one more release: the extraction *flag_file* (``<version>.txt``, as
    ``--out`` writes it) joins the releases *packed* already holds (a release it holds is
    replaced), each keeping its provenance comment."""
    import tempfile

    from gpustrata.catalog.vllm_releases import accepted_flags, flag_releases

    headers: dict[str, list[str]] = {}
    release = ""
    for line in packed.read_text("utf-8").splitlines():
        if line.startswith("@ "):
            release = line[2:].strip()
        elif line.startswith("# from") and release:
            headers.setdefault(release, []).append(line)
    with tempfile.TemporaryDirectory() as tmp:
        files = [flag_file]
        for version in flag_releases():
            if version == flag_file.stem:
                continue
            (found,) = accepted_flags(version) or ()
            path = Path(tmp) / f"{version}.txt"
            lines = [*headers.get(version, []), *sorted(found.flags)]
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            files.append(path)
        return pack(files)


def render(version: str, origin: str, result: Extraction) -> str:
    """The data file: a provenance header, then one flag per line."""
    files = ", ".join(f"vllm@v{version}:{p}" for p in sorted(result.files))
    lines = [
        f"# Flags of vllm serve {version} (make_arg_parser), extracted by tools/vllm_flags.py",
        f"# from {origin}; read: {files}",
        *sorted(result.flags),
    ]
    return "\n".join(lines) + "\n"


def _iter_lines(text: str) -> Iterator[str]:
    for line in text.splitlines():
        if line and not line.startswith("#"):
            yield line


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--pack", type=Path, nargs="+", help="<version>.txt files to pack into one (to --out)"
    )
    src.add_argument(
        "--add",
        type=Path,
        help="a new release's <version>.txt to add to catalog/data/vllm-flags.txt (in place)",
    )
    src.add_argument("--tree", type=Path, help="an unpacked vLLM source tree (sdist)")
    src.add_argument("--git", type=Path, help="a vLLM git directory (with --tag)")
    src.add_argument("--wheel", type=Path, help="a vLLM wheel (a release without an sdist)")
    ap.add_argument("--tag", help="the git tag, vX.Y.Z")
    ap.add_argument("--version", help="the release (default: the tag without v)")
    ap.add_argument("--out", type=Path, help="write <out>/<version>.txt (else stdout)")
    ap.add_argument("--strict", action="store_true", help="fail on any warning")
    args = ap.parse_args(argv)
    if args.add:
        PACKED.write_text(add(args.add), "utf-8")
        return 0
    if args.pack:
        text = pack(args.pack)
        if args.out is None:
            sys.stdout.write(text)
        else:
            args.out.write_text(text, "utf-8")
        return 0
    if args.git is not None:
        if not args.tag:
            ap.error("--git needs --tag")
        read, listing = git_reader(args.git, args.tag)
        version = args.version or args.tag.removeprefix("v")
        origin = f"git tag {args.tag}"
    elif args.wheel is not None:
        read, listing = wheel_reader(args.wheel)
        version = args.version or args.wheel.name.split("-")[1]
        origin = f"the Python sources of vllm {version} (PyPI wheel {args.wheel.name})"
    else:
        read, listing = tree_reader(args.tree)
        version = args.version or args.tree.name.removeprefix("vllm-")
        origin = f"the source tree of vllm {version} (PyPI sdist vllm-{version}.tar.gz)"
    result = extract(read, listing)
    memory = memory_default(read, listing)
    if memory is not None:
        print(
            f"{version}: gpu_memory_utilization {memory[0]:g} (vllm@v{version}:{memory[1]})",
            file=sys.stderr,
        )
    blocks = block_size_choices(read, listing)
    if blocks is not None:
        print(
            f"{version}: --block-size choices {blocks[0]} (vllm@v{version}:{blocks[1]})",
            file=sys.stderr,
        )
    for warning in result.warnings:
        print(f"warning: {version}: {warning}", file=sys.stderr)
    text = render(version, origin, result)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{version}.txt").write_text(text, "utf-8")
        print(f"{version}: {len(result.flags)} flags", file=sys.stderr)
    return 1 if args.strict and result.warnings else 0


if __name__ == "__main__":
    raise SystemExit(main())
