"""A run as one self-contained HTML page: what `prof-engine show` prints, with the step breakdown
drawn as a chart, and communication and memory where the run has them.

The page has no scripts and loads nothing: the chart is inline SVG, the style one `<style>` block,
so it opens anywhere and can be mailed or attached to a ticket. Every name and value on it is
HTML-escaped: op, kernel and file names come from the profiled program and the trace, which may
come from another machine. The data are the views' (`Run.summary`, `Run.info`); nothing is
computed here but the chart's geometry.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from prof_engine.engine.session import STEPS_TITLE, Result, Run
from prof_engine.engine.tables import cell_text, html_table
from prof_engine.store.files import atomic_path, output_file

# The step breakdown's parts, drawn left to right (torch_npu: step time = Computing +
# Communication(Not Overlapped) + Free), and their colours.
PARTS = (("Computing", "#4e79a7"), ("Communication(Not Overlapped)", "#f28e2b"), ("Free", "#bab0ac"))
BAR, GAP, LABEL, WIDTH = 16, 4, 190, 640  # px: bar height, gap, label column, bar area

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
"""


def write_report(run: Run, target: Path | str, top: int = 20) -> Path:
    """Write the report of `run` to `target` (an .html file, or a directory for report.html)."""
    target = output_file(target, "report.html")
    summary = run.summary(top, more=True)
    parts = [f"<h1>prof-engine report: {escape(run.path.name)}</h1>", _table(run.info())]
    for title, result in summary.items():  # the step breakdown is drawn too
        parts += [f"<h2>{escape(title)}</h2>", *([_step_chart(result)] if title == STEPS_TITLE else []),
                  _table(result)]
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(run.path.name)}: prof-engine report</title><style>{_STYLE}</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
    with atomic_path(target) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return target


def _table(result: Result) -> str:
    return html_table(result.arrow()) if len(result) else "<p>(none)</p>"


def _step_chart(steps: Result) -> str:
    """One stacked bar per rank, device and step, on one scale: the longest step spans the width."""
    rows = [dict(zip(steps.columns, r)) for r in steps.rows()]
    if not rows:
        return "<p>(no steps)</p>"
    longest = max(sum(r[p] or 0 for p, _ in PARTS) for r in rows) or 1
    height = len(rows) * (BAR + GAP)
    svg = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL + WIDTH + 10}" height="{height}" '
            f'role="img" aria-label="step breakdown">')]
    for i, r in enumerate(rows):
        y = i * (BAR + GAP)
        label = f"rank {r['Rank']} {r['Device']} step {r['Step'] if r['Step'] is not None else '-'}"
        svg.append(f'<text x="0" y="{y + BAR - 4}" font-size="12">{escape(label)}</text>')
        x = float(LABEL)
        for part, colour in PARTS:
            w = (r[part] or 0) / longest * WIDTH
            if w > 0:
                tip = f"{label}: {part} {cell_text(r[part])} µs"
                svg.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR}" fill="{colour}">'
                           f"<title>{escape(tip)}</title></rect>")
                x += w
    svg.append("</svg>")
    legend = "".join(f'<span style="background:{c}"></span>{escape(p)}' for p, c in PARTS)
    return f'<div class="legend">{legend}</div>' + "".join(svg)
