"""One module per `rlbench` command: each parses its options, calls the harness and prints; no logic of its own."""
