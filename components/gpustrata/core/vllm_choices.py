"""vLLM's closed sets of engine settings as ``Literal`` types.

The stack models (:mod:`gpustrata.spec.stack`) validate against them and the CLI names
their values in ``--help``; kept apart from the models so that building the argparse
tree loads neither pydantic nor the catalogues (``gpustrata check`` starts without them).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["BlockSize", "KvCacheDtype", "ModelDtype"]

# vLLM ``vllm/config/cache.py``: BlockSize and CacheDType literals (v0.11+).
BlockSize = Literal[1, 8, 16, 32, 64, 128, 256]
KvCacheDtype = Literal["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"]
# vLLM ``vllm/config/model.py``: ModelDType.
ModelDtype = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]
