"""Plans rendered as Spark work: the steps of a job spec, as Spark SQL (pure).

Parents are read through their physical tables (never through environment views), so
what a model computes depends only on the versions its snapshot was planned with.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Literal

import sqlglot
from sqlglot import exp

from sluice.core.errors import ModelError
from sluice.core.model import macros
from sluice.core.model.audits import builtin_audit_sql
from sluice.core.model.definition import Audit, KindName, Model
from sluice.core.model.graph import topological_order
from sluice.core.model.names import quote_column, sql_name
from sluice.core.model.properties import table_layout
from sluice.core.model.pycode.run import VIEW as PYTHON_VIEW
from sluice.core.plan import statements
from sluice.core.plan.categorize import is_star
from sluice.core.plan.plan import Plan
from sluice.core.snapshot.naming import (
    MARK_PREFIX,
    PROD,
    current_prefix,
    physical_schema,
    view_name,
)
from sluice.core.snapshot.snapshot import Category, Snapshot
from sluice.core.spark.spec import (
    AuditStep,
    BuildBatch,
    BuildStep,
    PythonModelSpec,
    ScdSpec,
    Step,
    ViewSpec,
    ViewsStep,
)
from sluice.core.spark.tuning import is_tuning
from sluice.core.timeutil import to_ts


def resolve_tables(query: exp.Expr, tables: Mapping[str, str]) -> exp.Expr:
    """Replace references to models (``schema.table``) by the tables given for them."""

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and node.db:
            target = tables.get(".".join(p.name for p in node.parts).lower())
            if target is not None:
                table = table_expr(target)
                if node.args.get("alias"):
                    table.set("alias", node.args["alias"].copy())
                else:
                    # Keep `orders.col` references working after the rename.
                    table.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
                return table
        return node

    return query.transform(swap)


def table_expr(name: str) -> exp.Table:
    """``[[catalog.]schema.]table`` as a table of a query, each part quoted when it is not
    a plain name (sqlglot quotes identifiers that need it)."""
    parts: list[exp.Identifier | None] = [None, None]
    parts += [exp.to_identifier(p) for p in name.split(".")]
    return exp.Table(this=parts[-1], db=parts[-2], catalog=parts[-3])


def physical_names(snapshots: Iterable[Snapshot]) -> dict[str, str]:
    """Model name -> the table a query reads for it (externals are read as they are;
    an embedded model has none: :func:`embedded_queries`)."""
    return {
        s.name: s.name if s.model.kind.name == KindName.EXTERNAL else s.table
        for s in snapshots
        if s.model.kind.name != KindName.EMBEDDED
    }


def embedded_queries(snapshots: Iterable[Snapshot]) -> dict[str, str]:
    """Embedded model name -> its query (Spark SQL with placeholders), which
    :func:`render_query` inlines where another model reads it."""
    return {
        s.name: s.model.query_sql
        for s in snapshots
        if s.model.kind.name == KindName.EMBEDDED and s.model.query_sql is not None
    }


EMBEDDED_DEPTH = 64
"""How many embedded models :func:`inline_embedded` inlines one inside another, at most."""


def inline_embedded(
    query: exp.Expr, embedded: Mapping[str, str], within: tuple[str, ...] = ()
) -> exp.Expr:
    """``query`` with each read of an embedded model replaced by that model's query as
    a subquery under the name the query reads it by (SQLMesh's EMBEDDED), embedded
    models that read embedded models inlined in turn. ``within``: the embedded models
    ``query`` is inlined into (innermost last); one reading a model it is within (a
    cycle, which the loader refuses) is an error naming them, and so are more than
    :data:`EMBEDDED_DEPTH` inlined one inside another (a query Spark and sqlglot would
    parse and write only by recursing as deep).

    Raises:
        ModelError: the embedded models read each other in a cycle, or nest too deep.
    """
    if not embedded:
        return query

    def swap(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Table) or not node.db:
            return node
        read = ".".join(p.name for p in node.parts).lower()
        sql = embedded.get(read)
        if sql is None:
            return node
        if len(within) >= EMBEDDED_DEPTH:
            raise ModelError(
                f"embedded models nest more than {EMBEDDED_DEPTH} deep ({within[0]} -> ... "
                f"-> {read}): each is inlined as a subquery where it is read",
                hint="make one of them a FULL or VIEW model (it is built once, then read)",
            )
        if read in within:
            cycle = " -> ".join((*within[within.index(read) :], read))
            raise ModelError(
                f"embedded models read each other in a cycle ({cycle}): an embedded model "
                "is inlined where it is read, so none can read itself",
                hint="make one of them a FULL or VIEW model, or remove the read",
            )
        inner = inline_embedded(sqlglot.parse_one(sql, read="spark"), embedded, (*within, read))
        alias = node.args.get("alias")
        name = alias.copy() if alias else exp.TableAlias(this=exp.to_identifier(node.name))
        return exp.Subquery(this=inner, alias=name)

    return query.transform(swap)


def render_query(
    model: Model,
    tables: Mapping[str, str],
    own_table: str,
    start: int,
    end: int,
    execution: int,
    embedded: Mapping[str, str] | None = None,
) -> str:
    """The model's query for the interval [start, end), ready for Spark (a Python
    model's reads the rows its function returned for the batch); ``embedded``: the
    queries of the embedded models it may read (:func:`embedded_queries`)."""
    if model.python_code is not None:
        return f"SELECT * FROM {PYTHON_VIEW}"
    assert model.query_sql is not None
    query = sqlglot.parse_one(model.query_sql, read="spark")
    query = inline_embedded(query, embedded or {})
    query = resolve_tables(query, tables)
    values: dict[str, exp.Expr | str] = {**macros.time_values(start, end, execution)}
    values["this_model"] = own_table
    return macros.render(query, values).sql("spark")


def source_path(path: str, project_dir: str) -> str:
    """``path`` relative to the project folder (as its author names it), else as given.

    >>> source_path("/srv/repo/models/orders.sql", "/srv/repo")
    'models/orders.sql'
    """
    try:
        return Path(path).resolve().relative_to(Path(project_dir).resolve()).as_posix()
    except ValueError:
        return path


def python_spec(model: Model, project_dir: str, tables: Mapping[str, str]) -> PythonModelSpec:
    """What the driver needs to run a Python model's function: its file and entry point,
    and the table ``context.resolve_table`` answers for each parent found in ``tables``."""
    return {
        "path": str(Path(model.path).resolve()),
        "entry": model.python_entry or "execute",
        "root": str(Path(project_dir).resolve()),
        # Its parents, and its own table (a model may read what it built before).
        "tables": [[d, tables[d]] for d in (*model.depends_on, model.name) if d in tables],
        "columns": [list(c) for c in model.columns],
        "variables": dict(model.python_variables),
    }


def scd_spec(model: Model, execution_time: int) -> ScdSpec:
    """How the driver merges an SCD type 2 model's rows into its history."""
    scd = model.kind.scd
    assert scd is not None
    by_time = model.kind.name == KindName.SCD_TYPE_2_BY_TIME
    first: Literal["epoch", "updated_at", "execution_time"] = "epoch"
    if by_time and scd.updated_at_as_valid_from:
        first = "updated_at"
    elif not by_time and scd.execution_time_as_valid_from:
        first = "execution_time"
    return {
        "by": "time" if by_time else "column",
        "updated_at": scd.updated_at_name if by_time else None,
        "columns": list(scd.columns),
        "valid_from": scd.valid_from_name,
        "valid_to": scd.valid_to_name,
        "invalidate_hard_deletes": scd.invalidate_hard_deletes,
        "time_type": scd.time_data_type,
        "first_valid_from": first,
        "execution_time": execution_time,
    }


def output_columns(model: Model) -> list[str] | None:
    """The query's column names in order, when sqlglot can tell them without a catalog."""
    if model.query_sql is None:
        return [name for name, _ in model.columns] or None
    query = sqlglot.parse_one(model.query_sql, read="spark")
    if not isinstance(query, exp.Select):
        return None
    names = []
    for projection in query.expressions:
        if is_star(projection) or not projection.alias_or_name:
            return None
        names.append(projection.alias_or_name)
    return names


def audit_sql(
    call_name: str,
    args: Mapping[str, str],
    audit: Audit | None,
    table: str,
    start: int,
    end: int,
    execution: int,
    views: Mapping[str, str] | None = None,
) -> str:
    """The query returning the rows that violate one audit of a model's table. Another
    model the audit names is read as written, prod's view of it; ``views`` (model name ->
    its prod view, given under a repository's schema prefix) says where that view is."""
    from sluice.core.model.definition import AuditCall

    if audit is None:
        return builtin_audit_sql(AuditCall(call_name, tuple(args.items())), table)
    values: dict[str, exp.Expr | str] = {**macros.time_values(start, end, execution)}
    values["this_model"] = table
    for name, sql in {**dict(audit.defaults), **args}.items():
        values[name] = sqlglot.parse_one(sql, read="spark")
    tree = macros.render(sqlglot.parse_one(audit.query_sql, read="spark"), values)
    for node in list(tree.find_all(exp.Table)) if views else ():
        named = ".".join(p for p in (node.catalog, node.db, node.name) if p).lower()
        target = views.get(named) if views else None
        if target is not None:  # the same table name, its schema (and catalog) prefixed
            where = exp.to_table(target)
            node.set("db", where.args.get("db"))
            node.set("catalog", where.args.get("catalog"))
    return tree.sql("spark")


def managed_schemas(plan: Plan, prod_schemas: Collection[str] = ()) -> set[str]:
    """The schemas (lower case) no statement of the project or of a model may name besides
    those :func:`sluice.core.plan.statements.managed` knows by their form: prod's as in
    force (``prod_schemas``: its views' and tables', from state, never from the plan a
    pull request computes) and those of the plan's models of every kind but external
    (embedded too: a schema the project keeps models in) and of the models it removes."""
    names = [s.name for s in plan.snapshots if s.model.kind.name != KindName.EXTERNAL]
    return statements.model_schemas([*names, *plan.removed]) | {
        schema.lower() for schema in prod_schemas
    }


def build_steps(
    plan: Plan,
    audits: Mapping[str, Audit],
    project_dir: str,
    table_format: str,
    restate: Mapping[str, list[tuple[int, int]]] | None = None,
    prod_schemas: Collection[str] = (),
) -> list[Step]:
    """Create and fill every table the plan needs, auditing each batch of a table right
    after it is written (its build runs the batch's ``audits``); a VIEW model's audits are
    steps of their own, after its view is made. A model's statements may name none of
    :func:`managed_schemas` (``prod_schemas``: prod's as in force, from state)."""
    tables = physical_names(plan.snapshots)
    embedded = embedded_queries(plan.snapshots)
    create_views = set(plan.create_views)
    # Under a repository's prefix (issue 46) an audit's reads of models go to its views.
    prod_views = (
        {name: view_name(name, PROD) for name in tables if name != tables[name]}
        if current_prefix()
        else None
    )
    steps: list[Step] = []
    schemas = sorted({physical_schema(s.name) for s in plan.snapshots if s.model.kind.has_views})
    if schemas:
        steps.append(
            {
                "type": "sql",
                "label": "create physical schemas",
                "statements": [f"CREATE DATABASE IF NOT EXISTS {sql_name(s)}" for s in schemas],
            }
        )
    backfills = {b.name: b for b in plan.backfill}
    schemas_of_views = managed_schemas(plan, prod_schemas)
    built = {s.name for s in plan.snapshots if s.name in backfills or s.name in create_views}
    parents = built_parents(plan.snapshots, built)
    for snap in plan.snapshots:
        model = snap.model
        kind = model.kind.name
        is_view = snap.name in create_views
        backfill = backfills.get(snap.name)
        if backfill is None and not is_view:
            continue
        if kind == KindName.CUSTOM:
            raise ModelError(
                f"model {snap.name} is not built: its kind CUSTOM (materialization "
                f"'{model.kind.materialization}') is a SQLMesh custom materialization, a "
                "Python class Sluice does not run on Spark, and the trusted settings map it "
                "to no built-in kind",
                path=model.path or None,
                line=model.line if model.path else None,
                hint="if it builds what a built-in kind builds, map it in the prod branch's "
                f"config.yaml: `sluice: {{materializations: "
                f"{{{model.kind.materialization}: FULL}}}}` (or VIEW); else give the model "
                "a built-in kind",
            )
        if model.statement_refusals:
            line, what, hint = model.statement_refusals[0]
            raise ModelError(
                f"model {snap.name} is not built: its {what}",
                path=model.path or None,
                line=line if model.path else None,
                hint=hint,
            )
        layout = table_layout(model, table_format)
        step: BuildStep = {
            "type": "build",
            "label": f"build {snap.name}",
            "model": snap.name,
            "version": snap.version,
            "table": snap.table,
            "kind": kind.value,
            "format": layout.provider,
            "time_column": model.kind.time_column,
            "unique_key": list(model.kind.unique_key),
            "columns": output_columns(model),
            "partitioned_by": list(layout.partitioned_by),
            "restate": [list(r) for r in (restate or {}).get(snap.name, [])],
            "batches": [],
            "clustered_by": list(layout.clustered_by),
            "table_properties": checked_pairs(model, layout.properties, "physical_properties"),
            "session_properties": checked_pairs(
                model, model.session_properties, "session_properties"
            ),
            "parents": parents[snap.name],
        }
        if model.path:  # where its author finds it, for a failure's message
            step["source"] = f"{source_path(model.path, project_dir)}:{model.line}"
        if kind == KindName.SEED:
            assert model.kind.seed_path is not None
            step["seed"] = {
                "path": str(Path(project_dir, model.kind.seed_path).resolve()),
                "columns": [list(c) for c in model.columns],
                "csv_settings": [list(c) for c in model.kind.csv_settings],
            }
        if model.python_code is not None:
            step["python"] = python_spec(model, project_dir, tables)
        if model.kind.scd is not None:
            step["scd"] = scd_spec(model, plan.execution_time)
        if is_view:
            step["view_sql"] = render_query(
                model, tables, snap.table, plan.end, plan.end, plan.execution_time, embedded
            )
        if backfill is not None:
            step["batches"] = []
            for s, e in backfill.batches:
                batch: BuildBatch = {
                    "start": s,
                    "end": e,
                    "sql": None
                    if kind == KindName.SEED
                    else render_query(
                        model, tables, snap.table, s, e, plan.execution_time, embedded
                    ),
                }
                # Audited as SQLMesh does: each batch right after it is written.
                checks = _audit_steps(
                    snap, audits, s, e, plan.execution_time, batch=True, views=prod_views
                )
                if checks:
                    batch["audits"] = checks
                step["batches"].append(batch)
            step["intervals"] = [list(i) for i in backfill.intervals]
        steps += _model_statements(snap, "pre_statements", schemas_of_views)
        steps.append(step)
        if is_view:  # no batch: its audits are steps of their own, after the view
            steps.extend(
                _audit_steps(
                    snap, audits, plan.end, plan.end, plan.execution_time, views=prod_views
                )
            )
        steps += _model_statements(snap, "post_statements", schemas_of_views)
    if len(steps) == 1 and steps[0]["label"] == "create physical schemas":
        return []  # nothing to build (a virtual update): no schema to create either
    return steps


def _model_statements(snap: Snapshot, key: str, schemas: set[str]) -> list[Step]:
    """The ``sql`` step running a model's pre- or post-statements (``key``) around its
    build, once per build (they are idempotent: ``CREATE ... IF NOT EXISTS`` or a query):
    its id tells the driver to check them again (:func:`statements.checked_step`); none
    may name a schema Sluice manages (:func:`statements.refusal`).

    Raises:
        ModelError: a statement names such a schema, with the model's file and line.
    """
    model = snap.model
    given: tuple[str, ...] = getattr(model, key)
    for sql in given:
        problem = statements.refusal(sql, schemas)
        if problem is not None:
            raise ModelError(
                f"{key.replace('_', '-')[:-1]} of {snap.name} ({sql}) {problem}",
                path=model.path or None,
                line=model.line if model.path else None,
                hint=statements.HINT,
            )
    if not given:
        return []
    prefix = statements.MODEL_STEP_PREFIXES[0 if key == "pre_statements" else 1]
    return [
        {
            "type": "sql",
            "id": f"{prefix}{snap.name}",
            "label": f"run the {key.replace('_', '-')} of {snap.name}",
            "statements": list(given),
        }
    ]


def built_parents(snapshots: Iterable[Snapshot], built: set[str]) -> dict[str, list[str]]:
    """For each model in ``built``, the models of ``built`` it reads: its parents, and
    through a parent not in ``built`` (already built, or a view of one), that parent's.
    A build waits for exactly these (:mod:`sluice.core.spark.schedule`)."""
    depends = {s.name: s.model.depends_on for s in snapshots}
    found: dict[str, frozenset[str]] = {}

    def reach(name: str) -> frozenset[str]:
        # Through the models not built here (memoized; the DAG has no cycle).
        if name not in found:
            found[name] = frozenset()  # a guard, should a cycle ever get this far
            names: set[str] = set()
            for parent in depends.get(name, ()):
                if parent in built:
                    names.add(parent)
                elif parent in depends:
                    names |= reach(parent)
            found[name] = frozenset(names)
        return found[name]

    return {name: sorted(reach(name)) for name in depends if name in built}


def checked_pairs(model: Model, pairs: Iterable[tuple[str, str]], what: str) -> list[list[str]]:
    """A model's properties as a step carries them, checked once more where they become
    Spark work, whichever way the model was read (a MODEL header, a Python model's
    decorator, a cache): the values are quoted into statements later
    (``TBLPROPERTIES``) or set in the session, so none may hold ``${`` (Spark's variable
    substitution rewrites a statement's text after Sluice quoted it), a table or view
    property may not be Sluice's own (``sluice.*``, the mark of its tables), and a session
    property must be Spark SQL tuning (:mod:`sluice.core.spark.tuning`).

    Raises:
        ModelError: naming the model's file and line.
    """
    checked: list[list[str]] = []
    for key, value in pairs:
        problem = None
        if "${" in key or "${" in value:
            problem = (
                f"{what} '{key}' of {model.name} writes '${{', which Spark replaces with a "
                "setting, a system property or an environment variable",
                "write it without '${'",
            )
        elif what == "session_properties" and not (
            is_tuning(key) and key.lower().startswith("spark.sql.")
        ):
            problem = (
                f"session property '{key}' of {model.name} is not a Spark SQL tuning setting",
                "remove it; a model may only size its build (see sluice/core/spark/tuning.py)",
            )
        elif what != "session_properties" and key.lower().startswith(MARK_PREFIX):
            problem = (
                f"{what} '{key}' of {model.name} is Sluice's own (the mark of its tables)",
                f"remove it, or name the property without the '{MARK_PREFIX}' prefix",
            )
        elif what == "physical_properties":
            found = statements.property_problem(key)
            if found is not None:
                problem = (
                    f"{found} (physical_properties of {model.name})",
                    "Sluice decides where and how a model's table is stored; remove it",
                )
        if problem is not None:
            raise ModelError(problem[0], path=model.path, line=model.line, hint=problem[1])
        checked.append([key, value])
    return checked


def _audit_steps(
    snap: Snapshot,
    audits: Mapping[str, Audit],
    start: int,
    end: int,
    execution: int,
    *,
    batch: bool = False,
    views: Mapping[str, str] | None = None,
) -> list[AuditStep]:
    """The model's audits over [start, end); ``batch``: of the build batch [start, end),
    which an INCREMENTAL_BY_TIME_RANGE model's audits read alone (:func:`batch_rows`)."""
    time_column = snap.model.kind.time_column
    scoped = batch and snap.model.kind.name == KindName.INCREMENTAL_BY_TIME_RANGE
    steps: list[AuditStep] = []
    uses: dict[str, int] = {}
    for call in snap.model.audits:
        audit = audits.get(call.name)
        # A model may use one audit several times (accepted_range on two columns): each
        # use is a result of its own, `name#2` from the second on, so that one passing
        # cannot stand for another (a model's intervals wait for all its blocking ones).
        uses[call.name] = uses.get(call.name, 0) + 1
        name = call.name if uses[call.name] == 1 else f"{call.name}#{uses[call.name]}"
        sql = audit_sql(call.name, dict(call.args), audit, snap.table, start, end, execution, views)
        if scoped and time_column is not None:
            sql = batch_rows(sql, snap.table, time_column, start, end)
        step: AuditStep = {
            "type": "audit",
            "label": f"audit {snap.name}: {name}",
            "model": snap.name,
            "version": snap.version,
            "audit": name,
            "blocking": call.blocking and (audit.blocking if audit else True),
            "sql": sql,
        }
        if batch:
            step["batch"] = [start, end]
        steps.append(step)
    return steps


def batch_rows(sql: str, table: str, time_column: str, start: int, end: int) -> str:
    """An audit's ``sql`` reading, where it reads the model's own ``table``, only the
    rows of the batch [start, end) (as SQLMesh audits a batch of an
    INCREMENTAL_BY_TIME_RANGE model): the time column compared as the build compares it
    when it clears the batch's range, with the bounds as literals.

    >>> batch_rows("SELECT * FROM s.t WHERE x IS NULL", "s.t", "ds", 0, 86_400_000)
    "SELECT * FROM (SELECT * FROM s.t WHERE `ds` >= '1970-01-01 00:00:00' AND `ds` < '1970-01-02 00:00:00') AS t WHERE x IS NULL"
    """
    own = table.lower()
    low, high = exp.Literal.string(to_ts(start)), exp.Literal.string(to_ts(end))

    def scope(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Table) or ".".join(p.name for p in node.parts).lower() != own:
            return node
        column = exp.column(exp.to_identifier(time_column, quoted=True))
        rows = (
            exp.select("*")
            .from_(table_expr(table))
            .where(
                exp.and_(
                    exp.GTE(this=column, expression=low),
                    exp.LT(this=column.copy(), expression=high),
                )
            )
        )
        alias = node.args.get("alias")
        name = (
            alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(node.name))
        )
        return exp.Subquery(this=rows, alias=name)

    return sqlglot.parse_one(sql, read="spark").transform(scope).sql("spark")


