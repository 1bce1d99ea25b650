"""``sluice demo`` finds the example project it copies, wherever its module sits in the
package (a move of ``entry/demo.py`` once pointed it at ``sluice/examples``). No Spark."""

from __future__ import annotations

from sluice.bot.entry import demo


def test_the_demo_finds_the_example_project() -> None:
    assert demo.EXAMPLE.is_dir(), demo.EXAMPLE
    assert (demo.EXAMPLE / "config.yaml").is_file()
    assert (demo.EXAMPLE / "models").is_dir()
