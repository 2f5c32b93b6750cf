"""`gpustrata check` on manifests nobody cleaned up: results, or exit 2 naming file and line.

Explicit cases (malformed YAML, empty documents, Helm output, JSON, stdin, binary data,
mixed directories, alias bombs, deep nesting, duplicate keys), a property over damaged
fixture files, and a memory bound on a generated multi-megabyte input. The 50 MB figure
comes from ``benchmarks/bench_large_input.py`` (too slow for every CI run).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, fixture_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import run

from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import InputError, load_text

sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))
from _fuzz import damage, record

GPU_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: llm
spec:
  containers:
    - name: c
      image: vllm/vllm-openai:v0.33.0
      resources:
        requests: {nvidia.com/gpu: 1}
"""
# K001: a GPU request without a limit, reported at the `requests` line.


def _error(argv: list[str], stdin: str | bytes | None = None) -> str:
    code, out, err = run(argv, stdin)
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("gpustrata: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.removeprefix("gpustrata: ").strip()


def _findings(argv: list[str], stdin: str | bytes | None = None) -> dict[str, object]:
    code, out, err = run(["check", "--format", "json", *argv], stdin)
    assert code in (0, 1) and "Traceback" not in err, err
    data: dict[str, object] = json.loads(out)
    return data


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kind: Pod\nmetadata: {name: [p\n", r":3: invalid YAML: "),
        ("kind: Pod\n  bad: indent\n", r":2: invalid YAML: "),
        ("a: 1\n\tb: 2\n", r":2: invalid YAML: "),
        ("kind: Pod\nkind: Deployment\n", r":2: duplicate key 'kind' in one mapping"),
        ("kind: !!python/object/apply:os.system [ls]\n", r":1: invalid YAML: .*constructor"),
        ("? [a]\n: b\n", r":1: invalid YAML: found unhashable key"),
        ("kind: Pod\nmetadata: &m\n  x: *m\n", r":2: cannot be checked: an alias refers"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", r":1: invalid YAML: .*nesting depth"),
        ("kind: Pod\nspec: \x00\n", r":2: binary input \(contains NUL bytes\)"),
    ],
    ids=[
        "unclosed",
        "indent",
        "tab",
        "duplicate",
        "python-tag",
        "complex-key",
        "alias-loop",
        "deep",
        "nul",
    ],
)
def test_malformed_yaml_names_file_and_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    message = _error(["check", str(path)])
    assert message.startswith(str(path)), message
    assert re.search(expected, message.removeprefix(str(path))), message


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ["kind: ConfigMap", "x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = _error(["check", str(path)])
    assert "this looks like an alias bomb" in message and "1234567" in message
    # Hand-written anchors (a shared label block) stay fine.
    path.write_text(GPU_POD.replace("metadata:\n", "metadata: &m\n") + "x: *m\n")
    assert _findings([str(path)])["findings"]


def test_binary_and_non_utf8(tmp_path: Path) -> None:
    png = tmp_path / "logo.yaml"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    assert re.fullmatch(
        rf"{re.escape(str(png))}:1: not UTF-8 text \(byte 0\); is it a binary file\?",
        _error(["check", str(png)]),
    )
    assert _error(["check", "-"], b"kind: Pod\n\xff\xfe\n").startswith("<stdin>:2: not UTF-8")
    assert _error(["check", "-"], "kind: Pod\n\x00").startswith("<stdin>:2: binary input")


def test_empty_documents_comments_and_nulls(tmp_path: Path) -> None:
    path = tmp_path / "helm.yaml"
    path.write_text(
        "---\n# Source: chart/templates/empty.yaml\n---\n---\n"
        "# Source: chart/templates/pod.yaml\n" + GPU_POD + "  nodeSelector: null\n"
        "---\nnull\n---\n~\n---\n# only a comment\n...\n",
        encoding="utf-8",
    )
    data = _findings([str(path)])
    k001 = [f for f in data["findings"] if f["rule"] == "K001"]  # type: ignore[union-attr,index]
    assert [f["resource"] for f in k001] == ["Pod/llm/p"]
    _code, out, _ = run(["check", str(path)])
    # Helm output: the finding points into the template it came from, at the right line.
    assert "chart/templates/pod.yaml:16: K001" in out, out
    # Nothing to check is an error, not a pass: an empty stdin, a file of comments.
    assert _error(["check", "-"], "").startswith("nothing was checked: stdin held no Kubernetes")
    assert _error(["check", "-"], "# nothing\n---\n").startswith("nothing was checked")


def test_json_file_stdin_and_list_kinds(tmp_path: Path) -> None:
    pod = yaml.safe_load(GPU_POD)
    listing = {"apiVersion": "v1", "kind": "List", "items": [pod, None, 7]}
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(listing, indent=2), encoding="utf-8")
    assert {f["rule"] for f in _findings([str(path)])["findings"]} >= {"K001"}  # type: ignore
    assert {f["rule"] for f in _findings(["-"], json.dumps(pod))["findings"]} >= {"K001"}  # type: ignore
    path.write_text('{"kind": "Pod",\n "spec": [1,]}', encoding="utf-8")
    assert re.fullmatch(
        rf"{re.escape(str(path))}:2: invalid JSON: .*", _error(["check", str(path)])
    )
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert _error(["check", str(path)]) == f"{path}: JSON nested too deeply to read"


def test_directory_with_mixed_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text(GPU_POD, encoding="utf-8")
    (tmp_path / "sub" / "b.yml").write_text(GPU_POD.replace("name: p", "name: q"))
    (tmp_path / "sub" / "c.json").write_text(
        json.dumps(yaml.safe_load(GPU_POD.replace("name: p", "name: r")))
    )
    (tmp_path / "README.md").write_text("# not a manifest: [unclosed\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\x00\x00")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)
    data = _findings([str(tmp_path)])
    resources = sorted(f["resource"] for f in data["findings"] if f["rule"] == "K001")  # type: ignore
    assert resources == ["Pod/llm/p", "Pod/llm/q", "Pod/llm/r"]  # symlinked dir not followed
    (tmp_path / "sub" / "broken.yaml").write_text("kind: Pod\nspec: [\n")
    # the broken file is named with its line, the others are still checked, exit 2 at the end
    code, out, err = run(["check", "--format", "json", str(tmp_path)])
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"gpustrata: {tmp_path / 'sub' / 'broken.yaml'}:3: invalid YAML")
    checked = json.loads(out)["findings"]
    assert sorted(f["resource"] for f in checked if f["rule"] == "K001") == resources
    assert _error(["check", str(tmp_path / "missing")]) == (
        f"{tmp_path / 'missing'}: no such file or directory"
    )


