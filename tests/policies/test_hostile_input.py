"""Issue 19: hostile input to ``check`` ends in exit 2 naming the file (and line), or in
results; never a hang, a blow-up or a traceback.

Special files (FIFOs, devices, broken and looping links, ``/dev/zero``), the empty path,
integers over Python's digit limit, JSON duplicate keys, and serveConfigV2 strings with
the top-level YAML guards. Each test failed before its fix.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from pathlib import Path

import pytest
from _release import REFERENCE_IMAGE
from conftest import REPO, fixture
from test_cli import run
from test_manifest_input import GPU_POD  # one GPU Pod manifest for both suites

sys.path.insert(0, str(REPO / "tests"))


def _error(argv: list[str], stdin: str | bytes | None = None, timeout: float = 20.0) -> str:
    """Run `check` in a thread (a FIFO must not block the test run); return its one-line error."""
    result: list[tuple[int, str, str]] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(run(argv, stdin))
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), f"check {argv} still running after {timeout} s (a hang)"
    assert not failure, f"check raised {failure[0]!r} (a traceback)"
    code, out, err = result[0]
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("gpustrata: ") and err.count("\n") == 1, err
    return err.removeprefix("gpustrata: ").strip()


# --- items 3, 4, 7: special files and the empty path -------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    message = _error(["check", str(fifo)])
    assert message.startswith(f"{fifo}: a FIFO (named pipe); gpustrata reads only regular"), message
    # In a folder it is refused too, not skipped silently.
    (tmp_path / "a.yaml").write_text(GPU_POD, encoding="utf-8")
    assert _error(["check", str(tmp_path)]).startswith(f"{fifo}: a FIFO")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_and_a_link_to_it_are_refused(tmp_path: Path) -> None:
    assert _error(["check", "/dev/zero"]).startswith("/dev/zero: a device; ")
    link = tmp_path / "z.yaml"
    link.symlink_to("/dev/zero")
    assert _error(["check", str(link)]).startswith(f"{link}: a device; ")
    assert _error(["check", str(tmp_path)]).startswith(f"{link}: a device; ")
    # On stdin: refused at the first chunk of NUL bytes, not read to the end of memory.
    with open("/dev/zero", "rb") as zero:
        zeros = zero.read(3 << 20)
    assert _error(["check", "-"], zeros) == (
        "<stdin>:1: binary input (contains NUL bytes), not YAML or JSON"
    )


def test_broken_and_looping_links_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GPU_POD, encoding="utf-8")
    broken = tmp_path / "gone.yaml"
    broken.symlink_to(tmp_path / "nothing.yaml")
    assert _error(["check", str(tmp_path)]).startswith(f"{broken}: a symbolic link to nothing")
    assert _error(["check", str(broken)]).startswith(f"{broken}: a symbolic link to nothing")
    broken.unlink()
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert _error(["check", str(tmp_path)]).startswith(f"{loop}: a symbolic link to nothing")
    loop.unlink()
    code, _out, _err = run(["check", str(tmp_path)])
    assert code == 1  # the folder is fine again: K001 on a.yaml


def test_empty_path_is_refused(tmp_path: Path) -> None:
    message = _error(["check", ""])
    assert message.startswith("'': an empty path (an unset variable in the command?)"), message
    assert _error(["check", str(tmp_path), ""]).startswith("'': an empty path")


# --- item 5: integers too long for Python ------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_huge_integer_in_a_manifest(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"big{suffix}"
    big = "9" * 5000
    if suffix == ".json":
        path.write_text(
            '{"kind": "Pod",\n "metadata": {"name": "p"},\n "spec": {"x": ' + big + "}}"
        )
    else:
        path.write_text(GPU_POD.replace("gpu: 1}", "gpu: " + big + "}"))
    message = _error(["check", str(path)])
    line = 3 if suffix == ".json" else 11
    assert message.startswith(f"{path}:{line}: cannot be checked: an integer of "), message
    assert "more than 4300" in message and big not in message


def test_huge_integer_in_a_serve_config_is_not_an_internal_error(tmp_path: Path) -> None:
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.inputs.manifests import load_text

    serve = "applications:\n  - name: a\n    args:\n      n: " + "7" * 5000 + "\n"
    doc = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "r", "namespace": "llm"},
        "spec": {"serveConfigV2": serve},
    }
    report = evaluate(load_text(json.dumps(doc), "r.json"))
    assert not [f for f in report.findings if f.internal], report.findings


def test_serve_config_duplicate_applications_and_alias_bomb_are_reported() -> None:
    from gpustrata.core.yamlguard import YamlShapeError
    from gpustrata.core.yamlio import safe_load

    with pytest.raises(YamlShapeError, match="duplicate key 'applications'"):
        safe_load("applications: []\napplications: [{name: a}]\n")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    with pytest.raises(YamlShapeError, match="alias bomb"):
        safe_load(bomb + "applications: [*h]\n")


def _ray_service(serve_config: str) -> str:
    """R003's good RayService fixture with *serve_config* (YAML text) as its serveConfigV2."""
    text = fixture("R003", "good-strict-pack-fits.yaml").read_text()
    start, end = text.index("  serveConfigV2: |"), text.index("  rayClusterConfig:")
    return text[:start] + f"  serveConfigV2: {serve_config}\n" + text[end:]


