"""prof_engine.compare: known changes injected into a synthetic program are found exactly, noise is not;
the statistics match an independent computation; thresholds follow their grammar."""

from __future__ import annotations

import math
import random
import statistics
import warnings

import duckdb
import pytest

import prof_engine
from compare_traces import compare_runs  # noqa: F401 - the session fixture
from conftest import fixture_path, write_trace, x
from prof_engine.engine.compare import Batch, _sql
from prof_engine.engine.compare.text import level_tables, verdict
from prof_engine.engine.compare.thresholds import parse_threshold
from prof_engine.errors import QueryError, ThresholdError

Z95 = statistics.NormalDist().inv_cdf(0.975)
# What the injected changes must show, and nothing else: (level, device type, item, detail) → status.
EXPECTED = {
    ("step", "device", "Step Time", ""): "slower",
    ("step", "device", "Free", ""): "slower",  # the stall that makes the step 10 % longer is idle time
    ("op_type", "device", "aten::relu", "KERNEL"): "slower",
    ("op_type", "device", "aten::dropout", "KERNEL"): "removed",
    ("op_type", "host", "aten::dropout", "CPU"): "removed",
    ("op", "device", "vectorized_elementwise_kernel<relu>", "64,512"): "slower",
    ("op", "device", "fused_dropout_kernel_vec", "64,512;"): "removed",
    ("api", "host", "cudaLaunchKernel", "runtime"): "count changed",  # one launch fewer per step
}


@pytest.fixture(scope="module")
def cmp(compare_runs):  # noqa: F811 - the imported fixture
    return prof_engine.compare(compare_runs["base"], compare_runs["changed"], compare_runs["noise"])


def _rows(cmp, run: str) -> dict[tuple, dict]:
    return {
        (r["Level"], r["Device Type"], r["Item"], r["Detail"]): r for r in cmp.arrow().to_pylist() if r["Run"] == run
    }


def test_injected_changes_are_found_exactly(cmp):
    rows = _rows(cmp, "changed")
    found = {key: r["Status"] for key, r in rows.items() if r["Status"] != "no change"}
    assert found == EXPECTED
    assert {r["Level"] for r in rows.values()} == {"step", "op_type", "op", "api", "communication", "memory"}


def test_injected_changes_have_the_right_signs_and_sizes(cmp):
    rows = _rows(cmp, "changed")
    step = rows[("step", "device", "Step Time", "")]
    assert 8.5 < step["Delta(%)"] < 11.5 and step["CI Low"] > 0
    relu = rows[("op_type", "device", "aten::relu", "KERNEL")]
    assert 90 < relu["Delta(%)"] < 110 and 55 < relu["CI Low"] <= relu["Delta"] <= relu["CI High"] < 66
    dropout = rows[("op", "device", "fused_dropout_kernel_vec", "64,512;")]
    assert dropout["Delta(%)"] == -100 and (dropout["Base Calls"], dropout["Run Calls"]) == (1, 0)
    launches = rows[("api", "host", "cudaLaunchKernel", "runtime")]
    assert (launches["Base Calls"], launches["Run Calls"]) == (9, 8)
    computing = rows[("step", "device", "Computing", "")]
    assert computing["Status"] == "no change"  # relu +60 µs, dropout −60 µs: they cancel
    assert all(
        r["Significant"] == (r["Status"] not in ("no change", "count changed")) or key in EXPECTED
        for key, r in rows.items()
    )


def test_rows_are_sorted_by_level_then_impact(cmp):
    rows = [r for r in cmp.arrow().to_pylist() if r["Run"] == "changed"]
    levels = [r["Level"] for r in rows]
    assert levels == sorted(levels, key=["step", "op_type", "op", "api", "communication", "memory"].index)
    for level in set(levels):
        impact = [abs(r["Delta"]) for r in rows if r["Level"] == level]
        assert impact == sorted(impact, reverse=True)


def test_noise_only_is_no_significant_change(cmp):
    assert {r["Status"] for r in _rows(cmp, "noise").values()} == {"no change"}
    assert "noise vs base: no significant change" in cmp.markdown()


