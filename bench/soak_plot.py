"""Draw a soak run's samples (``bench/soak.py --csv``) as an SVG of small multiples, one
panel a measure against time, with no plotting library (issue 45, point 3).

Usage: python bench/soak_plot.py RUN.csv OUT.svg

>>> rows = [{"seconds": "0", "rss_mib": "1"}, {"seconds": "60", "rss_mib": "3"}]
>>> "polyline" in svg(rows, [("rss_mib", "service RSS (MiB)")])
True
"""

from __future__ import annotations

import csv
import sys
from html import escape
from pathlib import Path

PANELS = [
    ("rss_mib", "service RSS (MiB)"),
    ("threads", "threads"),
    ("open_files", "open files"),
    ("temp_files", "temp files"),
    ("state_db_mib", "state database (MiB)"),
    ("workdir_mib", "workdir (MiB)"),
    ("state_rows", "state rows"),
    ("prs", "pull requests opened"),
]
WIDTH, HEIGHT, PAD = 360, 130, 50


def svg(rows: list[dict[str, str]], panels: list[tuple[str, str]]) -> str:
    """The panels of ``rows`` as one SVG document (two panels a row)."""
    xs = [float(r["seconds"]) / 60 for r in rows]
    span = max(xs[-1], 1e-9)
    parts = []
    for index, (key, title) in enumerate(panels):
        ys = [float(r[key]) for r in rows]
        low, high = 0.0, max(*ys, 1.0)  # from zero: a growth is shown as it is
        left = (index % 2) * (WIDTH + PAD) + PAD
        top = (index // 2) * (HEIGHT + PAD) + PAD
        points = " ".join(
            f"{left + x / span * WIDTH:.1f},{top + HEIGHT - (y - low) / (high - low) * HEIGHT:.1f}"
            for x, y in zip(xs, ys, strict=True)
        )
        parts += [
            f'<rect x="{left}" y="{top}" width="{WIDTH}" height="{HEIGHT}" fill="none" stroke="#999"/>',
            f'<text x="{left}" y="{top - 20}" font-size="12" font-weight="bold">{escape(title)}</text>',
            f'<text x="{left}" y="{top - 6}" font-size="11">{ys[0]:g} at 0 min, {ys[-1]:g} at '
            f"{xs[-1]:.0f} min (min {min(ys):g}, max {max(ys):g}; axis from 0)</text>",
            f'<polyline points="{points}" fill="none" stroke="#1f6feb" stroke-width="1.5"/>',
            f'<text x="{left}" y="{top + HEIGHT + 14}" font-size="10">0</text>',
            f'<text x="{left + WIDTH - 30}" y="{top + HEIGHT + 14}" font-size="10">{xs[-1]:.0f} min</text>',
        ]
    rows_of_panels = (len(panels) + 1) // 2
    width = 2 * (WIDTH + PAD) + PAD
    height = rows_of_panels * (HEIGHT + PAD) + PAD
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
        + "".join(parts)
        + "</svg>\n"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with open(argv[0], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    Path(argv[1]).write_text(svg(rows, PANELS), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
