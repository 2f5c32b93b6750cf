"""``gpustrata init [DIR]``: scaffold a Pulumi project that uses the released gpustrata.

The project holds ``Pulumi.yaml``, ``__main__.py``, one stack file per environment
(``Pulumi.dev.yaml``, ``Pulumi.staging.yaml``, ``Pulumi.prod.yaml``), ``requirements.txt``
pinning the gpustrata release that wrote it, the CrossGuard policy pack (``policy/``, whose
program is :func:`gpustrata_policies.pulumi_pack.serve` from that release), a GitHub
Actions workflow and a pre-commit config that install that release (not this repository's
internals). ``gpustrata plan --stack dev`` passes on it with no findings (a test builds the
wheel, installs it in a fresh virtualenv and checks that).

``--pulumi-template`` writes the same files as a template for ``pulumi new`` (``${PROJECT}``
and ``${DESCRIPTION}`` in Pulumi.yaml, a ``template:`` section); the repository's
``pulumi-template/`` folder is that output, kept current by ``tests/test_init.py``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from gpustrata import __version__
from gpustrata.cli.command import add_command
from gpustrata.core.errors import InputError

__all__ = ["init_command", "project_files", "register", "released_requirement"]

# The versions a new project starts from: the reference dev stack's (stacks/Pulumi.dev.yaml),
# which `gpustrata plan` checks against the catalogues (tests/test_init.py plans the result).
KUBERNETES_VERSION = "1.34"
GPU_OPERATOR_CHART = "v26.7.0"
NODE_IMAGE_DRIVER = "580.173.02"
DEFAULT_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
DEFAULT_INSTANCE = "g6.xlarge"
ENVIRONMENTS = ("dev", "staging", "prod")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


def register(sub: Any) -> None:
    """Add ``init`` to the ``gpustrata`` sub-command parser."""
    init = add_command(sub, "init", init_command)
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="project folder")
    init.add_argument(
        "-m",
        "--model",
        default=DEFAULT_MODEL,
        help=f"the first model's Hugging Face id (default {DEFAULT_MODEL})",
    )
    init.add_argument(
        "-i",
        "--instance-type",
        default=DEFAULT_INSTANCE,
        help=f"the GPU pool's EC2 instance type (default {DEFAULT_INSTANCE})",
    )
    init.add_argument(
        "--cluster-mode",
        choices=("create", "existing"),
        default="create",
        help="create: the stack builds an EKS cluster (VPC, system node group, add-ons); "
        "existing: it deploys onto the cluster of your kubeconfig (default create)",
    )
    init.add_argument(
        "--provisioner",
        choices=("managed-node-group", "karpenter"),
        default="managed-node-group",
        help="who launches GPU nodes: an EKS managed node group, or Karpenter from zero "
        "(create mode only; default managed-node-group)",
    )
    init.add_argument(
        "--requirement",
        metavar="SPEC",
        help="the pip requirement that installs gpustrata in the project (default: how this "
        "copy was installed, e.g. 'gpustrata @ git+https://HOST/ORG/gpustrata@v0.2.0', "
        f"else 'gpustrata=={__version__}')",
    )
    init.add_argument("--name", help="the Pulumi project's name (default: DIR's folder name)")
    init.add_argument(
        "--pulumi-template",
        action="store_true",
        help="write a `pulumi new` template instead (${PROJECT}/${DESCRIPTION} placeholders)",
    )


def released_requirement() -> str:
    """The requirement that installs this gpustrata: the git URL and revision it was
    installed from (PEP 610 ``direct_url.json``), else ``gpustrata==<version>``."""
    from importlib import metadata  # every command imports this module (issue 35)

    try:
        text = metadata.distribution("gpustrata").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        data = {}
    vcs = data.get("vcs_info") if isinstance(data, dict) else None
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and isinstance(data.get("url"), str):
        revision = vcs.get("requested_revision") or vcs.get("commit_id")
        return f"gpustrata @ git+{data['url']}" + (f"@{revision}" if revision else "")
    return f"gpustrata=={__version__}"


def _vllm_image() -> str:
    """The vLLM image of the catalogue's reference release (the one its facts are read at)."""
    from gpustrata.catalog.vllm_releases import load_vllm_releases

    return f"vllm/vllm-openai:v{load_vllm_releases().reference}"


