"""Tests of rlbench.harness.sweep and its executors."""
