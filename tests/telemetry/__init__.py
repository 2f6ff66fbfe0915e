"""Tests of rlbench.harness.telemetry."""
