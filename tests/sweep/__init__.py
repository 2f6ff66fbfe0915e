"""Tests of rlbench.sweep and its executors."""
