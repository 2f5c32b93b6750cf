"""YAML and JSON loader candidates for `check`, side by side in one run (issue 35).

    python benchmarks/bench_loaders.py [--objects 5000] [--repeat 3]

Reads the GPU-dense corpus of ``bench_check.py`` (written once, as YAML and as the
``kind: List`` JSON ``kubectl get -A -o json`` prints) with each candidate that is
installed and prints, per candidate: CPU seconds (best of ``--repeat``) over the bare
libyaml parse measured just before it, peak memory per input MB (``VmHWM`` of a fresh
interpreter, less what it held before parsing), whether it gives line numbers, whether
its values for the corpus equal the libyaml parse's, and how it reads the YAML that
Kubernetes tools disagree on (YAML 1.1 booleans, octals, merge keys, duplicate keys,
timestamps, ...) against today's loader: ``same`` or what it returns instead.

Candidates (a missing module is reported and skipped):

- ``libyaml nodes``: ``yaml.load_all`` with ``CSafeLoader`` (the parse floor);
- ``today``: ``gpustrata_policies.inputs.manifests.load_text`` (values and lines);
- ``libyaml events``: PyYAML's C parser's events (their marks give lines for free),
  values built here with PyYAML's resolver and constructors;
- ``rapidyaml``: ``ryml.parse_in_arena`` (C++), the tree walked into Python values with
  PyYAML's resolver on plain scalars (rapidyaml keeps each scalar's style);
- ``ryaml`` (serde-yaml), ``yaml-rs`` (saphyr), ``py-yaml12`` (saphyr),
  ``pyyaml-rs``: Rust bindings, values only;
- JSON: ``today`` (``load_text`` of the ``.json``), ``json``, ``orjson``, ``msgspec``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import yaml
from yaml.resolver import BaseResolver

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_check import corpus

Loader = Callable[[str], Any]

# Licence and upkeep, from each package's metadata on the index (for the table).
ABOUT = {
    "libyaml nodes": "MIT (PyYAML 6, libyaml); YAML 1.1",
    "today": "as libyaml nodes, plus lines",
    "libyaml events": "as libyaml nodes; marks on every event",
    "rapidyaml": "MIT (biojppm/rapidyaml); YAML 1.2 parser, styles kept",
    "ryaml": "MIT (emmatyping/ryaml) on serde-yaml (archived 2024); YAML 1.2",
    "yaml-rs": "Unlicense (lava-sh/yaml-rs 0.1) on saphyr; YAML 1.2",
    "py-yaml12": "MIT (posit-dev/py-yaml12 0.2) on saphyr; YAML 1.2",
    "pyyaml-rs": "MIT (pyyaml-rs 0.1.0, one release); YAML 1.2",
    "json today": "stdlib json + jsonio (lines on demand)",
    "json": "stdlib",
    "orjson": "Apache-2.0/MIT",
    "msgspec": "BSD-3-Clause",
}

LINES = {"today", "libyaml events", "rapidyaml", "json today"}
"""Candidates that give (or can give) each key's line."""


def _resolver() -> tuple[Any, Callable[..., str]]:
    loader = yaml.CSafeLoader("")
    return loader, lru_cache(maxsize=4096)(partial(BaseResolver.resolve, loader))


def libyaml_nodes(text: str) -> Any:
    return list(yaml.load_all(text, yaml.CSafeLoader))


def today(text: str, name: str = "bench.yaml") -> Any:
    """``load_text``'s documents as read, before they become objects (a ``kind: List``
    stays one value, as the other candidates give it)."""
    from gpustrata_policies.inputs import manifests

    make = manifests._objects
    manifests._objects = lambda data, *_args: [] if data is None else [data]  # type: ignore[assignment]
    try:
        return manifests.load_text(text, name)
    finally:
        manifests._objects = make


