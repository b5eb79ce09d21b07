"""Regression gates over a comparison: `--fail-if 'step_time > +5%'`.

Grammar (spaces optional):

    threshold  := metric comparator amount
    metric     := step_time                  the step time (step level, item `Step Time`)
                | level                      any item of a level: step, op_type, op, api, communication, memory
                | level '[' item ']'         one item by its exact name: step[Free], op_type[aten::mm],
                                             api[cudaLaunchKernel], memory[allocator]
    comparator := '>' | '<'                  '>' fails on a change above amount, '<' below it
    amount     := ['+' | '-'] number unit
    unit       := '%'                        Delta(%), relative to the baseline median
                | 'us' | 'ms'                Delta in time per step (not for memory)
                | 'MB'                       Delta of a memory peak (memory only)

A row fails a threshold when its change is significant (column `Significant`: its Benjamini–Hochberg
q-value is within the false discovery rate and the whole confidence interval lies beyond the noise
floor, or the item was added or removed) and its Delta passes the amount; a change inside the
noise, an `inconclusive` item (too few samples) or one the false-discovery control rejects never
fails a gate; but a gate that an `inconclusive` item might fail is undecided (`undecided`: the CLI
exits 4 and says about how many samples would decide), so a CI gate does not pass on what could
not be judged. Examples: `step_time > +5%`,
`op_type > +50us`, `memory > +512MB`, `step[Free] > +10%`, `step_time < -50%`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prof_engine.errors import ThresholdError

if TYPE_CHECKING:
    from prof_engine.engine.compare import Comparison

_PATTERN = re.compile(
    r"^\s*(?P<metric>[a-z_]+)(?:\[(?P<item>[^\]]+)\])?\s*(?P<op>[<>])\s*"
    r"(?P<amount>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>%|us|ms|MB)\s*$"
)
LEVEL_NAMES = ("step", "op_type", "op", "api", "communication", "memory")
GRAMMAR_HINT = (
    "write METRIC > AMOUNT or METRIC < AMOUNT, e.g. 'step_time > +5%', 'op_type[aten::mm] > +20us', 'memory > +100MB'"
)


@dataclass(frozen=True)
class Threshold:
    """One parsed gate: which rows (level, optional item), which way, how far, in which unit."""

    text: str
    level: str
    item: str | None
    above: bool
    amount: float
    unit: str

    def value(self, row: dict[str, Any]) -> float | None:
        """The row's Delta in this threshold's unit (None where it has none)."""
        if self.unit == "%":
            return row["Delta(%)"]
        delta = row["Delta"]
        return None if delta is None else delta / 1000 if self.unit == "ms" else delta

    def fails(self, row: dict[str, Any]) -> bool:
        if row["Level"] != self.level or (self.item is not None and row["Item"] != self.item):
            return False
        v = self.value(row)
        return bool(row["Significant"]) and v is not None and (v > self.amount if self.above else v < self.amount)


def parse_threshold(text: str) -> Threshold:
    """Parse one threshold (grammar in the module docstring); ThresholdError with a one-line reason if not."""
    m = _PATTERN.match(text)
    if not m:
        raise ThresholdError(f"threshold {text!r} is not understood; {GRAMMAR_HINT}")
    metric, item, unit = m["metric"], m["item"], m["unit"]
    if metric == "step_time" and item is None:
        metric, item = "step", "Step Time"
    if metric not in LEVEL_NAMES:
        raise ThresholdError(
            f"threshold {text!r}: unknown metric {metric!r}; use step_time or a level: "
            f"{', '.join(LEVEL_NAMES)} (optionally with [item])"
        )
    if (unit == "MB") != (metric == "memory") and unit != "%":
        raise ThresholdError(
            f"threshold {text!r}: {unit} does not measure {metric}; "
            f"use % or {'MB' if metric == 'memory' else 'us or ms'}"
        )
    return Threshold(text.strip(), metric, item.strip() if item else None, m["op"] == ">", float(m["amount"]), unit)


def _describe(row: dict[str, Any], t: Threshold) -> str:
    """`Step Time +81.0% (slower, CI +74.7% … +84.7%) in wide`: the row, in the threshold's unit."""

    def fmt(v: float) -> str:
        return f"{v:+.1f}%" if t.unit == "%" else f"{v:+,.4g} {t.unit}"

    def scaled(v: float | None) -> float | None:
        if v is None:
            return None
        if t.unit == "ms":
            return v / 1000
        if t.unit == "%":
            return v / abs(row["Base Median"]) * 100 if row["Base Median"] else None
        return v

    what = row["Item"] if row["Level"] == "step" else f"{row['Level']} {row['Item']}"
    what += f" [{row['Detail']}]" if row["Detail"] else ""
    low, high = scaled(row["CI Low"]), scaled(row["CI High"])
    ci = f", CI {fmt(low)} … {fmt(high)}" if low is not None and high is not None else ""
    value = t.value(row)
    assert value is not None  # only failing rows are described, and those have a value (Threshold.fails)
    return f"{what} {fmt(value)} ({row['Status']}{ci}) in {row['Run']}"


