"""Interval algebra and the overlap / step_trace views on hand-built timelines with known answers."""

from __future__ import annotations

import duckdb
import pytest

import prof_engine
from conftest import REPO, fixture_path, load_events, write_trace, x
from prof_engine._resources import data_dir

BASE = 1_700_000_000_000_000  # µs since the epoch
UNION_A, UNION_B, B_NOT_A, GAPS = range(4)  # interval_lanes' lanes (the lane pass's SQL oracle)


def _macros() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute((REPO / "tests" / "data" / "lanes_oracle.sql").read_text())  # interval_lanes, overlap_lanes
    return con


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return sorted(con.execute(sql).fetchall())


@pytest.mark.parametrize(
    "intervals, expected",
    [
        # [0----10)  [20--30)          separate
        ([(0, 10), (20, 30)], [(0, 10), (20, 30)]),
        # [0-----------20)  with [5--8) inside: nested
        ([(0, 20), (5, 8)], [(0, 20)]),
        # [0---10) [10---20): touching merge
        ([(0, 10), (10, 20)], [(0, 20)]),
        # [0---10) overlapping [5---15) overlapping [12--30)
        ([(0, 10), (5, 15), (12, 30)], [(0, 30)]),
        # an empty interval contributes nothing
        ([(0, 10), (50, 50)], [(0, 10)]),
    ],
    ids=["separate", "nested", "touching", "chained-overlap", "empty"],
)
def test_interval_union(intervals, expected):
    con = _macros()
    con.execute(
        "CREATE TABLE t AS SELECT 1 AS key, false AS b, * FROM (VALUES " + ",".join(map(str, intervals)) + ") v(s, e)"
    )
    assert _rows(con, f"SELECT s, e FROM interval_lanes('t') WHERE lane = {UNION_A}") == expected


def test_interval_union_keeps_keys_apart():
    con = _macros()
    con.execute(
        "CREATE TABLE t AS SELECT key, false AS b, s, e FROM (VALUES (1, 0, 10), (2, 5, 15), (1, 10, 12)) v(key, s, e)"
    )
    assert _rows(con, f"SELECT key, s, e FROM interval_lanes('t') WHERE lane = {UNION_A}") == [(1, 0, 12), (2, 5, 15)]


@pytest.mark.parametrize(
    "intervals, expected",
    [
        # [0--10)   [20--30)      → the hole between them
        ([(0, 10), (20, 30)], [(10, 20)]),
        # [0---10) [10---20): touching, no gap
        ([(0, 10), (10, 20)], []),
        # [0-----20) holding [5-8), then [25-30): one gap
        ([(0, 20), (5, 8), (25, 30)], [(20, 25)]),
        # empty intervals at 0 and 50 stretch the span [0, 50) around [10, 20)
        ([(0, 0), (10, 20), (50, 50)], [(0, 10), (20, 50)]),
        # only empty intervals: the whole span
        ([(5, 5), (9, 9)], [(5, 9)]),
        # one empty interval: no span
        ([(5, 5)], []),
    ],
    ids=["hole", "touching", "nested-then-hole", "empty-stretches-span", "only-empty", "single-empty"],
)
def test_interval_gaps(intervals, expected):
    con = _macros()
    con.execute(
        "CREATE TABLE t AS SELECT 1 AS key, false AS b, * FROM (VALUES " + ",".join(map(str, intervals)) + ") v(s, e)"
    )
    assert _rows(con, f"SELECT s, e FROM interval_lanes('t') WHERE lane = {GAPS}") == expected


# -- an independent reference: the same operations on sets of integer points --------------------------
def _points(intervals) -> set[int]:
    return {t for s, e in intervals for t in range(s, e)}


def _runs(points: set[int]) -> list[tuple[int, int]]:
    """Maximal [s, e) runs of consecutive points."""
    runs: list[list[int]] = []
    for t in sorted(points):
        if runs and runs[-1][1] == t:
            runs[-1][1] = t + 1
        else:
            runs.append([t, t + 1])
    return [tuple(r) for r in runs]


