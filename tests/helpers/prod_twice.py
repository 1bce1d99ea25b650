"""Prod recorded as built twice, with no Spark (for a rollback to have a promotion to go
back to): the example project, then the same with a column more in customers a minute
later (:func:`prod_recorded_twice`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers.cases import record_prod
from tests.helpers.fold_settings import fold_settings

REPO = Path(__file__).resolve().parents[2]


def prod_recorded_twice(
    root: Path,
    url: str,
    now: int,
    *,
    gate: str = "",
    commits: tuple[str | None, str | None] = (None, None),
) -> Path:
    """The example project copied to ``root/v1`` (its settings in config.yaml, ``gate``
    appended) recorded as prod in the state at ``url`` at ``now``; then ``root/v2``, the
    same with ``1 AS one`` in customers, a minute later. ``commits``: what each promotion
    records it was promoted from (None: nothing). Returns the second's folder."""
    first = root / "v1"
    shutil.copytree(REPO / "examples" / "jaffle_shop", first,
                    ignore=shutil.ignore_patterns(".sluice", "tests"))  # fmt: skip
    fold_settings(first)  # the example's sluice.yaml into config.yaml
    if gate:
        with (first / "config.yaml").open("a") as config:
            config.write(gate)
    record_prod(first, url, now, commit=commits[0])
    second = root / "v2"
    shutil.copytree(first, second)
    customers = second / "models" / "customers.sql"
    customers.write_text(
        customers.read_text().replace("  c.last_name,\n", "  c.last_name,\n  1 AS one,\n")
    )
    record_prod(second, url, now + 60_000, commit=commits[1])
    return second
