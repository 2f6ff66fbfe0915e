"""Run records: the schema of run.json and steps.parquet, reading and writing them, and comparing two runs."""
