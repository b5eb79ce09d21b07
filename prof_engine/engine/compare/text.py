"""A comparison as text: the wide form (a column group per run), cells for terminal tables, Markdown.

One table per level, rows by impact (|Delta|, the change of time per sample: time delta × count).
With one run the table shows both sides in full (median ± spread, shift, interval, calls); with
several it shows each run's median and change in a column of its own, so a sweep reads across.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from prof_engine.engine.compare import Comparison

TITLES = {
    "step": "Step time and its breakdown",
    "op_type": "Op types (op_statistic)",
    "op": "Ops and kernels by name and input shapes (op_summary)",
    "api": "API calls (api_statistic)",
    "communication": "Communication ops (communication)",
    "memory": "Memory peak per step (memory)",
}
KEY = ("Level", "Device Type", "Item", "Detail")
UNCHANGED = ("no change", "inconclusive")  # statuses that claim no change: "N changed" never counts them


@dataclass(frozen=True)
class TextTable:
    """One level's table as text cells: `rows` are the first `top`; `hidden` rows (`hidden_changed` of them changed) follow."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    hidden: int
    hidden_changed: int


def _num(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "–"
    text = f"{v:+,.2f}" if signed else f"{v:,.2f}"
    return text.replace("-", "−")


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:+.1f}%".replace("-", "−")


def _calls(v: float | None) -> str:
    return "–" if v is None else f"{v:g}"


def _unit(level: str) -> str:
    return "MB" if level == "memory" else "µs per step"


def wide(cmp: Comparison) -> pa.Table:
    """One row per item, ordered by level then the largest |Delta| over the runs; per run: median, Δ%, status."""
    from prof_engine.engine.compare import LEVELS

    keyed: dict[tuple, dict[str, Any]] = {}
    for r in cmp.arrow().to_pylist():
        w = keyed.setdefault(
            tuple(r[k] for k in KEY), {**{k: r[k] for k in KEY}, "Unit": r["Unit"], "Base Median": None, "_impact": 0.0}
        )
        w["Base Median"] = w["Base Median"] if w["Base Median"] is not None else r["Base Median"]
        w["_impact"] = max(w["_impact"], abs(r["Delta"] or 0.0))
        w.update(
            {
                f"{r['Run']} Median": r["Run Median"],
                f"{r['Run']} Delta(%)": r["Delta(%)"],
                f"{r['Run']} Status": r["Status"],
            }
        )
    rows = sorted(keyed.values(), key=lambda w: (LEVELS.index(w["Level"]), -w["_impact"]))
    columns = [*KEY, "Unit", "Base Median"] + [
        f"{run} {c}" for run in cmp.runs for c in ("Median", "Delta(%)", "Status")
    ]
    return pa.table({c: [w.get(c) for w in rows] for c in columns})


def _single_row(r: dict[str, Any], level: str) -> list[str]:
    ci = "n/a" if r["CI Low"] is None else f"{_num(r['CI Low'], True)} … {_num(r['CI High'], True)}"
    cells = [r["Item"], r["Device Type"]]
    if level not in ("step", "communication"):
        cells.append(r["Detail"])
    cells += [
        f"{_num(r['Base Median'])} ± {_num(r['Base Spread'])}",
        f"{_num(r['Run Median'])} ± {_num(r['Run Spread'])}",
        _num(r["Delta"], True),
        ci,
        _pct(r["Delta(%)"]),
    ]
    if level not in ("step", "memory"):
        cells.append(f"{_calls(r['Base Calls'])} → {_calls(r['Run Calls'])}")
    return cells + [r["Status"]]


def _single_headers(level: str, confidence: float) -> list[str]:
    headers = ["Item", "Where"] + (["Detail"] if level not in ("step", "communication") else [])
    headers += ["Base median ± spread", "Run median ± spread", "Delta", f"{confidence:.0%} CI", "Delta %"]
    return headers + (["Calls/sample"] if level not in ("step", "memory") else []) + ["Status"]


def _wide_cell(w: dict[str, Any], run: str) -> str:
    status = w.get(f"{run} Status")
    if status is None:
        return ""
    if status in ("added", "removed"):
        return f"{_num(w[f'{run} Median'])} ({status})"
    change = _pct(w[f"{run} Delta(%)"])
    note = "" if status == "no change" else f" {status}"
    return f"{_num(w[f'{run} Median'])} ({change}{note})" if change or note else _num(w[f"{run} Median"])


def level_tables(cmp: Comparison, top: int = 10) -> list[TextTable]:
    """The comparison as one text table per level present; `top` rows each (0: all)."""
    from prof_engine.engine.compare import LEVELS

    single = len(cmp.runs) == 1
    rows = cmp.arrow().to_pylist() if single else wide(cmp).to_pylist()
    tables = []
    for level in LEVELS:
        mine = [r for r in rows if r["Level"] == level]
        if not mine:
            continue
        shown = mine[:top] if top else mine
        if single:
            headers = _single_headers(level, cmp.settings.confidence)
            cells = [_single_row(r, level) for r in shown]
            changed = sum(r["Status"] not in UNCHANGED for r in mine[len(shown) :])
        else:
            detail = level not in ("step", "communication")
            headers = ["Item", "Where"] + (["Detail"] if detail else []) + ["Base"] + list(cmp.runs)
            cells = [
                [w["Item"], w["Device Type"]]
                + ([w["Detail"]] if detail else [])
                + [_num(w["Base Median"])]
                + [_wide_cell(w, run) for run in cmp.runs]
                for w in shown
            ]
            changed = sum(
                any(w.get(f"{run} Status") not in (None, *UNCHANGED) for run in cmp.runs) for w in mine[len(shown) :]
            )
        title = f"{TITLES[level]}, {_unit(level)}"
        tables.append(TextTable(title, headers, cells, len(mine) - len(shown), changed))
    return tables


