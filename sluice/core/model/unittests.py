"""SQLMesh-format unit tests (tests/*.yaml): read and validate (pure; run on Spark later)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from sluice.core.errors import ModelError
from sluice.core.model.definition import Model, UnitTest
from sluice.core.model.names import NO_CATALOGS, Catalogs, lookup_name
from sluice.core.yamlio import LocatedYaml

_ROWS_KEYS = frozenset({"rows", "columns"})
_TEST_KEYS = frozenset({"model", "inputs", "outputs", "vars", "description", "schema", "gateway"})


def parse_unit_tests(
    doc: LocatedYaml,
    models: Mapping[str, Model],
    notes: list[str] | None = None,
    catalogs: Catalogs = NO_CATALOGS,
) -> list[UnitTest]:
    """Validate every test in one YAML file against the project's models.

    Models and inputs may be named with a catalog (``local.sch.tbl``): the name is read
    as a model's name is (:func:`sluice.core.model.names.canonical` with ``catalogs``).

    A test of a model the project does not have is skipped with a warning in ``notes``
    (as SQLMesh loads such a project); without ``notes`` it is an error.

    Raises:
        ModelError: with file:line, naming the test and what is wrong.
    """
    if doc.data is None:
        return []
    if not isinstance(doc.data, dict):
        raise ModelError(
            "a unit-test file maps test names to tests",
            path=doc.path,
            line=doc.line_of(()) or 1,
            hint="write `test_name:` with `model:`, `inputs:` and `outputs:` under it",
        )
    tests = []
    for name, body in doc.data.items():

        def fail(
            message: str, *key_path: str | int, hint: str | None = None, test: str = name
        ) -> ModelError:
            return ModelError(
                f"test {test}: {message}",
                path=doc.path,
                line=doc.line_of((test, *key_path)),
                hint=hint,
            )

        if not isinstance(body, dict):
            raise fail(
                "expected model, inputs and outputs",
                hint="write `model:`, `inputs:` and `outputs:` under the test's name",
            )
        for key in body:
            if key not in _TEST_KEYS:
                raise fail(
                    f"unknown key '{key}'", key, hint="a test has model, inputs, outputs, vars"
                )
        model_name = lookup_name(str(body.get("model", "")), catalogs)
        if not model_name:
            raise fail("names no model", hint="add `model: schema.table`")
        model = models.get(model_name)
        if model is None:
            missing = fail(
                f"model '{model_name}' does not exist",
                "model",
                hint=_close(model_name, models)
                or "name a model of the project (schema.table, as in its MODEL header)",
            )
            if notes is None:
                raise missing
            notes.append(
                f"{missing.location}: {missing.message}; the test is skipped"
                f"\n  hint: {missing.hint}"
            )
            continue
        inputs = []
        given = body.get("inputs") or {}
        if not isinstance(given, dict):
            raise fail(
                "inputs must map each table the model reads to its rows",
                "inputs",
                hint="write `inputs:` then `schema.table:` with `rows:` under it",
            )
        for table, spec in given.items():
            table_name = lookup_name(str(table), catalogs)
            if table_name not in model.depends_on:
                raise fail(
                    f"input '{table}' is not read by {model_name}",
                    "inputs",
                    table,
                    hint=f"{model_name} reads: {', '.join(model.depends_on) or 'nothing'}",
                )
            inputs.append((table_name, _rows(spec, fail, "inputs", table)))
        outputs = body.get("outputs")
        if not isinstance(outputs, dict) or not ({"query", "ctes"} & set(outputs)):
            raise fail(
                "outputs must give `query` rows (and/or `ctes`)",
                "outputs",
                hint="write `outputs:` then `query:` with `rows:` under it",
            )
        rows: tuple[dict[str, Any], ...] = ()
        if "query" in outputs:
            rows = _rows(outputs["query"], fail, "outputs", "query")
        cte_specs = outputs.get("ctes") or {}
        if not isinstance(cte_specs, dict):
            raise fail(
                "outputs.ctes must map CTE names to their rows",
                "outputs",
                "ctes",
                hint="write `ctes:` then `cte_name:` with `rows:` under it",
            )
        ctes = tuple(
            (str(cte).lower(), _rows(spec, fail, "outputs", "ctes", cte))
            for cte, spec in cte_specs.items()
        )
        variables = body.get("vars") or {}
        if not isinstance(variables, dict):
            raise fail(
                "vars must be a mapping", "vars", hint="write `vars:` with `name: value` lines"
            )
        tests.append(
            UnitTest(
                name=str(name),
                model=model_name,
                inputs=tuple(inputs),
                outputs=rows,
                output_query="query" in outputs,
                ctes=ctes,
                variables=tuple(variables.items()),
                path=doc.path,
                line=doc.line_of((name,)) or 1,
            )
        )
    return tests


def _close(name: str, models: Mapping[str, Model]) -> str | None:
    close = difflib.get_close_matches(name, sorted(models), n=1)
    return f"did you mean '{close[0]}'?" if close else None


def _rows(spec: Any, fail: Any, *key_path: str | int) -> tuple[dict[str, Any], ...]:
    if isinstance(spec, dict):
        for key in spec:
            if key not in _ROWS_KEYS:
                # SQLMesh also takes a `query`, CSV text or a file `path`; Sluice runs only
                # the model's own SQL, and silently ignoring the rows would pass wrongly.
                raise fail(
                    f"'{key}' is not supported here",
                    *key_path,
                    key,
                    hint="list the rows: `rows:` followed by `- column: value` mappings",
                )
    rows = spec.get("rows") if isinstance(spec, dict) else spec
    if rows is None:
        return ()
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise fail(
            "rows must be a list of column: value mappings",
            *key_path,
            hint="write each row as `- column: value` lines",
        )
    return tuple({str(k).lower(): v for k, v in row.items()} for row in rows)
