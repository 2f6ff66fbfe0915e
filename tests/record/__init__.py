"""Tests of rlbench.harness.record: records, schema, comparison."""
