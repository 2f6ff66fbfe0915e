"""Records: the schema of run.json and steps.parquet, reading and writing them, a sweep's index, the spread over
repeats, and comparing two runs."""
