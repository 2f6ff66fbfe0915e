"""`python -m rlbench` is the `rlbench` command."""

from rlbench.cli import main

main()
