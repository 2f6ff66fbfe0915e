"""Tests of rlbench.harness.perfmodel, the work-depth model."""
