"""What a run is, before anything runs: its spec, --parallel knobs, inputs, the machine, the equal-work contract."""
