"""Multi-node engines: the planner's layout (TP = GPUs per node, PP = nodes), the
LeaderWorkerSet it renders (validated against the pinned LWS CRD), the LWS controller the
stack installs before it, and what the rules say about the result.

The LeaderWorkerSet CRD is kubernetes-sigs/lws@v0.10.0's (tests/schemas/lws-v0.10.0, see
SOURCE.md there), the release charts.yaml pins; unknown fields are rejected, as the API
server would prune them silently.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from _schemas import LWS_CRDS, crd_validators, schema_errors
from _stacks import ROOT, closure

from gpustrata.catalog.aws import efa_facts
from gpustrata.catalog.charts import chart_release
from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.core.errors import StackError
from gpustrata.planning.build import build_plan
from gpustrata.render.from_plan import (
    efa_device_plugin_chart,
    lws_chart,
    operator_object,
    pool_object,
    system_chart_objects,
    vllm_deployment_args,
    workload_objects,
)
from gpustrata.render.workloads import vllm_deployment_objects
from gpustrata.runtime.mockrun import run_program
from gpustrata_policies import evaluate

EXAMPLE = ROOT / "stacks" / "examples" / "Pulumi.multinode.yaml"
MODEL = "llama-405b"


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["config"][
        "gpustrata:stack"
    ]
    return doc


def _existing() -> dict[str, Any]:
    """The example on an existing cluster: its p5.48xlarge node groups were created with EFA
    (as the EKS guide does), so the engines ask for it."""
    doc = _doc()
    doc["cluster"]["mode"] = "existing"
    doc["cluster"]["kubeconfig"] = "~/.kube/config"
    return doc


_LWS = crd_validators(LWS_CRDS)
assert list(_LWS) == [("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")]  # served: v1 only
VALIDATOR = _LWS[("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")]


def _errors(obj: dict[str, Any]) -> list[str]:
    return schema_errors(VALIDATOR, obj)


def _objects(doc: dict[str, Any]) -> list[dict[str, Any]]:
    plan = build_plan(doc)
    return vllm_deployment_objects(vllm_deployment_args(plan.models[MODEL], plan.spec))


def _lws(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (lws,) = [
        o for o in objects if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == MODEL
    ]
    return lws


def test_the_pinned_crd_is_the_catalogued_release() -> None:
    release = chart_release("lws", "0.10.0")
    assert release is not None
    assert LWS_CRDS.name == f"lws-v{release.version}"
    assert "leaderworkerset.x-k8s.io/LeaderWorkerSet" in release.crds
    assert release.pods[0].values_node_selector == "nodeSelector"


def test_planner_spans_nodes_tp_per_node_pp_across() -> None:
    plan = build_plan(_doc())
    mp = plan.models[MODEL]
    assert mp.multi_node is not None
    # 405B bf16 (~756 GiB of weights) does not fit 8 x 80 GB; two p5.48xlarge do.
    assert (mp.multi_node.tensor_parallel_size, mp.multi_node.nodes) == (8, 2)
    assert mp.multi_node.chosen_by == "planner"
    assert (mp.spec.engine.tensor_parallel_size, mp.spec.engine.pipeline_parallel_size) == (8, 2)
    assert mp.gpus_per_replica == 16 and mp.gpus_per_pod == 8
    assert mp.capacity is not None and mp.capacity.fits
    why = {d.key: d.why for d in plan.derived}
    assert "fewest nodes (PP 2..4)" in why[f"models.{MODEL}.multiNode.nodes"]
    # The node group this stack creates attaches every EFA interface: each Pod asks for them.
    p5 = load_hardware_catalog().instances["p5.48xlarge"]
    assert mp.multi_node.efa_interfaces == p5.efa_interfaces == 32
    assert "launch template" in why[f"models.{MODEL}.multiNode.efaInterfaces"]
    existing = build_plan(_existing()).models[MODEL].multi_node
    assert existing is not None and existing.efa_interfaces == 32
    # A Karpenter NodePool's EC2NodeClass gets no EFA from gpustrata: none is asked for.
    doc = _doc()
    doc["node_pools"][0].update(provisioner="karpenter", min_size=0)
    karpenter = build_plan(doc)
    kmp = karpenter.models[MODEL].multi_node
    assert kmp is not None and kmp.efa_interfaces == 0
    kwhy = {d.key: d.why for d in karpenter.derived}
    assert "Karpenter NodePools" in kwhy[f"models.{MODEL}.multiNode.efaInterfaces"]


def test_planner_spans_nodes_unasked_only_when_one_node_cannot_start_the_engine() -> None:
    # The example's deepseek-r1 names no multi_node: 671B in FP8 spans two nodes by itself.
    r1 = build_plan(_doc()).models["deepseek-r1"]
    assert r1.multi_node is not None and (r1.multi_node.nodes, r1.gpus_per_pod) == (2, 8)
    assert r1.multi_node.chosen_by == "planner"
    doc = _doc()
    del doc["models"][0]["multi_node"]
    mp = build_plan(doc).models[MODEL]
    assert mp.multi_node is not None and mp.multi_node.nodes == 2
    assert mp.spec.multi_node is not None  # the resolved layout travels with the model
    # An 8B model fits one node: no multi-node, the stack's TP is kept.
    small = _doc()
    del small["models"][0]["multi_node"]
    small["models"][0]["model"] = "meta-llama/Llama-3.1-8B-Instruct"
    small["models"][0]["engine"]["max_model_len"] = 8192
    assert build_plan(small).models[MODEL].multi_node is None
    # A stack that sets TP itself keeps its single-node engine (V003 judges it).
    pinned = _doc()
    del pinned["models"][0]["multi_node"]
    pinned["models"][0]["engine"]["tensor_parallel_size"] = 8
    assert build_plan(pinned).models[MODEL].multi_node is None


def test_stated_nodes_are_kept() -> None:
    doc = _doc()
    del doc["models"][1]  # three nodes for llama-405b leave one for another engine
    doc["models"][0]["multi_node"]["nodes"] = 3
    mp = build_plan(doc).models[MODEL]
    assert mp.multi_node is not None
    assert (mp.multi_node.nodes, mp.multi_node.chosen_by) == (3, "spec")
    assert mp.gpus_per_replica == 24


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        (
            lambda m, d: m["engine"].update(tensor_parallel_size=4),
            "models[0].engine.tensor_parallel_size",
            ["tensor_parallel_size 4", "GPUs per node of the pool (8)"],
        ),
        (
            lambda m, d: (
                m["multi_node"].update(nodes=3) or d["node_pools"][0].update(min_size=1, max_size=2)
            ),
            "models[0].multi_node.nodes",
            ["3 nodes", "max_size is 2"],
        ),
        (
            lambda m, d: m.update(autoscaling={"kind": "hpa", "max_replicas": 2}),
            "models[0].autoscaling.kind",
            ["'hpa'", "kind none"],
        ),
        (
            lambda m, d: m["engine"].update(pipeline_parallel_size=1),
            "models[0].engine.pipeline_parallel_size",
            ["pipeline_parallel_size 1", "at least 2"],
        ),
        (
            lambda m, d: d["node_pools"][0].update(gpu_allocation="dra"),
            "models[0].pool",
            ["DRA", "device-plugin pool"],
        ),
    ],
    ids=["tp-not-gpus-per-node", "pool-too-small", "autoscaler", "pp-1", "dra"],
)
def test_layouts_that_cannot_run_are_refused(change: Any, where: str, words: list[str]) -> None:
    doc = _doc()
    change(doc["models"][0], doc)
    with pytest.raises(StackError) as err:
        build_plan(doc)
    text = str(err.value)
    assert where in text and all(w in text for w in words), text


def test_the_engines_of_a_pool_fit_it_together() -> None:
    doc = _doc()
    doc["node_pools"][0]["max_size"] = 3  # llama-405b and deepseek-r1 take 2 nodes each
    doc["node_pools"][0]["min_size"] = 2
    with pytest.raises(StackError) as err:
        build_plan(doc)
    text = str(err.value)
    assert "node_pools[0].max_size" in text and "need 4 whole nodes" in text, text
    assert "llama-405b 2, deepseek-r1 2" in text


def test_multi_node_needs_the_deployment_runtime() -> None:
    doc = _doc()
    doc["models"][0]["runtime"] = "rayservice"
    with pytest.raises(StackError) as err:
        build_plan(doc)
    assert "multi_node needs runtime 'deployment'" in str(err.value)


def test_rendered_leader_worker_set_validates_and_splits_the_roles() -> None:
    objects = _objects(_existing())
    lws = _lws(objects)
    assert not _errors(lws), _errors(lws)
    tpl = lws["spec"]["leaderWorkerTemplate"]
    assert tpl["size"] == 2 and tpl["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"
    (leader,) = tpl["leaderTemplate"]["spec"]["containers"]
    (worker,) = tpl["workerTemplate"]["spec"]["containers"]
    script = leader["command"][2]
    assert "multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE)" in script
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in script
    assert "--distributed-executor-backend ray" in script
    assert "--ray_address=$(LWS_LEADER_ADDRESS)" in worker["command"][2]
    assert {"startupProbe", "livenessProbe", "readinessProbe"} <= set(leader)
    assert not {"startupProbe", "livenessProbe", "readinessProbe"} & set(worker)
    efa = efa_facts()
    for container, spec in ((leader, tpl["leaderTemplate"]), (worker, tpl["workerTemplate"])):
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert container["resources"]["limits"][efa.resource] == "32"
        assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        shm = [v for v in spec["spec"]["volumes"] if v["name"] == "dshm"]
        assert shm == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}]
    (service,) = [o for o in objects if o["kind"] == "Service"]
    assert service["spec"]["selector"]["role"] == "leader"
    assert tpl["leaderTemplate"]["metadata"]["labels"]["role"] == "leader"


def test_mp_executor_and_efa_off() -> None:
    doc = _existing()
    doc["models"][0]["multi_node"] = {"executor": "mp", "efa": "off"}
    lws = _lws(_objects(doc))
    assert not _errors(lws), _errors(lws)
    tpl = lws["spec"]["leaderWorkerTemplate"]
    (leader,) = tpl["leaderTemplate"]["spec"]["containers"]
    (worker,) = tpl["workerTemplate"]["spec"]["containers"]
    assert "--nnodes 2 --master-addr $(LWS_LEADER_ADDRESS) --node-rank 0" in leader["command"][2]
    assert "--node-rank $(LWS_WORKER_INDEX) --headless" in worker["command"][2]
    assert "--distributed-executor-backend mp" in worker["command"][2]
    for container in (leader, worker):
        assert efa_facts().resource not in container["resources"]["limits"]
        assert "securityContext" not in container
    # Each node runs world size 16 / --nnodes 2 = 8 workers on its 8 GPUs (V001).
    assert not evaluate(_rendered(doc)).findings


def test_schema_rejects_what_the_api_server_would() -> None:
    lws = _lws(_objects(_doc()))
    bad = copy.deepcopy(lws)
    bad["spec"]["leaderWorkerTemplate"]["size"] = "two"
    bad["spec"]["leaderWorkerTemplate"]["workers"] = 1  # not an LWS field
    problems = _errors(bad)
    assert any("size" in p for p in problems) and any("workers" in p for p in problems)


def test_stack_installs_the_controller_before_the_leader_worker_set(tmp_path: Path) -> None:
    resources = run_program(_doc(), stack="multinode", program=ROOT / "__main__.py")
    by_name = {r.name: r for r in resources}
    sets = {r.name: r for r in resources if r.type.endswith(":LeaderWorkerSet")}
    assert len(sets) == 2  # llama-405b and deepseek-r1
    (release,) = [
        r for r in resources if r.type == "kubernetes:helm.sh/v3:Release" and "lws" in r.name
    ]
    assert all(release.name in closure(by_name, name) for name in sets)
    lws = sets[f"gpustrata-{MODEL}-leaderworkerset"]
    chart, version, values = lws_chart(build_plan(_doc())) or ("", "", {})
    assert release.inputs["chart"] == chart == "oci://registry.k8s.io/lws/charts/lws"
    assert release.inputs["version"] == version == "0.10.0"
    assert "repositoryOpts" not in release.inputs
    # The controller runs on the untainted system pool, its image pinned (the chart's is `main`).
    assert values["image"]["manager"]["tag"] == "v0.10.0"
    assert release.inputs["values"]["nodeSelector"] == values["nodeSelector"]
    assert values["nodeSelector"]
    registered = {k: v for k, v in lws.inputs.items() if k != "metadata"}
    assert registered["spec"]["leaderWorkerTemplate"]["size"] == 2


def test_no_controller_without_a_multi_node_model() -> None:
    doc = _doc()
    del doc["models"][1]
    doc["models"][0]["model"] = "meta-llama/Llama-3.1-8B-Instruct"
    doc["models"][0]["engine"]["max_model_len"] = 8192
    del doc["models"][0]["multi_node"]
    assert lws_chart(build_plan(doc)) is None


def _rendered(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """What `gpustrata render` prints for the stack (pools, charts, operator, workloads)."""
    plan = build_plan(doc)
    operator = operator_object(plan)
    return [
        *(pool_object(p, plan.spec) for p in plan.pools.values()),
        *system_chart_objects(plan),
        *([operator] if operator else []),
        *workload_objects(plan),
    ]


def test_rendered_manifests_pass_the_rules() -> None:
    objects = _rendered(_doc())
    assert {"HelmRelease", "LeaderWorkerSet"} <= {o["kind"] for o in objects}
    report = evaluate(objects)
    assert not report.findings, [f.message for f in report.findings]
    # Without the chart that installs its CRD, the LeaderWorkerSet is K018's.
    alone = [o for o in objects if o["kind"] != "HelmRelease"]
    assert "K018" in {f.rule for f in evaluate(alone).findings}
    broken = copy.deepcopy(_lws(objects))
    tpl = broken["spec"]["leaderWorkerTemplate"]
    tpl["size"] = 3  # the engine's TP 8 x PP 2 no longer equals the group's 24 GPUs
    for side in ("leaderTemplate", "workerTemplate"):
        tpl[side]["spec"]["volumes"] = [
            v for v in tpl[side]["spec"]["volumes"] if v["name"] != "dshm"
        ]
        for c in tpl[side]["spec"]["containers"]:
            c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "dshm"]
    others = [o for o in objects if o["kind"] != "LeaderWorkerSet"]
    rules = {f.rule for f in evaluate([*others, broken]).findings}
    assert {"V001", "K007"} <= rules, rules


def test_efa_device_plugin_tolerates_the_pools_that_ask_for_efa() -> None:
    plan = build_plan(_existing())
    found = efa_device_plugin_chart(plan)
    assert found is not None
    chart, version, _, namespace, values = found
    release = chart_release(chart, version)
    assert release is not None and namespace == "kube-system"
    (pod,) = release.pods
    # Its DaemonSet tolerates only CriticalAddonsOnly by default: the GPU taint is added.
    assert [t["key"] for t in pod.tolerations] == ["CriticalAddonsOnly"]
    assert values["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    # Created node groups attach EFA too: the same plugin, the same tolerations.
    assert efa_device_plugin_chart(build_plan(_doc())) == found
    doc = _existing()
    doc["models"][0]["multi_node"]["efa"] = "off"
    doc["models"][1]["multi_node"] = {"efa": "off"}
    assert efa_device_plugin_chart(build_plan(doc)) is None


def test_efa_instance_types_agree_with_the_device_plugin_chart() -> None:
    """Two sources, one fact: the catalogued types with EFA interfaces (Karpenter's
    instance-type reference) are exactly the catalogued types in the device plugin chart's
    EFA instance list."""
    release = chart_release(efa_facts().device_plugin_chart, efa_facts().device_plugin_version)
    assert release is not None
    (term,) = release.pods[0].required_affinity
    listed = set(term["matchExpressions"][0]["values"])
    aws = {n: i for n, i in load_hardware_catalog().instances.items() if i.provider == "aws"}
    assert listed == {n for n, i in aws.items() if i.efa_interfaces}


def test_existing_cluster_gets_the_efa_plugin_in_kube_system_before_the_engines() -> None:
    resources = run_program(_existing(), stack="multinode", program=ROOT / "__main__.py")
    by_name = {r.name: r for r in resources}
    lws = by_name[f"gpustrata-{MODEL}-leaderworkerset"]
    releases = {
        r.inputs["chart"].rsplit("/", 1)[-1]: r
        for r in resources
        if r.type == "kubernetes:helm.sh/v3:Release"
    }
    plugin = releases["aws-efa-k8s-device-plugin"]
    assert plugin.inputs["namespace"] == "kube-system"
    assert plugin.inputs["repositoryOpts"]["repo"] == "https://aws.github.io/eks-charts"
    namespaces = {r.inputs["metadata"]["name"] for r in resources if r.type.endswith(":Namespace")}
    assert "kube-system" not in namespaces  # the cluster's own namespace is never created
    assert {plugin.name, releases["lws"].name} <= closure(by_name, lws.name)
    (leader,) = lws.inputs["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]
    assert leader["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"


def _docs_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "howto" / "serve-across-nodes.md").read_text(encoding="utf-8")
    # The section's table only (later sections have tables of their own).
    table = text.split("### Measured: 405B and 671B on p5.48xlarge", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in table.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in row] for row in rows[1:]]  # the header row first


def test_the_docs_numbers_are_the_planners() -> None:
    """docs/howto/serve-across-nodes.md's measured table, recomputed."""
    rows = _docs_rows()
    assert len(rows) == 5
    for model, _, mml, layout, weights, tokens, seqs, startup in rows:
        doc = _doc()
        del doc["models"][1]
        m = doc["models"][0]
        m["model"] = model.split(" ")[0]
        m["engine"]["max_model_len"] = int(mml.replace(",", ""))
        if not m["model"].startswith("meta-llama"):
            del m["engine"]["dtype"]  # the checkpoint's own (FP8 weights)
        mp = build_plan(doc).models[MODEL]
        assert mp.multi_node is not None and mp.capacity is not None
        tp, pp = mp.multi_node.tensor_parallel_size, mp.multi_node.nodes
        assert layout == f"TP {tp} x PP {pp} = {tp * pp} GPUs", model
        assert weights == f"{mp.capacity.weights.bytes_per_gpu / 2**30:.1f}", model
        assert tokens == f"{mp.capacity.kv.tokens:,}", model
        assert seqs == str(mp.capacity.max_concurrent_full_length_sequences), model
        assert startup == f"{round(mp.capacity.startup.total_s):,}", model


