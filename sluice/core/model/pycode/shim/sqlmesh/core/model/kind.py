"""``ModelKindName`` as model files use it."""

from enum import StrEnum


class ModelKindName(StrEnum):
    FULL = "FULL"
    VIEW = "VIEW"
    INCREMENTAL_BY_TIME_RANGE = "INCREMENTAL_BY_TIME_RANGE"
    INCREMENTAL_BY_UNIQUE_KEY = "INCREMENTAL_BY_UNIQUE_KEY"
    SEED = "SEED"
    EXTERNAL = "EXTERNAL"
