"""Tests of rlbench.telemetry."""
