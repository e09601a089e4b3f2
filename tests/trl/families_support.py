"""The model families the family matrix runs (tests/trl/rollout/test_model_families.py, tests/trl/test_factory_families.py)."""

from __future__ import annotations

GUESSES = ("crane", "slate", "pious")

#: The text templates TRL 1.16 ships that render tool calls and have a response parser: TRL's (`add_response_schema`),
#: or gymenvs' own (DeepSeek V3, `gymenvs.dialects.OWN_RESPONSE_TEMPLATES`).
PARSED_FAMILIES = [
    "deepseekv3", "gemma4", "gemma4_v2", "gemma4_v3", "gemma4_v4", "gemma4_v5", "glm4moe", "gptoss", "lfm2_2_5", "lfm2_2_5_v2",
    "lfm2_v2", "llama3_1", "llama3_2", "nemotron_3_5_lightning", "nemotron_3_nano", "nemotron_3_super",
    "nemotron_3_ultra", "qwen2_5", "qwen3", "qwen3_5_nothink", "qwen3_5_think", "qwen3_6", "qwen3_8",
    "qwen3_instruct_2507",
]

