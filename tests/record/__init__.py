"""Tests of rlbench.record: records, schema, comparison."""