def test_markdown_has_a_table_per_level_by_impact(cmp):
    text = cmp.markdown(top=2)
    assert "### Op types (op_statistic), µs per step" in text and "… 13 more rows (1 changed)" in text
    assert "| Item | Where | Detail | Base | changed | noise |" in text  # two runs: the wide form, a column per run
    assert "| aten::relu | device | KERNEL | 60.39 | 120.36 (+99.4% slower) | 60.22 (−0.6%) |" in text


def test_output_says_which_test(cmp):
    assert "Hodges–Lehmann" in cmp.method and "Mann–Whitney" in cmp.method and "noise floor" in cmp.method
    assert cmp.method in cmp.markdown().replace("\n", " ").replace("_Method: ", "")


def test_wide_has_a_column_group_per_run(cmp):
    wide = cmp.wide().arrow()
    assert wide.column_names[:6] == ["Level", "Device Type", "Item", "Detail", "Unit", "Base Median"]
    assert wide.column_names[6:] == [
        f"{run} {c}" for run in ("changed", "noise") for c in ("Median", "Delta(%)", "Status")
    ]
    first = wide.to_pylist()[0]
    assert (first["Item"], first["changed Status"], first["noise Status"]) == ("Free", "slower", "no change")


def test_report_columns_are_documented(cmp):
    documented = [(c.name, c.type) for c in _sql("_report").columns]
    assert [name for name, _ in documented] == cmp.columns
    types = {"VARCHAR": "string", "DOUBLE": "double", "BIGINT": "int64", "BOOLEAN": "bool"}
    assert [types[t] for _, t in documented] == [str(t) for t in cmp.arrow().schema.types]


def test_samples_build_from_their_declared_dependencies_only():
    """Each level's macro binds with only what _samples.sql declares (and what that requires) present."""
    from prof_engine import schema
    from prof_engine.engine.compare import LEVELS
    from prof_engine.engine.views import definitions

    defs, needed = definitions(), set()

    def visit(name: str) -> None:
        needed.add(name)
        for dep in defs[name].requires if name in defs else ():
            visit(dep)

    for dep in _sql("_samples").requires:
        visit(dep)
    con = duckdb.connect()
    for name, table in schema.tables().items():
        if name in needed:
            con.register(f"_empty_{name}", table.arrow_schema.empty_table())
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM _empty_{name}")
    for name, view in defs.items():
        if name in needed:
            con.execute(view.statements())
    con.execute(_sql("_samples").statements())
    for level in LEVELS:
        assert con.execute(f"SELECT * FROM _compare_{level}()").fetchall() == []


def test_batch_holds_each_run_in_its_own_schema(compare_runs):  # noqa: F811 - the imported fixture
    with Batch([compare_runs["base"], compare_runs["changed"]]) as batch:
        ((a, b),) = batch.sql("""SELECT (SELECT count(*) FROM run_0.op_summary WHERE "OP Type" = 'aten::dropout'),
                                      (SELECT count(*) FROM run_1.op_summary WHERE "OP Type" = 'aten::dropout')""").rows()
    assert (a, b) == (16, 0)


def test_bad_arguments_are_one_line_errors(compare_runs):  # noqa: F811 - the imported fixture
    with pytest.raises(QueryError, match="at least one other run"):
        prof_engine.compare(compare_runs["base"])
    with pytest.raises(QueryError, match="unknown level kernels"):
        prof_engine.compare(compare_runs["base"], compare_runs["noise"], levels=["kernels"])
    with pytest.raises(prof_engine.RunError):
        prof_engine.compare(compare_runs["base"], compare_runs["base"].parent / "absent")


# The statistics, on hand-made samples, against an independent computation.


def _samples(values: list) -> list[tuple[int, float]]:
    """(rank, value) pairs; plain values are rank 0."""
    return [v if isinstance(v, tuple) else (0, v) for v in values]