@pytest.mark.parametrize(
    ("value", "what"), [("{applications: []}", "a mapping"), ("5", "an integer"), ("[]", "a list")]
)
def test_serve_config_that_is_not_a_string_is_reported(value: str, what: str) -> None:
    """KubeRay's CRD types serveConfigV2 as a string: the API server rejects anything else,
    so it is a finding (it used to be skipped as if the RayService had no Serve config)."""
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.inputs.manifests import load_text

    report = evaluate(load_text(_ray_service(value), "r.yaml"))
    found = [(f.rule, f.message, f.line) for f in report.findings]
    assert found == [
        (
            "R003",
            f"spec.serveConfigV2 is {what}, not a string: KubeRay's RayService CRD declares it "
            "a string (ray-project/kuberay@v1.7.0:ray-operator/apis/ray/v1/rayservice_types.go), "
            "so the API server rejects the object and no engine is placed; write the Serve "
            "config as a YAML block string (serveConfigV2: |)",
            10,  # the serveConfigV2 line
        )
    ], found


@pytest.mark.parametrize(
    ("serve", "reason"),
    [
        ("applications: []\napplications: [{name: a}]\n", "duplicate key 'applications'"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
                for p, c in zip("abcdefg", "bcdefgh", strict=True)
            )
            + "applications: [*h]\n",
            "alias bomb",
        ),
    ],
    ids=["duplicate-applications", "alias-bomb"],
)
def test_serve_config_guards_reach_the_report(serve: str, reason: str) -> None:
    """The top-level YAML guards hold inside a serveConfigV2 string through ``check``: the
    RayService is "not evaluated" naming the guard, not read with the last key winning."""
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.inputs.manifests import load_text

    report = evaluate(load_text(_ray_service(json.dumps(serve)), "r.yaml"))
    assert not report.findings, report.findings
    reasons = [n.reason for n in report.not_evaluated if n.rule == "R003"]
    assert any("serveConfigV2 is not valid YAML (line " in r and reason in r for r in reasons), (
        reasons
    )


# --- item 8: JSON duplicate keys ---------------------------------------------------------


def test_json_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    path.write_text('{"kind": "Pod",\n "metadata": {"name": "p"},\n "kind": "Secret"}')
    message = _error(["check", str(path)])
    assert re.fullmatch(
        rf"{re.escape(str(path))}:3: cannot be checked: duplicate key 'kind' in one object: "
        ".*keep one",
        message,
    ), message
    config = tmp_path / "policy.json"
    config.write_text('{"rules": {},\n "rules": {"K001": {"enforcement": "disabled"}}}')
    manifest = tmp_path / "ok.yaml"
    manifest.write_text(GPU_POD, encoding="utf-8")
    assert _error(["check", "--config", str(config), str(manifest)]).startswith(
        f"{config}:2: invalid config file: duplicate key 'rules'"
    )


# --- item 14: K014 finds tokens in engine_kwargs, shell strings and repeated flags -------

