"""The README's table excerpt, generated from a built table (`make readme` after `make demo`), never hand-copied:
some rows and columns of ``results/demo/tables/table1a.md``, written between the README's excerpt markers.

    python -m tradeoff.report.readme_excerpt results/demo/tables/table1a.md README.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from tradeoff.storage.atomic import atomic_write_text

BEGIN, END = "<!-- excerpt: make readme -->", "<!-- end of excerpt -->"
ROWS = ("FAT", "Generalist")
COLUMNS = ("Natural", "PGD-20", "AutoAttack")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def excerpt(table_md: str, rows=ROWS, columns=COLUMNS) -> str:
    """The title, the header and every line of the named rows (ours, protocols, paper), restricted to the columns
    whose header starts with one of ``columns``, as an aligned Markdown table in a code block."""
    lines = table_md.splitlines()
    title = lines[0].lstrip("# ").strip()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| Method |"))
    header = _cells(lines[start])
    keep = [0, 1] + [i for i, h in enumerate(header) if i > 1 and h.split(",")[0] in columns]
    body, current = [], None
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        current = cells[0].rstrip(" ‡") if cells[0] else current
        if current in rows:
            body.append([cells[i] for i in keep])
    table = [[header[i] for i in keep]] + body
    widths = [max(len(r[i]) for r in table) for i in range(len(keep))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in table]
    return "\n".join([f"{title}", "", "```"] + out + ["```"])


def write(table: Path, readme: Path) -> None:
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: no excerpt markers ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    atomic_write_text(readme, f"{head}{BEGIN}\n{excerpt(table.read_text())}\n{END}{tail}")


if __name__ == "__main__":  # pragma: no cover - the Makefile's `readme`
    write(Path(sys.argv[1]), Path(sys.argv[2]))
