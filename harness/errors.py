"""The one exception type for user mistakes and environment problems.

The CLI prints an `RLBenchError` as a single line (problem and fix) and exits 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class RLBenchError(Exception):
    """A problem the user can fix: bad input, missing data, framework not installed."""
