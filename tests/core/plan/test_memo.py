"""The planner's caches are bounded in entries and in the query text they were made from
(sluice/core/plan/memo.py): a stream of new query texts, as a service planning pull
request after pull request makes, never holds more than the bound."""

from __future__ import annotations

import pytest

from sluice.core.model.definition import Kind, KindName, Model
from sluice.core.plan import column_types, lineage, memo, outputs
from sluice.core.plan.column_types import ColumnTypes
from sluice.core.plan.outputs import OutputColumns


def test_least_recently_used_leaves_first_past_the_entries() -> None:
    cache: memo.QueryCache[str, int] = memo.QueryCache(entries=3, chars=1000)
    for n in range(3):
        cache.put(f"q{n}", "x", n)
    assert cache.get("q0") == 0  # used: q1 is the least recently used now
    cache.put("q3", "x", 3)
    assert list(cache) == ["q2", "q0", "q3"]
    assert cache.get("q1") is memo.MISSING
    assert len(cache) == 3


def test_past_the_characters_entries_leave_and_a_text_longer_is_not_kept() -> None:
    cache: memo.QueryCache[str, None] = memo.QueryCache(entries=100, chars=100)
    cache.put("a", "a" * 40, None)  # None is a value, not a miss
    cache.put("b", "b" * 40, None)
    assert cache.get("a") is None
    cache.put("c", "c" * 40, None)  # 120 characters: b, least recently used, leaves
    assert list(cache) == ["a", "c"] and cache.held() == 80
    cache.put("a", "a" * 10, None)  # put again: counted once, at its new size
    assert cache.held() == 50
    cache.put("huge", "h" * 101, None)
    assert cache.get("huge") is memo.MISSING and cache.held() == 50
    cache.clear()
    assert not cache and cache.held() == 0


def test_the_planner_s_caches_share_the_bounds() -> None:
    for cache in (column_types._CACHE, lineage._CACHE, outputs._READS, outputs._RESOLVED):
        assert isinstance(cache, memo.QueryCache)
        assert (cache.entries, cache.chars) == (memo.ENTRIES, memo.CHARS)
    assert memo.CHARS >= 2 * (4 << 20)  # two of the largest model file the loader reads


@pytest.mark.parametrize("cached", ["types", "outputs", "shapes"])
def test_new_query_texts_fill_a_cache_to_its_bound_of_characters(
    cached: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = memo.QueryCache[object, object](entries=memo.ENTRIES, chars=20_000)
    name = {"types": "_CACHE", "outputs": "_RESOLVED", "shapes": "_CACHE"}[cached]
    module = {"types": column_types, "outputs": outputs, "shapes": lineage}[cached]
    monkeypatch.setattr(module, name, bound)
    parent = Model("s.p", Kind(KindName.FULL), query_sql="SELECT 1 AS id, 'a' AS name")
    columns = ", ".join(f"name AS c{n}" for n in range(100))
    for n in range(60):  # each a new text of about 1,400 characters, as a new PR head is
        sql = f"SELECT /* head {n} */ id, {columns} FROM s.p"
        child = Model("s.m", Kind(KindName.FULL), query_sql=sql, depends_on=("s.p",))
        models = {"s.p": parent, "s.m": child}
        if cached == "types":
            assert ColumnTypes(models)("s.m") is not None
        elif cached == "outputs":
            assert OutputColumns(models)("s.m") is not None
        else:
            assert not lineage.model_shape(child, {"s.p": ("id", "name")}).unknown
        assert bound.held() <= 20_000
    assert 10 <= len(bound) <= 20_000 // len(sql) + 1
