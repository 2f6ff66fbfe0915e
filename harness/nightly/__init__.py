"""The nightly regression gate: its configuration and the night's run, judged against baselines."""