def _random_intervals(rng, n: int) -> list[tuple[int, int, int]]:
    """(key, s, e) rows: nested, overlapping, touching, duplicated, empty and negative intervals."""
    rows = []
    for _ in range(n):
        s = rng.randint(0, 40)
        rows.append((rng.randint(1, 3), s, s + rng.choice([0, 1, 2, 3, 5, 8, 13, -2, rng.randint(0, 30)])))
    return rows + rng.sample(rows, min(3, len(rows)))


@pytest.mark.parametrize("seed", range(80))
def test_interval_lanes_match_point_sets(seed):
    """interval_lanes' four lanes equal the same operations done on sets of integer points, keys kept
    apart (NULL included): the unions of a and of b, b less a, and the gaps of both in their span."""
    import random

    rng = random.Random(seed)
    rows = [(k, False, s, e) for k, s, e in _random_intervals(rng, rng.randint(1, 25))]
    rows += [(k, True, s, e) for k, s, e in _random_intervals(rng, rng.randint(0, 25))]
    rows = [(None if k == 3 else k, b, s, e) for k, b, s, e in rows]
    rng.shuffle(rows)
    con = _macros()
    con.execute("CREATE TABLE t (key INTEGER, b BOOLEAN, s BIGINT, e BIGINT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    got = con.execute("SELECT key, lane, s, e FROM interval_lanes('t')").fetchall()
    for key in {r[0] for r in rows}:
        a = [(s, e) for k, b, s, e in rows if k == key and not b]
        b = [(s, e) for k, b, s, e in rows if k == key and b]
        span = (min(s for s, _ in a + b), max(e for _, e in a + b))
        expected = {
            UNION_A: _runs(_points(a)),
            UNION_B: _runs(_points(b)),
            B_NOT_A: _runs(_points(b) - _points(a)),
            GAPS: _runs(_points([span]) - _points(a + b)),
        }
        for lane, want in expected.items():
            assert sorted((s, e) for k, ln, s, e in got if k == key and ln == lane) == want, (key, lane)


def _step_totals(rows) -> dict:
    """`step_lanes` over the lanes of (step, b, s, e) rows of one device, as (|a|, |b|, |a ∪ b|,
    first start of an interval longer than 0, span start, span end) per step."""
    con = _macros()
    con.execute((data_dir("queries") / "_lanes.sql").read_text())
    con.execute("CREATE TABLE act (rank INTEGER, device VARCHAR, step BIGINT, type VARCHAR, s BIGINT, e BIGINT)")
    con.executemany(
        "INSERT INTO act VALUES (0, 'gpu0', ?, ?, ?, ?)",
        [(k, "Communication" if b else "Computing", s, e) for k, b, s, e in rows],
    )
    con.execute("CREATE TABLE lanes AS SELECT * FROM overlap_lanes('act', ['gpu0'])")
    con.execute("CREATE TABLE receives (rank INTEGER, device VARCHAR, step BIGINT, dur BIGINT)")
    con.execute("CREATE TABLE steps (rank INTEGER, step BIGINT, ts BIGINT)")
    return {
        step: (a, b, a + not_overlapped, first, s, e)
        for step, a, b, not_overlapped, first, s, e in con.execute(
            "SELECT step, computing, communication, not_overlapped, first_active, span_start, span_end "
            "FROM step_lanes('lanes', 'receives', 'steps')"
        ).fetchall()
    }


@pytest.mark.parametrize("seed", range(60))
def test_step_totals_match_point_sets(seed):
    """The step breakdown's lengths and spans, summed from the lanes, equal those of point sets,
    steps kept apart (NULL included)."""
    import random

    rng = random.Random(seed)
    rows = [(k, False, s, e) for k, s, e in _random_intervals(rng, rng.randint(1, 30))]
    rows += [(k, True, s, e) for k, s, e in _random_intervals(rng, rng.randint(0, 30))]
    rows = [(None if k == 3 else k, b, s, e) for k, b, s, e in rows]  # NULL: outside every step
    rng.shuffle(rows)
    expected = {}
    for key in {r[0] for r in rows}:
        a = _points([(s, e) for k, b, s, e in rows if k == key and not b])
        b = _points([(s, e) for k, b, s, e in rows if k == key and b])
        mine = [(s, e) for k, _, s, e in rows if k == key]
        first = min((s for s, e in mine if e > s), default=None)
        span = (min(s for s, _ in mine), max(e for _, e in mine))
        if span[1] > span[0]:  # a step has lanes where its span is longer than 0
            expected[key] = (len(a), len(b), len(a | b), first, *span)
    assert _step_totals(rows) == expected


@pytest.mark.parametrize(
    "rows, expected",
    [
        # a [0---10)  b    [5------20)    a [15--18): a 13, b 15, both 20
        ([(False, 0, 10), (True, 5, 20), (False, 15, 18)], (13, 15, 20, 0, 0, 20)),
        # a [0--5) [5--9) touching, b nested in them, then an empty a far away: the span reaches it
        ([(False, 0, 5), (False, 5, 9), (True, 2, 3), (False, 30, 30)], (9, 1, 9, 0, 0, 30)),
        # only empty intervals: lengths 0, no first start
        ([(False, 4, 4), (True, 7, 7)], (0, 0, 0, None, 4, 7)),
        # equal starts in any order: the longer one counts once
        ([(True, 0, 3), (True, 0, 8), (True, 0, 1)], (0, 8, 8, 0, 0, 8)),
    ],
    ids=["overlap", "touching-and-empty", "only-empty", "equal-starts"],
)
def test_step_totals(rows, expected):
    assert _step_totals([(1, b, s, e) for b, s, e in rows]) == {1: expected}


@pytest.mark.parametrize(
    "kept, covering, expected",
    [
        # kept [0------------30)  covering   [10--20)          → [0,10) [20,30)
        ([(0, 30)], [(10, 20)], [(0, 10), (20, 30)]),
        # covering covers kept entirely
        ([(5, 10)], [(0, 20)], []),
        # covering touches kept's ends only
        ([(10, 20)], [(0, 10), (20, 30)], [(10, 20)]),
        # kept overlapping itself (two streams) less a nested covering: merged result
        ([(0, 10), (5, 20)], [(8, 9)], [(0, 8), (9, 20)]),
        # nothing covering
        ([(0, 10)], [], [(0, 10)]),
    ],
    ids=["hole", "covered", "touching", "multi-stream", "nothing-to-subtract"],
)
def test_interval_lanes_difference(kept, covering, expected):
    """Lane 2 is the b intervals less the a intervals: `kept` go in as b, `covering` as a."""
    con = _macros()
    rows = [(True, s, e) for s, e in kept] + [(False, s, e) for s, e in covering]
    con.execute("CREATE TABLE t AS SELECT 1 AS key, * FROM (VALUES " + ",".join(map(str, rows)) + ") v(b, s, e)")
    assert _rows(con, f"SELECT s, e FROM interval_lanes('t') WHERE lane = {B_NOT_A}") == expected


def _kernel(name: str, start: float, dur: float, stream: int, **args) -> dict:
    return x(name, BASE + start, dur, cat="kernel", pid=0, tid=stream, device=0, stream=stream, **args)


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    """Step 1 = [0, 100) µs on the host; on gpu0:

    stream 7  compute   A [10----30)  C [30--40)      (B [20,25) nested in A)
    stream 8  comm                        N1 [35------60)      N2 [70--80)
    step 2 = [100, 200): aten::mm [190,195) launches (corr 42) kernel K that runs at [205,215)
    """
    d = tmp_path_factory.mktemp("gpu")
    events = [
        x("ProfilerStep#1", BASE + 0, 100, cat="user_annotation"),
        x("ProfilerStep#2", BASE + 100, 100, cat="user_annotation"),
        _kernel("A", 10, 20, 7),
        _kernel("B", 20, 5, 7),
        _kernel("C", 30, 10, 7),
        _kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 35, 25, 8),
        _kernel("ncclKernel_AllGather_RING_LL", 70, 10, 8),
        x("aten::mm", BASE + 190, 5, **{"External id": 9}),
        x("cudaLaunchKernel", BASE + 191, 2, cat="cuda_runtime", correlation=42, **{"External id": 9}),
        _kernel("K", 205, 10, 7, correlation=42, **{"External id": 9}),
    ]
    run = prof_engine.import_trace([write_trace(d / "t.json", events)], d / "run")
    with prof_engine.open(run) as r:
        yield r


