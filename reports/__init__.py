"""HTML reports from run records: comparisons across runs and nightly history (`rlbench report`)."""
