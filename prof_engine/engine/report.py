"""A run as one self-contained HTML page: what `prof-engine show` prints, with the step breakdown
drawn as a chart, and communication and memory where the run has them.

The page has no scripts and loads nothing: the charts are inline SVG, the style one `<style>`
block, so it opens anywhere and can be mailed or attached to a ticket. Every name and value on it
is HTML-escaped: op, kernel and file names come from the profiled program and the trace, which may
come from another machine. The data are the views' (`Run.summary`, `Run.info`, and for many steps
queries/_report.sql); nothing is computed here but the charts' geometry.

It reads at 1,400 px whatever the run: a name is cut to one line with the whole name on hover,
numbers are never cut, and beyond `MANY_STEPS` step rows the steps are drawn as a distribution with
the slowest listed, not one bar each (421 steps drew 4,000 px of bars before the first table).
"""

from __future__ import annotations

import shlex
from html import escape
from pathlib import Path

from prof_engine.engine.session import QUALITY_TITLE, STEPS_TITLE, Result, Run
from prof_engine.engine.tables import cell_text, html_table, is_number
from prof_engine.store.files import atomic_path, output_file

# The step breakdown's parts, drawn left to right (torch_npu: step time = Computing +
# Communication(Not Overlapped) + Free), and their colours.
PARTS = (("Computing", "#4e79a7"), ("Communication(Not Overlapped)", "#f28e2b"), ("Free", "#bab0ac"))
# Colours of the distribution's rows (queries/_report.sql's parts), the parts' as in the bars.
PART_COLOURS = {"Step Time(us)": "#59595e", **dict(PARTS), "Overlapped": "#76b7b2", "Preparing": "#edc948"}
BAR, GAP, LABEL, WIDTH = 16, 4, 190, 640  # px: bar height, gap, label column, bar area
MANY_STEPS = 30  # step rows (rank, device, step) beyond which the steps are summarised, not drawn
SLOWEST = 10  # the slowest step rows listed when summarised
BAR_W, FINDINGS = 640, 3  # px: the summary's share bar; the findings of advice it lists
# Columns of device time: where a CPU-only run has them all 0 the page leaves them out.
DEVICE_WORDS = ("Device", "Communication", "Overlapped", "Bubble", "Kernel")
HIST_W, HIST_H, PERCENTILE_W = 440, 90, 250  # px: the step-time histogram's plot area, the percentiles' scale
# Columns of sentences, which wrap; other text (op, kernel, file names) is cut to one line.
PROSE = frozenset({"value", "Detail", "Meaning", "Finding", "Suggestion", "Views", "Query", "Note"})

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
@media (max-width: 600px) { body { margin: 1em; } }
h1 { font-size: 1.4em; overflow-wrap: anywhere; } p, li { overflow-wrap: anywhere; }
svg { max-width: 100%; height: auto; }
p.lead { font-size: 1.1em; } h2 { font-size: 1.1em; margin-top: 2em; } h3 { font-size: 1em; margin: 1em 0 .3em; }
table { border-collapse: collapse; margin: .5em 0; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.t { max-width: 24em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
td.p { min-width: 12em; overflow-wrap: anywhere; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
.charts { display: flex; flex-wrap: wrap; gap: 12px 32px; align-items: flex-start; }
.wide { overflow-x: auto; max-width: 100%; }
"""


def write_report(run: Run, target: Path | str, top: int = 20) -> Path:
    """Write the report of `run` to `target` (an .html file, or a directory for report.html)."""
    target = output_file(target, "report.html")
    summary = run.summary(top, more=True)
    ((cpu_only,),) = run.sql("SELECT * FROM _report_cpu_only").rows()
    # A reader's order: the summary, what to look at first, then the tables; the manifest last.
    advice = next((t for t in summary if t.startswith("Advice")), None)
    titles = [t for t in summary if t == QUALITY_TITLE] + ([advice] if advice else [])
    titles += [t for t in summary if t not in titles]
    parts = [f"<h1>prof-engine report: {escape(run.path.name)}</h1>", _section("Summary", _summary(run, summary))]
    for title in titles:  # the step breakdown is drawn too
        result = summary[title]
        body = _steps(run, result, cpu_only) if title == STEPS_TITLE else _table(result, cpu_only)
        parts.append(_section(title, body))
    parts.append(_section("Run (manifest)", _table(run.info())))
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(run.path.name)}: prof-engine report</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )
    with atomic_path(target) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return target


def _section(title: str, body: str) -> str:
    return f"<section><h2>{escape(title)}</h2>\n{body}</section>"


def _summary(run: Run, tables: dict[str, Result]) -> str:
    """The page's opening: step time, the shares of it computing, communication not hidden by it
    and idle take (a bar), and the first findings of advice (`_report_summary`, `summary_advice`)."""
    result = run.sql("SELECT * FROM _report_summary")
    row = dict(zip(result.columns, result.rows()[0]))
    if not row["Rows"]:
        return "<p>(no records in any step or device)</p>"
    where = f"{row['Devices']:,} ranks/devices" if row["Devices"] > 1 else "1 device"
    if row["In Steps"]:
        span = (
            "" if row["Min(us)"] == row["Max(us)"] else f" ({cell_text(row['Min(us)'])} to {cell_text(row['Max(us)'])})"
        )
        lead = f"{row['Steps']:,} step(s) on {where}: step time {cell_text(row['Mean(us)'])} µs on average{span}."
    else:
        lead = (
            f"No steps (no ProfilerStep# or step ranges): the whole trace, {cell_text(row['Mean(us)'])} µs on "
            f"average on {where}."
        )
    shares = [(part, colour, row[f"{part}(%)"] or 0.0) for part, colour in PARTS]
    bar = [_svg(BAR_W, BAR, "where the step time goes")]
    x = 0.0
    for part, colour, share in shares:
        w = share / 100 * BAR_W
        if w > 0:
            bar.append(
                f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="{BAR}" fill="{colour}">'
                f"<title>{escape(f'{part} {share} %')}</title></rect>"
            )
            x += w
    bar.append("</svg>")
    legend = "".join(f'<span style="background:{c}"></span>{escape(p)} {escape(cell_text(v))} %' for p, c, v in shares)
    advice = next((r for t, r in tables.items() if t.startswith("Advice")), None)
    findings = ""
    if advice is not None and len(advice):
        items = []
        for r in [dict(zip(advice.columns, values)) for values in advice.rows()[:FINDINGS]]:
            ranks = cell_text(r.get("Ranks"))  # the ranks a finding holds on ("0-3,6")
            head = (f"<b>{escape(r['Severity'])}</b> " if r.get("Severity") else "") + (
                f"(rank {escape(ranks)}) " if ranks else ""
            )
            items.append(f"<li>{head.strip() + ': ' if head else ''}{escape(cell_text(r.get('Finding')))}</li>")
        findings = "<h3>Top findings (advice)</h3><ol>" + "".join(items) + "</ol>"
    return f'<p class="lead">{escape(lead)}</p><div class="legend">{legend}</div>{"".join(bar)}{findings}'


def _zero_device_columns(result: Result) -> list[str]:
    """The device columns of `result` (DEVICE_WORDS in the name) whose every value is 0 or NULL."""
    arrow = result.arrow()
    return [
        name
        for name, typ, col in zip(arrow.column_names, arrow.schema.types, arrow.columns)
        if is_number(typ) and any(w in name for w in DEVICE_WORDS) and not any(v for v in col.to_pylist())
    ]


def _table(result: Result, cpu_only: bool = False) -> str:
    """`result` as a table (in a box that scrolls a table too wide, rather than the page), and how
    many rows it leaves out where it holds the first of more (`Result.total`). On a CPU-only run
    (`cpu_only`) the device columns that are all zero are left out, and a line names them."""
    if not len(result):
        return "<p>(none)</p>"
    total = result.total
    more = (
        (
            f'<p class="more">… {total - len(result):,} more rows: the first {len(result):,} of {total:,} '
            "shown (--top sets how many)</p>"
        )
        if total > len(result)
        else ""
    )
    arrow = result.arrow()
    if cpu_only and (zero := _zero_device_columns(result)):
        arrow = arrow.drop_columns(zero)
        more += f'<p class="more">Not shown, all 0 on this CPU-only run: {escape(", ".join(zero))}</p>'
    return f'<div class="wide">{html_table(arrow, PROSE)}</div>{more}'


def _steps(run: Run, steps: Result, cpu_only: bool = False) -> str:
    """A bar per step row where there are few; else how many, their distribution and the slowest."""
    ((rows, distinct, devices),) = run.sql("SELECT * FROM _report_step_count").rows()
    if rows <= MANY_STEPS:
        return _step_chart(steps) + _table(steps, cpu_only)
    slowest = run.sql("SELECT * FROM _report_slowest_steps LIMIT ?", [SLOWEST])
    where = f"{devices:,} ranks/devices" if devices > 1 else "1 device"
    note = (
        f"<p>{rows:,} step rows ({distinct:,} steps on {where}): too many for a bar each, so their "
        f"distribution, and the {min(SLOWEST, rows)} slowest. Every row: "
        f"<code>prof-engine export {escape(shlex.quote(str(run.path)))} step_trace</code>.</p>"
    )
    distribution = run.sql("SELECT * FROM _report_step_distribution")
    histogram = _histogram(run.sql("SELECT * FROM _report_step_histogram"))
    slowest_title = f"<h3>The {min(SLOWEST, rows)} slowest step rows</h3>"
    return (
        note
        + f'<div class="charts"><div>{histogram}<br>{_percentile_chart(distribution)}</div>'
        + f"<div><h3>Percentiles over all step rows (µs)</h3>{_table(distribution)}</div></div>"
        + slowest_title
        + _table(slowest, cpu_only)
    )


def _svg(width: float, height: float, label: str) -> str:
    """An SVG of `width` × `height` px that shrinks with a narrower window (its viewBox, and the
    style's max-width: 100%), its text with it."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(label)}">'
    )


def _step_chart(steps: Result) -> str:
    """One stacked bar per rank, device and step, on one scale: the longest step spans the width."""
    rows = [dict(zip(steps.columns, r)) for r in steps.rows()]
    if not rows:
        return "<p>(no steps)</p>"
    longest = max(sum(r[p] or 0 for p, _ in PARTS) for r in rows) or 1
    svg = [_svg(LABEL + WIDTH + 10, len(rows) * (BAR + GAP), "step breakdown")]
    for i, r in enumerate(rows):
        y = i * (BAR + GAP)
        label = f"rank {r['Rank']} {r['Device']} step {r['Step'] if r['Step'] is not None else '-'}"
        svg.append(f'<text x="0" y="{y + BAR - 4}" font-size="12">{escape(label)}</text>')
        x = float(LABEL)
        for part, colour in PARTS:
            w = (r[part] or 0) / longest * WIDTH
            if w > 0:
                tip = f"{label}: {part} {cell_text(r[part])} µs"
                svg.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR}" fill="{colour}">'
                    f"<title>{escape(tip)}</title></rect>"
                )
                x += w
    svg.append("</svg>")
    legend = "".join(f'<span style="background:{c}"></span>{escape(p)}' for p, c in PARTS)
    return f'<div class="legend">{legend}</div>' + "".join(svg)


def _histogram(bins: Result) -> str:
    """Step time's histogram: a column per bin, its height the bin's step rows (tallest: full)."""
    rows = bins.rows()  # (bin, from, to, count)
    if not rows:
        return ""
    most = max(r[3] for r in rows) or 1
    w = HIST_W / len(rows)
    svg = [_svg(HIST_W + 10, HIST_H + 36, "step time histogram")]
    for b, lo, hi, n in rows:
        h = n / most * HIST_H
        svg.append(
            f'<rect x="{b * w:.1f}" y="{HIST_H - h:.1f}" width="{max(w - 1, 1):.1f}" height="{h:.1f}" '
            f'fill="{PART_COLOURS["Step Time(us)"]}"><title>{escape(f"{cell_text(lo)}–{cell_text(hi)} µs: {n:,} step rows")}'
            "</title></rect>"
        )
    svg.append(f'<line x1="0" y1="{HIST_H + 0.5}" x2="{HIST_W}" y2="{HIST_H + 0.5}" stroke="#888"/>')
    svg.append(f'<text x="0" y="{HIST_H + 14}" font-size="11">{escape(cell_text(rows[0][1]))} µs</text>')
    svg.append(
        f'<text x="{HIST_W}" y="{HIST_H + 14}" font-size="11" text-anchor="end">{escape(cell_text(rows[-1][2]))} µs</text>'
    )
    svg.append(
        f'<text x="{HIST_W / 2:.0f}" y="{HIST_H + 30}" font-size="12" text-anchor="middle">'
        f"step time: step rows per bin (tallest {most:,})</text></svg>"
    )
    return "".join(svg)


def _percentile_chart(distribution: Result) -> str:
    """Each part's spread on one scale from 0 (or the least value, where a part goes below it): a
    line from min to max, a box from p50 to p90, a tick at p99."""
    rows = [dict(zip(distribution.columns, r)) for r in distribution.rows()]
    low = min((r["Min(us)"] or 0 for r in rows), default=0)
    low, high = min(low, 0), max((r["Max(us)"] or 0 for r in rows), default=0)
    label, width = LABEL + 20, PERCENTILE_W  # (the parts' names are longer than the bars' labels)

    def pos(v: float | None) -> float:  # the x of a value in µs
        return label + ((v or 0) - low) / ((high - low) or 1) * width

    svg = [_svg(label + width + 10, (len(rows) + 1) * (BAR + GAP), "step time and its parts: percentiles")]
    for i, r in enumerate(rows):
        y, part, mid = i * (BAR + GAP), r["Part"], i * (BAR + GAP) + BAR / 2
        tip = (
            f"{part}: "
            + ", ".join(
                f"{k.removesuffix('(us)')} {cell_text(r[k])}"
                for k in ("Min(us)", "P50(us)", "P90(us)", "P99(us)", "Max(us)")
            )
            + " µs"
        )
        box = max(pos(r["P90(us)"]) - pos(r["P50(us)"]), 2)
        svg.append(
            f"<g><title>{escape(tip)}</title>"
            f'<text x="0" y="{y + BAR - 4}" font-size="12">{escape(part)}</text>'
            f'<line x1="{pos(r["Min(us)"]):.1f}" y1="{mid}" x2="{pos(r["Max(us)"]):.1f}" y2="{mid}" stroke="#888"/>'
            f'<rect x="{pos(r["P50(us)"]):.1f}" y="{y + 2}" width="{box:.1f}" height="{BAR - 4}" '
            f'fill="{PART_COLOURS.get(part, "#888")}"/>'
            f'<line x1="{pos(r["P99(us)"]):.1f}" y1="{y}" x2="{pos(r["P99(us)"]):.1f}" y2="{y + BAR}" stroke="#222"/></g>'
        )
    y = len(rows) * (BAR + GAP) + BAR - 4
    svg.append(
        f'<text x="0" y="{y}" font-size="11">{escape(cell_text(low))} to {escape(cell_text(high))} µs; line: min to max, '
        "box: p50 to p90, tick: p99</text></svg>"
    )
    return "".join(svg)
