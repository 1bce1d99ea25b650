"""No test module imports another: what several test modules share lives in ``tests/helpers/``
(or a ``conftest.py``, or a wire fake beside the tests), so that running, moving or deleting
one test module never changes what another collects."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _module_name(path: Path) -> str:
    """The dotted name of ``path`` (a file under the repository root)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.Module, module: str) -> set[str]:
    """Every module name ``tree`` (the source of ``module``) imports, anywhere in it
    (inside functions too): ``import a.b`` gives ``a.b``; ``from a import b`` gives
    ``a`` and ``a.b`` (``b`` may be a module); relative imports are resolved."""
    names: set[str] = set()
    package = module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def imported_test_modules(source: str, module: str) -> list[str]:
    """The ``test_*`` modules that ``source`` (the text of ``module``) imports."""
    found = set()
    for name in _imported(ast.parse(source), module):
        parts = name.split(".")
        for i, part in enumerate(parts):
            if part.startswith("test_"):
                found.add(".".join(parts[: i + 1]))
                break
    return sorted(found)


def test_no_test_module_imports_another() -> None:
    sources = [p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts]
    assert len(sources) > 50
    offending = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources
        for name in imported_test_modules(path.read_text(encoding="utf-8"), _module_name(path))
    ]
    assert offending == [], (
        "move what is shared into tests/helpers/ and import it from there: " + "; ".join(offending)
    )


def test_an_import_of_a_test_module_is_found() -> None:
    module = "tests.bot.test_pr_flow"
    source = (
        "from tests.bot.test_service import Service\n"
        "def helper():\n"
        "    import tests.security.test_replay as replay\n"
        "    from . import test_lifecycle\n"
        "    from .test_gitlab_service import gitlab_settings\n"
        "    from ..security import test_fork_head\n"
        "    return replay\n"
    )
    assert imported_test_modules(source, module) == [
        "tests.bot.test_gitlab_service",
        "tests.bot.test_lifecycle",
        "tests.bot.test_service",
        "tests.security.test_fork_head",
        "tests.security.test_replay",
    ]
    harmless = (
        "from tests.helpers.github_service import Service\n"
        "from tests.helpers.cases import load_case\n"
        "import pytest\n"
        "from . import github_wire\n"
    )
    assert imported_test_modules(harmless, module) == []
