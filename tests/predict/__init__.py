"""Tests of rlbench.harness.predict: predictions of runs, calibration, probes."""