def test_overlap_lanes_exact(gpu_run):
    rows = gpu_run.sql(
        f"""SELECT "Type", "Start Time(us)" - {BASE} AS start, "Duration(us)" FROM overlap
           WHERE "Step" = 1 ORDER BY "Type", start"""
    ).rows()
    assert [(t, float(s), d) for t, s, d in rows] == [
        ("Communication", 35.0, 25.0),
        ("Communication", 70.0, 10.0),
        ("Communication(Not Overlapped)", 40.0, 20.0),
        ("Communication(Not Overlapped)", 70.0, 10.0),
        ("Computing", 10.0, 30.0),
        ("Free", 60.0, 10.0),  # only between activities: before the first is Preparing, after the last nothing
    ]


def test_step_trace_from_overlap(gpu_run):
    row = gpu_run.sql('SELECT * FROM step_trace WHERE "Step" = 1').arrow().to_pylist()[0]
    assert row["Device"] == "gpu0" and row["Rank"] == 0
    assert row["Computing"] == 30.0
    assert row["Communication"] == 35.0
    assert row["Communication(Not Overlapped)"] == 30.0
    assert row["Overlapped"] == 5.0
    assert row["Free"] == 10.0
    assert row["Stage"] == 70.0  # span [10, 80): first to last activity, minus no bubble
    assert row["Bubble"] == 0.0
    assert row["Preparing"] == 10.0  # first device activity 10 µs after the host step began


