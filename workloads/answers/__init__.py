"""Answer formats: how a response's final answer is found and checked against the reference.

Each module serves every dataset written in its format (a registry row in
`rlbench.workloads.dataset_registry` names one module's `extract` and `matches`):
`numeric` for GSM8K-style numbers, `boxed` for MATH-style LaTeX in `\\boxed{...}`.
"""