@st.composite
def damaged_manifest(draw: st.DrawFn) -> str:
    """A fixture file with a few characters inserted, deleted or replaced."""
    files = fixture_files()
    text = draw(st.sampled_from(files)).read_text(encoding="utf-8")
    return damage(draw, text)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=damaged_manifest(), as_json=st.booleans())
@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_damaged_manifests_give_results_or_a_located_error(text: str, as_json: bool) -> None:
    name = "damaged.json" if as_json else "damaged.yaml"
    with record("manifest-textual"):
        try:
            objects = load_text(text, name)
        except InputError as exc:
            assert re.match(rf"{re.escape(name)}(:\d+)?: \S", str(exc)), exc
            assert "\n" not in str(exc)
            return
        report = evaluate(objects)
        assert not [f for f in report.findings if f.internal], report.findings


@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_large_input_memory_grows_linearly_and_modestly(tmp_path: Path) -> None:
    """Peak RSS of `check` (fresh interpreter) on ~0.5 and ~1.5 MB of Helm-style output.

    The growth per input MB bounds memory for any size; measured ~12 MiB per MB (the
    parsed objects, their line numbers, the report), i.e. ~0.7 GiB for 50 MB (see
    benchmarks/bench_large_input.py). 25 MiB per MB leaves room for new rules but
    catches a loader that keeps every YAML node, or a report that grows quadratically.
    """
    import bench_large_input

    peaks = []
    for mb in (0.5, 1.5):
        directory = tmp_path / str(mb)
        directory.mkdir()
        yaml_path, _, _ = bench_large_input.write_inputs(directory, mb)
        code, _, peak_mib = bench_large_input.check(str(yaml_path))
        assert code in (0, 1)
        peaks.append((yaml_path.stat().st_size / 2**20, peak_mib))
    (small, small_peak), (big, big_peak) = peaks
    per_mb = (big_peak - small_peak) / (big - small)
    assert per_mb < 25, f"{per_mb:.1f} MiB of memory per MB of input ({peaks})"
