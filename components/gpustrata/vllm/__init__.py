"""vLLM as gpustrata models it: engine settings, flag grammar, per-release defaults, KV cache,
weights, memory budget and timing. Pulumi-free."""
