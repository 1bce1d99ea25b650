"""Schema names per repository (issue 46): a prefix set by the service reaches every
schema naming.py makes, after the catalog; none outside it, as before."""

from __future__ import annotations

import threading

import pytest

from sluice.core.snapshot import naming
from sluice.core.snapshot.naming import (
    PROD,
    physical_schema,
    physical_table,
    reserved_schema,
    schema_prefix,
    view_name,
    view_schema,
)

PREFIX = "sluice_r_acme_x_0123456789ab__"


def test_without_a_prefix_the_names_are_those_of_one_repository() -> None:
    assert physical_schema("jaffle.orders") == "sluice__jaffle"
    assert physical_table("jaffle.orders", "v1") == "sluice__jaffle.jaffle__orders__v1"
    assert view_name("jaffle.orders", PROD) == "jaffle.orders"
    assert view_name("jaffle.orders", "pr_7") == "jaffle__pr_7.orders"
    assert view_name("cat.jaffle.orders", "pr_7") == "cat.jaffle__pr_7.orders"


def test_a_prefix_starts_every_schema_after_the_catalog() -> None:
    with schema_prefix(PREFIX):
        assert physical_schema("jaffle.orders") == f"{PREFIX}sluice__jaffle"
        assert physical_table("jaffle.orders", "v1") == f"{PREFIX}sluice__jaffle.jaffle__orders__v1"
        assert physical_table("cat.jaffle.orders", "v1") == (
            f"cat.{PREFIX}sluice__jaffle.jaffle__orders__v1"
        )
        assert view_name("jaffle.orders", PROD) == f"{PREFIX}jaffle.orders"
        assert view_name("jaffle.orders", "pr_7") == f"{PREFIX}jaffle__pr_7.orders"
        assert view_schema("cat.jaffle", PROD) == f"cat.{PREFIX}jaffle"
        made = [physical_schema("jaffle.orders"), view_schema("jaffle", "dev")]
    assert all(reserved_schema(schema) for schema in made)
    assert view_name("jaffle.orders", PROD) == "jaffle.orders"  # gone with the block


def test_a_prefix_belongs_to_its_thread() -> None:
    seen: list[str] = []
    with schema_prefix(PREFIX):
        other = threading.Thread(target=lambda: seen.append(view_name("jaffle.orders", PROD)))
        other.start()
        other.join()
        assert naming.current_prefix() == PREFIX
    assert seen == ["jaffle.orders"]


@pytest.mark.parametrize(
    "prefix",
    ["acme__", "sluice_r_../x__", "sluice_r_a__b__", "SLUICE_R_A__", "sluice_r_a", "sluice_r___"],
)
def test_only_a_prefix_of_the_service_s_form_is_taken(prefix: str) -> None:
    with pytest.raises(ValueError, match="schema prefix"), schema_prefix(prefix):
        pass


def test_the_repositories_mark_is_reserved_whatever_its_case_or_catalog() -> None:
    assert reserved_schema("SLUICE_R_acme_1__jaffle")
    assert reserved_schema("spark_catalog.sluice_r_acme_1__jaffle")
    assert not reserved_schema("jaffle") and not reserved_schema("sluice__jaffle")
