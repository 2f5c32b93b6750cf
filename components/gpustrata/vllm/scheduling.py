"""Whether a vLLM engine schedules asynchronously: its CPU work beside the GPU's, or after it.

vLLM V1's engine core runs one step as ``Scheduler.schedule``, the model runner's input
preparation, the forward pass and sampling, then ``Scheduler.update_from_output``
(``EngineCore.step``, vllm-project/vllm@v0.10.1.1:vllm/v1/engine/core.py). Without
asynchronous scheduling these run one after another, so a step costs its CPU work plus its
GPU work. With it, the engine schedules step n + 1 and prepares its inputs while the GPU
runs step n (``EngineCore.step_with_batch_queue`` and ``AsyncScheduler``), so a step costs
the larger of the two.

The default changed in v0.14.0: ``SchedulerConfig.async_scheduling`` is ``False`` up to
v0.13.0 (vllm-project/vllm@v0.13.0:vllm/config/scheduler.py; v0.11.0 and v0.12.0 the
same) and ``None`` from v0.14.0 (vllm-project/vllm@v0.14.0:vllm/config/scheduler.py),
which ``VllmConfig.__post_init__`` turns on unless speculative decoding of an unsupported
kind or an executor other than ``mp``, ``uni`` or ``external_launcher`` (Ray) rules it out
(vllm-project/vllm@v0.14.0:vllm/config/vllm.py; v0.15.1 and v0.19.0 read the same). Read in
the released wheels from PyPI (session 20).

Detokenisation and streaming are in neither: they run in the API server process
(``AsyncLLM``'s output handler, ``OutputProcessor``), beside the engine, and a request's
``RequestOutputCollector`` merges the tokens of several steps when that process falls behind
(vllm-project/vllm@v0.10.1.1:vllm/v1/engine/output_processor.py), so they add no time to a
step. Pure: no Pulumi import.
"""

from __future__ import annotations

from gpustrata.core.versions import parse_version

__all__ = ["ASYNC_SCHEDULING_SINCE", "async_scheduling_default"]

ASYNC_SCHEDULING_SINCE = "0.14.0"
"""The first vLLM release whose engine schedules asynchronously by default (module
docstring)."""


def async_scheduling_default(release: str | None) -> tuple[bool, str]:
    """Whether ``release``'s engine schedules asynchronously when ``--async-scheduling`` is
    not given, and why. ``None`` (no release stated) is the reference release's default."""
    from gpustrata.catalog.vllm_releases import reference_release

    version = release or reference_release()
    which = f"vLLM {version}" + ("" if release else " (the reference release)")
    try:
        parsed = parse_version(version)
    except ValueError:  # "nightly", "latest": no release to read, the reference's default
        version = reference_release()
        parsed = parse_version(version)
        which = f"vLLM {release!r} (not a release: the reference release {version}'s default)"
    on = parsed >= parse_version(ASYNC_SCHEDULING_SINCE)
    if on:
        return True, (
            f"async scheduling on: {which} schedules the next step while the GPU runs this "
            f"one by default (since {ASYNC_SCHEDULING_SINCE}, vllm/config/vllm.py), so a "
            "step costs the larger of its CPU and GPU work"
        )
    return False, (
        f"async scheduling off: {which} runs a step's CPU work after its GPU work (the "
        f"default before {ASYNC_SCHEDULING_SINCE}, vllm/config/scheduler.py), so a step costs "
        "their sum"
    )
