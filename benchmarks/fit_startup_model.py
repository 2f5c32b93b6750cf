"""Fit the startup model ONCE on the published vLLM startup logs; write the startup: section.

Reads ``catalog/data/startup-logs.yaml``. Load bandwidth per source is the median of the
logged GB/s (weights / load time) of that source's logs; engine init is fitted as
``base + torch.compile per decoder layer (cold) or a fixed cached-compile time + CUDA graph
capture``, each term the median of what the logs that report it give. Writes the
``startup:`` section of ``catalog/data/serving-fit.yaml`` (the serving constants above it
are left as they are):

    python benchmarks/fit_startup_model.py [--write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import yaml

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.serving import StartupLog, load_startup_logs

_DATA = Path(__file__).resolve().parents[1] / "components/gpustrata/catalog/data/serving-fit.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    logs = load_startup_logs()
    models = load_model_catalog()
    out: dict[str, dict[str, object]] = {}
    by_source: dict[str, list[tuple[str, float]]] = {}
    for log in logs:
        if log.load_gbps is not None:
            by_source.setdefault(log.weights_source, []).append((log.id, log.load_gbps))
    for source, rows in sorted(by_source.items()):
        value = statistics.median(r for _, r in rows)
        out[f"load_gbps_{source.replace('-', '_')}"] = {
            "value": round(value, 3),
            "fitted_on": [i for i, _ in rows],
            "explanation": (
                f"median of {len(rows)} logged {source} loads: "
                + ", ".join(f"{r:.2f}" for _, r in sorted(rows, key=lambda x: x[1]))
                + " GB/s"
            ),
        }
    compile_cold: list[tuple[str, float]] = []
    compile_cached: list[tuple[str, float]] = []
    capture: list[tuple[str, float]] = []
    moe: list[tuple[str, float]] = []

    def layers(log: StartupLog) -> int | None:
        arch = models.get(log.model)
        return log.layers or (arch.num_hidden_layers if arch else None)

    for log in logs:
        n = layers(log)
        if log.compile_s and n is not None and log.torch_compile:
            if log.compile_cached:
                compile_cached.append((log.id, log.compile_s))
            else:
                compile_cold.append((log.id, log.compile_s / n))
        if log.graph_capture_s is not None:
            capture.append((log.id, log.graph_capture_s))
        if log.moe_warmup_s is not None:
            moe.append((log.id, log.moe_warmup_s))
    cold = statistics.median(v for _, v in compile_cold)
    cached = statistics.median(v for _, v in compile_cached)
    cap = statistics.median(v for _, v in capture)
    moe_s = statistics.median(v for _, v in moe)
    base_rows: list[tuple[str, float]] = []
    for log in logs:
        n = layers(log)
        if log.init_s is None or n is None or log.enforce_eager:
            continue
        # The base is what the log's init leaves once its own logged parts are taken out
        # (the fitted term where the log does not report a part).
        if not log.torch_compile:
            comp = 0.0
        elif log.compile_s is not None:
            comp = log.compile_s
        else:
            comp = cached if log.compile_cached else cold * n
        graphs = log.graph_capture_s if log.graph_capture_s is not None else cap
        arch = models.get(log.model)
        warm = (log.moe_warmup_s or moe_s) if arch is not None and arch.is_moe else 0.0
        base_rows.append((log.id, log.init_s - comp - graphs - warm))
    base = max(0.0, statistics.median(v for _, v in base_rows))
    out["init_base_s"] = {
        "value": round(base, 1),
        "fitted_on": [i for i, _ in base_rows],
        "explanation": "median of each log's init less its logged torch.compile, CUDA graph "
        "and MoE warm-up seconds (process start, profiling, KV cache allocation, warm-up): "
        + ", ".join(f"{v:.1f}" for _, v in sorted(base_rows, key=lambda x: x[1]))
        + " s",
    }
    out["compile_s_per_layer"] = {
        "value": round(cold, 2),
        "fitted_on": [i for i, _ in compile_cold],
        "explanation": "median of a cold torch.compile's logged seconds per decoder layer: "
        + ", ".join(f"{v:.2f}" for _, v in sorted(compile_cold, key=lambda x: x[1])),
    }
    out["compile_cached_s"] = {
        "value": round(cached, 1),
        "fitted_on": [i for i, _ in compile_cached],
        "explanation": "logged torch.compile time when the compiled graphs come from the cache",
    }
    out["graph_capture_s"] = {
        "value": round(cap, 1),
        "fitted_on": [i for i, _ in capture],
        "explanation": "median of the logged CUDA graph capture times: "
        + ", ".join(f"{v:g}" for _, v in sorted(capture, key=lambda x: x[1]))
        + " s",
    }
    out["moe_warmup_s"] = {
        "value": round(moe_s, 1),
        "fitted_on": [i for i, _ in moe],
        "explanation": "logged MoE kernel (DeepGEMM) warm-up of an FP8 MoE model",
    }

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: object) -> bool:
            return True

    text = yaml.dump({"startup": out}, Dumper=_NoAliases, sort_keys=False, width=100)
    print(text)
    if args.write:
        old = _DATA.read_text(encoding="utf-8")
        head = old[: old.index("\nstartup:")] if "\nstartup:" in old else old.rstrip("\n")
        _DATA.write_text(head.rstrip("\n") + "\n" + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