def test_kernel_takes_the_step_of_its_launch(gpu_run):
    """K runs during step 2's successor time range but was launched in step 2: it belongs to step 2."""
    ((step, launcher),) = gpu_run.sql(
        "SELECT k.step, l.name FROM slices k JOIN slices l ON l.id = k.launch_id WHERE k.name = 'K'"
    ).rows()
    assert (step, launcher) == (2, "aten::mm")
    ((op_type,),) = gpu_run.sql("""SELECT "OP Type" FROM op_summary WHERE "Op Name" = 'K'""").rows()
    assert op_type == "aten::mm"


def test_task_wait_time_is_gap_on_stream(gpu_run):
    rows = dict(gpu_run.sql("""SELECT "Op Name", "Task Wait Time(us)" FROM op_summary WHERE "Stream ID" = 7""").rows())
    assert rows["A"] == 0.0 and rows["B"] == 0.0 and rows["C"] == 0.0 and rows["K"] == 165.0


# -- steps whose device spans overlap (issue 28, item 8) -------------------------------------------------
def _device_free(rows) -> dict:
    """Free per step by `device_free` over the lanes of (step, b, s, e) rows of one device."""
    con = _macros()
    con.execute((data_dir("queries") / "_lanes.sql").read_text())
    con.execute("CREATE TABLE act (rank INTEGER, device VARCHAR, step BIGINT, type VARCHAR, s BIGINT, e BIGINT)")
    con.executemany(
        "INSERT INTO act VALUES (0, 'gpu0', ?, ?, ?, ?)",
        [(k, "Communication" if b else "Computing", s, e) for k, b, s, e in rows],
    )
    con.execute("CREATE TABLE own AS SELECT * FROM overlap_lanes('act', ['gpu0'])")
    con.execute("CREATE TABLE devices AS SELECT * FROM overlapping_devices('own')")
    con.execute("CREATE TABLE free AS SELECT * FROM device_free('own', 'devices')")
    got: dict = {}
    for step, ts, dur in con.execute(
        "SELECT step, ts, dur FROM device_lanes('own', 'devices', 'free') WHERE type = 'Free' ORDER BY ts"
    ).fetchall():
        got.setdefault(step, []).append((ts, ts + dur))
    return got


