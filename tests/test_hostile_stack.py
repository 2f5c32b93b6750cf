"""Issue 19: what a stack file from a pull request may do (huge numbers, model paths,
names, weak types); each problem is exit 2 with the file, line, config path and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.spec.loader import load_stack_file


def _plan_error(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["plan", "--file", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and err.startswith("gpustrata: "), err
    return err


def test_huge_integer_in_a_stack(mutated_stack, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path = mutated_stack("min_size: 1", "min_size: " + "9" * 5000)
    lines = path.read_text(encoding="utf-8").splitlines()
    line = 1 + next(i for i, t in enumerate(lines) if "9" * 5000 in t)
    with pytest.raises(StackError, match=rf":{line}: cannot be used: an integer of 5000 digits"):
        load_stack_file(path)
    assert f":{line}: cannot be used: an integer of 5000 digits" in _plan_error(path, capsys)


M0 = "gpustrata:stack.models[0]"


@pytest.mark.parametrize(
    ("old", "new", "where", "says"),
    [
        # item 6: a name no file system takes
        ("model: meta-llama/Llama-3.3-70B-Instruct", "model: " + "a" * 300, f"{M0}.model",
         "has a path component over 255 bytes"),
        # item 10: files outside the project
        ("model: meta-llama/Llama-3.3-70B-Instruct", "model: /proc/self/environ",
         f"{M0}.model", "is an absolute path"),
        ("model: meta-llama/Llama-3.3-70B-Instruct", "model: /etc/passwd",
         f"{M0}.model", "is an absolute path"),
        ("model: meta-llama/Llama-3.3-70B-Instruct", "model: ../../../../etc/hostname",
         f"{M0}.model", "leaves the project through '..'"),
        ("model: meta-llama/Llama-3.3-70B-Instruct", "model: ~/config.json",
         f"{M0}.model", "is an absolute path"),
        # item 11: weak types and patterns
        ("image: rayproject/ray-llm:2.60.0-py311-cu128", 'image: "a\\nb"', f"{M0}.image",
         "'a\\nb' is not in the expected form"),
        ("image: rayproject/ray-llm:2.60.0-py311-cu128", "image: 'ray llm'", f"{M0}.image",
         "is not in the expected form"),
        ('driver_version: "580.173.02"', "driver_version: ../../etc/passwd",
         "gpustrata:stack.gpu_operator.driver_version", "is not in the expected form"),
        ("name: llama-70b\n        model: meta-llama/Llama-3.3-70B-Instruct",
         "name: llama-70b\n        model: \"meta-llama/Llama-3.3-70B-Instruct\\u202e\"",
         f"{M0}.model", "character U+202E"),
        ("name: llama-70b\n        model: meta-llama/Llama-3.3-70B-Instruct",
         "name: llama-70b\n        model: \"meta-llama/Llama\\u200b-3.3-70B-Instruct\"",
         f"{M0}.model", "character U+200B"),
        ("min_size: 1", "min_size: true", "gpustrata:stack.node_pools[0].min_size",
         "true is not a whole number"),
        ("enabled: true", 'enabled: "true"', "gpustrata:stack.kuberay.enabled",
         "'true' is not true or false"),
        ("memory.available: 2Gi", 'memory.available: ""',
         "gpustrata:stack.node_pools[0].kubelet.eviction_hard", "'' is not a threshold"),
        ("uri: s3://gpustrata-prod-models/llama-3.3-70b-instruct/", "uri: ../../etc/passwd",
         f"{M0}.weights.uri", "a '..' segment"),
        # item 14: credentials in URI userinfo are refused and never printed
        ("uri: s3://gpustrata-prod-models/llama-3.3-70b-instruct/",
         "uri: s3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMIK7MDENG@bucket/m/",
         f"{M0}.weights.uri", "holds a URI with credentials before the host (scheme://***@host"),
    ],
    ids=["long-model", "proc-environ", "etc-passwd", "dotdot", "home", "image-newline",
         "image-space", "driver-path", "bidi", "zero-width", "min-size-bool",
         "enabled-string", "eviction-empty", "uri-dotdot", "uri-userinfo"],
)  # fmt: skip
def test_stack_refuses_hostile_values(  # type: ignore[no-untyped-def]
    mutated_stack, capsys: pytest.CaptureFixture[str], old: str, new: str, where: str, says: str
) -> None:
    path = mutated_stack(old, new)
    err = _plan_error(path, capsys)
    line = next(ln for ln in err.splitlines() if where in ln)
    assert f"{path}:" in line and says in line, err
    assert "AKIA" not in err and "wJalr" not in err and "Traceback" not in err


def test_model_symlink_out_of_the_project_is_not_read(tmp_path: Path) -> None:
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.planning.plan import _outside_project

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "leak.json").symlink_to("/etc/hostname")
    catalog = load_model_catalog()
    why = _outside_project("models/leak.json", catalog, tmp_path)
    assert why is not None and "leads outside the project" in why
    assert _outside_project("models/inside.json", catalog, tmp_path) is None
    assert _outside_project("meta-llama/Llama-3.1-8B-Instruct", catalog, tmp_path) is None


# --- item 13: the secret-flag guard is an allowlist of vLLM's grammar --------------------

TOKEN = "hf_" + "Q" * 34


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("hf-token ", "x"),
        ("hf.token", "x"),
        ("hf-tokens", "x"),
        ("api-k\u0435y", "x"),  # Cyrillic e
        ("api-key\u200b", "x"),
        ("authorization", "Bearer " + TOKEN),
        ("api-key=" + TOKEN, "1"),
        ("served-model-name", TOKEN),
    ],
)
def test_secret_flag_variants_are_refused_without_the_value(name: str, value: str) -> None:
    import pydantic

    from gpustrata.spec.serving import EngineSpec

    with pytest.raises(pydantic.ValidationError) as caught:
        EngineSpec(extra_args={name: value})
    assert TOKEN not in str(caught.value.errors()[0]["msg"])


def test_ordinary_flags_still_pass() -> None:
    from gpustrata.spec.serving import EngineSpec

    ok = {"max_num_batched_tokens": 8192, "long-prefill-token-threshold": 64, "tokenizer": "x"}
    assert EngineSpec(extra_args=ok).extra_args == ok


def test_flag_name_property() -> None:
    """Every name that is not of vLLM's grammar, or hints at a credential, is refused."""
    import sys

    import pydantic
    from hypothesis import given, settings
    from hypothesis import strategies as st

    sys.path.insert(0, str(Path(__file__).parent))
    from _fuzz import record

    from gpustrata.spec.serving import EngineSpec

    base = st.sampled_from(["api-key", "api_key", "hf-token", "hf_token", "apikey"])
    noise = st.sampled_from(["", " ", ".", "s", "\u200b", "\u202e", "=x", "\n", "\u0435", "A"])

    @settings(max_examples=300, deadline=None)
    @given(base=base, before=noise, after=noise, upper=st.booleans())
    def prop(base: str, before: str, after: str, upper: bool) -> None:
        name = before + (base.upper() if upper else base) + after
        with record("secret-flag-names"), pytest.raises(pydantic.ValidationError):
            EngineSpec(extra_args={name: TOKEN})

    prop()


