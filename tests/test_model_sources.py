"""Model facts from the model's own files (issue 30 item 1): ``--models DIR``, the Hugging
Face cache and a manifest's path, before the catalogue; hostile layouts refused with the
file and the fix (``gpustrata.catalog.model_sources``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _model_configs import qwen3_5_4b_config
from _stacks import ROOT

from gpustrata.catalog.architectures import ModelCatalogError
from gpustrata.catalog.model_sources import ModelSources, hf_hub_cache, local_config_path
from gpustrata.cli.app import main

# A 13B Llama-shaped model no catalogue has (acme/acme-13b).
ACME: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 40,
    "hidden_size": 5120,
    "intermediate_size": 13824,
    "num_attention_heads": 40,
    "num_key_value_heads": 40,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "float16",
}
TOTAL_SIZE = 26_031_728_640  # bytes of its float16 safetensors: 13.016B parameters
COMMIT = "a" * 40
SIZE = ["--input-tokens", "100", "--output-tokens", "10", "--concurrency", "4"]


@pytest.fixture(autouse=True)
def _no_user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own Hugging Face cache never decides a test."""
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hf-cache"))


def _model(folder: Path, config: dict[str, Any] = ACME, total: int | None = TOTAL_SIZE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if total is not None:
        index = {"metadata": {"total_size": total}, "weight_map": {}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder / "config.json"


def _hub(cache: Path, repo: str, config: dict[str, Any] = ACME, ref: bool = True) -> Path:
    """``models--org--name`` as huggingface_hub writes it: blobs, a snapshot of links, refs."""
    root = cache / ("models--" + repo.replace("/", "--"))
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / "c0ffee").write_text(json.dumps(config))
    snap = root / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to(Path("../../blobs/c0ffee"))
    if ref:
        (root / "refs").mkdir()
        (root / "refs" / "main").write_text(COMMIT)
    return root


def _deployment(model: str) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: acme, namespace: inference}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: acme}}}}
  template:
    metadata: {{labels: {{app: acme}}}}
    spec:
      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-L4}}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.8.5
        command: [vllm, serve, {model}, --max-model-len, "4096"]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


