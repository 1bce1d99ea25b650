"""A small ``sqlmesh`` package (in ``shim/sqlmesh``) for macro and model files.

Only processes that run project Python (the macro child, the Spark driver) put this folder
on ``sys.path``, so ``from sqlmesh import macro, model`` finds it there and nowhere else.
"""

from pathlib import Path

PATH = str(Path(__file__).resolve().parent)
"""The folder to put first on ``sys.path``."""