def _free_by_points(rows) -> dict:
    """The rule on point sets: keys with a span longer than 0, in order of (outside every step last,
    span start, step); a key's window is its span less the spans of the keys before it; its Free is
    the window's points where no interval of any key runs."""
    spans = {}
    for k, _, s, e in rows:
        a, b = spans.get(k, (s, e))
        spans[k] = (min(a, s), max(b, e))
    spans = {k: v for k, v in spans.items() if v[1] > v[0]}
    busy = _points([(s, e) for _, _, s, e in rows])
    taken: set[int] = set()
    free = {}
    for k in sorted(spans, key=lambda k: (k is None, spans[k][0], k or 0)):
        window = _points([spans[k]]) - taken
        taken |= _points([spans[k]])
        if window - busy:
            free[k] = _runs(window - busy)
    return free


@pytest.mark.parametrize("seed", range(60))
def test_device_free_matches_point_sets(seed):
    """Steps whose spans overlap, nest or not, and records outside every step (NULL): `device_free`
    equals the rule on point sets, and Σ Free is the device's idle time within the keys' spans."""
    import random

    rng = random.Random(seed)
    rows = []
    for k in (1, 2, 3, None):
        base = rng.randint(0, 30)
        rows += [(k, rng.random() < 0.3, base + s, base + e) for _, s, e in _random_intervals(rng, rng.randint(0, 6))]
    got = _device_free(rows)
    assert got == _free_by_points(rows)
    spans = [
        (min(s for kk, _, s, _ in rows if kk == k), max(e for kk, _, _, e in rows if kk == k))
        for k in {r[0] for r in rows}
    ]
    idle = _points(spans) - _points([(s, e) for _, _, s, e in rows])
    assert sum(e - s for v in got.values() for s, e in v) == len(idle)


def test_device_free_keeps_disjoint_steps():
    """Steps apart: each keeps the gaps of its own activity (no other step's kernel is in its span)."""
    rows = [(1, False, 0, 10), (1, True, 15, 20), (2, False, 30, 40), (2, False, 45, 50)]
    assert _device_free(rows) == {1: [(10, 15)], 2: [(40, 45)]}


def test_device_free_of_overlapping_steps_by_hand():
    """step 1 [0, 10) [40, 50): its span [0, 50) holds step 2's [20, 30); step 2 [20, 30) [60, 70).
    Device idle: [10, 20) [30, 40) [50, 60). Step 1 holds [0, 50): Free [10, 20) [30, 40); step 2's
    span less step 1's is [50, 70): Free [50, 60). Before: step 1 counted [10, 40) less nothing of
    its own (30 µs), step 2 [30, 60) (30), against 30 idle in all."""
    rows = [(1, False, 0, 10), (1, False, 40, 50), (2, False, 20, 30), (2, True, 60, 70)]
    assert _device_free(rows) == {1: [(10, 20), (30, 40)], 2: [(50, 60)]}


