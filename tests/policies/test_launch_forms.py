"""Engines launched the way real manifests launch them (issue 20 item 2): shell scripts,
Kubernetes' ``$(VAR)`` expansion, shell variables, argparse prefixes, other entrypoints."""

from __future__ import annotations

from typing import Any

import pytest

from gpustrata.catalog.vllm_releases import accepts_abbreviations, flag_releases, load_vllm_releases
from gpustrata_policies import UNKNOWN
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.shell import MARK, container_env, k8s_expand, shell_commands
from gpustrata_policies.view.vllm_args import EngineArgs, vllm_engine


def _engine(**fields: Any) -> EngineArgs | None:
    obj = K8sObject(
        {
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", **fields}]},
        }
    )
    return vllm_engine(next(obj.containers()))


def test_bash_exc_script_of_production_stack_is_read() -> None:
    # vllm-project/production-stack examples/disaggregated_prefill_orchestrated/prefill-deploy.yaml
    script = (
        "set -x\n\napt-get update\nDEBIAN_FRONTEND=noninteractive apt-get install -y \\\n"
        "  python3.10 ca-certificates\n# pip install vllm\n"
        "python -m vllm.entrypoints.openai.api_server \\\n  --host 0.0.0.0 \\\n"
        "  --port ${PORT} \\\n  --model ${MODEL_ID} \\\n  --max-model-len ${MAX_SEQ_LEN}\n"
        "  # Add KV transfer configuration flags as needed\n"
    )
    engine = _engine(
        image="ubuntu:22.04",
        command=["/bin/bash", "-exc", script],
        env=[
            {"name": "PORT", "value": "8000"},
            {"name": "MAX_SEQ_LEN", "value": "512"},
            {"name": "MODEL_ID", "value": "/var/mdl/m"},
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}},
        ],
    )
    assert engine is not None and engine.complete
    assert engine.model == "/var/mdl/m" and engine.get_int("max_model_len") == 512
    assert engine.port == 8000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--model $(M)", "--model m"),
        ("--model $$(M)", "--model $(M)"),  # $$ escapes
        ("--model $(NOPE)", "--model $(NOPE)"),  # undefined: left as written
        ("--token $(SECRET)", f"--token {MARK}"),  # valueFrom: not stated
    ],
)
def test_kubernetes_expansion(text: str, expected: str) -> None:
    env, open_env = container_env(
        [{"name": "M", "value": "m"}, {"name": "SECRET", "valueFrom": {}}], None
    )
    assert k8s_expand(text, env, open_env) == expected


def test_env_refers_to_entries_before_it_and_envfrom_opens_it() -> None:
    env, _ = container_env(
        [
            {"name": "A", "value": "x"},
            {"name": "B", "value": "$(A)-$(C)"},
            {"name": "C", "value": "c"},
        ],
        None,
    )
    assert env["B"] == "x-$(C)"  # C is defined after B
    env, open_env = container_env([], [{"configMapRef": {"name": "cm"}}])
    assert open_env and k8s_expand("$(ANY)", env, open_env) == MARK


def test_shell_words_quotes_assignments_and_redirections() -> None:
    variables: dict[str, str | None] = {"TP": "2"}
    commands = list(
        shell_commands(
            "MODEL=m; export LEN=4096\n"
            'exec vllm serve "$MODEL" -tp ${TP} --max-model-len ${LEN:-1} '
            "--served-model-name '$MODEL' --port ${PORT:-9} 2>&1 > /tmp/log",
            variables,
        )
    )
    assert commands[-1] == [
        "exec", "vllm", "serve", "m", "-tp", "2", "--max-model-len", "4096",
        "--served-model-name", "$MODEL", "--port", MARK,
    ]  # fmt: skip


def test_unknown_shell_values_are_unknown_never_text() -> None:
    engine = _engine(
        image="vllm/vllm-openai:v0.10.1.1",
        command=["sh", "-c", "vllm serve m --max-model-len $LEN --gpu-memory-utilization $(cat f)"],
    )
    assert engine is not None
    assert engine.values["max_model_len"] is UNKNOWN
    assert engine.values["gpu_memory_utilization"] is UNKNOWN
    assert engine.complete  # unknown values, but no unknown word where a flag may stand