TOKEN = "hf_" + "Z" * 34


def _k014(doc: dict[str, object]) -> list[str]:
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.inputs.manifests import load_text

    report = evaluate(load_text(json.dumps(doc), "k.json"))
    messages = [f.message for f in report.findings if f.rule == "K014"]
    assert all(TOKEN not in m for m in messages)
    return messages


def _deployment(container: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "llm"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def test_k014_shell_string_and_second_flag() -> None:
    shell = {
        "name": "c",
        "image": REFERENCE_IMAGE,
        "command": ["sh", "-c"],
        "args": [f"vllm serve m --api-key {TOKEN} --port 8000"],
    }
    assert any("--api-key in a shell command" in m for m in _k014(_deployment(shell)))
    twice = {
        "name": "c",
        "image": REFERENCE_IMAGE,
        "args": ["--model", "m", "--api-key=$(KEY)", f"--api-key={TOKEN}"],
    }
    assert any("--api-key a second time" in m for m in _k014(_deployment(twice)))


def test_k014_engine_kwargs() -> None:
    serve = (
        "applications:\n  - name: a\n    import_path: ray.serve.llm:build_openai_app\n"
        "    args:\n      llm_configs:\n        - model_loading_config: {model_id: m}\n"
        f"          engine_kwargs: {{hf_token: {TOKEN}, api_key: {TOKEN}}}\n"
    )
    doc = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "r", "namespace": "llm"},
        "spec": {"serveConfigV2": serve},
    }
    messages = _k014(doc)
    assert any("engine_kwargs sets hf_token" in m for m in messages), messages
    assert any("engine_kwargs sets api_key" in m for m in messages), messages


# --- item 12: every exit-2 message of `check` names the file and line --------------------


@pytest.mark.parametrize(
    ("name", "content", "config", "line", "says"),
    [
        ("bel.yaml", b"kind: Pod\nmetadata:\n  name: p\x07\n", False, 3,
         "invalid YAML: unacceptable character #x0007"),
        ("nul.yaml", b"kind: Pod\n\nx: \x00\n", False, 3, "binary input (contains NUL bytes)"),
        ("latin1.yaml", b"kind: Pod\nx: caf\xe9\n", False, 2, "not UTF-8 text (byte 16)"),
        ("c.yaml", b"rules:\n  K001: {enforcement: advisory}\x07\n", True, 2,
         "invalid config file"),
        ("c.yaml", b"rules:\n  K001: advisory\n  K999: advisory\n", True, 3,
         "rules.K999: no rule with that id or name"),
        ("c.json", b'{"rules":\n {"K001": {"enforcement": 7}}}', True, 2,
         "rules.K001.enforcement: "),
        ("c.yaml", b"\xff\n", True, 1, "not UTF-8 text (byte 0)"),
    ],
    ids=["manifest-bel", "manifest-nul", "manifest-latin1", "config-bel", "config-unknown-rule",
         "config-json-value", "config-not-utf8"],
)  # fmt: skip
def test_check_exit_2_names_the_line(
    tmp_path: Path, name: str, content: bytes, config: bool, line: int, says: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    manifest = tmp_path / "ok.yaml"
    manifest.write_text(GPU_POD, encoding="utf-8")
    argv = ["check", "--config", str(path), str(manifest)] if config else ["check", str(path)]
    message = _error(argv)
    assert message.startswith(f"{path}:{line}: ") and says in message, message


# --- item 14: URI credentials are redacted wherever gpustrata prints ---------------------

KEY, SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
CREDENTIAL_URI = f"s3://{KEY}:{SECRET}@models-bucket/llama/"


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "markdown"])
def test_uri_userinfo_is_redacted_in_check_output(tmp_path: Path, fmt: str) -> None:
    """A vLLM engine loading from a URI with credentials: rules quote the model (K015,
    V rules) and "not evaluated" reasons name it; no output format carries the key."""
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "llm"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                    "containers": [
                        {
                            "name": "vllm",
                            "image": REFERENCE_IMAGE,
                            "args": ["--model", CREDENTIAL_URI, "--load-format", "runai_streamer"],
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ],
                }
            }
        },
    }
    path = tmp_path / "d.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(["check", "--format", fmt, str(path)])
    assert code in (0, 1), err
    shown = out.replace("\\*", "*").replace("@&#8203;", "@")  # markdown's escapes
    assert "s3://***@models-bucket/llama/" in shown, out  # quoted, the userinfo hidden
    assert KEY not in out + err and SECRET not in out + err


