"""The secrets a hostile PR hunts for, and its SQL probes: a driver (spark-submit's, or a
Spark Connect job's child) must show none of them (tests/security/test_driver_isolation.py,
test_connect_isolation.py)."""

from __future__ import annotations

import base64

PASSWORD = "pw-Db-7f3a9c1e5b"
SECRETS = {
    "SLUICE_GITHUB_TOKEN": "ghs_SluiceAppToken9d8c7b6a5f4e",
    "SLUICE_WEBHOOK_SECRET": "whsec-4b1d2e3f-webhook-9a8b",
    "SLUICE_DATABASE_URL": f"postgresql://sluice:{PASSWORD}@db.internal:5432/sluice",
    "SLUICE_GITHUB_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----MIIEpkeyBODYx1y2z3-----END",
    "GITHUB_TOKEN": "ghp_ActionsTokenQ1w2E3r4T5y6",
}


def leaks(text: str) -> list[str]:
    """Which secrets (or their base64 encodings, or the database password) ``text`` holds."""
    found = []
    for name, value in [*SECRETS.items(), ("the database password", PASSWORD)]:
        encoded = base64.b64encode(value.encode()).decode()
        urlsafe = base64.urlsafe_b64encode(value.encode()).decode()
        for shown in (value, encoded, encoded.rstrip("="), urlsafe.rstrip("=")):
            if shown in text:
                found.append(name)
    return found


# A PR's SQL reading the driver's environment.
_GETENV = "reflect('java.lang.System', 'getenv', '{name}')"
PROBES = [
    "SELECT reflect('java.lang.System', 'getenv') AS everything",
    "SELECT " + ", ".join(f"{_GETENV.format(name=n)} AS {n.lower()}" for n in SECRETS),
    "SELECT " + ", ".join(
        f"base64(java_method('java.lang.System', 'getenv', '{n}')) AS {n.lower()}" for n in SECRETS
    ),
    "SELECT java_method('java.lang.System', 'getProperty', 'user.home') AS home, "
    + _GETENV.format(name="HOME") + " AS home_env, "
    "reflect('java.lang.System', 'getProperty', 'sun.java.command') AS command, "
    "reflect('java.lang.System', 'getProperty', 'java.class.path') AS classpath",
    # Spark's variable substitution pastes these in before parsing, literals included.
    "SELECT '${env:PATH}' AS env_path, '${system:user.home}' AS home_prop, "
    "'${spark.sql.warehouse.dir}' AS warehouse",
]  # fmt: skip
