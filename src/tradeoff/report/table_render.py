"""A table's formats, each rendered from the one :class:`~tradeoff.report.table_model.Table` built: Markdown, the CSV
of every number with where it comes from, LaTeX that prints (a longtable, sized to the page, in panels where it is
wider than a landscape page) and an HTML fragment; and the inline markup of a note in each (LaTeX, HTML, a figure's
plain text) and the HTML page around a fragment, which the summary, the figures and the audits use too."""

from __future__ import annotations

import csv
import html
import io
import math
import re
from dataclasses import dataclass

from tradeoff.config import PSEUDO_COLUMNS, Catalog
from tradeoff.core.targets import Row as TargetRow
from tradeoff.report import stats
from tradeoff.report.table_model import (
    EARLY,
    FAILED,
    MARK,
    OVERSTATES,
    STRONG,
    Column,
    Row,
    Table,
    before_mechanism,
    row_cell,
    selected_epochs,
)


def _num(x: float | None, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def ours_text(table: Table, proto: str, row: Row, c: Column, *, bold: str = "**{}**", mark: str = MARK,
              pm: str = "±") -> str:
    o = table.ours[(proto, row.key, c.key)]
    if o.same_as_strong:
        return "" if c.attack in PSEUDO_COLUMNS else "="
    if o.value is None:
        return "—"
    digits = 3 if o.kind == "minutes" and o.value < 10 else 1  # minutes of a small scale: 0.137, not 0.1
    text = _num(o.value, digits) + (f"{pm}{_num(o.std, digits)}" if o.std is not None else "")
    if (proto, row.key, c.key) in table.bold:
        text = bold.format(text)
    p = table.adjusted.get((proto, row.key, c.key))
    if p is not None and p < stats.ALPHA:
        text += mark
    text += (FAILED if o.failed else "") + (OVERSTATES if o.overstates is not None else "")
    if o.lo is not None:
        text += f" [{_num(o.lo)}, {_num(o.hi)}]"
    return text


def paper_text(table: Table, member: TargetRow, c: Column, pm: str = "±") -> str:
    value = table.paper.get((member.key, c.key))
    if value is None:
        return "—"
    return _num(value[0], 2) + (f"{pm}{_num(value[1], 2)}" if value[1] is not None else "")


def _lines(table: Table, row: Row) -> list[tuple[str, str, list[str] | None, TargetRow | None]]:
    """The lines of a row: (row label or '', line label, protocol, member): ours per protocol, then the paper's."""
    lines = []
    label = row.label + (f" {EARLY}" if before_mechanism(table, row) else "")
    for i, (proto, _) in enumerate(table.protocols):
        what = "ours" if len(table.protocols) == 1 else ("ours, strong" if proto == STRONG else f"ours, {proto}")
        lines.append((label if i == 0 else "", what, proto, None))
    for member in table.paper_rows(row):
        what = "paper" if len(row.members) == 1 else f"paper ({member.label})"
        lines.append(("", what, None, member))
    return lines


def render_markdown(table: Table) -> str:
    out = [f"# {table.title}", "", "| Method | | " + " | ".join(c.label for c in table.columns) + " |",
           "|---|---|" + "---|" * len(table.columns)]
    for row in table.rows:
        for label, what, proto, member in _lines(table, row):
            cells = [ours_text(table, proto, row, c) if member is None else paper_text(table, member, c)
                     for c in table.columns]
            out.append(f"| {label} | {what} | " + " | ".join(cells) + " |")
    return "\n".join(out + [""] + table.notes) + "\n"


CSV_FIELDS = ("target", "row", "label", "column", "column_label", "protocol", "attack", "ours", "ci_low", "ci_high",
              "ours_std", "seeds", "examples", "paper", "paper_std", "diff", "p_vs_compare", "p_holm", "significant",
              "bold", "selected_epoch", "mechanism_epoch", "before_mechanism", "jobs", "metrics", "scale", "title",
              "attack_failed", "overstates", "best_known")


def render_csv(table: Table, catalog: Catalog) -> str:
    """One line per (row, column, protocol): every number with where it comes from."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    fmt = lambda v: "" if v is None else f"{v:.4f}"  # noqa: E731
    for row in table.rows:
        for c in table.columns:
            for proto, _ in table.protocols:
                o = table.ours[(proto, row.key, c.key)]
                if o.same_as_strong:
                    continue
                attack = (c.attack if proto == STRONG
                          else catalog.protocol_attack(table.name, c.attack, row.members[0].run))
                cell = row_cell(table, row)
                mech = (cell.mechanism or {}) if cell else {}
                early = before_mechanism(table, row)
                for member in row.members:
                    paper = table.paper.get((member.key, c.key), (None, None))
                    p = table.pvalues.get((proto, row.key, c.key))
                    adjusted = table.adjusted.get((proto, row.key, c.key))
                    diff = None if o.value is None or paper[0] is None else o.value - paper[0]
                    writer.writerow([table.name, member.key, member.label, c.key, c.label, proto, attack,
                                     fmt(o.value), fmt(o.lo), fmt(o.hi), fmt(o.std), len(row.runs),
                                     o.examples or "", fmt(paper[0]), fmt(paper[1]), fmt(diff),
                                     "" if p is None else f"{p:.4g}",
                                     "" if adjusted is None else f"{adjusted:.4g}",
                                     "" if adjusted is None else int(adjusted < stats.ALPHA),
                                     int((proto, row.key, c.key) in table.bold),
                                     " ".join("" if e is None else str(e) for e in selected_epochs(table, row)),
                                     "" if mech.get("epoch") is None else mech["epoch"],
                                     "" if not mech else int(early is not None), " ".join(row.runs),
                                     " ".join(o.files), table.scale, table.title, o.failed or "",
                                     fmt(o.overstates), fmt(o.best_known)])
    return buffer.getvalue()


# LaTeX: every character outside ASCII that a label or note may hold, as text-mode LaTeX (pdflatex, no packages).
# Symbols stay at the text's size (a superscript of \footnotesize would be set at 6 pt: below what prints legibly).
TEX_CHARS = {"β": r"$\beta$", "λ": r"$\lambda$", "γ": r"$\gamma$", "δ": r"$\delta$", "ε": r"$\varepsilon$",
             "μ": r"$\mu$", "τ": r"$\tau$", "ω": r"$\omega$", "α": r"$\alpha$", "∞": r"$\infty$", "—": "---",
             "–": "--", "−": "$-$", "±": r"$\pm$", "×": r"$\times$", "½": "1/2", "†": r"\dag{}",
             "‡": r"\ddag{}", "…": r"\ldots{}", "⊘": r"$\oslash$", "↑": r"$\uparrow$",
             "‖": r"$\|$", "≥": r"$\geq$", "≤": r"$\leq$", "→": r"$\rightarrow$", "·": r"$\cdot$", "’": "'",
             "é": r"\'e", "ü": r"\"u"}
TEX_SPECIAL = {"<": r"\textless{}", ">": r"\textgreater{}",
               "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex(text: str) -> str:
    """Text as LaTeX source for pdflatex: special characters escaped, Greek and symbols as math. A character it does
    not know is an error (a table must compile), not a silent '?'."""
    out = []
    for ch in text:
        if ch in TEX_SPECIAL:
            out.append(TEX_SPECIAL[ch])
        elif ch in TEX_CHARS:
            out.append(TEX_CHARS[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            raise ValueError(f"no LaTeX for {ch!r} in {text!r}: add it to tradeoff.report.table_render.TEX_CHARS")
    return "".join(out)


def tex_note(note: str) -> str:
    """A note of the Markdown (``**bold**``, ```code```, a leading "- ") as LaTeX: bold as \\textbf, code as
    \\texttt, every character through tex()."""
    note = note.strip()
    note = note[2:] if note.startswith("- ") else note
    out = []
    for i, part in enumerate(note.split("`")):
        pieces = [tex(p) if j % 2 == 0 else r"\textbf{" + tex(p) + "}" for j, p in enumerate(part.split("**"))]
        out.append(r"\texttt{" + "".join(pieces) + "}" if i % 2 else "".join(pieces))
    return "".join(out)


# The page a table is set for: LaTeX's article class (10 pt, A4 or letter) has a 345 pt text width, and 550 pt of text
# height, the width of a landscape page. Cells are set in \footnotesize (8 pt), never scaled: a table wider than the
# portrait page turns to a landscape page, and one wider than that is split into panels of columns, each repeating
# the row labels. Widths are estimated from the characters at 8 pt (Computer Modern: digits 4.25 pt, bold 4.9 pt).
TEX_PORTRAIT = 345.0
TEX_LANDSCAPE = 550.0
TEX_SEP = 4.0                       # \tabcolsep, pt
TEX_LABEL = 78.0                    # the row label's column (its text wraps), pt
TEX_PACKAGES = "booktabs, array, longtable, pdflscape"
_TEX_NARROW = set(".,;:!|[]()'`") | {" "}
_TEX_WIDE = set("MW@%") | set("—")


def tex_width(text: str, bold: bool = False) -> float:
    """The width of plain text set in \\footnotesize, estimated in pt (generously: a column sized by it never
    overflows)."""
    width = 0.0
    for ch in text:
        if ch in _TEX_NARROW:
            width += 2.6
        elif ch.isdigit() or ch in "±×+-=/<>≥≤":
            width += 4.3
        elif ch in _TEX_WIDE:
            width += 8.0
        elif ch.isupper():
            width += 6.3
        else:
            width += 4.4
    return width * (1.14 if bold else 1.0) + 1.0


def _words_width(text: str) -> float:
    """The widest word of a text (a wrapped column must be at least that wide)."""
    return max((tex_width(w) for w in text.split()), default=0.0)


@dataclass
class _TexCell:
    lines: list[str]                # LaTeX of each line of the cell (a value, then its interval)
    width: float                    # pt


def _tex_cell(table: Table, proto: str | None, row: Row, c: Column, member: TargetRow | None) -> _TexCell:
    """A cell as LaTeX lines: ours' number with its marks on one line and its interval below it; the paper's."""
    if member is not None:
        text = paper_text(table, member, c)
        return _TexCell([tex(text)], tex_width(text))
    text = ours_text(table, proto, row, c, bold="\x00{}\x01", mark="\x02")
    value, sep, interval = text.rpartition(" [")
    if not sep:
        value, interval = text, ""
    else:
        interval = "[" + interval
    plain = value.replace("\x00", "").replace("\x01", "").replace("\x02", "†")
    bold = "\x00" in value
    lines = [tex(value).replace("\x00", r"\textbf{").replace("\x01", "}").replace("\x02", r"\dag{}")]
    widths = [tex_width(plain, bold)]
    if interval:
        lines.append(tex(interval))
        widths.append(tex_width(interval))
    return _TexCell(lines, max(widths))


def _tex_panels(widths: list[float], fixed: float) -> tuple[list[list[int]], bool]:
    """The columns (indices) of each panel and whether the page turns: one panel on the portrait page if the table
    fits it, else on a landscape page, else as few landscape panels as hold every column, of even widths."""
    total = fixed + sum(w + 2 * TEX_SEP for w in widths)
    if total <= TEX_PORTRAIT:
        return [list(range(len(widths)))], False
    if total <= TEX_LANDSCAPE:
        return [list(range(len(widths)))], True
    room = TEX_LANDSCAPE - fixed
    for count in range(2, len(widths) + 1):
        size = math.ceil(len(widths) / count)
        panels = [list(range(i, min(i + size, len(widths)))) for i in range(0, len(widths), size)]
        if all(sum(widths[j] + 2 * TEX_SEP for j in p) <= room for p in panels):
            return panels, True
    return [[j] for j in range(len(widths))], True


def render_latex(table: Table) -> str:
    """The table as LaTeX that prints: a longtable (it breaks across pages, its header repeated) in \\footnotesize,
    never scaled; on a landscape page where it is wider than the portrait page, and in panels of columns where it is
    wider than that. The caption is the title and one sentence; the legend and every note follow under the table.
    Needs ``\\usepackage{booktabs, array, longtable, pdflscape}`` (TeX Live's latex-base and latex-recommended)."""
    lines = [(row, label, what, proto, member) for row in table.rows
             for label, what, proto, member in _lines(table, row)]
    cells = {(i, c.key): _tex_cell(table, proto, row, c, member)
             for i, (row, _, _, proto, member) in enumerate(lines) for c in table.columns}
    what_width = max([_words_width(what) for _, _, what, _, _ in lines] + [tex_width("Method")])
    label_width = min(max([_words_width(label) for _, label, _, _, _ in lines] + [40.0]), TEX_LABEL)
    label_width = max(label_width, TEX_LABEL if any(tex_width(label) > TEX_LABEL for _, label, _, _, _ in lines)
                      else label_width)
    widths = [max([cells[(i, c.key)].width for i in range(len(lines))] + [_words_width(c.label), 22.0])
              for c in table.columns]
    panels, landscape = _tex_panels(widths, label_width + what_width + 4 * TEX_SEP)
    caption = (tex(f"{table.title} (scale: {table.scale}).") + " " +
               tex("Ours with its 95% interval (with seeds: mean ± standard deviation) above the paper's number; "
                   "the legend and the notes are under the table."))
    anchor = re.sub(r"[^A-Za-z0-9_.-]", "-", table.name)
    out = [f"% {tex(table.name)}: needs \\usepackage{{{TEX_PACKAGES}}}",
           *([r"\begin{landscape}"] if landscape else []), r"\begingroup\footnotesize",
           rf"\setlength{{\tabcolsep}}{{{TEX_SEP:g}pt}}\setlength{{\LTcapwidth}}{{\linewidth}}"]
    for k, panel in enumerate(panels):
        spec = (rf"@{{}}>{{\raggedright\arraybackslash}}p{{{label_width:.0f}pt}}"
                rf">{{\raggedright\arraybackslash}}p{{{what_width:.0f}pt}}"
                + "".join(rf">{{\centering\arraybackslash}}p{{{widths[j]:.0f}pt}}" for j in panel) + "@{}")
        name = f" ({chr(ord('a') + k)})" if len(panels) > 1 else ""
        head = ("Method & & " + " & ".join(tex(table.columns[j].label) for j in panel) + r" \\")
        if k == 0:
            out += [rf"\begin{{longtable}}{{{spec}}}", rf"\caption{{{caption}}}\label{{tab:{anchor}}}\\"]
        else:  # longtable steps the table counter: the panels are one table
            out += [r"\addtocounter{table}{-1}", rf"\begin{{longtable}}{{{spec}}}",
                    rf"\caption*{{Table \thetable{{}} (continued), panel{name}.}}\\"]
        if len(panels) > 1:
            out.append(rf"\multicolumn{{{len(panel) + 2}}}{{@{{}}l}}{{Panel{name}}} \\")
        out += [r"\toprule", head, r"\midrule", r"\endfirsthead",
                rf"\multicolumn{{{len(panel) + 2}}}{{@{{}}l}}{{Table \thetable{{}}{name}, continued}} \\",
                r"\toprule", head, r"\midrule", r"\endhead", r"\bottomrule", r"\endlastfoot"]
        for i, (row, label, what, proto, member) in enumerate(lines):
            if i and label:
                out.append(r"\midrule")
            values = [r"\newline ".join(cells[(i, table.columns[j].key)].lines) for j in panel]
            out.append(f"{tex(label)} & {tex(what)} & " + " & ".join(values) + r" \\")
        out.append(r"\end{longtable}")
    notes = table.legend + [n for n in table.notes if n not in table.legend]
    out += [r"\par\smallskip{\raggedright\setlength{\parindent}{0pt}\setlength{\parskip}{2pt}"]
    for n in notes:
        nested = n.startswith("  - ")
        out.append((r"\hangindent=2em\hangafter=0 " if nested else r"\hangindent=1em\hangafter=1 ")
                   + tex_note(n) + r"\par")
    out += ["}", r"\endgroup", *([r"\end{landscape}"] if landscape else [])]
    return "\n".join(out) + "\n"


def render_html(table: Table) -> str:
    """An HTML fragment (for the Snakemake report and the summary page)."""
    out = [f"<h2>{html.escape(table.title)}</h2>", "<table class='tradeoff'>",
           "<thead><tr><th>Method</th><th></th>" + "".join(f"<th>{html.escape(c.label)}</th>" for c in table.columns)
           + "</tr></thead><tbody>"]
    for row in table.rows:
        for label, what, proto, member in _lines(table, row):
            cells = [html.escape(paper_text(table, member, c)) if member is not None else
                     html.escape(ours_text(table, proto, row, c, bold="\x00{}\x01")).replace(
                         "\x00", "<b>").replace("\x01", "</b>") for c in table.columns]
            cls = " class='paper'" if member is not None else ""
            out.append(f"<tr{cls}><th>{html.escape(label)}</th><td>{html.escape(what)}</td>"
                       + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    notes_html = "".join(f"<li>{inline_html(n.strip().removeprefix('- '))}</li>" for n in table.notes)
    out += ["</tbody></table>", f"<ul class='notes'>{notes_html}</ul>"]
    return "\n".join(out) + "\n"


def inline_html(text: str) -> str:
    """A note's inline Markdown (```code```, ``**bold**``) as HTML, everything else escaped."""
    out = []
    for i, part in enumerate(text.split("`")):
        pieces = [html.escape(p) if j % 2 == 0 else f"<b>{html.escape(p)}</b>" for j, p in enumerate(part.split("**"))]
        out.append(f"<code>{''.join(pieces)}</code>" if i % 2 else "".join(pieces))
    return "".join(out)


def plain_text(text: str) -> str:
    """A note's inline Markdown without its marks (a figure's text: no backticks, no asterisks)."""
    return text.replace("`", "").replace("**", "")


HTML_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table.tradeoff {{ border-collapse: collapse; font-size: 0.9em; }}
table.tradeoff th, table.tradeoff td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: center; }}
table.tradeoff tr.paper td {{ color: #666; font-style: italic; }}
ul.notes {{ color: #444; font-size: 0.85em; }}
code {{ font-size: 0.95em; background: #f3f3f3; padding: 0 0.2em; }}
img.claims {{ max-width: 100%; }}
details {{ margin: 0.4em 0; }} details > summary {{ cursor: pointer; font-weight: bold; }}
</style></head><body>
{body}
</body></html>
"""


def html_page(title: str, body: str) -> str:
    return HTML_PAGE.format(title=html.escape(title), body=body)


def render_all(table: Table, catalog: Catalog) -> dict[str, str]:
    """Every format of one table as built."""
    return {"md": render_markdown(table), "csv": render_csv(table, catalog), "tex": render_latex(table),
            "html": render_html(table)}