def _check(tmp_path: Path, model: str, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    manifest = tmp_path / "manifests" / "d.yaml"
    manifest.parent.mkdir(exist_ok=True)
    manifest.write_text(_deployment(model))
    main(["check", str(manifest), "-e", "dev", "-o", "json", *flags])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return out


def _v003(out: str) -> str:
    """V003's finding or not-evaluated reason, as text."""
    data = json.loads(out)
    hits = [f["message"] for f in data["findings"] if f["rule"] == "V003"]
    hits += [n["reason"] for n in data["not_evaluated"] if n["rule"] == "V003"]
    assert len(hits) == 1, data
    return str(hits[0])


# --------------------------------------------------------------------------- sources


def test_hf_hub_cache_follows_huggingface_hub_precedence() -> None:
    assert hf_hub_cache({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}) == Path("/c")
    assert hf_hub_cache({"HF_HOME": "/h"}) == Path("/h/hub")
    assert hf_hub_cache({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")


@pytest.mark.parametrize(
    ("layout", "written"),
    [
        ("acme/acme-13b", "acme/acme-13b"),  # <org>/<name>
        ("acme-13b", "acme/acme-13b"),  # <name>
        ("acme/acme-13b", "/models/acme-13b"),  # a manifest's path, by its last component
        ("ACME/Acme-13B", "s3://bucket/models/acme/acme-13b"),  # a URI, case ignored
    ],
)
def test_models_dir_layouts(tmp_path: Path, layout: str, written: str) -> None:
    _model(tmp_path / "models" / layout)
    arch = ModelSources(tmp_path / "models").architecture(written)
    assert arch is not None and arch.num_hidden_layers == 40
    # Exact weight bytes from the index: 26,031,728,640 / 2 B = 13.016B parameters.
    assert arch.weights_bytes == TOTAL_SIZE and arch.params_total_b == 13.016
    assert local_config_path(arch) == str(tmp_path / "models" / layout / "config.json")
    assert "model.safetensors.index.json" in arch.sources[1]
    assert "--models" in (arch.notes or "")


def test_models_dir_in_hub_cache_layout_and_the_hf_cache(tmp_path: Path) -> None:
    _hub(tmp_path / "models", "acme/acme-13b")
    arch = ModelSources(tmp_path / "models").architecture("acme/acme-13b")
    assert arch is not None and arch.id == "acme/acme-13b"
    assert f"snapshots/{COMMIT}/config.json" in (local_config_path(arch) or "")
    _hub(tmp_path / "hf" / "hub", "acme/acme-7b", {**ACME, "num_hidden_layers": 32})
    sources = ModelSources.from_environment(env={"HF_HOME": str(tmp_path / "hf")})
    found = sources.architecture("/mnt/weights/acme-7b")  # a bare name: the one repo
    assert found is not None and found.num_hidden_layers == 32
    assert "Hugging Face cache" in (found.notes or "") and found.weights_bytes is None


def test_precedence_dir_then_hf_cache_then_catalogue(tmp_path: Path) -> None:
    qwen = "Qwen/Qwen2.5-1.5B-Instruct"  # catalogued: 28 layers
    cache = tmp_path / "hub"
    _hub(cache, qwen, {**ACME, "num_hidden_layers": 7})
    _model(tmp_path / "models" / qwen, {**ACME, "num_hidden_layers": 5})
    both = ModelSources(tmp_path / "models", hf_cache=cache).architecture(qwen)
    cache_only = ModelSources(None, hf_cache=cache).architecture(qwen)
    assert both is not None and both.num_hidden_layers == 5
    assert cache_only is not None and cache_only.num_hidden_layers == 7
    assert ModelSources(tmp_path / "nothing-here", hf_cache=cache / "x").architecture(qwen) is None


def test_refs_main_picks_the_snapshot(tmp_path: Path) -> None:
    root = _hub(tmp_path, "acme/acme-13b")
    newer = root / "snapshots" / ("b" * 40)
    newer.mkdir()
    (newer / "config.json").write_text(json.dumps({**ACME, "num_hidden_layers": 2}))
    arch = ModelSources(None, hf_cache=tmp_path).architecture("acme/acme-13b")
    assert arch is not None and arch.num_hidden_layers == 40  # refs/main, not the newest


# --------------------------------------------------------------------------- hostile


def test_cache_config_linking_out_of_the_cache_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({**ACME, "_name_or_path": "SECRET"}))
    root = _hub(tmp_path / "hub", "acme/acme-13b")
    link = root / "snapshots" / COMMIT / "config.json"
    link.unlink()
    link.symlink_to(secret)
    with pytest.raises(ModelCatalogError, match="resolves outside") as caught:
        ModelSources(None, hf_cache=tmp_path / "hub").architecture("acme/acme-13b")
    assert str(link) in str(caught.value) and "SECRET" not in str(caught.value)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("../../../../etc", "is not a commit hash"),
        ("x" * 1000, "is not a commit hash"),
        (None, "resolves outside"),  # refs/main itself a link out of the repository
    ],
)
def test_refs_main_pointing_outside_is_refused(
    tmp_path: Path, ref: str | None, expected: str
) -> None:
    root = _hub(tmp_path / "hub", "acme/acme-13b")
    main_ref = root / "refs" / "main"
    if ref is None:
        (tmp_path / "elsewhere").write_text(COMMIT)
        main_ref.unlink()
        main_ref.symlink_to(tmp_path / "elsewhere")
    else:
        main_ref.write_text(ref)
    with pytest.raises(ModelCatalogError, match=expected) as caught:
        ModelSources(None, hf_cache=tmp_path / "hub").architecture("acme/acme-13b")
    assert str(main_ref) in str(caught.value) and "download again" in str(caught.value)


def test_snapshot_without_config(tmp_path: Path) -> None:
    """refs/main naming a snapshot without config.json: refused with the download to run;
    a cache entry with no config.json at all (and no refs) is not a source."""
    root = _hub(tmp_path / "hub", "acme/acme-13b")
    (root / "snapshots" / COMMIT / "config.json").unlink()
    with pytest.raises(ModelCatalogError, match=r"no config.json .*hf download acme/acme-13b"):
        ModelSources(None, hf_cache=tmp_path / "hub").architecture("acme/acme-13b")
    (root / "refs" / "main").unlink()
    assert ModelSources(None, hf_cache=tmp_path / "hub").find("acme/acme-13b") is None


def test_huge_and_bad_files_are_refused_unread(tmp_path: Path) -> None:
    config = _model(tmp_path / "models" / "acme-13b")
    with config.open("wb") as file:  # sparse: 2 GB that take no disk
        file.truncate(2 << 30)
    with pytest.raises(ModelCatalogError, match="over the 4,194,304 bytes"):
        ModelSources(tmp_path / "models").architecture("acme-13b")
    _model(tmp_path / "models" / "acme-13b", total=10**20)
    with pytest.raises(ModelCatalogError, match=r"total_size .* is not a byte count") as caught:
        ModelSources(tmp_path / "models").architecture("acme-13b")
    assert "model.safetensors.index.json" in str(caught.value)


