"""rlbench: benchmark and profiling suite for RL-for-LLM training frameworks.

Importing this package imports no training framework; adapters load lazily.

    rlbench run --framework trl --workload gsm8k-grpo-tiny
"""

from __future__ import annotations

__version__ = "0.1.0"
