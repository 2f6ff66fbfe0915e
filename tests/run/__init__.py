"""Tests of rlbench.harness.run: one run, start to end."""
