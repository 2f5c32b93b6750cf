"""Property: any stack file is a plan or one-line errors naming the config path; never a crash.

The reference stacks are mutated (wrong types, missing, unknown and duplicated keys,
extreme numbers, unicode, empty lists, nulls, deep nesting, text-level damage) and
fed through what ``gpustrata plan`` runs:

* ``spec-structural`` (1,000 cases) / ``spec-textual`` (900): ``read_stack_file``
  (YAML, pydantic, cross-references), ``plan_spec`` (planner), every pure renderer
  the components call, and all rules over the rendered objects. That is all of
  ``plan`` except Pulumi's registration, at ~35 ms per case.
* ``spec-cli`` (100): ``gpustrata plan`` itself (``cli.main``: the real program under
  Pulumi's mocks, then the rules; ~320 ms per case), asserting the exit code and that
  stderr holds only ``gpustrata:`` lines. Registration adds no input handling of its
  own (the program validates first), so fewer cases suffice there.

2,000 cases per run, derandomized (profile ``ci`` in ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from _fuzz import damage, junk, mutated, record
from _stacks import ROOT, STACKS, stack_doc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.planning.build import plan_spec
from gpustrata.render.from_plan import pool_object, pool_tolerations, workload_objects
from gpustrata.render.nodes import nodeadm_user_data
from gpustrata.render.operators import (
    device_plugin_sharing_config,
    gpu_operator_values,
    kuberay_values,
)
from gpustrata.spec.loader import read_stack_file
from gpustrata_policies.evaluate import evaluate

pytestmark = pytest.mark.slow  # minutes: see CONTRIBUTING.md, fast feedback

REFERENCE = {env: stack_doc(env) for env in STACKS}
MAX_LINE = 600  # after the file name; user text in a message is cut to 60 characters

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-spec")


def _write(workdir: Path, env: str, text: str) -> Path:
    path = workdir / f"Pulumi.{env}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _stack_text(doc: Any) -> str:
    return yaml.safe_dump(
        {"config": {"aws:region": "us-west-2", "gpustrata:stack": doc}},
        allow_unicode=True,
        sort_keys=False,
        width=4096,
    )


def assert_error_lines(text: str, file: Path, *, config_path: bool) -> None:
    """Every line: ``file[:line]: [gpustrata:stack...: ]message``, short, no traceback."""
    lines = text.splitlines()
    assert lines, "an error without a message"
    for line in lines:
        assert line.startswith(str(file)), f"does not name the file: {line!r}"
        rest = re.sub(r"^:\d+", "", line[len(str(file)) :])
        assert "Traceback" not in line and len(rest) <= MAX_LINE, line
        assert rest.startswith(": ") and rest[2:].strip(), line
        if config_path:
            assert "gpustrata:stack" in rest, f"does not name the config path: {line!r}"


def plan_path(path: Path, *, config_path: bool) -> str:
    """What `plan` does without Pulumi; returns "plan" or "error" (asserting its form)."""
    try:
        spec, _ = read_stack_file(path)
        plan = plan_spec(spec, str(path))
    except StackError as exc:
        assert_error_lines(exc.render(), path, config_path=config_path)
        return "error"
    # The renderers the components call (InferenceStack, GpuNodePool, GpuOperator, KubeRay).
    pools = [pool_object(p) for p in plan.pools.values()]
    for pool in pools:
        nodeadm_user_data(
            pool=pool["metadata"]["name"],
            instance_type=pool["spec"]["instanceType"],
            kubelet=pool["spec"]["kubelet"],
        )
    objects = pools + workload_objects(plan)
    tolerations = [t for p in plan.pools.values() for t in pool_tolerations(p)]
    gpu_operator_values(plan.spec.gpu_operator, tolerations)
    device_plugin_sharing_config(plan.spec.gpu_operator)
    kuberay_values()
    yaml.safe_dump_all(objects)  # `gpustrata render`
    report = evaluate(objects, environment=plan.spec.environment)
    crashed = [f for f in report.findings if f.message.startswith("internal error")]
    assert not crashed, crashed
    return "plan"


@settings(max_examples=1000, deadline=None, suppress_health_check=_SUPPRESS)
@given(
    env=st.sampled_from(STACKS),
    data=st.data(),
)
def test_structural_mutations_plan_or_name_the_path(workdir: Path, env: str, data: Any) -> None:
    doc = data.draw(mutated(REFERENCE[env], junk()), label="stack")
    path = _write(workdir, env, _stack_text(doc))
    with record("spec-structural"):
        plan_path(path, config_path=True)


@st.composite
def damaged_text(draw: st.DrawFn) -> tuple[str, str]:
    """A reference stack file with a few characters inserted, deleted or replaced."""
    env = draw(st.sampled_from(STACKS))
    text = (ROOT / "stacks" / f"Pulumi.{env}.yaml").read_text(encoding="utf-8")
    return env, damage(draw, text)


@settings(max_examples=900, deadline=None, suppress_health_check=_SUPPRESS)
@given(case=damaged_text())
def test_damaged_files_plan_or_name_the_file(workdir: Path, case: tuple[str, str]) -> None:
    env, text = case
    path = workdir / f"Pulumi.{env}.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    with record("spec-textual"):
        plan_path(path, config_path=False)


@settings(max_examples=100, deadline=None, suppress_health_check=_SUPPRESS)
@given(env=st.sampled_from(STACKS), data=st.data())
def test_plan_command_exit_codes(workdir: Path, env: str, data: Any) -> None:
    doc = data.draw(mutated(REFERENCE[env], junk(), max_steps=2), label="stack")
    path = _write(workdir, env, _stack_text(doc))
    out, err = io.StringIO(), io.StringIO()
    with record("spec-cli"):
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            argv = ["plan", "--file", str(path), "--project-dir", str(ROOT), "--format", "json"]
            code = main(argv)
        assert code in (0, 1, 2), code
        if code == 2:
            assert out.getvalue() == ""
            text = err.getvalue()
            assert text.startswith("gpustrata: "), text
            assert_error_lines(text.removeprefix("gpustrata: "), path, config_path=True)
        else:
            assert "Traceback" not in err.getvalue()
            assert out.getvalue().lstrip().startswith("{")