def _report(base: list, run: list, level: str = "step", rel: float = 0.02, max_samples: int = 200):
    """compare_report over hand-made samples: values (rank 0) or (rank, value) pairs, one step each."""
    con = duckdb.connect()
    con.execute("CREATE TABLE compare_runs AS SELECT * FROM (VALUES (0, 'base'), (1, 'run')) t(run, label)")
    con.execute("""CREATE TABLE compare_samples (run INTEGER, level VARCHAR, device_type VARCHAR, item VARCHAR,
                   detail VARCHAR, rank INTEGER, device VARCHAR, step BIGINT, value DOUBLE, calls BIGINT)""")
    rows = [
        (side, level, "device", "x", "", rank, "gpu0", i, v, 1)
        for side, values in ((0, base), (1, run))
        for i, (rank, v) in enumerate(_samples(values))
    ]
    con.executemany("INSERT INTO compare_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    for name in ("_shift", "_report"):
        con.execute(_sql(name).statements())
    (row,) = (
        con.sql("SELECT * FROM compare_report(?, ?, 1.0, 1.0, ?)", params=[Z95, rel, max_samples])
        .to_arrow_table()
        .to_pylist()
    )
    return row


def _report_items(items: dict[str, tuple[list[float], list[float]]], level: str = "op_type") -> dict[str, dict]:
    """compare_report over several hand-made items at one level: name → (baseline values, run values), rank 0, a call each."""
    con = duckdb.connect()
    con.execute("CREATE TABLE compare_runs AS SELECT * FROM (VALUES (0, 'base'), (1, 'run')) t(run, label)")
    con.execute("""CREATE TABLE compare_samples (run INTEGER, level VARCHAR, device_type VARCHAR, item VARCHAR,
                   detail VARCHAR, rank INTEGER, device VARCHAR, step BIGINT, value DOUBLE, calls BIGINT)""")
    rows = [
        (side, level, "device", item, "", 0, "gpu0", i, v, 1)
        for item, sides in items.items()
        for side, values in enumerate(sides)
        for i, v in enumerate(values)
    ]
    con.executemany("INSERT INTO compare_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    for name in ("_shift", "_report"):
        con.execute(_sql(name).statements())
    table = con.sql("SELECT * FROM compare_report(?, 0.02, 1.0, 1.0, 200)", params=[Z95]).to_arrow_table()
    return {r["Item"]: r for r in table.to_pylist()}


def test_false_discovery_rate_is_controlled_across_the_items_of_a_level():
    """20 items, one shifted just beyond the noise floor (alone it would count), 19 unchanged: the
    p-values match scipy's Mann–Whitney test against ±floor, the q-values scipy's Benjamini–Hochberg,
    and one small p among 20 is not a discovery — nor does a gate fire on it."""
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(29)
    items = {"shifted": ([100 + rng.gauss(0, 1) for _ in range(12)], [103.2 + rng.gauss(0, 1) for _ in range(12)])}
    items |= {
        f"same{i:02}": ([100 + rng.gauss(0, 1) for _ in range(12)], [100 + rng.gauss(0, 1) for _ in range(12)])
        for i in range(19)
    }
    rows = _report_items(items)

    def p_beyond_floor(base: list[float], run: list[float], floor: float) -> float:
        up = stats.mannwhitneyu(
            [v - floor for v in run], base, alternative="greater", method="asymptotic", use_continuity=False
        )
        down = stats.mannwhitneyu(
            [v + floor for v in run], base, alternative="less", method="asymptotic", use_continuity=False
        )
        return min(1.0, 2 * min(up.pvalue, down.pvalue))

    shifted = rows["shifted"]
    assert shifted["Status"] == "no change" and not shifted["Significant"]
    assert not parse_threshold("op_type > -1000%").fails(shifted)
    names = sorted(items)
    p = [p_beyond_floor(*items[n], 0.02 * statistics.median(items[n][0])) for n in names]
    q = stats.false_discovery_control(p, method="bh")
    assert [rows[n]["P Value"] for n in names] == pytest.approx(p, rel=1e-5, abs=1e-9)
    assert [rows[n]["Q Value"] for n in names] == pytest.approx(list(q), rel=1e-5, abs=1e-9)
    assert shifted["CI Low"] > shifted["Noise Floor"] and shifted["P Value"] < 0.05 < shifted["Q Value"]
    assert {r["Status"] for r in rows.values()} == {"no change"}
    alone = _report_items({"shifted": items["shifted"]})["shifted"]
    assert (alone["Q Value"], alone["Status"]) == (pytest.approx(alone["P Value"]), "slower")


def test_verdict_names_inconclusive_items_beside_no_change():
    """Step time over 6 steps a side (tested, unchanged), an op seen in 2 steps a side (too few): the
    verdict says both, and the op is not counted as a change."""
    from prof_engine.engine.compare import Comparison, Settings, _Meta

    con = duckdb.connect()
    con.execute("CREATE TABLE compare_runs AS SELECT * FROM (VALUES (0, 'base'), (1, 'run')) t(run, label)")
    con.execute("""CREATE TABLE compare_samples (run INTEGER, level VARCHAR, device_type VARCHAR, item VARCHAR,
                   detail VARCHAR, rank INTEGER, device VARCHAR, step BIGINT, value DOUBLE, calls BIGINT)""")
    rows = [(side, "step", "device", "Step Time", "", 0, "gpu0", i, 100.0 + i, 1) for side in (0, 1) for i in range(6)]
    rows += [(side, "op", "device", "k", "", 0, "gpu0", i, 10.0 + 5 * side, 1) for side in (0, 1) for i in range(2)]
    con.executemany("INSERT INTO compare_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    for name in ("_shift", "_report"):
        con.execute(_sql(name).statements())
    table = con.sql("SELECT * FROM compare_report(?, 0.02, 1.0, 1.0, 200)", params=[Z95]).to_arrow_table()
    cmp = Comparison(table, _Meta("base", ["run"], Settings(), ("step", "op")))
    assert [r["Status"] for r in table.to_pylist()] == ["no change", "inconclusive"]
    assert (
        verdict(cmp)
        == "run vs base: no significant change; 1 other item inconclusive (too few samples for a 95% interval)"
    )
    assert len(cmp.changes()) == 0


@pytest.mark.parametrize("x", [-3.0, -0.5, 0.0, 0.7, 1.959964, 5.0, 12.0])
def test_erfc_keeps_its_relative_precision_in_the_tail(x):
    con = duckdb.connect()
    con.execute("CREATE TABLE compare_runs (run INTEGER, label VARCHAR)")
    con.execute("""CREATE TABLE compare_samples (run INTEGER, level VARCHAR, device_type VARCHAR, item VARCHAR,
                   detail VARCHAR, rank INTEGER, device VARCHAR, step BIGINT, value DOUBLE, calls BIGINT)""")
    con.execute(_sql("_shift").statements())
    assert con.execute("SELECT compare_erfc(?)", [x]).fetchone()[0] == pytest.approx(math.erfc(x), rel=2e-7)


def _hodges_lehmann(base: list, run: list) -> tuple[float, float | None, float | None]:
    """Median of the differences run − base within each shared rank (all pooled if none is shared); the
    interval inverts the stratified Mann–Whitney test: the k-th smallest and largest difference."""
    x, y = _samples(base), _samples(run)
    shared = {r for r, _ in x} & {r for r, _ in y}
    stratum = (lambda r: r) if shared else (lambda r: -1)
    strata = {stratum(r) for r, _ in x} & {stratum(r) for r, _ in y}
    d, pairs, var = [], 0, 0.0
    for s in strata:
        xs, ys = [v for r, v in x if stratum(r) == s], [v for r, v in y if stratum(r) == s]
        d += [b - a for a in xs for b in ys]
        n, m = len(xs), len(ys)
        pairs, var = pairs + n * m, var + n * m * (n + m + 1) / 12
    d.sort()
    k = math.floor(pairs / 2 - Z95 * math.sqrt(var))
    return statistics.median(d), (d[k - 1] if k >= 1 else None), (d[-k] if k >= 1 else None)


@pytest.mark.parametrize("n, m, shift", [(12, 9, 15.0), (30, 30, -4.0), (5, 7, 0.0)])
def test_shift_and_interval_match_an_independent_computation(n, m, shift):
    rng = random.Random(n * m)
    base = [100 + rng.gauss(0, 5) for _ in range(n)]
    run = [100 + shift + rng.gauss(0, 5) for _ in range(m)]
    row = _report(base, run)
    est, low, high = _hodges_lehmann(base, run)
    assert row["Delta"] == pytest.approx(est, abs=1e-3)
    assert (row["CI Low"], row["CI High"]) == (pytest.approx(low, abs=1e-3), pytest.approx(high, abs=1e-3))
    assert row["Base Median"] == pytest.approx(statistics.median(base), abs=1e-3)
    assert row["Base Spread"] == pytest.approx(
        1.4826 * statistics.median(abs(v - statistics.median(base)) for v in base), abs=1e-3
    )


def test_ranks_are_compared_with_themselves():
    """Two ranks doing different work (2.5× apart), 15 µs more on each: within ranks the interval is
    tight; pooled, the gap between the ranks dominates it."""
    rng = random.Random(5)
    base = [(r, level * rng.gauss(1, 0.01)) for r, level in ((0, 100.0), (1, 250.0)) for _ in range(6)]
    run = [(r, v + 15 + rng.gauss(0, 1)) for r, v in base]
    row = _report(base, run)
    est, low, high = _hodges_lehmann(base, run)
    assert (row["Delta"], row["CI Low"], row["CI High"]) == (
        pytest.approx(est, abs=1e-3),
        pytest.approx(low, abs=1e-3),
        pytest.approx(high, abs=1e-3),
    )
    assert row["Status"] == "slower" and row["CI Low"] > row["Noise Floor"]
    other_ranks = _report(base, [(r + 2, v) for r, v in run])  # no rank in common: one pooled stratum
    assert row["CI Low"] < 15 < row["CI High"] and row["CI High"] - row["CI Low"] < 6
    assert other_ranks["CI High"] - other_ranks["CI Low"] > 2 * (row["CI High"] - row["CI Low"])
    assert other_ranks["Delta"] == pytest.approx(_hodges_lehmann(base, [(r + 2, v) for r, v in run])[0], abs=1e-3)


def test_a_one_percent_change_inside_the_noise_floor_is_no_change():
    rng = random.Random(7)
    base = [1000 + rng.gauss(0, 2) for _ in range(40)]
    row = _report(base, [v * 1.01 + rng.gauss(0, 2) for v in base])
    assert row["CI Low"] > 0  # statistically detectable...
    assert row["Status"] == "no change" and not row["Significant"]  # ...but within 2 % of the median
    assert row["Noise Floor"] == pytest.approx(0.02 * row["Base Median"], abs=1e-3)
    assert _report(base, [v * 1.01 for v in base], rel=0.005)["Status"] == "slower"  # a lower floor sees it


def test_interval_must_clear_the_floor_not_only_the_estimate():
    rng = random.Random(3)
    base = [100 + rng.gauss(0, 8) for _ in range(8)]
    row = _report(base, [v + 3 + rng.gauss(0, 8) for v in base])  # +3 %: beyond the floor, but so noisy
    assert row["Delta"] > row["Noise Floor"] and row["CI Low"] < row["Noise Floor"] and row["Status"] == "no change"


def test_too_few_samples_are_inconclusive_not_judged_on_the_estimate():
    """3 against 3 cannot give a 95 % interval (k = floor(4.5 − 1.96·√5.25) = 0): a 10 % shift is
    `inconclusive`, not significant, and no gate fires on it; 4 against 4 is tested."""
    few = _report([100.0, 101.0, 102.0], [110.0, 111.0, 112.0])
    assert (few["CI Low"], few["P Value"], few["Q Value"], few["Status"], few["Significant"]) == (
        None,
        None,
        None,
        "inconclusive",
        False,
    )
    assert not parse_threshold("step > -1000%").fails(few)
    assert _report([100.0, 101.0, 102.0, 103.0], [110.0, 111.0, 112.0, 113.0])["Status"] == "slower"


def test_many_samples_are_thinned_and_the_interval_still_holds():
    rng = random.Random(11)
    base = [50 + rng.gauss(0, 1) for _ in range(1000)]
    row = _report(base, [55 + rng.gauss(0, 1) for _ in range(1000)], max_samples=100)
    assert row["Base N"] == 1000 and row["CI Low"] < 5 < row["CI High"] and row["Status"] == "slower"


def test_items_that_skip_a_sample_count_zero_there():
    """An op that runs in every other step: its samples are its time there and 0 elsewhere — on the
    ranks that run it; rank 1 (another pipeline stage, say) never runs `k` and holds no sample of it."""
    con_rows = _report([10.0, 10.0, 10.0, 10.0], [10.0, 10.0, 10.0, 10.0], level="op")
    assert con_rows["Status"] == "no change"
    con = duckdb.connect()
    con.execute("CREATE TABLE compare_runs AS SELECT * FROM (VALUES (0, 'base'), (1, 'run')) t(run, label)")
    con.execute("""CREATE TABLE compare_samples AS SELECT * FROM (VALUES
        (0, 'op', 'device', 'k', '', 0, 'gpu0', 1::BIGINT, 10.0, 1::BIGINT), (0, 'op', 'device', 'other', '', 0, 'gpu0', 2, 5.0, 1),
        (1, 'op', 'device', 'k', '', 0, 'gpu0', 1, 10.0, 1), (1, 'op', 'device', 'other', '', 0, 'gpu0', 2, 5.0, 1),
        (0, 'op', 'device', 'other', '', 1, 'gpu1', 1, 5.0, 1), (1, 'op', 'device', 'other', '', 1, 'gpu1', 1, 5.0, 1))
        t(run, level, device_type, item, detail, rank, device, step, value, calls)""")
    for name in ("_shift", "_report"):
        con.execute(_sql(name).statements())
    rows = con.execute(
        'SELECT "Item", "Base Median", "Base N", "Base Calls" FROM compare_report(1.96, 0.02, 1.0, 1.0, 200)'
    ).fetchall()
    assert sorted(rows) == [("k", 5.0, 2, 0.5), ("other", 5.0, 3, 1.0)]


@pytest.mark.parametrize(
    "name, kind",
    [
        ("hcom_allReduce_", "allreduce"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "allreduce"),
        ("hcom_reduceScatter_", "reducescatter"),
        ("ncclDevKernel_Recv", "receive"),
        ("ncclKernel_SendRecv_RING_SIMPLE", "sendrecv"),
        ("gemm", None),
    ],
)
def test_collective_kind_is_one_word_for_every_vendor(name, kind):
    from prof_engine._resources import data_dir

    con = duckdb.connect()
    con.execute((data_dir("queries") / "_classify.sql").read_text())
    assert con.execute("SELECT collective_kind(?)", [name]).fetchone() == (kind,)


# Thresholds.


@pytest.mark.parametrize(
    "text, fails",
    [
        ("step_time > +5%", True),
        ("step_time > +15%", False),
        ("step_time>5%", True),
        ("step_time < -5%", False),
        ("step[Free] > +50us", True),
        ("op_type[aten::relu] > +0.05ms", True),
        ("op_type > +120%", False),
        ("op > 50us", True),
        ("memory > +1MB", False),
        ("communication > +1%", False),
        ("step > +5%", True),
    ],
)
def test_thresholds_fail_only_on_significant_changes_beyond_them(compare_runs, text, fails, cmp):  # noqa: F811 - the imported fixture
    reasons = cmp.check([text])
    assert bool(reasons) == fails
    if fails:
        assert len(reasons) == 1 and reasons[0].startswith(f"regression: {text.strip()}: ") and "\n" not in reasons[0]


@pytest.mark.parametrize(
    "text, why",
    [
        ("step_time >> 5%", "not understood"),
        ("step_time > 5", "not understood"),
        ("latency > +5%", "unknown metric"),
        ("memory > +5us", "does not measure memory"),
        ("step_time > +5MB", "does not measure step"),
        ("", "not understood"),
    ],
)
def test_bad_threshold_syntax_is_a_one_line_error(text, why):
    with pytest.raises(ThresholdError, match=why) as e:
        parse_threshold(text)
    assert "\n" not in str(e.value)


def test_threshold_naming_no_item_is_an_error_not_a_pass(cmp):
    with pytest.raises(ThresholdError, match="no op_type item named 'aten::relu_typo'"):
        cmp.check(["op_type[aten::relu_typo] > +5%"])


def test_runs_without_steps_compare_as_one_sample_per_rank_too_few_to_judge(tmp_path):
    base = 1.7e15
    for name, mm_us in (("a", 10), ("b", 20)):
        write_trace(
            tmp_path / f"{name}.json",
            [x("aten::mm", base + i * 100, mm_us) for i in range(5)]
            + [x("aten::add", base + 50 + i * 100, 5) for i in range(5)],
        )
        prof_engine.import_trace([tmp_path / f"{name}.json"], tmp_path / name)
    rows = _rows(prof_engine.compare(tmp_path / "a", tmp_path / "b", levels=["op"]), "b")
    mm, add = rows[("op", "host", "aten::mm", "")], rows[("op", "host", "aten::add", "")]
    assert (mm["Status"], mm["Delta"], mm["Base N"], mm["CI Low"], mm["Significant"]) == (
        "inconclusive",
        50.0,
        1,
        None,
        False,
    )
    assert add["Status"] == "inconclusive"


def test_kineto_run_against_ascend_run(tmp_path):
    """Different vendors: the step breakdown and the collectives meet; ops of one side are added/removed."""
    gpu = prof_engine.import_trace([fixture_path("kineto", "hta_sampled_2rank_nccl")], tmp_path / "gpu")
    npu = prof_engine.import_trace([fixture_path("ascend", "torch_npu_2rank_level1_text")], tmp_path / "npu")
    rows = _rows(prof_engine.compare(gpu, npu, levels=["step", "communication"]), "npu")
    step = rows[("step", "device", "Step Time", "")]
    assert step["Base N"] == 4 and step["Run N"] == 2 and step["Base Median"] > 0 and step["Run Median"] > 0
    assert rows[("communication", "device", "allreduce", "")]["Status"] == "added"
    assert rows[("communication", "device", "sendrecv", "")]["Status"] == "removed"


# Runs recorded by torch.profiler in the test: what a user compares.


def _record_pair(d, steps: int, batches: tuple[int, int] = (16, 16), per_cycle: int = 1, memory: bool = False) -> tuple:
    """Two runs of one small training script, recorded with torch.profiler (CPU, with shapes):
    run `a` trains on batches of batches[0] rows, run `b` of batches[1]; `steps` recorded steps each.

    The two recordings take turns, one profiling cycle (a warm-up step, `per_cycle` recorded steps) each:
    recorded one after the other on a shared machine, their times differ by tens of percent with its
    load — a real difference between the runs that no statistic over one run's steps can call noise.
    In turns, both see the same machine, as the claim "the same script, no change" presumes."""
    torch = pytest.importorskip("torch")
    import json

    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(n, 32), torch.randn(n, 8)) for n in batches]
    cycles: list[dict] = []

    def save(prof) -> None:
        prof.export_chrome_trace(str(d / "cycle.json"))
        cycles.append(json.loads((d / "cycle.json").read_text(encoding="utf-8")))

    cycle, cycles_per_run = per_cycle + 1, steps // per_cycle
    with (
        warnings.catch_warnings(),
        profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=per_cycle, repeat=2 * cycles_per_run),
            record_shapes=True,
            profile_memory=memory,
            on_trace_ready=save,
        ) as prof,
    ):
        warnings.filterwarnings("ignore", "Warning: Profiler clears events")  # a trace per cycle is the point
        for i in range(2 * cycles_per_run * cycle):
            x, y = data[i // cycle % 2]  # cycle c belongs to run c % 2
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    runs = []
    for side, name in enumerate("ab"):
        trace = {**cycles[side], "traceEvents": [e for c in cycles[side::2] for e in c["traceEvents"]]}
        write_trace(
            d / f"{name}.json", trace.pop("traceEvents"), **{k: v for k, v in trace.items() if k != "schemaVersion"}
        )
        runs.append(prof_engine.import_trace([d / f"{name}.json"], d / name, jobs=1))
    return tuple(runs), cycles


@pytest.fixture(scope="module")
def same_script(tmp_path_factory):
    (a, b), _ = _record_pair(tmp_path_factory.mktemp("same_script"), steps=8, per_cycle=2, memory=True)
    return prof_engine.compare(a, b)


def test_the_same_script_recorded_twice_is_no_significant_change_at_every_level(same_script):
    """Every item of every level is tested (an interval, a q-value) and none changed: the claim "no
    significant change" stands on a test of each item, never on items too thin to judge."""
    rows = same_script.arrow().to_pylist()
    assert {r["Level"] for r in rows} == {"step", "op_type", "op", "api", "memory"}
    assert [r["Item"] for r in rows if r["Status"] not in ("no change", "inconclusive") or r["Significant"]] == []
    assert all(r["CI Low"] is not None and r["Base N"] == r["Run N"] == 8 for r in rows)  # memory too: a peak per step
    assert all(r["Q Value"] is not None for r in rows)
    # on a loaded machine a CPU step can vary by half: an estimate beyond twice the floor over an
    # interval that reaches into it is `inconclusive` (issue 38, item 11), never `no change`
    assert all(r["Status"] == "inconclusive" for r in rows if abs(r["Delta"]) > 2 * r["Noise Floor"])
    line = verdict(same_script)
    assert line == "b vs a: no significant change" or ("inconclusive" in line and "slower" not in line)
    assert "Benjamini–Hochberg" in same_script.method and "false discovery rate" in same_script.method


@pytest.fixture(scope="module")
def three_steps(tmp_path_factory):
    (a, b), _ = _record_pair(tmp_path_factory.mktemp("three_steps"), steps=3)
    return prof_engine.compare(a, b)


def test_three_against_three_steps_is_inconclusive_in_table_and_verdict(three_steps):
    rows = three_steps.arrow().to_pylist()
    assert {r["Status"] for r in rows} == {"inconclusive"} and not any(r["Significant"] for r in rows)
    assert all(r["CI Low"] is None and (r["Base N"], r["Run N"]) == (3, 3) for r in rows)
    line = verdict(three_steps)
    assert line.startswith("b vs a: inconclusive: too few samples for a 95% interval (3 vs 3 samples per item)")
    assert "slower" not in line and "faster" not in line and "no significant change" not in line
    step_table = level_tables(three_steps, top=2)[0]
    assert step_table.headers[-1] == "Status" and {row[-1] for row in step_table.rows} == {"inconclusive"}
    assert step_table.hidden > 0 and step_table.hidden_changed == 0 and len(three_steps.changes()) == 0
    # no gate fires on an item that could not be judged, however low its bar
    assert three_steps.check(["step_time > -1000%", "step_time < +1000%", "op > -1000000us"]) == []


def test_an_op_whose_input_shapes_changed_is_matched_by_name(tmp_path):
    """Batches of 16 rows, then of 24: each op keeps its name and changes its input shapes — one
    `shapes changed` item per op name, its time judged as any other, instead of a removal and an addition."""
    (a, b), cycles = _record_pair(tmp_path, steps=4, batches=(16, 24), per_cycle=2)
    rows = _rows(prof_engine.compare(a, b, levels=["op"]), "b")
    assert {r["Status"] for r in rows.values()} <= {
        *("shapes changed", "no change", "slower", "faster", "count changed"),
        "inconclusive",  # a noisy CPU op's large estimate over a wide interval (issue 38, item 11)
    }
    # the oracle: input shapes of aten::addmm in the raw traces of each run
    shapes = [
        {
            ";".join(",".join(map(str, dims)) for dims in e["args"]["Input Dims"])
            for c in cycles[side::2]
            for e in c["traceEvents"]
            if e.get("name") == "aten::addmm" and e.get("cat") == "cpu_op"
        }
        for side in (0, 1)
    ]
    assert shapes[0] and shapes[1] and not shapes[0] & shapes[1]
    addmm = rows[("op", "host", "aten::addmm", f"{' | '.join(sorted(shapes[0]))} → {' | '.join(sorted(shapes[1]))}")]
    assert addmm["Status"] == "shapes changed" and (addmm["Base N"], addmm["Run N"]) == (4, 4)
    assert addmm["CI Low"] is not None and addmm["Q Value"] is not None  # its time is tested as any item's
    assert (addmm["Base Calls"], addmm["Run Calls"]) == (2, 2)  # both linear layers, under one name