def why_inconclusive(r: dict[str, Any], confidence: float) -> str:
    """Why an `inconclusive` row could not be judged: too few samples for an interval, or an
    interval that reaches into the noise floor (or a change the false-discovery control rejects)."""
    if r["CI Low"] is None:
        return f"{r['Base N']} vs {r['Run N']} samples, too few for a {confidence:.0%} interval"
    base = abs(r["Base Median"] or 0)

    def pct(v: float) -> str:
        return _pct(v / base * 100) if base else _num(v, True)

    if r["CI Low"] <= r["Noise Floor"] and r["CI High"] >= -r["Noise Floor"]:
        return (
            f"its {confidence:.0%} interval {pct(r['CI Low'])} … {pct(r['CI High'])} is too wide: it reaches into "
            f"the noise floor (±{pct(r['Noise Floor']).lstrip('+')}) over {r['Base N']} vs {r['Run N']} samples"
        )
    return f"not confirmed by the false-discovery control over its level (q = {r['Q Value']:.3g})"


def _headline(r: dict[str, Any], confidence: float) -> str:
    """`step time +9.9% (slower, CI +8.3% … +11.1%)` for a Step Time row."""
    base = abs(r["Base Median"] or 0)
    ci = (
        ""
        if r["CI Low"] is None or not base
        else f", {_pct(r['CI Low'] / base * 100)} … {_pct(r['CI High'] / base * 100)}"
    )
    status = r["Status"]
    if status == "inconclusive":
        return f"step time {_pct(r['Delta(%)']) or _num(r['Delta'], True) + ' µs'} (inconclusive: {why_inconclusive(r, confidence)})"
    return f"step time {_pct(r['Delta(%)']) or _num(r['Delta'], True) + ' µs'} ({status}{ci})"


def verdict(cmp: Comparison) -> str:
    """One line per run: the step time change, then how many items changed and how, then how many
    could not be judged (`inconclusive`: too few samples); never "no significant change" for those."""
    lines = []
    rows = cmp.arrow().to_pylist()
    few = f"too few samples for a {cmp.settings.confidence:.0%} interval"
    for run in cmp.runs:
        mine = [r for r in rows if r["Run"] == run]
        steps = [r for r in mine if r["Level"] == "step" and r["Item"] == "Step Time"]
        counts: dict[str, int] = {}
        for r in mine:
            if r["Status"] not in UNCHANGED and r not in steps:
                counts[r["Status"]] = counts.get(r["Status"], 0) + 1
        unjudged = sum(r["Status"] == "inconclusive" for r in mine if r not in steps)
        wide = any(r["Status"] == "inconclusive" and r["CI Low"] is not None for r in mine if r not in steps)
        why = f"{few}, or intervals too wide to tell" if wide else few
        found = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        head = [_headline(r, cmp.settings.confidence) for r in steps[:1]]
        n, other = sum(counts.values()), " other" if steps else ""
        change = f"{n}{other} change{'s' if n > 1 else ''}: {found}" if counts else "no other significant change"
        unsure = [f"{unjudged}{other} item{'s' if unjudged > 1 else ''} inconclusive ({why})"] if unjudged else []
        if not counts and all(r["Status"] == "inconclusive" for r in mine):
            parts = [f"inconclusive: {why} ({_sample_sizes(mine)})", *head]
        elif not counts and all(r["Status"] == "no change" for r in steps):
            parts = ["no significant change", *unsure]
        else:
            parts = [*head, change, *unsure]
        lines.append(f"{run} vs {cmp.baseline}: " + "; ".join(parts))
    return "\n".join(lines)


def _sample_sizes(rows: list[dict[str, Any]]) -> str:
    """`3 vs 3 samples per item`, or the range where items differ."""

    def span(values: set[int]) -> str:
        return f"{min(values)}" if len(values) == 1 else f"{min(values)}–{max(values)}"

    return f"{span({r['Base N'] or 0 for r in rows})} vs {span({r['Run N'] or 0 for r in rows})} samples per item"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(cmp: Comparison, top: int = 10) -> str:
    """The comparison as Markdown: the verdict, one table per level, the statistics rule."""
    parts = [
        f"**Compared with {_md_escape(cmp.baseline)}**: " + "; ".join(cmp.runs),
        "",
        *(f"- {_md_escape(line)}" for line in verdict(cmp).splitlines()),
        "",
    ]
    for t in level_tables(cmp, top):
        parts += [
            f"### {t.title}",
            "",
            "| " + " | ".join(t.headers) + " |",
            "|" + "|".join("---" for _ in t.headers) + "|",
        ]
        parts += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in t.rows]
        if t.hidden:
            parts.append(f"\n… {t.hidden} more rows ({t.hidden_changed} changed)")
        parts.append("")
    parts.append(f"_Method: {cmp.method}_")
    return "\n".join(parts)
