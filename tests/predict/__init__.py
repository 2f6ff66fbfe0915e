"""Tests of rlbench.predict: predictions of runs, calibration, probes."""
