"""A forge's pull requests and checks as the UI reads them (:class:`PullSource`), for the
forges that keep them where Sluice can read them back: the local forge (``sluice pr``,
``sluice ui``) and the in-memory one. The service's hosted forges get theirs with
sign-in (issue 44), read as the signed-in user."""

from __future__ import annotations

from sluice.bot.forge.base import Check, ForgeError, PullRequest
from sluice.bot.forge.local import LocalForge
from sluice.bot.forge.memory import MemoryForge


class LocalPulls:
    """A :class:`LocalForge`'s pull requests and the checks stored beside them."""

    def __init__(self, forge: LocalForge) -> None:
        self.forge = forge

    def pull(self, number: int) -> PullRequest | None:
        try:
            return self.forge.pull_request(number)
        except ForgeError:
            return None

    def checks(self, sha: str) -> list[Check]:
        found = []
        for name, data in sorted(self.forge.checks(sha).items()):
            found.append(
                Check(
                    name=name,
                    status=str(data.get("status", "")),
                    title=str(data.get("title", "")),
                    summary=str(data.get("summary", "")),
                    conclusion=data.get("conclusion"),
                )
            )
        return found


class MemoryPulls:
    """A :class:`MemoryForge`'s pull requests and checks."""

    def __init__(self, forge: MemoryForge) -> None:
        self.forge = forge

    def pull(self, number: int) -> PullRequest | None:
        return self.forge.pulls.get(number)

    def checks(self, sha: str) -> list[Check]:
        return [c for _, c in sorted(self.forge.checks.get(sha, {}).items())]