def libyaml_events(text: str) -> Any:
    """Values and the line of every key and item from the C parser's events."""
    loader = yaml.CSafeLoader(text)
    resolve = lru_cache(maxsize=4096)(partial(BaseResolver.resolve, loader))
    build = loader.yaml_constructors
    scalar_node, str_tag = yaml.ScalarNode, "tag:yaml.org,2002:str"
    scalar_ev, map_start, seq_start = (
        yaml.ScalarEvent,
        yaml.MappingStartEvent,
        yaml.SequenceStartEvent,
    )
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    docs: list[Any] = []
    lines: list[int] = []
    # Each open container: [value, key waiting for its value or None, is mapping].
    stack: list[list[Any]] = []
    get = loader.get_event
    try:
        while True:
            event = get()
            kind = type(event)
            if kind is scalar_ev:
                tag = event.tag
                if tag is None or tag == "!":
                    tag = resolve(scalar_node, event.value, event.implicit)
                value = (
                    event.value
                    if tag == str_tag
                    else build[tag](loader, scalar_node(tag, event.value))
                )
            elif kind is map_start or kind is seq_start:
                if event.anchor is not None:
                    raise ValueError("anchors: left to the general loader")
                stack.append([{} if kind is map_start else [], None, kind is map_start])
                lines.append(event.start_mark.line + 1)
                continue
            elif kind in ends:
                value = stack.pop()[0]
            elif isinstance(event, yaml.AliasEvent):
                raise ValueError("aliases: left to the general loader")
            elif isinstance(event, yaml.StreamEndEvent):
                return docs, lines
            else:
                continue
            if not stack:
                docs.append(value)
                continue
            top = stack[-1]
            if top[2]:
                if top[1] is None:
                    top[1] = (value,)
                    lines.append(event.start_mark.line + 1)
                else:
                    top[0][top[1][0]] = value
                    top[1] = None
            else:
                top[0].append(value)
                lines.append(event.start_mark.line + 1)
    finally:
        loader.dispose()


def rapidyaml(text: str) -> Any:
    """The rapidyaml tree walked into values, plain scalars resolved as PyYAML does."""
    import ryml

    tree = ryml.parse_in_arena(text.encode())
    loader, resolve = _resolver()
    build = loader.yaml_constructors
    scalar_node, str_tag = yaml.ScalarNode, "tag:yaml.org,2002:str"
    first, after, none = tree.first_child, tree.next_sibling, ryml.NONE
    is_map, is_seq = tree.is_map, tree.is_seq

    def scalar(raw: Any, plain: bool) -> Any:
        text = bytes(raw).decode() if raw is not None else ""
        tag = resolve(scalar_node, text, (plain, not plain))
        return text if tag == str_tag else build[tag](loader, scalar_node(tag, text))

    def value(node: int) -> Any:
        if is_map(node):
            out = {}
            child = first(node)
            while child != none:
                out[scalar(tree.key(child), tree.is_key_plain(child))] = value(child)
                child = after(child)
            return out
        if is_seq(node):
            items = []
            child = first(node)
            while child != none:
                items.append(value(child))
                child = after(child)
            return items
        return scalar(tree.val(node), tree.is_val_plain(node))

    root = tree.root_id()
    docs = [value(d) for d in ryml.children(tree, root)] if tree.is_stream(root) else [value(root)]
    return docs


def _rust(module: str, call: str) -> Loader:
    def load(text: str) -> Any:
        found = getattr(__import__(module), call)(text)
        return found if module != "pyyaml_rs" else list(found)

    return load


def _py_yaml12(text: str) -> Any:
    import yaml12

    return yaml12.parse_yaml(text, multi=True)


def _yaml_rs(text: str) -> Any:
    import yaml_rs

    found = yaml_rs.loads(text)
    return found if isinstance(found, list) and text.count("\n---") else [found]


YAML: dict[str, Loader] = {
    "libyaml nodes": libyaml_nodes,
    "today": today,
    "libyaml events": lambda t: libyaml_events(t)[0],
    "rapidyaml": rapidyaml,
    "ryaml": _rust("ryaml", "loads_all"),
    "yaml-rs": _yaml_rs,
    "py-yaml12": _py_yaml12,
    "pyyaml-rs": _rust("pyyaml_rs", "safe_load_all"),
}


def _json_today(text: str) -> Any:
    return today(text, "bench.json")


def _orjson(text: str) -> Any:
    import orjson

    return orjson.loads(text)


def _msgspec(text: str) -> Any:
    import msgspec

    return msgspec.json.decode(text)


JSON: dict[str, Loader] = {
    "json today": _json_today,
    "json": json.loads,
    "orjson": _orjson,
    "msgspec": _msgspec,
}

