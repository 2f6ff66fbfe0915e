"""Tests of rlbench.nightly."""
