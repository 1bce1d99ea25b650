"""Settings shared by the fuzz tests.

By default each run draws the same examples (``derandomize``), so CI is reproducible and
a failure is one that anyone gets again. To explore, run with fresh random examples and
more of them::

    SLUICE_FUZZ_RANDOM=1 SLUICE_FUZZ_EXAMPLES=5000 pytest tests/fuzz

Hypothesis then prints the failing example and a ``@reproduce_failure`` line. No example
database is kept (``database=None``); Hypothesis still caches Unicode tables and constants
in ``.hypothesis/``, which ignores itself in git.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

RANDOM = os.environ.get("SLUICE_FUZZ_RANDOM") == "1"


def examples(default: int) -> int:
    """``default``, or the count in ``SLUICE_FUZZ_EXAMPLES``."""
    return int(os.environ.get("SLUICE_FUZZ_EXAMPLES", default))


def fuzz(default: int) -> settings:
    """Hypothesis settings for one fuzz test of about ``default`` examples."""
    return settings(
        max_examples=examples(default),
        deadline=None,
        database=None,
        derandomize=not RANDOM,
        print_blob=RANDOM,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
