"""Tests of rlbench.harness.nightly."""