# --------------------------------------------------------------------------- commands


def test_check_reads_models_dir_for_a_manifest_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _model(tmp_path / "models" / "acme" / "acme-13b")
    before = _v003(_check(tmp_path, "/models/acme-13b", capsys))
    assert "not in the model catalogue" in before
    after = _v003(
        _check(tmp_path, "/models/acme-13b", capsys, "--models", str(tmp_path / "models"))
    )
    config = tmp_path / "models" / "acme" / "acme-13b" / "config.json"
    assert f"from {config}" in after and "13.016B params" in after  # index.json's bytes


def test_check_reads_the_hf_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _hub(tmp_path / "hf" / "hub", "acme/acme-13b")
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    reason = _v003(_check(tmp_path, "acme/acme-13b", capsys))
    assert f"snapshots/{COMMIT}/config.json" in reason


def test_check_sizes_a_gated_deltanet_hybrid_from_the_hf_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private Qwen3.5 fine-tune (text_config with layer_types, linear_* keys) in the HF
    cache is sized, not refused: V012 reports vLLM's raised attention block."""
    _hub(tmp_path / "hf" / "hub", "acme/qwen35-tuned", qwen3_5_4b_config())
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = json.loads(_check(tmp_path, "acme/qwen35-tuned", capsys))
    records = [f["message"] for f in data["findings"]] + [
        n["reason"] for n in data["not_evaluated"]
    ]
    assert not any("linear-attention hybrid" in r for r in records), records
    v012 = [f["message"] for f in data["findings"] if f["rule"] == "V012"]
    assert v012 and "blocks of 528 tokens" in v012[0]


def test_check_bad_local_file_is_not_evaluated_with_file_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _model(tmp_path / "models" / "acme-13b", {**ACME, "num_hidden_layers": 10**12})
    out = _check(tmp_path, "/models/acme-13b", capsys, "--models", str(tmp_path / "models"))
    reason = _v003(out)
    assert str(config) in reason and "num_hidden_layers" in reason and "fix the config" in reason
    assert any(n["rule"] == "V003" for n in json.loads(out)["not_evaluated"])


def test_check_catalogue_fallback_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "models").mkdir()
    model = "Qwen/Qwen2.5-32B-Instruct"  # catalogued; 61 GiB of weights: V003 on an L4
    reason = _v003(_check(tmp_path, model, capsys, "--models", str(tmp_path / "models")))
    assert f"serves {model} on" in reason and "from /" not in reason


def test_missing_models_dir_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        [
            "size",
            "--model",
            "acme/acme-13b",
            "--input-tokens",
            "100",
            "--output-tokens",
            "10",
            "--concurrency",
            "4",
        ],
        ["capacity", "--model", "acme/acme-13b", "--gpu", "l4"],
    ):
        code = main([*argv, "--models", str(tmp_path / "absent")])
        out, err = capsys.readouterr()
        assert code == 2 and "no such folder" in err and "Traceback" not in err, out + err


def test_capacity_and_size_read_models_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _model(tmp_path / "models" / "acme" / "acme-13b")
    models = ["--models", str(tmp_path / "models")]
    code = main(
        [
            "capacity",
            "--model",
            "acme/acme-13b",
            "--gpu",
            "h100-sxm-80gb",
            "--format",
            "json",
            *models,
        ]
    )
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert json.loads(out)["model"] == "acme/acme-13b" and "13.016B params" in out
    config = _model(tmp_path / "bad" / "acme-13b", {**ACME, "hidden_size": -1})
    code = main(["size", "--model", "acme-13b", *SIZE, "--models", str(tmp_path / "bad")])
    out, err = capsys.readouterr()
    assert code == 2 and str(config) in err and "Traceback" not in err, out + err


def _stack(project: Path, model: str, extra: str = "") -> Path:
    project.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    text = text.replace("model: Qwen/Qwen2.5-1.5B-Instruct", f"model: {model}")
    if extra:
        text = text.replace("    models:\n", f"    catalog:\n      {extra}\n    models:\n", 1)
    stack = project / "Pulumi.dev.yaml"
    stack.write_text(text)
    return stack


