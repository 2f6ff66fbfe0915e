"""Bridges from runs to the work-depth model: predictions of a run, `rlbench predict` tables, the floor cache,
machine probes."""
