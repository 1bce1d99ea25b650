"""The helpers of the state's plain records."""

from __future__ import annotations

import pytest

from sluice.core.state.records import chunks


@pytest.mark.parametrize("count", [0, 1, 399, 400, 401, 1_201])
def test_chunks_keep_every_item_in_order_within_the_size(count: int) -> None:
    items = [(f"m{i}", f"v{i}") for i in range(count)]
    runs = list(chunks(items, 400))
    assert [item for run in runs for item in run] == items
    assert all(0 < len(run) <= 400 for run in runs)
    assert len(runs) == -(-count // 400)
