"""Tests of rlbench.workloads: datasets, rewards, workloads, tiny models."""