# Text Kubernetes tools read differently, and today's loader's answer is the reference.
CASES = {
    "1.1 booleans": "a: yes\nb: on\nc: Off\nd: NO\n",
    "octal 0755": "mode: 0755\n",
    "octal 0o755": "mode: 0o755\n",
    "1_000, 1:20": "a: 1_000\nb: 1:20\n",
    "1e3 (no dot)": "a: 1e3\n",
    "merge key": "b: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n",
    "duplicate key": "a: 1\na: 2\n",
    "timestamp": "a: 2024-01-02\n",
    "!!binary": "a: !!binary aGVsbG8=\n",
    "unknown tag": "a: !custom x\n",
    # 10**6 values from 60 written: today's loader refuses it by name.
    "alias bomb": "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcde", "bcdef", strict=True)
    ),
    "tab indent": "a:\n\tb: 1\n",
}


def _outcome(load: Loader, text: str) -> str:
    try:
        return repr(load(text))
    except RecursionError:
        return "error RecursionError"
    except Exception as exc:
        return f"error {type(exc).__name__}"


def semantics(name: str, load: Loader) -> str:
    """Cases read otherwise than today's loader reads them (``same`` when none)."""
    diffs = []
    for case, text in CASES.items():
        ref, got = _outcome(today, text), _outcome(load, text)
        if ref.startswith("error") != got.startswith("error") or (
            not ref.startswith("error") and ref != got
        ):
            diffs.append(case)
    return "same" if not diffs else "differs: " + ", ".join(diffs)


def best(load: Loader, text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        load(text)
        times.append(time.process_time() - start)
    return min(times)


def peak(name: str, path: Path) -> float:
    """MiB a fresh interpreter's peak RSS grows by while *name* loads *path*."""
    argv = [sys.executable, __file__, "--peak", name, str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode:
        return float("nan")
    return float(proc.stdout.split()[-1])


def _vm(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peak", nargs=2, metavar=("NAME", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    loaders = YAML | JSON
    if args.peak:  # in a child: load once, print the growth of the peak
        name, file = args.peak
        text = Path(file).read_text()
        load = loaders[name]
        load(text[:2000] if name in YAML else "{}")  # imports, before the baseline
        before = _vm("VmRSS")
        load(text)
        print(f"{_vm('VmHWM') - before:.1f}")
        return
    with tempfile.TemporaryDirectory() as tmp_name:
        docs = corpus(args.objects)
        paths = {"yaml": Path(tmp_name) / "cluster.yaml", "json": Path(tmp_name) / "cluster.json"}
        paths["yaml"].write_text(yaml.safe_dump_all(docs, sort_keys=False))
        listed = {"apiVersion": "v1", "kind": "List", "items": docs}
        paths["json"].write_text(json.dumps(listed, indent=4))
        texts = {k: p.read_text() for k, p in paths.items()}
        mb = {k: p.stat().st_size / 2**20 for k, p in paths.items()}
        print(f"corpus: {len(docs)} objects, {mb['yaml']:.1f} MiB YAML, {mb['json']:.1f} MiB JSON")
        reference = [d for d in libyaml_nodes(texts["yaml"]) if d is not None]
        head = f"{'candidate':<16}{'x floor':>9}{'MiB/MB':>8}{'lines':>7}  {'values':<8}semantics"
        print(head)
        for name, load in loaders.items():
            form = "json" if name in JSON else "yaml"
            try:
                # The floor again just before: on a shared machine, the ratio of two
                # neighbouring measurements drifts less than either.
                floor = best(libyaml_nodes, texts["yaml"], args.repeat)
                seconds = best(load, texts[form], args.repeat)
                got = load(texts[form])
            except ImportError as exc:
                print(f"{name:<16}not installed ({exc.name})")
                continue
            if form == "json":
                got = got if isinstance(got, list) else got["items"]  # today: the items
            else:
                got = [d for d in got if d is not None]
            values = "same" if got == reference else "DIFFER"
            sem = semantics(name, load) if form == "yaml" else "-"
            ratio, memory = seconds / floor, peak(name, paths[form]) / mb[form]
            lines = "yes" if name in LINES else "no"
            print(f"{name:<16}{ratio:9.2f}{memory:8.1f}{lines:>7}  {values:<8}{sem}")
        print()
        for name, about in ABOUT.items():
            print(f"{name:<16}{about}")


if __name__ == "__main__":
    main()