def _keeps_table(model: Model) -> bool:
    """Whether a forward-only change of ``model`` keeps a table of its rows that a view
    reads by the query's columns: a materialized SQL model (a Python model's query reads
    rows its function returns in a build; a VIEW model's view is made again)."""
    return model.kind.materialized and model.python_code is None and model.query_sql is not None


def parents_first(snapshots: Iterable[Snapshot]) -> list[Snapshot]:
    """``snapshots`` in the order their environment's views are swapped: each after every
    model of the plan it reads (topological, ties by name).

    The swap is one statement per view, so a reader between two statements sees some
    views old and some new. Parents first, the views already swapped at any moment are
    closed under parents: a reader never sees a model's new view beside an older parent
    than its definition expects (a new column of the parent, its new rows). What remains
    is the reverse, between the swaps of a parent and its child: a new parent beside its
    old child (docs/reliability.md, the promotion window).
    """
    by_name = {s.name: s for s in snapshots}
    return [by_name[name] for name in topological_order({n: s.model for n, s in by_name.items()})]


def environment_view_sql(snap: Snapshot) -> str:
    """The query of an environment's view of ``snap`` (a model with views): its physical
    table's rows, in the model's columns for an INCREMENTAL_BY_TIME_RANGE model (whose
    table stores its time column last), else ``*``. What the views step makes, and what
    ``sluice drift`` expects the catalog to hold (:mod:`sluice.core.drift`)."""
    columns = output_columns(snap.model) if snap.model.kind.is_incremental_by_time else None
    select = ", ".join(quote_column(c) for c in columns) if columns else "*"
    return f"SELECT {select} FROM {sql_name(snap.table)}"


