"""Tests of rlbench.adapters: the contract every adapter keeps, and each framework's own."""
