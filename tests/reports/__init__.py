"""Tests of rlbench.reports."""
