"""``sqlmesh.core.config.common``: the enumerations config files name."""

from __future__ import annotations

from enum import StrEnum


class EnvironmentSuffixTarget(StrEnum):
    SCHEMA = "schema"
    TABLE = "table"
    CATALOG = "catalog"


class TableNamingConvention(StrEnum):
    SCHEMA_AND_TABLE = "schema_and_table"
    TABLE_ONLY = "table_only"
    HASH_MD5 = "hash_md5"


class VirtualEnvironmentMode(StrEnum):
    FULL = "full"
    DEV_ONLY = "dev_only"
