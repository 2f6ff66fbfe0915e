"""Tests of rlbench.perfmodel, the work-depth model."""
