"""Text on its way out of the service (PR comments, checks, replies, logs), redacted.

Secrets are replaced in the forms a program would print them, not only verbatim: URL
encoded, hex, and base64 (standard and URL-safe, at any of the three byte alignments a
secret can have inside a longer base64 text). Host paths (the work directory, the
Python installation, the home directory) become short placeholders, so a PR comment
never shows where the service keeps its files.

>>> redact = Redactor(["hunter2-secret"], paths=[Path("/srv/sluice")])
>>> redact("token=hunter2-secret in /srv/sluice/trees/x")
'token=*** in <workdir>/trees/x'
>>> import base64
>>> "***" in redact("leak " + base64.b64encode(b"x:hunter2-secret:y").decode())
True
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

MASK = "***"
_MIN_ENCODED = 8  # shorter encoded fragments would mask ordinary text


def variants(secret: str) -> set[str]:
    """``secret`` and the encodings of it that can appear in printed text."""
    raw = secret.encode()
    found = {secret, quote(secret, safe=""), raw.hex(), raw.hex().upper()}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for shift in range(3):
            text = encode(b"\0" * shift + raw).decode().rstrip("=")
            # Characters mixing the secret with its neighbours differ from text to text:
            # keep only those that encode the secret's own bits.
            start = -(-shift * 4 // 3) + (1 if shift else 0)
            core = text[start : len(text) - 2]
            if len(core) >= _MIN_ENCODED:
                found.add(core)
    return {v for v in found if v}


class Redactor:
    """Replaces secrets and host paths in text (see the module docstring)."""

    def __init__(self, secrets: Iterable[str], *, paths: Iterable[Path] = ()) -> None:
        masks = {v for s in secrets if s for v in variants(s)}
        # Longest first, so a secret's encoding is not half-replaced by a shorter one.
        self._masks = sorted(masks, key=len, reverse=True)
        places = [(Path(p).resolve(), "<workdir>") for p in paths]
        places += [(Path(sys.prefix).resolve(), "<python>")]
        home = os.environ.get("HOME")
        if home and len(home) > 1:
            places.append((Path(home).resolve(), "~"))
        self._paths = sorted(((str(p), name) for p, name in places), key=lambda x: -len(x[0]))

    def __call__(self, text: str) -> str:
        for mask in self._masks:
            text = text.replace(mask, MASK)
        for path, name in self._paths:
            if path not in ("", "/"):
                text = text.replace(path, name)
        return text