def _kineto_free_oracle(events) -> dict:
    """From the raw Kineto JSON (ns, exact): device kernels (cat `kernel`: compute and collectives),
    each in the host ProfilerStep holding its launch (by correlation id), or else in the device's
    step window holding its own start (step N's: the hull of the GPU's ProfilerStep#N and of the
    device records launched in host step N), else in none (None); the device's idle intervals (gaps
    of the union of all kernels); each step's span (first to last of its kernels) less the spans of
    the steps that started before it (no step last); Free = idle within it."""

    def ns(v):
        return int(v * 1000)

    host_steps = {
        int(e["name"].split("#")[1]): (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    }

    def step_at(t):
        held = [(s, k) for k, (s, e) in host_steps.items() if s <= t < e]
        return max(held)[1] if held else None

    launch = {
        e["args"]["correlation"]: ns(e["ts"])
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    windows = {
        int(e["name"].split("#")[1]): (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
        for e in events
        if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#")
    }
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X"]
    for e in device:
        c = e["args"].get("correlation")
        k = step_at(launch[c]) if c in launch else None
        if k is not None:
            a, b = windows.get(k, (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
            windows[k] = (min(a, ns(e["ts"])), max(b, ns(e["ts"]) + ns(e["dur"])))

    def window_at(t):
        held = [(s, k) for k, (s, e) in windows.items() if s <= t < e]
        return max(held)[1] if held else None

    kernels = []
    for e in device:
        if e["cat"] == "kernel":
            s = ns(e["ts"])
            c = e["args"].get("correlation")
            k = step_at(launch[c]) if c in launch else None
            kernels.append((window_at(s) if k is None else k, s, s + ns(e["dur"])))
    merged: list[list[int]] = []
    for _, s, e in sorted(kernels, key=lambda k: k[1]):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        elif e > s:
            merged.append([s, e])
    idle = [(a[1], b[0]) for a, b in zip(merged, merged[1:])]
    spans: dict = {}
    for k, s, e in kernels:
        a, b = spans.get(k, (s, e))
        spans[k] = (min(a, s), max(b, e))
    free, before = {}, []
    for k in sorted(spans, key=lambda k: (k is None, spans[k][0])):
        lo, hi = spans[k]
        own = [(max(lo, s), min(hi, e)) for s, e in idle if min(hi, e) > max(lo, s)]
        for a, b in before:  # less what the spans of the steps before it hold
            own = [p for s, e in own for p in ((s, min(e, a)), (max(s, b), e)) if p[1] > p[0]]
        free[k] = sum(e - s for s, e in own)
        before.append(spans[k])
    return {"free": free, "idle": sum(e - s for s, e in idle), "range": merged[-1][1] - merged[0][0], "spans": spans}


@pytest.fixture(scope="module")
def mi300x_run(tmp_path_factory):
    src = fixture_path("kineto", "rccl_mi300x_resnet_3step")
    with prof_engine.open(prof_engine.import_trace([src], tmp_path_factory.mktemp("mi300x") / "run")) as r:
        yield src, r


def test_overlapping_steps_free_is_device_idle(mi300x_run):
    """rccl_mi300x_resnet_3step: before step 15's first kernel the GPU runs 30 ms of work launched
    before the trace (968 tasks, no launch record): in no step, as its GPU step windows say (issue
    38; before, host time folded it into steps 15 and 16, whose spans then overlapped by 32 ms).
    Free per step equals the oracle's, and Σ Free is the device's idle time, 5.2 ms of its 86.6 ms."""
    src, run = mi300x_run
    oracle = _kineto_free_oracle(load_events(next(src.glob("*.json.gz")))[1])
    assert oracle["idle"] == 5_203_181 and oracle["range"] == 86_567_708
    assert set(oracle["spans"]) == {None, 15, 16, 17}  # the queued work before step 15's window: none
    query = 'SELECT "Step", "Free" FROM step_trace ORDER BY "Step"'
    stored = run.sql(query).rows()
    assert stored == [(k, v / 1e3) for k, v in sorted(oracle["free"].items(), key=lambda kv: (kv[0] is None, kv[0]))]
    assert sum(v for _, v in stored) == pytest.approx(oracle["idle"] / 1e3)
    assert run.sql('SELECT sum("Duration(us)") FROM overlap WHERE "Type" = \'Free\'').rows()[0][0] == pytest.approx(
        oracle["idle"] / 1e3
    )


def test_step_overlaps_and_advice_idle_share(mi300x_run):
    """`_step_overlaps`: with the queued work before step 15 in no step (issue 38), the steps' GPU
    spans no longer overlap (before: step 15 ran past step 16's start by 32 ms); advice finds no
    idle device."""
    src, run = mi300x_run
    spans = _kineto_free_oracle(load_events(next(src.glob("*.json.gz")))[1])["spans"]
    del spans[None]
    union, reach = 0, None
    for s, e in sorted(spans.values()):
        union += max(0, e - max(s, reach or s))
        reach = max(reach or e, e)
    (row,) = run.sql("SELECT steps, overlapping, first_step, overlap, span FROM _step_overlaps").rows()
    assert row == (3, 0, None, 0, union) and union == sum(e - s for s, e in spans.values())
    assert "device_idle" not in {r[0] for r in run.sql('SELECT "Rule" FROM advice').rows()}