def _slug(model: str) -> str:
    """A Kubernetes name for the model (``Qwen/Qwen2.5-1.5B-Instruct`` -> ``qwen2-5-1-5b``)."""
    tail = model.rstrip("/").rsplit("/", 1)[-1].lower()
    tail = re.sub(r"-(instruct|chat|hf)$", "", tail)
    slug = re.sub(r"[^a-z0-9]+", "-", tail).strip("-")[:40].strip("-")
    return slug or "model"


def _stack_file(env: str, project: str, args: argparse.Namespace) -> str:
    karpenter = args.provisioner == "karpenter"
    controllers = ", Karpenter" if karpenter else ""
    prod = env == "prod"
    if args.cluster_mode == "create":
        cluster = f"""    cluster:
      name: {project}-{env}
      mode: create
      # The GPU Operator release below supports this Kubernetes version (rule O001).
      kubernetes_version: "{KUBERNETES_VERSION}"
      region: us-west-2
      # An untainted node group for the controllers (GPU Operator, CoreDNS{controllers}).
      system_pool:
        instance_type: m7i.large
        min_size: {2 if prod else 1}
        max_size: 2
"""
    else:
        cluster = f"""    cluster:
      name: {project}-{env}
      mode: existing
      kubernetes_version: "{KUBERNETES_VERSION}"
      region: us-west-2
      # The kubeconfig context of the cluster (empty: the current context of KUBECONFIG).
      # context: my-cluster
"""
    nodes = 2 if prod else 1
    if karpenter:
        pool = f"""      - name: gpu
        instance_type: {args.instance_type}
        # Karpenter launches GPU nodes when engines are Pending and keeps none standing.
        provisioner: karpenter
        capacity_type: {"ON_DEMAND" if prod else "SPOT"}
        min_size: 0
        max_size: {nodes}
"""
    else:
        pool = f"""      - name: gpu
        instance_type: {args.instance_type}
        capacity_type: {"ON_DEMAND" if prod else "SPOT"}
        # A managed node group has no autoscaler here: min_size 0 would mean no GPU node
        # (rule K017).
        min_size: {nodes}
        max_size: {nodes}
"""
    replicas = 2 if prod else 1
    return f"""# The {env} stack of {project}: `gpustrata plan --stack {env}` checks it offline,
# `pulumi up --stack {env}` deploys it. Every key is described by `gpustrata schema`.
config:
  aws:region: us-west-2
  gpustrata:stack:
    environment: {env}
{cluster}    node_pools:
{pool}    gpu_operator:
      # EKS AL2023 NVIDIA AMIs ship the driver: the operator brings the device plugin,
      # GFD/NFD and the DCGM exporter (rule O003).
      chart_version: {GPU_OPERATOR_CHART}
      driver_enabled: false
      driver_version: "{NODE_IMAGE_DRIVER}"
    models:
      - name: {_slug(args.model)}
        model: {args.model}
        pool: gpu
        # Pinned: vLLM flags and defaults change between releases (rule K013).
        image: {_vllm_image()}
        replicas: {replicas}
        # cpu and memory default to the Pod's share of the node (`gpustrata plan` shows them).
        engine:
          max_model_len: 8192
"""