# --- item 12: every exit-2 message about a stack file names its line ---------------------

DEV = Path(__file__).resolve().parents[1] / "stacks" / "Pulumi.dev.yaml"


def _dev_with(old: bytes, new: bytes) -> bytes:
    data = DEV.read_bytes()
    assert old in data
    return data.replace(old, new, 1)


def _line_of(data: bytes, needle: bytes) -> int:
    return data[: data.index(needle)].count(b"\n") + 1


@pytest.mark.parametrize(
    ("data", "line", "says"),
    [
        (
            d := _dev_with(b"instance_type: g6.xlarge", b"instance_type: g9.huge"),
            _line_of(d, b"g9.huge"),
            "node_pools[0].instance_type: 'g9.huge' is not in the hardware catalogue",
        ),
        (
            d := _dev_with(b"gpustrata:stack:", b"gpustrata:stak:"),
            _line_of(d, b"gpustrata:stak:"),
            "config.gpustrata:stack: missing; did you mean 'gpustrata:stak'?",
        ),
        (
            b"config:\n  aws:region: us-west-2\n  gpustrata:stack: hello\n",
            3,
            "gpustrata:stack: 'hello' is not a map",
        ),
        (
            d := _dev_with(b"max_size: 1", b"max_size: 1\x00"),
            _line_of(d, b"\x00"),
            "binary input (contains NUL bytes), not YAML or JSON",
        ),
        (
            d := _dev_with(b"max_size: 1", b"max_size: 1 \xff"),
            _line_of(d, b"\xff"),
            "not UTF-8 text (byte ",
        ),
        (
            d := _dev_with(b"environment: dev", b"environment: dev\x07"),
            _line_of(d, b"\x07"),
            "holds the control character U+0007, which YAML does not allow",
        ),
        (b"stack: {}\n", 1, "config: missing; a Pulumi stack file has a top-level 'config:' map"),
    ],
    ids=["instance-type", "stak-typo", "stack-hello", "nul", "not-utf8", "bel", "no-config"],
)  # fmt: skip
def test_exit_2_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, line: int, says: str
) -> None:
    """Each message is ``file:LINE: ...`` (these gave no line, or a byte offset, before)."""
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_bytes(data)
    for command in ("plan", "render"):
        code = main([command, "--file", str(path)])
        _out, err = capsys.readouterr()
        assert code == 2 and "Traceback" not in err, (command, code, err)
        assert err.startswith(f"gpustrata: {path}:{line}: "), (command, err)
        assert says in err, err


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_stack_file_that_is_a_device_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --file` reads stack files as `check` reads manifests (core/textfiles.py)."""
    link = tmp_path / "Pulumi.dev.yaml"
    link.symlink_to("/dev/zero")
    assert f"{link}: a device; gpustrata reads only regular files" in _plan_error(link, capsys)