def test_unknown_word_in_flag_position_makes_the_engine_incomplete() -> None:
    engine = _engine(command=["sh", "-c", "vllm serve m $EXTRA_ARGS"])
    assert engine is not None and not engine.complete


def test_sh_c_operands_are_positional_parameters() -> None:
    engine = _engine(
        command=["sh", "-c", 'exec vllm serve "$@"', "sh", "m", "--tensor-parallel-size", "4"]
    )
    assert engine is not None and engine.complete
    assert engine.model == "m" and engine.get_int("tensor_parallel_size") == 4


def test_exec_form_shell_syntax_is_not_expanded() -> None:
    engine = _engine(
        command=["vllm", "serve", "m", "--max-model-len", "${LEN}"],
        env=[{"name": "LEN", "value": "4096"}],
    )
    assert engine is not None and engine.values["max_model_len"] is UNKNOWN


@pytest.mark.parametrize(
    "command",
    [
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
        ["python3", "-m", "vllm.entrypoints.cli.main", "serve", "m"],
        ["/usr/local/bin/vllm", "serve", "m"],
        ["bash", "-lc", "source /venv/bin/activate && vllm serve m"],
    ],
)
def test_entrypoints(command: list[str]) -> None:
    engine = _engine(command=command)
    assert engine is not None and engine.model == "m"


def test_script_file_is_not_read() -> None:
    assert _engine(command=["bash", "/scripts/start.sh"]) is None


def test_abbreviations_follow_the_release_parser() -> None:
    facts = load_vllm_releases().abbreviations
    assert facts and all(f.source.startswith("vllm@v") for _, f in facts)
    fact = accepts_abbreviations("0.10.1.1")
    assert fact is not None and fact.value == 1.0
    engine = _engine(image="vllm/vllm-openai:v0.10.1.1", args=["--model", "m", "--max-model", "4k"])
    assert engine is not None and engine.get_int("max_model_len") == 4000
    # A release the catalogue has no answer for: the prefix is not resolved, and the
    # engine is incomplete (it may set a setting the rules would read as unset).
    assert accepts_abbreviations("0.4.1") is None
    engine = _engine(image="vllm/vllm-openai:v0.4.1", args=["--model", "m", "--max-model", "4k"])
    assert engine is not None and engine.get("max_model_len") is None and not engine.complete


def test_v013_prefixes_agree_with_the_catalogued_parser_fact() -> None:
    # V013 resolves unique prefixes as argparse does; that is right only while every
    # release whose flags were read takes prefixes. A release without the fact, or one whose
    # parser refuses them, needs V013 to read the fact too.
    for version in flag_releases():
        fact = accepts_abbreviations(version)
        assert fact is not None and fact.value == 1.0, version


def test_unknown_values_after_equals_and_the_odh_multinode_script() -> None:
    # opendatahub-io/odh-model-controller config/runtimes/vllm-multinode-template.yaml
    script = (
        "until [[ $(ray status --address ${RAY_ADDRESS} | grep -c node_) -eq ${PP} ]]; do\n"
        '  echo "Waiting..."\n  sleep 1\ndone\n'
        "export SERVED_MODEL_NAME=${MODEL_NAME}\nexport MODEL_NAME=${MODEL_DIR}\n"
        "exec python3 -m vllm.entrypoints.openai.api_server --port=8080 "
        "--model=${MODEL_NAME} --tensor-parallel-size=${TENSOR_PARALLEL_SIZE}"
    )
    engine = _engine(command=["bash", "-c"], args=[script])
    assert engine is not None and engine.complete
    assert engine.values["tensor_parallel_size"] is UNKNOWN and engine.model is None
    assert engine.port == 8080


