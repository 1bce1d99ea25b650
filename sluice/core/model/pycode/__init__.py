"""Python in a project: SQLMesh's Python macros and Python models.

Project Python is the PR author's code, so the service process never runs it:

- :mod:`.models` reads Python model files without running them (``ast``): the
  ``@model(...)`` arguments, the parents named by ``context.resolve_table("...")``, and the
  code that decides the model's rows (the function and the project-local functions and
  constants it uses), which is what the fingerprint covers.
- :mod:`.macros` starts :mod:`.child`, a short-lived Python process with an empty
  environment, memory and CPU limits and :mod:`.guard`'s audit hook, which imports
  ``macros/*.py`` and answers each ``@name(...)`` call with SQL text.
- A Python model's body runs only in the Spark driver (:mod:`.run`), like a SQL model's
  query, with no credential in its environment.
- SQLMesh's config.py runs in a child like the macros' one (:mod:`.config_file`, the
  service's side; :mod:`.config_eval`, the child's), which gives back its ``Config`` as
  plain data for :mod:`sluice.core.config` to validate.

Macro and model files import ``from sqlmesh import macro, model`` (config.py,
``sqlmesh.core.config``'s classes): :mod:`.shim` holds a small compatible ``sqlmesh``
package that only the child and the driver put on their ``sys.path`` (it is never
installed as a top-level package).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """Why a caller runs none of a project's Python: ``reason`` says what and what to do;
    ``files`` are the project files (relative paths) that decided it, when some did (a
    pull request's changed Python), else the project's Python as a whole is refused."""

    reason: str
    files: tuple[str, ...] = ()