def check(cmp: Comparison, thresholds: Sequence[str | Threshold]) -> list[str]:
    """One reason per failing threshold: 'regression: <threshold>: <row> (and N more rows)'; [] = pass.

    A threshold naming an item that no run has raises ThresholdError (a typo must not pass a gate)."""
    parsed = [t if isinstance(t, Threshold) else parse_threshold(t) for t in thresholds]
    rows = cmp.arrow().to_pylist()
    reasons = []
    for t in parsed:
        if t.item is not None and not any(r["Level"] == t.level and r["Item"] == t.item for r in rows):
            raise ThresholdError(f"threshold {t.text!r}: no {t.level} item named {t.item!r} in this comparison")
        failing = sorted((r for r in rows if t.fails(r)), key=lambda r: -abs(t.value(r) or 0))
        if failing:
            more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
            reasons.append(f"regression: {t.text}: {_describe(failing[0], t)}{more}")
    return reasons


def _in_unit(row: dict[str, Any], t: Threshold, v: float | None) -> float | None:
    """`v`, in Delta's unit (µs per step, MB), in the threshold's unit."""
    if v is None:
        return None
    if t.unit == "%":
        return v / abs(row["Base Median"]) * 100 if row["Base Median"] else None
    return v / 1000 if t.unit == "ms" else v


def _undecided(row: dict[str, Any], t: Threshold) -> bool:
    """Whether an `inconclusive` row may pass the threshold: its interval reaches past the amount,
    or (too few samples for one) its estimate passes it."""
    if row["Status"] != "inconclusive" or row["Level"] != t.level or (t.item is not None and row["Item"] != t.item):
        return False
    low, high, value = _in_unit(row, t, row["CI Low"]), _in_unit(row, t, row["CI High"]), t.value(row)
    if low is None or high is None:
        return value is not None and (value > t.amount if t.above else value < t.amount)
    return high > t.amount if t.above else low < t.amount


def samples_to_decide(row: dict[str, Any], t: Threshold, z: float) -> int | None:
    """About how many samples a side would put the interval of `row`'s change clear of the threshold,
    from the spreads observed (a normal approximation: n = z²·(s_base² + s_run²) / (Delta − amount)²,
    at least 4, the fewest for a 95 % interval); None when the estimate sits on the threshold."""
    amount = t.amount
    if t.unit == "%":
        if not row["Base Median"]:
            return None
        amount = amount / 100 * abs(row["Base Median"])
    elif t.unit == "ms":
        amount *= 1000
    gap = abs((row["Delta"] or 0.0) - amount)
    spread = (row["Base Spread"] or 0.0) ** 2 + (row["Run Spread"] or 0.0) ** 2
    if gap == 0:
        return None
    return max(4, math.ceil(z * z * spread / (gap * gap)))


def undecided(cmp: Comparison, thresholds: Sequence[str | Threshold]) -> list[str]:
    """One line per threshold that no row fails but an `inconclusive` row might (see `_undecided`):
    'inconclusive: <threshold>: <row>; about N samples a side would decide'. A CI gate must not pass
    on what could not be judged; [] when every threshold is decided."""
    from prof_engine.engine.compare.text import why_inconclusive

    parsed = [t if isinstance(t, Threshold) else parse_threshold(t) for t in thresholds]
    rows = cmp.arrow().to_pylist()
    z, confidence = cmp.settings.z, cmp.settings.confidence
    lines = []
    for t in parsed:
        if any(t.fails(r) for r in rows):
            continue  # failed: `check` says so
        open_rows = sorted((r for r in rows if _undecided(r, t)), key=lambda r: -abs(r["Delta"] or 0))
        if not open_rows:
            continue
        r = open_rows[0]
        what = r["Item"] if r["Level"] == "step" else f"{r['Level']} {r['Item']}"
        value = t.value(r)
        shown = "" if value is None else (f" {value:+.1f}%" if t.unit == "%" else f" {value:+,.4g} {t.unit}")
        n = samples_to_decide(r, t, z)
        now = f"now {r['Base N']} vs {r['Run N']}"
        # the estimate reads the robust spreads; where it asks for no more samples than there are,
        # the interval is wide from the samples' shape (outliers, a loaded machine), not their number
        need = (
            "no number of samples decides an estimate that sits on the threshold"
            if n is None
            else f"the samples' spread, not their number, keeps it open ({now}): rerun on a quieter machine"
            if n <= min(r["Base N"] or 0, r["Run N"] or 0)
            else f"about {n} samples a side (steps × ranks × devices; {now}) would decide"
        )
        more = f" (and {len(open_rows) - 1} more)" if len(open_rows) > 1 else ""
        lines.append(
            f"inconclusive: {t.text}: {what}{shown} in {r['Run']} ({why_inconclusive(r, confidence)}){more}; {need}"
        )
    return lines
