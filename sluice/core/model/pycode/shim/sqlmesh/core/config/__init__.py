"""Sluice's stand-in for ``sqlmesh.core.config``, for a project's config.py.

Each class records the keyword arguments it is given (:class:`.recorded.Recorded`); the
sandboxed process turns the chosen ``Config`` into the data a config.yaml holds, and the
service validates that. A name SQLMesh exports that is not here is an ImportError naming
it and what is (PEP 562's module ``__getattr__``).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from .common import EnvironmentSuffixTarget, TableNamingConvention, VirtualEnvironmentMode
from .linter import LinterConfig
from .recorded import Recorded


class Config(Recorded):
    """The project's configuration: its keyword arguments are config.yaml's sections."""


class ModelDefaultsConfig(Recorded):
    """``model_defaults``."""


class NameInferenceConfig(Recorded):
    """``model_naming``."""


class GatewayConfig(Recorded):
    """A gateway: ``connection``, ``state_connection``, ``test_connection``, ``variables``..."""


class PlanConfig(Recorded):
    """``plan``."""


class RunConfig(Recorded):
    """``run``."""


class MigrationConfig(Recorded):
    """``migration``."""


class FormatConfig(Recorded):
    """``format``."""


class UIConfig(Recorded):
    """``ui``."""


class JanitorConfig(Recorded):
    """``janitor``."""


class BuiltInSchedulerConfig(Recorded):
    """``default_scheduler``: SQLMesh's built-in scheduler."""

    type_name = "builtin"


class DbtConfig(Recorded):
    """``dbt``."""


class AutoCategorizationMode(Enum):
    FULL = "full"
    SEMI = "semi"
    OFF = "off"


class CategorizerConfig(Recorded):
    """``plan.auto_categorize_changes``: a mode per kind of model."""

    @classmethod
    def _all(cls, mode: AutoCategorizationMode) -> CategorizerConfig:
        return cls(external=mode, python=mode, sql=mode, seed=mode)

    @classmethod
    def all_full(cls) -> CategorizerConfig:
        return cls._all(AutoCategorizationMode.FULL)

    @classmethod
    def all_semi(cls) -> CategorizerConfig:
        return cls._all(AutoCategorizationMode.SEMI)

    @classmethod
    def all_off(cls) -> CategorizerConfig:
        return cls._all(AutoCategorizationMode.OFF)


class ConnectionConfig(Recorded):
    """A connection; each engine's class sets its ``type``."""


class DuckDBAttachOptions(Recorded):
    """A DuckDB connection's attached catalog (``catalogs: {name: {type, path, ...}}``)."""


def _connection(name: str, type_name: str) -> type[ConnectionConfig]:
    return type(name, (ConnectionConfig,), {"type_name": type_name, "__module__": __name__})


# The engines' connection classes, by SQLMesh's name and config.yaml's `type`.
_ENGINES = {
    "DuckDBConnectionConfig": "duckdb",
    "MotherDuckConnectionConfig": "motherduck",
    "SnowflakeConnectionConfig": "snowflake",
    "DatabricksConnectionConfig": "databricks",
    "BigQueryConnectionConfig": "bigquery",
    "GCPPostgresConnectionConfig": "gcp_postgres",
    "RedshiftConnectionConfig": "redshift",
    "PostgresConnectionConfig": "postgres",
    "MySQLConnectionConfig": "mysql",
    "MSSQLConnectionConfig": "mssql",
    "AzureSQLConnectionConfig": "azuresql",
    "FabricConnectionConfig": "fabric",
    "SparkConnectionConfig": "spark",
    "TrinoConnectionConfig": "trino",
    "ClickhouseConnectionConfig": "clickhouse",
    "AthenaConnectionConfig": "athena",
    "RisingwaveConnectionConfig": "risingwave",
    "StarRocksConnectionConfig": "starrocks",
}
_CONNECTIONS = {name: _connection(name, kind) for name, kind in _ENGINES.items()}
DuckDBConnectionConfig = _CONNECTIONS["DuckDBConnectionConfig"]
BaseDuckDBConnectionConfig = DuckDBConnectionConfig
MotherDuckConnectionConfig = _CONNECTIONS["MotherDuckConnectionConfig"]
SnowflakeConnectionConfig = _CONNECTIONS["SnowflakeConnectionConfig"]
DatabricksConnectionConfig = _CONNECTIONS["DatabricksConnectionConfig"]
BigQueryConnectionConfig = _CONNECTIONS["BigQueryConnectionConfig"]
GCPPostgresConnectionConfig = _CONNECTIONS["GCPPostgresConnectionConfig"]
RedshiftConnectionConfig = _CONNECTIONS["RedshiftConnectionConfig"]
PostgresConnectionConfig = _CONNECTIONS["PostgresConnectionConfig"]
MySQLConnectionConfig = _CONNECTIONS["MySQLConnectionConfig"]
MSSQLConnectionConfig = _CONNECTIONS["MSSQLConnectionConfig"]
AzureSQLConnectionConfig = _CONNECTIONS["AzureSQLConnectionConfig"]
FabricConnectionConfig = _CONNECTIONS["FabricConnectionConfig"]
SparkConnectionConfig = _CONNECTIONS["SparkConnectionConfig"]
TrinoConnectionConfig = _CONNECTIONS["TrinoConnectionConfig"]
ClickhouseConnectionConfig = _CONNECTIONS["ClickhouseConnectionConfig"]
AthenaConnectionConfig = _CONNECTIONS["AthenaConnectionConfig"]
RisingwaveConnectionConfig = _CONNECTIONS["RisingwaveConnectionConfig"]
StarRocksConnectionConfig = _CONNECTIONS["StarRocksConnectionConfig"]

__all__ = [
    "AthenaConnectionConfig",
    "AutoCategorizationMode",
    "AzureSQLConnectionConfig",
    "BaseDuckDBConnectionConfig",
    "BigQueryConnectionConfig",
    "BuiltInSchedulerConfig",
    "CategorizerConfig",
    "ClickhouseConnectionConfig",
    "Config",
    "ConnectionConfig",
    "DatabricksConnectionConfig",
    "DbtConfig",
    "DuckDBAttachOptions",
    "DuckDBConnectionConfig",
    "EnvironmentSuffixTarget",
    "FabricConnectionConfig",
    "FormatConfig",
    "GCPPostgresConnectionConfig",
    "GatewayConfig",
    "JanitorConfig",
    "LinterConfig",
    "MSSQLConnectionConfig",
    "MigrationConfig",
    "ModelDefaultsConfig",
    "MotherDuckConnectionConfig",
    "MySQLConnectionConfig",
    "NameInferenceConfig",
    "PlanConfig",
    "PostgresConnectionConfig",
    "Recorded",
    "RedshiftConnectionConfig",
    "RisingwaveConnectionConfig",
    "RunConfig",
    "SnowflakeConnectionConfig",
    "SparkConnectionConfig",
    "StarRocksConnectionConfig",
    "TableNamingConvention",
    "TrinoConnectionConfig",
    "UIConfig",
    "VirtualEnvironmentMode",
]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise ImportError(
        f"Sluice's stand-in for sqlmesh.core.config has no {name}: config.py may use "
        f"{', '.join(sorted(n for n in __all__ if n != 'Recorded'))}",
        name=f"sqlmesh.core.config.{name}",
    )
