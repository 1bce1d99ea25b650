"""The README's shared catalog: a Hive metastore in PostgreSQL, as Spark settings.

One place for the settings the shared-catalog test and ``bench/view_swap_bench.py`` use.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url

JAR = Path("/usr/share/java/postgresql.jar")
"""PostgreSQL's JDBC driver as Debian installs it (scripts/ensure-postgres.sh)."""


def postgres_metastore_conf(metastore_url: str, warehouse: Path) -> dict[str, str]:
    """Spark settings for a Hive metastore in the PostgreSQL database ``metastore_url``
    and a warehouse in ``warehouse``."""
    url = make_url(metastore_url)
    return {
        "spark.driver.extraClassPath": str(JAR),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:postgresql://{url.host}:{url.port}/{url.database}"
        ),
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "spark.hadoop.javax.jdo.option.ConnectionUserName": url.username or "",
        "spark.hadoop.javax.jdo.option.ConnectionPassword": url.password or "",
        # the schema's tables and columns, not its constraints: DataNucleus adding those
        # while its other connection holds a transaction waits for ever
        "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
        "spark.hadoop.datanucleus.schema.autoCreateSchema": "true",
        "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
        "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
        "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.sql.warehouse.dir": warehouse.as_uri(),
    }
