"""Text leaving the service never carries a secret, in any encoding a program would print
it, nor the host's paths (docs/security.md, "Code from a pull request runs with no
credential": what the driver prints is quoted into the PR only after this)."""

from __future__ import annotations

import base64
import random
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from sluice.bot.flow.deps import make_deps
from sluice.bot.present.redact import Redactor, variants

SECRET = "ghp_Zq8w3Lk2Vx9Tn4Rb7Yc1Md6Pf0Hs5Ja"


@pytest.mark.parametrize(
    "printed",
    [
        SECRET,
        quote(SECRET + "/="),
        SECRET.encode().hex(),
        SECRET.encode().hex().upper(),
        base64.b64encode(SECRET.encode()).decode(),
        base64.b64encode(b"user:" + SECRET.encode()).decode(),  # a Basic auth header
        base64.urlsafe_b64encode(b'{"token": "' + SECRET.encode() + b'"}').decode(),
        base64.b64encode(b"ab" + SECRET.encode() + b"cd").decode().rstrip("="),
    ],
)
def test_a_secret_is_masked_in_every_printed_form(printed: str) -> None:
    out = Redactor([SECRET])(f"error: {printed} end")
    assert "***" in out
    for form in variants(SECRET):
        assert form not in out


def test_any_alignment_in_any_surrounding_bytes_is_masked() -> None:
    rng = random.Random(7)
    redact = Redactor([SECRET])
    for _ in range(300):
        data = (
            rng.randbytes(rng.randrange(0, 9))
            + SECRET.encode()
            + rng.randbytes(rng.randrange(0, 9))
        )
        encode = rng.choice([base64.b64encode, base64.urlsafe_b64encode])
        assert "***" in redact(encode(data).decode()), data


def test_ordinary_text_and_short_secrets_do_not_mangle_output() -> None:
    redact = Redactor([SECRET, ""])
    text = "SELECT order_id, amount FROM jaffle.orders WHERE status = 'completed'"
    assert redact(text) == text


def test_host_paths_become_placeholders(tmp_path: Path) -> None:
    work = tmp_path / "srv" / "sluice"
    redact = Redactor([], paths=[work])
    out = redact(f"cannot read {work}/trees/x/models/a.sql via {sys.prefix}/lib/python3.11")
    assert str(tmp_path) not in out and sys.prefix not in out
    assert "<workdir>/trees/x/models/a.sql" in out and "<python>/lib" in out


def test_the_flow_scrubs_secrets_trees_and_the_workdir(tmp_path: Path) -> None:
    deps = make_deps(project_python="on", forge_for=lambda _e: None, workdir=tmp_path / "w",  # type: ignore[arg-type,return-value]
                             state_url=f"sqlite:///{tmp_path / 's.db'}", secrets=(SECRET,))  # fmt: skip
    tree = tmp_path / "w" / "trees" / "o_r" / ("a" * 40)
    leaked = base64.b64encode(f"k={SECRET}".encode()).decode()
    text = deps.scrub(
        f"{tree}/models/x.sql:3: bad; env {leaked}; log {tmp_path / 'w'}/logs/j.log", tree
    )
    assert text.startswith("models/x.sql:3: bad")
    assert "***" in text and str(tmp_path) not in text and "<workdir>/logs/j.log" in text