def test_stack_models_dir_and_render_serves_the_hub_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """catalog.models_dir sizes a Hub id from its config.json; render serves the id."""
    project = tmp_path / "project"
    _model(project / "models" / "acme" / "acme-1b", {**ACME, "num_hidden_layers": 4}, None)
    stack = _stack(project, "acme/acme-1b", "models_dir: models")
    code = main(["capacity", "--file", str(stack), "-C", str(project), "--format", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert json.loads(out)["model"] == "acme/acme-1b"
    assert main(["render", "--file", str(stack), "-C", str(project)]) == 0
    rendered = capsys.readouterr().out
    assert "- acme/acme-1b" in rendered and "config.json" not in rendered


def test_stack_models_dir_outside_the_project_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    stack = _stack(project, "acme/acme-1b", "models_dir: ../elsewhere")
    code = main(["render", "--file", str(stack), "-C", str(project)])
    err = capsys.readouterr().err
    assert code == 2 and "catalog.models_dir" in err and "'..'" in err


def test_project_folder_named_like_a_hub_id_is_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34 item 4: 'models/acme' read as a folder would be served as a Hub id."""
    project = tmp_path / "project"
    _model(project / "models" / "acme", total=None)
    stack = _stack(project, "models/acme")
    code = main(["render", "--file", str(stack), "-C", str(project)])
    out, err = capsys.readouterr()
    assert code == 2 and "vllm serve" not in out
    assert "'./models/acme'" in err and "catalog.models_dir" in err


def test_plan_models_flag_reaches_the_planner_and_the_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --models DIR`: the ledger names the file (source model-file) and the rules
    of the rendered Deployment size the model from it too."""
    _model(tmp_path / "models" / "acme" / "acme-13b")
    project = tmp_path / "project"
    stack = _stack(project, "acme/acme-13b")
    argv = ["plan", "--file", str(stack), "-C", str(project), "--format", "json"]
    main([*argv, "--models", str(tmp_path / "models")])
    data = json.loads(capsys.readouterr().out)
    config = str(tmp_path / "models" / "acme" / "acme-13b" / "config.json")
    derived = {d["key"]: d for d in data["derived"]}
    arch = derived["models.qwen-1-5b.architecture"]
    assert arch["source"] == "model-file" and config in arch["why"]
    v003 = [f["message"] for f in data["findings"] if f["rule"] == "V003"]
    assert v003 and f"from {config}" in v003[0] and "13.016B params" in v003[0]


def test_cache_repository_linked_out_of_the_cache_is_refused(tmp_path: Path) -> None:
    """The folder named is the cache: a models--org--name that is a link elsewhere leaves it."""
    _hub(tmp_path / "elsewhere", "acme/acme-13b")
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "models--acme--acme-13b").symlink_to(
        tmp_path / "elsewhere" / "models--acme--acme-13b"
    )
    with pytest.raises(ModelCatalogError, match="resolves outside"):
        ModelSources(None, hf_cache=tmp_path / "hub").architecture("acme/acme-13b")


def test_size_snippet_says_which_file_sized_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34 item 4: the snippet keeps the Hub id and says where its config.json was."""
    _model(tmp_path / "models" / "acme" / "acme-1b", {**ACME, "num_hidden_layers": 4}, None)
    snippet = tmp_path / "snippet.yaml"
    models = ["--models", str(tmp_path / "models")]
    code = main(
        [
            "size",
            "--model",
            "acme/acme-1b",
            *SIZE,
            "--gpu",
            "l4",
            "--snippet",
            str(snippet),
            *models,
        ]
    )
    capsys.readouterr()
    assert code == 0
    text = snippet.read_text()
    config = tmp_path / "models" / "acme" / "acme-1b" / "config.json"
    assert f"sized from {config}" in text and "catalog.models_dir" in text
    assert "model: acme/acme-1b" in text


def test_pulumi_pack_reads_the_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The standalone policy pack sizes a model from the Hugging Face cache of its
    environment, as `check` without --models does (issue 30 item 4)."""
    import yaml

    from gpustrata_policies import pulumi_pack
    from gpustrata_policies.evaluate import find_rule

    _hub(tmp_path / "hf" / "hub", "acme/acme-13b")
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(pulumi_pack, "_SOURCES", [])
    rule = find_rule("V003")
    assert rule is not None
    obj = yaml.safe_load(_deployment("acme/acme-13b"))
    report = pulumi_pack._evaluate([obj], rules=[rule], environment="dev")
    reasons = [n.reason for n in report.not_evaluated] + [f.message for f in report.findings]
    assert reasons and not any("not in the model catalogue" in r for r in reasons)
    assert pulumi_pack.model_sources().hf_cache == tmp_path / "hf" / "hub"
    monkeypatch.setattr(pulumi_pack, "_SOURCES", [])
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty"))
    report = pulumi_pack._evaluate([obj], rules=[rule], environment="dev")
    assert any("not in the model catalogue" in n.reason for n in report.not_evaluated)
