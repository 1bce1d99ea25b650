"""When a model downstream of a change keeps its table, and when it is *unaffected*: the
one rule (pure; :mod:`sluice.core.plan.build` applies it, nothing else decides it).

A model whose own definition is the same but whose parents changed is *downstream* of
those changes. Its data fingerprint folds in its parents' (a Merkle chain,
``snapshot/fingerprint.py``), so it always gets a new snapshot; what this rule decides is
its *version*, the physical table its data lives in, and how the plan reports it.

1. **Its output columns first.** A changed parent P (directly modified here, or itself
   reshaped) *reshapes* a downstream model when the model's query, rendered against its
   parents' columns as SQLMesh renders it, is no longer the same:

   - a star of the query takes P's columns (``*``, ``t.*``, ``* EXCEPT (...)``,
     ``* REPLACE (...)``, directly or through CTEs and subqueries, or inside an
     expression: ``STRUCT(*)``, ``HASH(*)``; :mod:`sluice.core.plan.outputs`), and P's
     resolved output columns differ, or are not known on either side; or
   - P gained a column whose name the query uses without saying which table it is of
     (Spark may now resolve the name to P's new column).

   A reshaped model is planned as *directly modified*, as SQLMesh plans it, and gets a
   new version: it is rebuilt in every environment that takes the plan, so its view has
   its query's columns. Its category compares its own lineage before and after
   (:mod:`sluice.core.plan.lineage`): *non-breaking* when it only gains columns (or
   none) and its rows cannot change; *breaking* otherwise (a column lost; a
   ``DISTINCT *``, whose rows a new column can split; a ``STRUCT(*)`` or ``HASH(*)``,
   whose value changes in every row: there SQLMesh keeps the old table, whose values
   are then stale, and Sluice is stricter). *Forward-only* (the model's setting, the
   plan's, or every change that reshapes it is forward-only), it keeps its table as
   those changes keep theirs: the write that next fills it adds the columns it gained,
   and a column it loses is a destructive change (``on_destructive_change``).
   SQLMesh rebuilds a model only forward-only changes reshape, from a preview of the
   parent in development and again when deployed; Sluice keeps no previews, and a table
   built in a pull request's environment from the parent's unchanged table would lack
   the new column in prod too.
   (``@STAR`` is expanded when the project is loaded, so a parent's new column changes
   the model's own query: a direct change already. A Python model's, seed's or external
   table's declared columns are its output columns.)

2. **Otherwise its table stays under non-breaking and forward-only changes.** Its query
   renders the same, so its columns are the same, and a non-breaking change upstream
   only adds columns it cannot read: it keeps its version (a VIEW model is re-pointed:
   a new version, no data). Breaking upstream, it is rebuilt.

3. **Narrowing only hides.** A model of 2 is reported *unaffected* instead of
   indirectly modified when every change reaching it is non-breaking and its lineage is
   fully known and reads none of the changed columns. Its snapshot and version are
   exactly those of 2; breaking and forward-only changes are never narrowed.

>>> from sluice.core.model.definition import Kind, KindName, Model
>>> from sluice.core.plan.outputs import OutputColumns
>>> def model(name, sql, *parents):
...     return Model(name, Kind(KindName.FULL), query_sql=sql, depends_on=parents)
>>> before = {"s.p": model("s.p", "SELECT 1 AS id, 'x' AS name")}
>>> after = {"s.p": model("s.p", "SELECT 1 AS id, 'x' AS name, 2 AS extra")}
>>> changed = {"s.p": Category.NON_BREAKING}
>>> for query in (
...     "SELECT * FROM s.p",                                  # 1: takes extra
...     "WITH c AS (SELECT * FROM s.p) SELECT c.* FROM c",    # 1: through a CTE
...     "SELECT id, HASH(*) AS h FROM s.p",                   # 1: h's value changes
...     "SELECT id, name FROM s.p",                           # 2, then 3: unaffected
... ):
...     child = model("s.c", query, "s.p")
...     print(reshaped_by(child, changed, OutputColumns(before), OutputColumns(after)))
('s.p',)
('s.p',)
('s.p',)
()
>>> reshaped_category(ColumnImpact(added=("extra",))), reshaped_category(ColumnImpact(changed=("h",)))
(<Category.NON_BREAKING: 'non-breaking'>, <Category.BREAKING: 'breaking'>)
>>> reshaped_category(ColumnImpact(added=("extra",)), [Category.FORWARD_ONLY])
<Category.FORWARD_ONLY: 'forward-only'>
>>> unaffected(Category.NON_BREAKING, [Category.NON_BREAKING], ColumnImpact())
True
>>> unaffected(Category.NON_BREAKING, [Category.NON_BREAKING], ColumnImpact(unknown=True))
False
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sluice.core.model.definition import Model
from sluice.core.plan.lineage import ColumnImpact
from sluice.core.plan.outputs import OutputColumns, model_star_reads, unqualified_names
from sluice.core.snapshot.snapshot import Category


def reshaped_by(
    model: Model,
    changed: Mapping[str, Category],
    old: OutputColumns,
    new: OutputColumns,
) -> tuple[str, ...]:
    """The changed parents that reshape ``model`` (rule 1), in its ``depends_on``
    order; empty when its output is provably as it was.

    Args:
        model: The project's model (its query is the environment's too when downstream).
        changed: Each model directly modified or reshaped so far -> its category.
        old: The environment's output columns.
        new: The project's output columns.
    """
    parents = [p for p in model.depends_on if p in changed]
    if not parents:
        return ()
    reads = model_star_reads(model)  # None: cannot tell, so every parent may be read whole
    found: list[str] = []
    for parent in parents:
        before, after = old(parent), new(parent)
        if reads is None or parent in reads:
            if before is None or after is None or before != after:
                found.append(parent)
            continue
        if before is not None and after is not None:
            gained = set(after) - set(before)
            if gained and unqualified_names(model, gained):
                found.append(parent)
        elif changed[parent] == Category.NON_BREAKING and unqualified_names(model):
            # It added columns nobody can name: any name without a table may be one.
            found.append(parent)
        # Else forward-only or breaking with columns not known: rule 2 (breaking
        # rebuilds it anyway; forward-only keeps the table whatever its names read).
    return tuple(found)


def reshaped_category(
    own: ColumnImpact,
    by: Sequence[Category] | None = None,
    *,
    materialized: bool = True,
) -> Category:
    """A reshaped model's category from its own impact, its query before and after
    rendered against its parents' columns (rule 1). ``by``: the categories of the
    parents that reshape it, when its own definition is the same; reshaped by
    forward-only changes alone, a table keeps its data as they do (rule 1's
    forward-only case)."""
    if by and materialized and all(c == Category.FORWARD_ONLY for c in by):
        return Category.FORWARD_ONLY
    if own.removed or own.changed or own.rows_changed or own.unknown:
        return Category.BREAKING
    return Category.NON_BREAKING


def unaffected(category: Category, reached: Iterable[Category], impact: ColumnImpact) -> bool:
    """Whether a downstream model of rule 2 is reported unaffected (rule 3): only
    non-breaking changes reach it, and its lineage reads none of what they change."""
    reaching = list(reached)
    return (
        category == Category.NON_BREAKING
        and bool(reaching)
        and all(c == Category.NON_BREAKING for c in reaching)
        and impact.touches_nothing
    )