def test_uri_userinfo_is_redacted_in_errors_and_refused_in_a_stack(tmp_path: Path) -> None:
    message = _error(["check", CREDENTIAL_URI])
    assert message == "s3://***@models-bucket/llama/: no such file or directory", message
    from gpustrata.core.errors import StackError
    from gpustrata.spec.loader import load_stack_file

    stack = REPO / "stacks" / "Pulumi.dev.yaml"
    hostile = tmp_path / "Pulumi.dev.yaml"
    text = stack.read_text().replace(
        "model: Qwen/Qwen2.5-1.5B-Instruct", f"model: {CREDENTIAL_URI}"
    )
    extra = f"\n          extra_args: {{served-model-name: '{CREDENTIAL_URI}'}}"
    hostile.write_text(text.replace("        engine:", "        engine:" + extra, 1))
    with pytest.raises(StackError) as caught:
        load_stack_file(hostile)
    shown = caught.value.render()
    assert "gpustrata:stack.models[0].model: holds a URI with credentials" in shown, shown
    assert "gpustrata:stack.models[0].engine.extra_args: holds a URI with credentials" in shown
    assert KEY not in shown and SECRET not in shown


# --- item 17: messages say values as YAML does, never as Python reprs --------------------


def _pod_with_gpu(requests: str, limits: str) -> str:
    return (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\nspec:\n  containers:\n"
        f"    - name: c\n      image: {REFERENCE_IMAGE}\n      resources:\n"
        f"        requests: {{nvidia.com/gpu: {requests}}}\n"
        f"        limits: {{nvidia.com/gpu: {limits}}}\n"
    )


@pytest.mark.parametrize(
    ("requests", "limits", "rule", "says"),
    [
        (".nan", ".nan", "K001", "requests nvidia.com/gpu: .nan and limits it to .nan; .nan is "
         "not a quantity, so the API server rejects it"),
        ("1", "abc", "K001", "abc is not a quantity"),
        ("null", "null", "K002", "sets limits.nvidia.com/gpu: null, which is not a quantity"),
        ("!!binary aGVsbG8=", "1", "K002",
         "sets requests.nvidia.com/gpu: binary data (5 bytes), which is not a quantity"),
    ],
    ids=["nan", "garbage", "null", "binary"],
)  # fmt: skip
def test_messages_spell_values_as_yaml(requests: str, limits: str, rule: str, says: str) -> None:
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.inputs.manifests import load_text

    report = evaluate(load_text(_pod_with_gpu(requests, limits), "p.yaml"))
    messages = [f.message for f in report.findings if f.rule == rule]
    assert any(says in m for m in messages), messages
    everything = " ".join(f.message for f in report.findings)
    everything += " ".join(n.reason for n in report.not_evaluated)
    assert "None" not in everything and "b'" not in everything and " nan " not in everything


def test_k015_names_an_aliased_model_once() -> None:
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.inputs.manifests import load_text

    text = fixture("R003", "good-strict-pack-fits.yaml").read_text()
    start, end = text.index("            - model_loading_config"), text.index("  rayClusterConfig:")
    config = text[start:end].replace(
        "            - model_loading_config",
        "            - &m\n              model_loading_config",
        1,
    )
    aliased = text[:start] + config + "".join(["            - *m\n"] * 9) + text[end:]
    aliased = aliased.replace("ephemeral-storage: 200Gi", "ephemeral-storage: 20Gi")
    report = evaluate(load_text(aliased, "r.yaml"))
    messages = [f.message for f in report.findings if f.rule == "K015"]
    assert messages, [f.rule for f in report.findings]
    for message in messages:
        assert message.count("meta-llama/Llama-3.3-70B-Instruct") == 1, message
