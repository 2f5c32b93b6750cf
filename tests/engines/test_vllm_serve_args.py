"""The vLLM settings gpustrata renders for the reference stacks, through vLLM 0.33 itself.

For every model of ``stacks/Pulumi.{dev,staging,prod}.yaml`` the rendered workload is
taken apart the way it runs:

* a ``vllm serve MODEL --flag ...`` container command is parsed by vLLM's own ``vllm
  serve`` parser (``ServeSubcommand.subparser_init`` -> ``make_arg_parser`` in
  ``vllm/entrypoints/cli/serve.py``), checked by ``validate_parsed_serve_args`` and turned
  into engine args by ``AsyncEngineArgs.from_cli_args``;
* a RayService's ``serveConfigV2`` ``engine_kwargs`` are what Ray Serve LLM hands to
  ``AsyncEngineArgs(**engine_kwargs)``; the same kwargs are also rendered as flags
  (``render.workloads.engine_flags``) and parsed like a command line.

Each result must build a full engine config with ``EngineArgs.create_engine_config`` on a
local ``config.json`` written from the catalogue (``load_format="dummy"``, no tokenizer,
no network). The model path is the only thing replaced; everything else is the rendering.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from _stacks import STACKS, stack_path
from conftest import engine_module

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.planning.build import plan_spec
from gpustrata.render.from_plan import workload_objects
from gpustrata.render.workloads import engine_flags
from gpustrata.spec.loader import load_stack_file

pytestmark = [
    pytest.mark.engines,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def _stack_models() -> list[tuple[str, str]]:
    out = []
    for env in STACKS:
        spec = load_stack_file(stack_path(env))
        out += [(env, m.name) for m in spec.models]
    return out


@pytest.fixture(scope="module")
def serve() -> Any:
    """vLLM's ``vllm serve`` parser and subcommand."""
    engine_module("vllm")
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    subcommand = ServeSubcommand()
    subcommand.subparser_init(parser.add_subparsers(dest="subparser"))
    return parser, subcommand


def _rendered(env: str, name: str) -> tuple[str, dict[str, Any]]:
    """(catalogue model id, the rendered object of that stack model)."""
    path = stack_path(env)
    plan = plan_spec(load_stack_file(path), str(path))
    model = plan.models[name]
    kinds = ("RayService",) if model.spec.runtime == "rayservice" else ("Deployment",)
    for obj in workload_objects(plan):
        if obj["kind"] in kinds and obj["metadata"]["name"] == name:
            return model.spec.model, obj
    raise AssertionError(f"{env}: no {kinds[0]} rendered for model {name}")


def _model_dir(model_id: str, root: Path) -> Path:
    engine_module("vllm")
    import _vllm_kv

    arch = load_model_catalog().get(model_id)
    assert arch is not None, (
        f"{model_id} is not in the model catalogue, so no config.json can be written for "
        "the vLLM check (add it to components/gpustrata/catalog/data/models.yaml)"
    )
    return _vllm_kv.write_model_dir(root, arch)


def _parse_serve(serve: Any, argv: list[str], local: Path) -> Any:
    """``vllm serve ...`` -> AsyncEngineArgs, as vLLM's CLI builds them."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    parser, subcommand = serve
    assert argv[:2] == ["vllm", "serve"], argv
    args = parser.parse_args(argv[1:])
    subcommand.validate(args)
    assert args.model_tag is not None
    args.model = str(local)  # the one substitution: a local config.json for the model
    args.model_tag = None
    engine = AsyncEngineArgs.from_cli_args(args)
    engine.load_format = "dummy"
    engine.skip_tokenizer_init = True
    return engine


def _build(engine: Any) -> Any:
    config = engine.create_engine_config()
    assert config.model_config.max_model_len == engine.max_model_len
    return config


@pytest.mark.parametrize(("env", "name"), _stack_models(), ids=lambda v: str(v))
def test_rendered_engine_settings_build_a_vllm_engine_config(
    env: str, name: str, serve: Any, tmp_path: Path
) -> None:
    """The rendered command line / engine_kwargs parse and configure vLLM 0.33."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    model_id, obj = _rendered(env, name)
    local = _model_dir(model_id, tmp_path)
    if obj["kind"] == "Deployment":
        container = obj["spec"]["template"]["spec"]["containers"][0]
        argv = [*container.get("command", []), *container.get("args", [])]
        engine = _parse_serve(serve, argv, local)
        config = _build(engine)
        flags = argv[3:]
        assert config.parallel_config.tensor_parallel_size == _flag(flags, "tensor-parallel-size")
        return
    serve_config = yaml.safe_load(obj["spec"]["serveConfigV2"])
    llm_configs = [
        cfg for app in serve_config["applications"] for cfg in app["args"]["llm_configs"]
    ]
    assert llm_configs, f"{env}/{name}: serveConfigV2 has no llm_configs"
    for cfg in llm_configs:
        kwargs = dict(cfg.get("engine_kwargs") or {})
        # Ray Serve LLM: AsyncEngineArgs(model=<model_source>, **engine_kwargs)
        engine = AsyncEngineArgs(
            model=str(local), load_format="dummy", skip_tokenizer_init=True, **kwargs
        )
        config = _build(engine)
        assert config.parallel_config.tensor_parallel_size == kwargs.get("tensor_parallel_size", 1)
        # the same settings as a command line must mean the same to vLLM's parser
        argv = ["vllm", "serve", model_id, *engine_flags(kwargs)]
        from_flags = _parse_serve(serve, argv, local)
        for key, value in kwargs.items():
            assert getattr(from_flags, key) == value, (key, getattr(from_flags, key), value)


def _flag(flags: list[str], name: str) -> int:
    """An integer flag's value (vLLM's default 1 when absent)."""
    key = f"--{name}"
    return int(flags[flags.index(key) + 1]) if key in flags else 1
