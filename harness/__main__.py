"""`python -m rlbench.harness` is the `rlbench` command."""

from rlbench.harness.cli import main

main()