def project_files(project: str, args: argparse.Namespace, requirement: str) -> dict[str, str]:
    """The scaffold's files by path: the same for ``init`` and ``--pulumi-template``
    (whose Pulumi.yaml names ``${PROJECT}`` and carries a ``template:`` section)."""
    template = bool(getattr(args, "pulumi_template", False))
    name = "${PROJECT}" if template else project
    description = (
        "${DESCRIPTION}" if template else "LLM inference on GPUs in Kubernetes (gpustrata)"
    )
    template_section = (
        """template:
  displayName: gpustrata LLM inference stack
  description: EKS GPU nodes, the NVIDIA GPU Operator and vLLM from one typed stack.
  config:
    aws:region:
      description: The AWS region to deploy into
      default: us-west-2
"""
        if template
        else ""
    )
    files = {
        "Pulumi.yaml": f"""name: {name}
description: {description}
runtime:
  name: python
  options:
    toolchain: pip
    virtualenv: venv
config:
  gpustrata:stack:
    type: object
    description: The gpustrata stack (see `gpustrata schema` for its JSON Schema).
{template_section}""",
        "__main__.py": '''"""Builds the InferenceStack from the stack's gpustrata:stack config."""

from gpustrata.runtime.program import main

main()
''',
        "requirements.txt": f"""# gpustrata brings the Pulumi SDK and providers it was tested with.
{requirement}
""",
        "policy/PulumiPolicy.yaml": """# `pulumi preview --policy-pack policy`: the gpustrata rules.
runtime:
  name: python
  options:
    virtualenv: venv
description: GPU, Ray and vLLM checks for LLM inference on Kubernetes (gpustrata rules).
""",
        "policy/__main__.py": '''"""The gpustrata policy pack, from the installed release."""

from gpustrata_policies.pulumi_pack import serve

serve()
''',
        "policy/requirements.txt": f"""{requirement}
""",
        ".github/workflows/gpustrata.yml": f"""# Plan every stack offline on each pull request
# (no cloud credentials, no Pulumi CLI).
# A mandatory finding (exit 1) or an unusable stack file (exit 2) fails the job.
name: gpustrata
on:
  pull_request:
  push:
    branches: [main]
jobs:
  plan:
    runs-on: ubuntu-latest
    strategy:
      fail-fast: false
      matrix:
        stack: [{", ".join(ENVIRONMENTS)}]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
          cache: pip
      - run: pip install -r requirements.txt
      - run: gpustrata plan --stack ${{{{ matrix.stack }}}}
""",
        ".pre-commit-config.yaml": f"""# `pre-commit install`: each commit that changes a stack file
# plans the dev stack with the gpustrata release of requirements.txt.
repos:
  - repo: local
    hooks:
      - id: gpustrata-plan
        name: gpustrata plan
        entry: gpustrata plan --quiet --stack dev
        language: python
        additional_dependencies: ["{requirement}"]
        files: ^(Pulumi\\..*\\.yaml|__main__\\.py)$
        pass_filenames: false
""",
        ".gitignore": "venv/\npolicy/venv/\n__pycache__/\n",
    }
    for env in ENVIRONMENTS:
        files[f"Pulumi.{env}.yaml"] = _stack_file(env, name, args)
    return files


def init_command(args: argparse.Namespace) -> int:
    """scaffold a Pulumi project that uses the released gpustrata

    Write a Pulumi project into DIR: Pulumi.yaml, __main__.py, one stack file per environment
    (dev, staging, prod), requirements.txt pinning this gpustrata release, the policy pack
    (policy/), a GitHub Actions workflow and a pre-commit config. `gpustrata plan --stack dev`
    passes on the result. Existing files are never overwritten. Exit 0: written; 2: a file
    exists or a choice is invalid.
    """
    target = Path(args.dir)
    project = args.name or target.resolve().name
    if not args.pulumi_template and not _NAME.match(project):
        raise InputError(
            f"project name {project!r} is not a lowercase name of letters, digits and '-' "
            "(at most 40); pass --name, e.g. --name llm-serving"
        )
    if args.provisioner == "karpenter" and args.cluster_mode == "existing":
        raise InputError(
            "--provisioner karpenter needs --cluster-mode create (the stack installs "
            "Karpenter on the cluster it creates); drop one of them"
        )
    files = project_files(project, args, args.requirement or released_requirement())
    existing = [p for p in files if (target / p).exists()]
    if existing:
        raise InputError(
            f"{target / existing[0]} already exists; init writes only new files: choose an "
            "empty folder"
        )
    for rel, text in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if not getattr(args, "quiet", False):
        print(f"wrote {len(files)} files into {target}; next:")
        print(f"  cd {target} && gpustrata plan --stack dev")
    return 0
