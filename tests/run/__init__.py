"""Tests of rlbench.run: one run, start to end."""