def test_heredoc_body_with_an_apostrophe_does_not_hide_the_engine() -> None:
    # The heredoc body is data: its `don't` opened a quote that swallowed `vllm serve`.
    script = (
        "cat <<EOF > /tmp/chat.jinja\ndon't answer twice\nEOF\n"
        'cat <<-"END"\n\ttab-indented\n\tEND\n'
        "vllm serve m --tensor-parallel-size 2\n"
    )
    engine = _engine(image="vllm/vllm-openai:v0.8.5", command=["bash", "-c", script])
    assert engine is not None and engine.get_int("tensor_parallel_size") == 2


@pytest.mark.parametrize(
    "launcher",
    [
        ["/usr/bin/env", "bash", "-c"],  # as in Dockerfiles' SHELL ["/usr/bin/env", "bash", "-c"]
        ["env", "HF_HOME=/cache", "-u", "X", "sh", "-c"],
        ["exec", "/bin/sh", "-lc"],
        ["bash", "-xc"],
    ],
)
def test_launchers_before_the_shell(launcher: list[str]) -> None:
    engine = _engine(
        image="vllm/vllm-openai:v0.8.5", command=[*launcher, "vllm serve m --max-model-len 512"]
    )
    assert engine is not None and engine.get_int("max_model_len") == 512


def test_a_script_that_mentions_vllm_but_cannot_be_read_is_not_evaluated() -> None:
    from gpustrata.core.unknown import UnknownInput

    with pytest.raises(UnknownInput, match="names vllm as a command"):
        _engine(image="ubuntu:22.04", command=["sh", "-c", 'eval "$LAUNCH" # vllm serve'])


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # A GKE multi-node sample: the head runs Ray in the background, then the server.
        (
            "ray start --head --port=6379 --disable-usage-stats &\n"
            "python3 -m vllm.entrypoints.openai.api_server --model m --tensor-parallel-size 4",
            "ray start --head",
        ),
        # A node that joins a cluster before serving.
        ("/usr/local/bin/ray start --address=$HEAD:6379; vllm serve m", "ray start"),
        # Ray started after the server (never reached while it runs) or not at all.
        ("vllm serve m; ray start --head", None),
        ("echo ray start; vllm serve m", None),
    ],
)
def test_ray_start_before_the_server_is_read(script: str, expected: str | None) -> None:
    """V001 reads whether the engine's own script starts Ray before the vLLM server: only
    then may an engine larger than the container's GPUs take the Ray cluster's."""
    engine = _engine(image="vllm/vllm-openai:v0.10.2", command=["/bin/bash", "-c", script])
    assert engine is not None
    assert engine.ray_start == expected


def test_ray_fallback_release_is_catalogued_with_its_sources() -> None:
    """The last release that picks the Ray executor itself and the first that refuses,
    each cited in vllm-releases.yaml (read in the releases' sdists)."""
    releases = load_vllm_releases()
    assert releases.ray_fallback_until == "0.11.1"
    assert releases.ray_fallback_source == "vllm@v0.11.1:vllm/config/parallel.py"
    assert releases.ray_fallback_last_source == "vllm@v0.11.0:vllm/config/parallel.py"
    sources = dict(releases.facts())
    assert sources["engines ray_fallback_until"] == releases.ray_fallback_source


def test_ray_start_without_the_catalogue_fact_is_not_evaluated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A release catalogue that lacks engines.ray_fallback_until says nothing of which
    releases take the Ray cluster's GPUs: V001 neither reports nor guesses."""
    import dataclasses

    from gpustrata_policies import evaluate
    from gpustrata_policies.rules.v001_parallelism_matches_gpus.rule import RULE
    from gpustrata_policies.view import catalogs

    bare = dataclasses.replace(load_vllm_releases(), ray_fallback_until=None)
    monkeypatch.setattr(catalogs, "vllm_releases", lambda: bare)
    script = "ray start --head & vllm serve m --tensor-parallel-size 4"
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "vllm/vllm-openai:v0.29.0",
                    "command": ["/bin/bash", "-c", script],
                    "resources": {"limits": {"nvidia.com/gpu": 2}},
                }
            ]
        },
    }
    report = evaluate([obj], rules=[RULE])
    assert report.findings == []
    (record,) = [n for n in report.not_evaluated if n.rule == "V001"]
    assert "catalogue does not say" in record.reason
