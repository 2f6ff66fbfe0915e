"""Records: run.json in one module (run_record), the step vocabulary of steps.parquet (schema), the states of a
run, a sweep cell and a night (status), reading and writing them, a sweep's index, the spread over repeats, and
comparing two runs."""