def test_created_node_group_attaches_efa_in_a_cluster_placement_group() -> None:
    """Create mode: the pool whose engines ask for EFA gets a launch template with one EFA
    interface per network card (card 0 at device index 0, the others at device index 1:
    EC2 user guide, efa-acc-inst-types / p5-efa), a cluster placement group, an EFA security
    group allowing all traffic to and from itself (efa-start), one subnet; the node group
    waits for all of it and the engines for the node group and the EFA device plugin."""
    resources = run_program(_doc(), stack="multinode", program=ROOT / "__main__.py")
    by_name = {r.name: r for r in resources}

    def of(typ: str) -> list[Any]:
        return [r for r in resources if r.type == typ]

    (template,) = [r for r in of("aws:ec2/launchTemplate:LaunchTemplate") if "gpu-h100" in r.name]
    interfaces = template.inputs["networkInterfaces"]
    p5 = load_hardware_catalog().instances["p5.48xlarge"]
    assert len(interfaces) == p5.efa_interfaces == 32
    assert [i["networkCardIndex"] for i in interfaces] == list(range(32))
    assert [i["deviceIndex"] for i in interfaces] == [0] + [1] * 31
    assert {i["interfaceType"] for i in interfaces} == {"efa"}
    assert all("subnetId" not in i for i in interfaces)  # EKS: the node group's subnets
    (sg,) = of("aws:ec2/securityGroup:SecurityGroup")
    assert sg.inputs["vpcId"] == "vpc-mock"
    sg_id = f"{sg.name}-id"
    for i in interfaces:  # EKS adds its cluster SG to no declared interface: kept here
        assert i["securityGroups"] == ["sg-mock-cluster", sg_id]
    (group,) = of("aws:ec2/placementGroup:PlacementGroup")
    assert group.inputs["strategy"] == "cluster"
    assert template.inputs["placement"] == {"groupName": group.name}
    (ingress,) = of("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    (egress,) = of("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
    for rule in (ingress, egress):
        assert rule.inputs["securityGroupId"] == sg_id
        assert rule.inputs["referencedSecurityGroupId"] == sg_id
        assert rule.inputs["ipProtocol"] == "-1"
    (ng,) = [
        r for r in of("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupName"] == "gpu-h100"
    ]
    assert len(ng.inputs["subnetIds"]) == 1  # one subnet: EFA and the placement group's AZ
    waits = closure(by_name, ng.name)
    assert {template.name, group.name, sg.name, ingress.name, egress.name} <= waits
    plugin = next(r for r in resources if r.inputs.get("chart") == efa_facts().device_plugin_chart)
    lws = by_name[f"gpustrata-{MODEL}-leaderworkerset"]
    assert {ng.name, plugin.name} <= closure(by_name, lws.name)
    spec = lws.inputs["spec"]["leaderWorkerTemplate"]
    for pod in (spec["leaderTemplate"]["spec"], spec["workerTemplate"]["spec"]):
        (container,) = pod["containers"]
        assert container["resources"]["limits"][efa_facts().resource] == "32"
        assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]
    # The system node group keeps EKS's defaults: no EFA, no placement group.
    (system,) = [
        r for r in of("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupName"] == "system"
    ]
    assert "launchTemplate" not in system.inputs


def test_created_node_group_without_efa_engines_gets_none() -> None:
    """efa: off on every engine: the p5 node group's launch template declares no interface,
    and no placement group, EFA security group or device plugin is created."""
    doc = _doc()
    doc["models"][0]["multi_node"]["efa"] = "off"
    doc["models"][1]["multi_node"] = {"efa": "off"}
    resources = run_program(doc, stack="multinode", program=ROOT / "__main__.py")
    types = {r.type for r in resources}
    assert not types & {
        "aws:ec2/placementGroup:PlacementGroup",
        "aws:ec2/securityGroup:SecurityGroup",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    }
    for r in resources:
        if r.type == "aws:ec2/launchTemplate:LaunchTemplate":
            assert not r.inputs.get("networkInterfaces") and not r.inputs.get("placement")
    assert not any(
        r.inputs.get("chart") == efa_facts().device_plugin_chart
        for r in resources
        if r.type == "kubernetes:helm.sh/v3:Release"
    )
