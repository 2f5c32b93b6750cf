"""`gpustrata plan`: run the program under mocks, check what it registered, report by layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpustrata.catalog.model_sources import using_model_sources
from gpustrata.core.terminal import printable
from gpustrata.planning.plan_types import StackPlan
from gpustrata.reports.serving import serving_rows, serving_text
from gpustrata.runtime.mockrun import Registered, run_program, stack_config
from gpustrata_policies.rehearsal import Rehearsal, rehearse

LAYERS = ("nodes", "gpu-software", "ray", "vllm", "routing", "other")
_LAYER_OF_COMPONENT = {
    "gpustrata:index:EksCluster": "nodes",
    "gpustrata:index:GpuNodePool": "nodes",
    "gpustrata:index:Karpenter": "nodes",
    "gpustrata:index:KarpenterNodePool": "nodes",
    "gpustrata:index:GpuOperator": "gpu-software",
    "gpustrata:index:DraDriver": "gpu-software",
    "gpustrata:index:KubeRayOperator": "ray",
    "gpustrata:index:RayLlmService": "ray",
    "gpustrata:index:VllmDeployment": "vllm",
    "gpustrata:index:InferenceGateway": "routing",
    "gpustrata:index:InferenceRoute": "routing",
    # Registered by the stack itself (also when the gateway is not installed by it).
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": "routing",
}
_LAYER_TITLES = {
    "nodes": "Nodes (Kubernetes decides which node and how many whole GPUs)",
    "gpu-software": "GPU software (driver, toolkit, device plugin, DCGM)",
    "ray": "Ray (KubeRay: which worker runs which engine, placement groups)",
    "vllm": "vLLM (plain Deployments: engine flags, probes, autoscaling)",
    "routing": "Routing (Gateway API Inference Extension: gateway, InferencePools, pickers)",
    "other": "Other",
}


@dataclass
class PlanReport:
    """What `plan` shows: resources by layer, derived values, rule findings."""

    stack: str
    file: str
    plan: StackPlan
    resources: list[Registered]
    findings: list[dict[str, Any]] = field(default_factory=list)
    not_evaluated: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = 0
    environment: str = ""
    """The environment the rules were enforced for."""
    environment_why: str = ""
    """Why that environment (see :func:`rules_environment`)."""
    warnings: list[str] = field(default_factory=list)
    """Advisory notes on the stack file (plaintext config named like a credential)."""
    rehearsal: Rehearsal | None = None
    """The deploy rehearsal of the registered resources (what `up` would meet)."""
    _index: dict[str, Registered] = field(default_factory=dict, repr=False)

    def layer_of(self, resource: Registered) -> str:
        """The layer a resource belongs to: its own or its nearest gpustrata ancestor's."""
        by_name = self._by_name()
        current: Registered | None = resource
        seen: set[int] = set()
        # Logical names are unique per type only: a component may share the Stack's name
        # (stack "inference-gateway", component "gpustrata-inference-gateway"), so the walk
        # up by name must stop at a resource it has seen.
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            if current.type in _LAYER_OF_COMPONENT:
                return _LAYER_OF_COMPONENT[current.type]
            current = by_name.get(current.parent) if current.parent else None
        return "other"

    def _by_name(self) -> dict[str, Registered]:
        if len(self._index) != len(self.resources):
            self._index = {r.name: r for r in self.resources}
        return self._index

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: {stack, resources, derived, findings, not_evaluated, environment}
        and ``warnings`` when there are any."""
        data: dict[str, Any] = {
            "stack": self.stack,
            "file": self.file,
            "resources": [
                {**r.as_dict(), "layer": self.layer_of(r)}
                for r in self.resources
                if r.type != "pulumi:pulumi:Stack"
            ],
            "derived": [d.as_dict() for d in self.plan.derived],
            "serving": [vars(r) for r in serving_rows(self.plan, self.resources)],
            "findings": self.findings,
            "not_evaluated": self.not_evaluated,
            "environment": {"enforced": self.environment, "why": self.environment_why},
        }
        if self.warnings:  # only when there are any: the reference stacks' JSON is unchanged
            data["warnings"] = self.warnings
        if self.rehearsal is not None:
            data["rehearsal"] = self.rehearsal.as_dict()
        return data

    def text(self, verbose: bool = False) -> str:
        """The report for people: the models side by side, the rehearsal and the findings;
        *verbose* adds every resource by layer, pool costs, the serving layer and every
        derived value with its working (what ``plan --verbose`` prints)."""
        lines = [f"Stack {self.stack} ({self.file}): {len(self.resources) - 1} resources"]
        if self.environment:
            lines.append(f"Rules enforced for {self.environment}: {self.environment_why}")
        grouped: dict[str, list[Registered]] = {layer: [] for layer in LAYERS}
        for r in self.resources:
            if r.type != "pulumi:pulumi:Stack" and r.type != "gpustrata:index:InferenceStack":
                grouped[self.layer_of(r)].append(r)
        if verbose:
            for layer in LAYERS:
                if not grouped[layer]:
                    continue
                lines += ["", _LAYER_TITLES[layer]]
                lines += [f"  {r.type:<48} {r.name}" for r in grouped[layer]]
        else:
            counts = ", ".join(
                f"{_LAYER_TITLES[layer].split(' (')[0]} {len(grouped[layer])}"
                for layer in LAYERS
                if grouped[layer]
            )
            lines.append(f"Resources by layer: {counts} (--verbose lists them)")
        lines += ["", "Models, three layers side by side"]
        lines += _model_table(self.plan)
        if verbose:
            priced = [p for p in self.plan.pools.values() if p.cost_per_hour is not None]
            if priced:
                lines += ["", "Pool cost per hour (catalogue price x nodes)"]
                lines += [
                    f"  {p.name}: {p.cost_per_hour.explanation}" for p in priced if p.cost_per_hour
                ]
            serving = serving_text(self.plan, self.resources)
            if serving:
                lines += ["", "Serving layer: each value as registered, next to the plan"]
                lines += serving
            lines += ["", "Derived values (value <- working [source])"]
            for d in self.plan.derived:
                lines.append(f"  {d.key} = {_short(d.value)} <- {d.why} [{d.source}]")
        if self.rehearsal is not None:
            lines += ["", *self.rehearsal.text()]
        lines += ["", *self.finding_lines()]
        if not verbose:
            lines.append(
                f"Derived values: {len(self.plan.derived)}, each with its working "
                "(--verbose shows them, with every resource and the serving layer)"
            )
        return "\n".join(lines)

    def finding_lines(self) -> list[str]:
        """The findings with their fix and stack keys, what was not evaluated and the
        warnings: all that ``plan --quiet`` prints."""
        lines = [f"Findings: {len(self.findings)}"]
        for f in self.findings:
            lines.append(
                f"  {f['rule']} {f['enforcement']:<9} {printable(f['resource'])}: "
                f"{printable(f['message'])}"
            )
            lines.append(f"      fix: {f['fix']}")
            if "at" in f:
                lines.append(f"      in {f['at']}: {', '.join(f['stack_keys'])}")
        if self.not_evaluated:
            lines.append(f"Not evaluated: {len(self.not_evaluated)}")
            for n in self.not_evaluated:
                lines.append(f"  {n['rule']} {printable(n['resource'])}: {printable(n['reason'])}")
        if self.warnings:
            lines += ["", f"Warnings (advisory): {len(self.warnings)}"]
            lines += [f"  {printable(w)}" for w in self.warnings]
        return lines

    def quiet_text(self) -> str:
        """``plan --quiet``: nothing when there is no finding, blocker or warning; else the
        rehearsal's first blocker and :meth:`finding_lines`."""
        blocked = self.rehearsal is not None and self.rehearsal.first_blocker is not None
        if not (self.findings or self.warnings or blocked):
            return ""
        lines = self.rehearsal.text()[:3] if blocked and self.rehearsal else []
        return "\n".join([*lines, *self.finding_lines()])


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _model_table(plan: StackPlan) -> list[str]:
    header = (
        "model",
        "pool / GPUs per node",
        "Ray workers",
        "vLLM engine",
        "startup window",
        "predicted per replica",
    )
    rows = [header]
    for mp in plan.models.values():
        pool = mp.pool
        engine = mp.spec.engine
        ray = "-"
        if mp.ray is not None:
            ray = (
                f"{mp.ray.min_workers}..{mp.ray.max_workers} x {mp.ray.gpus_per_worker} GPU, "
                f"{mp.ray.placement_strategy}"
            )
        vllm = (
            f"TP{engine.tensor_parallel_size} x PP{engine.pipeline_parallel_size} = "
            f"{mp.gpus_per_replica} GPU, {mp.min_replicas}..{mp.max_replicas} replicas, "
            f"max_model_len {engine.max_model_len or 'model max'}"
        )
        rows.append(
            (
                mp.name,
                f"{pool.name}: {pool.instance.name} {pool.instance.gpu_count} x {pool.gpu.id}",
                ray,
                vllm,
                f"{mp.probes.startup_window_s} s",
                mp.serving.summary() if mp.serving else "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]


def rules_environment(declared: str, stack: str) -> str:
    """The environment rules are enforced for: ``GPUSTRATA_ENVIRONMENT`` when CI sets it,
    else the stack file's ``environment`` but never more relaxed than a stack named dev,
    staging or prod (a stack named like none follows its file, with a warning). The file is
    part of the change under review: a ``Pulumi.prod.yaml`` that declares
    ``environment: dev`` is checked as prod."""
    return environment_and_why(declared, stack)[0]


def environment_and_why(declared: str, stack: str) -> tuple[str, str]:
    """:func:`rules_environment` with the reason, for the report."""
    import os

    from gpustrata.core.environments import ENVIRONMENTS, enforced_environment

    override = os.environ.get("GPUSTRATA_ENVIRONMENT")
    env = enforced_environment([declared], stack, override)
    if override in ENVIRONMENTS:
        why = f"GPUSTRATA_ENVIRONMENT={override} (set by CI)"
    elif stack not in ENVIRONMENTS:
        why = (
            f"stack '{stack}' is named like no environment, so the stack file's environment "
            f"{declared} applies; CI pins it with GPUSTRATA_ENVIRONMENT"
        )
    elif env == declared == stack:
        why = "the stack file's environment and the stack's name agree"
    elif env == stack:
        why = f"the stack's name; the file's environment: {declared} cannot relax it"
    else:
        why = f"the stack file's environment, stricter than the stack's name {stack}"
    return env, why


# The stack keys (under a model or a pool entry) that a rule's finding asks to change.
_MODEL_KEYS: dict[str, tuple[str, ...]] = {
    "K005": ("cpu", "memory", "pool"),
    "K007": ("shm_size",),
    "K013": ("image",),
    "K015": ("weights",),
    "K020": ("memory", "engine.extra_args", "pool"),
    "O007": ("engine.dtype", "engine.quantization"),
    "V001": ("engine.tensor_parallel_size", "engine.pipeline_parallel_size"),
    "V002": ("engine.tensor_parallel_size", "engine.pipeline_parallel_size"),
    "V003": ("engine.gpu_memory_utilization", "engine.tensor_parallel_size"),
    "V004": ("engine.max_model_len", "engine.gpu_memory_utilization"),
    "V005": ("engine.max_num_batched_tokens",),
    "V006": ("engine.block_size",),
    "V007": ("engine.gpu_memory_utilization",),
    "V008": ("engine.enforce_eager",),
    "V009": ("startup_init_s",),
    # The longest step: the largest prefill chunk, or a whole prompt without chunking.
    "V010": ("engine.max_num_batched_tokens", "engine.enable_chunked_prefill"),
    # The readiness probe is rendered from the plan: no key sets it, the entry is named.
    "V011": (),
    "V012": ("engine.max_num_seqs",),
    "V013": ("engine.extra_args", "image"),
}
_POOL_KEYS: dict[str, tuple[str, ...]] = {
    "K003": ("taints",),
    "K006": ("kubelet",),
}


def stack_location(rule: str, resource: str, plan: StackPlan) -> tuple[str, list[str]] | None:
    """The stack entry a finding on *resource* comes from (``gpustrata:stack.models[1]``)
    and the keys under it that *rule* asks to change; None when no model or pool of the
    stack made the resource. A resource belongs to the model or pool whose name is its own
    name or the start of it (``llama-8b-pdb``), the longest such name."""
    name = resource.rsplit("/", 1)[-1]

    def owner(names: list[str]) -> int | None:
        hits = [i for i, n in enumerate(names) if name == n or name.startswith(f"{n}-")]
        return max(hits, key=lambda i: len(names[i]), default=None)

    models = [m.name for m in plan.spec.models]
    pools = [p.name for p in plan.spec.node_pools]
    at_model, at_pool = owner(models), owner(pools)
    if at_model is not None and (at_pool is None or len(models[at_model]) >= len(pools[at_pool])):
        return f"gpustrata:stack.models[{at_model}]", list(_MODEL_KEYS.get(rule, ()))
    if at_pool is not None:
        return f"gpustrata:stack.node_pools[{at_pool}]", list(_POOL_KEYS.get(rule, ()))
    return None


def plan_report(
    file: Path,
    stack: str,
    plan: StackPlan,
    document: dict[str, Any],
    project_dir: Path,
    label: str | None = None,
) -> PlanReport:
    """Run the program for ``document`` under mocks and check every registered resource.

    ``plan`` is the already validated plan of ``document``, shown beside the resources.
    ``file`` is read for its secret config; ``label`` names it in the report (default:
    ``file``), e.g. ``origin/main:stacks/Pulumi.prod.yaml`` for a base read from git.
    """
    import os

    from gpustrata.core.environments import name_mismatch
    from gpustrata.planning.build import rule_model_sources
    from gpustrata.spec.loader import line_in_file, plaintext_secret_warnings
    from gpustrata.spec.project import read_project
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.inputs.pulumi import objects_from_pulumi

    project = read_project(project_dir)
    program = project.program()
    # The program gets the stack file's config as Pulumi passes it (secrets as stand-ins).
    extra, secret_keys = stack_config(file, project.name)[1:]
    with using_model_sources(plan.sources):  # the program plans and the rules look there
        resources = run_program(
            document,
            stack=stack,
            project=project.name,
            program=program if program.exists() else None,
            extra_config=extra,
            secret_keys=secret_keys,
        )
    report = PlanReport(stack=stack, file=label or str(file), plan=plan, resources=resources)
    report.warnings = plaintext_secret_warnings(file)
    objects = objects_from_pulumi((r.type, r.name, r.inputs) for r in resources)
    report.environment, report.environment_why = environment_and_why(plan.spec.environment, stack)
    mismatch = name_mismatch(plan.spec.environment, stack, os.environ.get("GPUSTRATA_ENVIRONMENT"))
    if mismatch:
        at = line_in_file(str(file), "gpustrata:stack.environment")
        report.warnings.insert(0, f"{file}{f':{at}' if at else ''}: {mismatch}")
    with using_model_sources(rule_model_sources(plan.spec, project_dir, plan.sources)):
        result = evaluate(objects, environment=report.environment)
    report.findings = [f.to_json() for f in result.findings]
    for finding in report.findings:
        where = stack_location(finding["rule"], finding["resource"], plan)
        if where is not None:
            keys = [f"{where[0]}.{k}" for k in where[1]] or [where[0]]
            at = line_in_file(str(file), keys[0])  # the entry's line when the key is unset
            finding["stack_keys"] = keys
            finding["at"] = f"{label or file}:{at}" if at else str(label or file)
    report.not_evaluated = [n.to_json() for n in result.not_evaluated]
    report.exit_code = result.exit_code
    report.rehearsal = rehearse(resources)
    if report.rehearsal.blockers:  # `up` would hang, fail or serve nothing
        report.exit_code = max(report.exit_code, 1)
    return report
