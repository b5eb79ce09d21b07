"""`compare` says inconclusive where it cannot tell, and a CI gate does not pass on it (issue 38, item 11).

A +169 % step time over a wide interval read `no change`; `--fail-if 'step_time > +5%'` exited 0 on
a run 10 % slower over 3 steps a side; a CPU-only run compared with a GPU run said nothing. The
oracle: the step times themselves — their mean delta and Welch's t interval, a few lines of Python
that share nothing with the view SQL — and, for "how many samples would decide", a comparison with
that many samples, which then decides.
"""

from __future__ import annotations

import math
import statistics

import duckdb
import pytest
from typer.testing import CliRunner

from prof_engine.cli import app
from prof_engine.engine.compare import Comparison, Settings, _Meta, _sql, _unlike_devices
from prof_engine.engine.compare.text import verdict

Z95 = statistics.NormalDist().inv_cdf(0.975)


def _comparison(base: list[float], run: list[float]) -> Comparison:
    """A comparison of two runs whose only item is the step time, one sample per step (rank 0)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE compare_runs AS SELECT * FROM (VALUES (0, 'base'), (1, 'run')) t(run, label)")
    con.execute("""CREATE TABLE compare_samples (run INTEGER, level VARCHAR, device_type VARCHAR, item VARCHAR,
                   detail VARCHAR, rank INTEGER, device VARCHAR, step BIGINT, value DOUBLE, calls BIGINT)""")
    rows = [
        (side, "step", "device", "Step Time", "", 0, "gpu0", i, v, 1)
        for side, values in enumerate((base, run))
        for i, v in enumerate(values)
    ]
    con.executemany("INSERT INTO compare_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    for name in ("_shift", "_report"):
        con.execute(_sql(name).statements())
    table = con.sql("SELECT * FROM compare_report(?, 0.02, 1.0, 1.0, 200)", params=[Z95]).to_arrow_table()
    return Comparison(table, _Meta("base", ["run"], Settings(), ("step",)))


def _welch(base: list[float], run: list[float]) -> tuple[float, float, float]:
    """Mean delta and its 95 % Welch interval (t quantile from scipy where present, else normal)."""
    d = statistics.mean(run) - statistics.mean(base)
    se = math.sqrt(statistics.variance(base) / len(base) + statistics.variance(run) / len(run))
    try:
        from scipy import stats

        va, vb = statistics.variance(base) / len(base), statistics.variance(run) / len(run)
        df = (va + vb) ** 2 / (va**2 / (len(base) - 1) + vb**2 / (len(run) - 1))
        q = stats.t.ppf(0.975, df)
    except ImportError:
        q = Z95
    return d, d - q * se, d + q * se


def test_a_large_change_over_a_wide_interval_is_inconclusive_not_no_change():
    base = [100.0, 104.0, 97.0, 101.0, 99.0, 103.0]
    run = [101.0, 420.0, 98.0, 515.0, 103.0, 460.0]  # +169 % by the median of differences, wildly spread
    d, low, high = _welch(base, run)
    floor = 0.02 * statistics.median(base)
    assert d > 2 * floor and low < floor  # the oracle: a big estimate, an interval that reaches the floor
    cmp = _comparison(base, run)
    (row,) = cmp.arrow().to_pylist()
    assert row["Status"] == "inconclusive" and not row["Significant"]
    line = verdict(cmp)
    assert "no change" not in line and "no significant change" not in line
    assert "inconclusive: its 95% interval" in line and "is too wide" in line and "6 vs 6 samples" in line


def test_a_small_change_is_still_no_change():
    base = [100.0, 104.0, 97.0, 101.0, 99.0, 103.0]
    (row,) = _comparison(base, [v + 1.0 for v in base]).arrow().to_pylist()  # +1 %: inside the 2 % floor
    assert row["Status"] == "no change"


def _invoke(monkeypatch, cmp: Comparison, *gates: str):
    import prof_engine

    monkeypatch.setattr(prof_engine, "compare", lambda *a, **k: cmp)
    args = ["compare", "base", "run", "--format", "csv"]
    for g in gates:
        args += ["--fail-if", g]
    return CliRunner().invoke(app, args)


def test_a_gate_on_too_few_steps_exits_4_and_says_how_many_would_decide(monkeypatch):
    base, run = [100.0, 101.0, 102.0], [110.0, 111.0, 112.0]  # 10 % slower, 3 steps a side
    d, low, high = _welch(base, run)
    assert low > 5  # the oracle: a t interval would already say slower by more than 5 %...
    done = _invoke(monkeypatch, _comparison(base, run), "step_time > +5%")
    assert done.exit_code == 4, done.output  # ...but the engine's test cannot judge 3 against 3: not a pass
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("inconclusive:")]
    assert len(lines) == 1 and lines[0].startswith("inconclusive: step_time > +5%: Step Time +9.9% in run")
    assert "3 vs 3 samples, too few for a 95% interval" in lines[0]
    assert "about 4 samples a side (steps × ranks × devices; now 3 vs 3) would decide" in lines[0]
    # with that many the gate decides: it fails, exit 3
    decided = _invoke(monkeypatch, _comparison([*base, 103.0], [*run, 113.0]), "step_time > +5%")
    assert decided.exit_code == 3 and "regression: step_time > +5%" in decided.stderr


def test_a_gate_the_inconclusive_item_cannot_reach_passes(monkeypatch):
    cmp = _comparison([100.0, 101.0, 102.0], [110.0, 111.0, 112.0])
    assert _invoke(monkeypatch, cmp, "step_time > +50%").exit_code == 0  # the estimate is far from +50 %
    assert _invoke(monkeypatch, cmp).exit_code == 0  # no gate: a report, exit 0


def test_a_wide_interval_that_reaches_the_amount_is_undecided(monkeypatch):
    cmp = _comparison([100.0, 104.0, 97.0, 101.0, 99.0, 103.0], [101.0, 420.0, 98.0, 515.0, 103.0, 460.0])
    done = _invoke(monkeypatch, cmp, "step_time > +10%")
    assert done.exit_code == 4 and "is too wide" in done.stderr and "samples a side" in done.stderr


def test_a_cpu_only_run_against_a_gpu_run_is_said():
    cpu = {"devices": [{"rank": 0, "device": "host"}]}
    gpu = {"devices": [{"rank": 0, "device": "gpu0"}, {"rank": 0, "device": "host"}]}
    (line,) = _unlike_devices(["cpu_run", "gpu_run"], [cpu, gpu])
    assert line.startswith("cpu_run recorded no accelerator activity and gpu_run did (gpu0)")
    assert _unlike_devices(["a", "b"], [gpu, gpu]) == _unlike_devices(["a", "b"], [cpu, cpu]) == []


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_the_warning_reaches_the_cli(monkeypatch, fmt):
    cmp = _comparison([100.0, 101.0, 102.0, 103.0], [100.0, 101.0, 102.0, 103.0])
    cmp.warnings = ["cpu_run recorded no accelerator activity and gpu_run did (gpu0): ..."]
    import prof_engine

    monkeypatch.setattr(prof_engine, "compare", lambda *a, **k: cmp)
    done = CliRunner().invoke(app, ["compare", "base", "run", "--format", fmt])
    assert done.exit_code == 0 and done.stderr.startswith("Warning: cpu_run recorded no accelerator activity")


def test_an_interval_wide_from_its_spread_does_not_ask_for_fewer_samples_than_it_has():
    """Under load a run's steps scatter: 20 vs 20 samples gave an interval of −20 % … +70 % while
    the robust spreads asked for 'about 10 samples a side' — fewer than there were. It says the
    spread keeps it open instead."""
    from types import SimpleNamespace

    import pyarrow as pa

    from prof_engine.engine.compare.thresholds import undecided

    row = {
        "Level": "step", "Item": "Step Time", "Run": "wide", "Status": "inconclusive",
        "Base Median": 2000.0, "Delta": 890.0, "Delta(%)": 44.5, "CI Low": -404.0, "CI High": 1392.0, "Noise Floor": 40.0,
        "Base Spread": 150.0, "Run Spread": 900.0, "Base N": 20, "Run N": 20, "Q Value": 0.2, "Significant": False,
    }  # fmt: skip
    cmp = SimpleNamespace(arrow=lambda: pa.Table.from_pylist([row]), settings=SimpleNamespace(z=1.96, confidence=0.95))
    (line,) = undecided(cmp, ["step_time > +5%"])
    # the normal approximation: n = z²·(s_b² + s_r²) / (Delta − amount)²
    assert math.ceil(1.96**2 * (150**2 + 900**2) / (890 - 100) ** 2) <= 20
    assert "spread, not their number, keeps it open (now 20 vs 20)" in line and "about" not in line
