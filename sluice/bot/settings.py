"""The service's settings, from the environment (``SLUICE_*``); read when the app is made.

Secrets are :class:`pydantic.SecretStr`, so printing the settings, logging them, or an
error page never shows them.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sluice.core.errors import ConfigError


class ServiceSettings(BaseSettings):
    """Everything ``sluice serve`` needs; each field is ``SLUICE_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="SLUICE_", extra="ignore", frozen=True)

    github_app_id: str | None = None
    github_private_key: SecretStr | None = None
    github_token: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    github_request_interval: float = Field(default=0.25, ge=0)
    github_write_interval: float = Field(default=1.0, ge=0)
    """Pauses between GitHub API calls and between writes (GitHub's advice for apps)."""
    webhook_secret: SecretStr | None = None
    """GitHub's webhook secret (``X-Hub-Signature-256``)."""
    gitlab_url: str = "https://gitlab.com"
    gitlab_token: SecretStr | None = None
    """A GitLab access token with the ``api`` scope (project, group or personal)."""
    gitlab_webhook_secret: SecretStr | None = None
    """GitLab's webhook secret token (``X-Gitlab-Token``)."""
    database_url: SecretStr | None = None
    workdir: Path = Path(".sluice-service")
    project_path: str = "."
    """Where the Sluice project is inside each repository."""
    max_attempts: int = Field(default=3, ge=1)
    workers: int = Field(default=1, ge=1)
    job_lease_seconds: float = Field(default=60.0, gt=0)
    """A running job's lease; a worker that stops renewing it loses the job after this."""
    janitor_interval_seconds: float = Field(default=3600.0, ge=0)
    """How often each repository's janitor runs (drops invalidated and expired
    environments and tables unreferenced for the project's TTL); 0 turns it off."""
    max_body_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)
    insecure_no_signature: bool = False
    """Development only: accept unsigned deliveries (``sluice serve --insecure``)."""

    @model_validator(mode="after")
    def _secured(self) -> ServiceSettings:
        secrets = (self.webhook_secret, self.gitlab_webhook_secret)
        if not any(s is not None and s.get_secret_value() for s in secrets) and (
            not self.insecure_no_signature
        ):
            raise ConfigError(
                "neither SLUICE_WEBHOOK_SECRET nor SLUICE_GITLAB_WEBHOOK_SECRET is set: "
                "webhook deliveries cannot be verified",
                hint="set SLUICE_WEBHOOK_SECRET to the secret of the GitHub webhook or App, "
                "and/or SLUICE_GITLAB_WEBHOOK_SECRET to the GitLab webhook's secret token "
                "(a forge without its secret gets 401 on every delivery); for local "
                "development only, start with `sluice serve --insecure`",
            )
        if self.github_app_id and self.github_private_key is None:
            raise ConfigError(
                "SLUICE_GITHUB_APP_ID is set but SLUICE_GITHUB_PRIVATE_KEY is not",
                hint="give the App's private key (PEM text), or use SLUICE_GITHUB_TOKEN",
            )
        return self

    def state_url(self) -> str:
        """The state database: SLUICE_DATABASE_URL, else SQLite in the work directory."""
        if self.database_url is not None and self.database_url.get_secret_value():
            return self.database_url.get_secret_value()
        return f"sqlite:///{(self.workdir / 'state.db').resolve()}"

    def secrets(self) -> list[str]:
        """Every secret value, for scrubbing text that leaves the service."""
        values = [self.github_private_key, self.github_token, self.webhook_secret,
                  self.gitlab_token, self.gitlab_webhook_secret]  # fmt: skip
        out = [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]
        url = self.database_url.get_secret_value() if self.database_url else ""
        if "@" in url and ":" in url.split("@", 1)[0].split("//", 1)[-1]:
            out.append(url.split("@", 1)[0].split("//", 1)[-1].split(":", 1)[1])
        return out