def view_steps(plan: Plan, previous: Mapping[str, str] | None) -> ViewsStep:
    """Point the environment's views at the plan's versions, parents first
    (:func:`parents_first`).

    ``previous`` maps model name -> version the environment's views point at now (None
    when the environment has no views yet, so every view is created).
    """
    env = plan.environment
    tables = physical_names(plan.snapshots)
    embedded = embedded_queries(plan.snapshots)
    # A forward-only change keeps its table (same version) but may change its columns:
    # its view is made again, since a view keeps the columns it was created with.
    # (A child of such a change keeps its columns, unless it reads it through `*`, where
    # its column impact is not known.)
    reshaped = {
        c.name
        for c in plan.directly_modified
        if not c.rebuilds
        and (c.columns is None or c.columns.unknown or c.columns.added or c.columns.removed)
    } | {
        c.name
        for c in plan.indirectly_modified
        if not c.rebuilds
        and c.category == Category.FORWARD_ONLY
        and (c.columns is None or c.columns.unknown)
    }
    views: list[ViewSpec] = []
    for snap in parents_first(plan.snapshots):
        if not snap.model.kind.has_views:
            continue
        if (
            previous is not None
            and previous.get(snap.name) == snap.version
            and snap.name not in reshaped
        ):
            continue
        columns = output_columns(snap.model) if snap.model.kind.is_incremental_by_time else None
        view: ViewSpec = {
            "view": view_name(snap.name, env),
            "sql": environment_view_sql(snap),
            "properties": checked_pairs(
                snap.model, snap.model.virtual_properties, "virtual_properties"
            ),
        }
        if snap.name in reshaped and _keeps_table(snap.model):
            # Its kept table lacks the columns the change added until a batch writes
            # them: prod adds them to it, any other environment reads them as NULLs.
            view["fill"] = {
                "table": snap.table,
                "query": render_query(
                    snap.model,
                    tables,
                    snap.table,
                    plan.end,
                    plan.end,
                    plan.execution_time,
                    embedded,
                ),
                "columns": columns or None,
                "alter": env == PROD,
            }
        views.append(view)
    # Views of models the plan does not hold: those it removes, and (when planned against
    # another environment) those the environment has that the plan no longer knows.
    gone = set(plan.removed) | (set(previous or ()) - {s.name for s in plan.snapshots})
    drops = [view_name(name, env) for name in sorted(gone)]
    # Only the schemas of views being created: CREATE DATABASE costs a metastore call each.
    touched = {v["view"].rsplit(".", 1)[0] for v in views}
    schemas = sorted(touched)
    return {
        "type": "views",
        "label": f"point {env}'s views at the new versions",
        "environment": env,
        "schemas": schemas,
        "views": views,
        "drop": drops,
    }
