"""Table diff: what a change does to a model's data, compared row by row on Spark.

``result`` and ``where`` are pure (the CLI, the workflow and the bot use them without
Spark); ``compute`` runs in the Spark driver; ``render`` prints a result for a terminal or
as Markdown for a pull request.
"""

from sluice.core.tablediff.result import DiffOptions, TableDiffError, TableDiffResult

__all__ = ["DiffOptions", "TableDiffError", "TableDiffResult"]
