"""End to end on a real torch.profiler CPU trace recorded by the test itself.

Every expected value is computed here from the raw trace JSON, never from prof_engine output.
The raw file is read with `json` and `parse_float=Decimal`: Kineto writes µs with 3 decimals, and
a float64 can no longer hold them to the ns once `ts` passes 2**43 µs (~102 days after
Kineto's fixed `baseTimeNanoseconds`), so the ns values are exact here whatever the date.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from decimal import Decimal

import pytest

import prof_engine

BATCH, IN, HIDDEN, OUT = 16, 32, 64, 8
EXPECTED_STEPS = [2, 3, 4]  # schedule(wait=1, warmup=1, active=3): the first active step is #2


def ns(us) -> int:
    """µs as written in the trace (Decimal or int) → int ns, exactly."""
    return int(Decimal(us) * 1000)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> dict:
    """Record 6 SGD iterations of a small MLP with torch.profiler (CPU), import it; raw events + run."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    tmp = tmp_path_factory.mktemp("torch_trace")
    path = tmp / "trace.json"
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.LayerNorm(HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(BATCH, IN), torch.randn(BATCH, OUT)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        record_shapes=True,
        profile_memory=True,
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(6):
            with record_function("my_forward"):
                loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()

    top = json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)
    events = top["traceEvents"]
    base = int(top.get("baseTimeNanoseconds", 0))
    steps = {}  # N -> (start ns, end ns), absolute
    for e in events:
        if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"):
            start = base + ns(e["ts"])
            steps[int(e["name"].split("#")[1])] = (start, start + ns(e["dur"]))
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    ranges = {
        e["name"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")
    }
    # torch's own table over the same (last active) window: name -> (calls, self µs, total µs)
    averages = {a.key: (a.count, a.self_cpu_time_total, a.cpu_time_total) for a in prof.key_averages()}
    self_memory = {a.key: a.self_cpu_memory_usage for a in prof.key_averages() if a.self_cpu_memory_usage}
    prof_engine.import_trace([path], tmp / "run")
    run = prof_engine.open(tmp / "run")
    yield {
        "events": events,
        "base": base,
        "steps": steps,
        "ops": ops,
        "ranges": ranges,
        "run": run,
        "averages": averages,
        "self_memory": self_memory,
    }
    run.close()


def step_of(t: dict, start_ns: int) -> int | None:
    """The ProfilerStep whose [start, end) holds absolute time `start_ns`, else None."""
    return next((n for n, (s, e) in t["steps"].items() if s <= start_ns < e), None)


def self_times(ops: list[dict]) -> list[tuple[str, int]]:
    """(name, self ns) per cpu_op: dur minus the dur of its direct children (innermost enclosing op)."""
    by_thread = defaultdict(list)
    for e in ops:
        by_thread[(e["pid"], e["tid"])].append(e)
    out = []
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda e: (ns(e["ts"]), -ns(e["dur"])))  # stable: file order on ties
        stack: list[list] = []  # [end ns, name, dur ns, children ns]
        for e in thread_ops:
            start, dur = ns(e["ts"]), ns(e["dur"])
            while stack and stack[-1][0] <= start:  # touching is not nesting
                _, name, d, kids = stack.pop()
                out.append((name, d - kids))
            if stack:
                stack[-1][3] += dur
            stack.append([start + dur, e["name"], dur, 0])
        out.extend((name, d - kids) for _, name, d, kids in stack)
    return out


def test_steps_are_the_profiler_steps(trace):
    """The run's steps (slices and manifest) are exactly the ProfilerStep#N numbers and ranges of the trace."""
    assert sorted(trace["steps"]) == EXPECTED_STEPS
    run = trace["run"]
    assert (
        sorted(r[0] for r in run.sql("select distinct step from slices where kind = 'step'").rows()) == EXPECTED_STEPS
    )
    manifest = {s["step"]: (s["start_ns"], s["end_ns"]) for s in run.manifest["steps"]}
    assert manifest == trace["steps"]


def test_host_ops_get_the_step_containing_their_start(trace):
    """Per step, the number of host ops equals the raw cpu_ops whose start lies in ProfilerStep#N."""
    expected = Counter(step_of(trace, trace["base"] + ns(e["ts"])) for e in trace["ops"])
    got = dict(trace["run"].sql("select step, count(*) from slices where kind = 'host_op' group by step").rows())
    assert got == dict(expected)
    assert set(got) >= set(EXPECTED_STEPS)


def test_op_statistic_host_counts_and_self_time(trace):
    """op_statistic host rows: per op name, Count = raw cpu_op count and Total Time = summed self time."""
    counts, totals = Counter(), Counter()
    for name, self_ns in self_times(trace["ops"]):
        counts[name] += 1
        totals[name] += self_ns
    rows = (
        trace["run"]
        .sql(
            """select "OP Type", "Count", "Total Time(us)" from op_statistic
           where "Device" = 'host' and "Core Type" = 'CPU'"""
        )
        .rows()
    )
    assert {r[0]: r[1] for r in rows} == dict(counts)
    for name, _, total_us in rows:
        assert total_us == pytest.approx(totals[name] / 1000, abs=0.002), name


def test_op_statistic_ratio_sums_to_100(trace):
    """Ratio(%) sums to 100 per (Rank, Device), up to its rounding to 3 decimals per row."""
    rows = (
        trace["run"].sql("""select "Rank", "Device", sum("Ratio(%)"), count(*) from op_statistic group by all""").rows()
    )
    assert rows and all(device == "host" for _, device, _, _ in rows)  # a CPU-only trace has host rows only
    for _, _, ratio, n in rows:
        assert ratio == pytest.approx(100, abs=max(0.01, 0.0005 * n))


def test_api_statistic_lists_framework_ops(trace):
    """A CPU-only trace has no runtime API calls: api_statistic lists the cpu_ops, Level 'framework'."""
    df = trace["run"].view("api_statistic").pl()
    assert set(df["Level"]) == {"framework"}
    assert df["Count"].sum() == len(trace["ops"])
    addmm = [e for e in trace["ops"] if e["name"] == "aten::addmm"]
    row = df.filter(df["API Name"] == "aten::addmm")
    assert len(addmm) == 2 * len(EXPECTED_STEPS)  # two Linear layers per step
    assert row["Count"].to_list() == [len(addmm)]
    assert row["Time(us)"][0] == pytest.approx(sum(ns(e["dur"]) for e in addmm) / 1000, abs=0.002)


def test_op_summary_one_cpu_op_row_per_op(trace):
    """op_summary has one CPU_OP row per raw cpu_op (same names, same counts)."""
    df = trace["run"].view("op_summary").pl()
    assert len(df) == len(trace["ops"])
    assert set(df["Task Type"]) == {"CPU_OP"}
    assert Counter(df["Op Name"]) == Counter(e["name"] for e in trace["ops"])


def test_memory_rows_match_memory_events(trace):
    """The memory_events table has one row per `[memory]` instant event; bytes sum to the raw args.Bytes sum."""
    mem = [e for e in trace["events"] if e.get("ph") == "i" and e["name"] == "[memory]"]
    assert mem, "profile_memory=True records allocator events"
    count, total = trace["run"].sql("select count(*), sum(bytes) from memory_events").rows()[0]
    assert count == len(mem)
    assert total == sum(e["args"]["Bytes"] for e in mem)


def test_user_range_once_per_step_inside_it(trace):
    """'my_forward' is a user_range once per active step, lying inside that step's raw range."""
    raw = [e for e in trace["events"] if e.get("ph") == "X" and e["name"] == "my_forward"]
    assert len(raw) == len(EXPECTED_STEPS)
    rows = trace["run"].sql("select step, ts, dur from slices where kind = 'user_range' and name = 'my_forward'").rows()
    assert sorted(r[0] for r in rows) == EXPECTED_STEPS
    for step, ts, dur in rows:
        start, end = trace["steps"][step]
        assert start <= ts and ts + dur <= end
    assert sorted(r[1] for r in rows) == sorted(trace["base"] + ns(e["ts"]) for e in raw)


def test_step_trace_host_lanes(trace):
    """step_trace: one host row per step; Computing = merged cpu_op time; Computing + Free = End − Start."""
    df = trace["run"].view("step_trace").pl()
    assert sorted(df["Step"]) == EXPECTED_STEPS
    assert set(df["Device"]) == {"host"}
    for r in df.iter_rows(named=True):
        ops = sorted(
            (trace["base"] + ns(e["ts"]), trace["base"] + ns(e["ts"]) + ns(e["dur"]))
            for e in trace["ops"]
            if step_of(trace, trace["base"] + ns(e["ts"])) == r["Step"]
        )
        merged, cur_s, cur_e = 0, *ops[0]
        for s, e in ops[1:]:
            if s > cur_e:
                merged, cur_s, cur_e = merged + cur_e - cur_s, s, e
            else:
                cur_e = max(cur_e, e)
        merged += cur_e - cur_s
        start, end = ns(r["Start Time(us)"]), ns(r["End Time(us)"])
        assert r["Communication"] == 0
        assert r["Computing"] > 0
        assert r["Computing"] == pytest.approx(merged / 1000, abs=0.002)
        assert r["Computing"] + r["Free"] == pytest.approx((end - start) / 1000, abs=0.01)
        assert start == ops[0][0]  # span: first op of the step ...
        assert end == max(e for _, e in ops)  # ... to the end of its last activity (torch_npu's span)


def test_input_shapes_of_linear_ops(trace):
    """op_summary Input Shapes of the linear ops: first tensor is (batch, in_features) and matches raw dims."""
    df = trace["run"].view("op_summary").pl()
    linear = df.filter(df["Op Name"] == "aten::linear")
    assert len(linear) == 2 * len(EXPECTED_STEPS)
    firsts = Counter(s.split(";")[0] for s in linear["Input Shapes"])
    assert firsts == {f"{BATCH},{IN}": len(EXPECTED_STEPS), f"{BATCH},{HIDDEN}": len(EXPECTED_STEPS)}
    raw = Counter(
        ";".join(",".join(map(str, d)) for d in e["args"]["Input Dims"])
        for e in trace["ops"]
        if e["name"] == "aten::linear"
    )
    assert Counter(linear["Input Shapes"]) == raw
    addmm = df.filter(df["Op Name"] == "aten::addmm")["Input Shapes"].to_list()
    assert f"{HIDDEN};{BATCH},{IN};{IN},{HIDDEN};;" in addmm  # bias; input; weight.t(); beta; alpha


def test_key_averages_is_torchs_key_averages(trace):
    """key_averages gives, per op and record_function range, the calls, self and total CPU time of
    torch.profiler's own `key_averages()` over the same events, redispatches folded as torch folds
    them (ProfilerStep#N are steps here, step_trace's rows)."""
    names = {e["name"] for e in trace["ops"]} | trace["ranges"]
    torch_rows = {k: v for k, v in trace["averages"].items() if k in names}
    ours = {
        n: (c, s, t)
        for n, c, s, t in trace["run"]
        .sql('SELECT "Name", "Calls", "Self Host(us)", "Host Total(us)" FROM key_averages')
        .rows()
    }
    assert sorted(ours) == sorted(torch_rows) and len(ours) > 10
    assert {"my_forward", "Optimizer.step#SGD.step"} <= set(ours)
    for name, (calls, self_us, total_us) in torch_rows.items():
        assert ours[name][0] == calls, name
        assert ours[name][1] == pytest.approx(self_us, abs=0.002 * calls), name
        assert ours[name][2] == pytest.approx(total_us, abs=0.002 * calls), name


def test_op_memory_is_torchs_self_cpu_memory(trace):
    """op_memory's net bytes per op are torch's Self CPU Mem (profile_memory=True): each allocation
    and free counts for the innermost op, record_function range or step running on its thread,
    `[memory]` for those outside every one."""
    ours: dict[str, float] = {}
    for name, mb in (
        trace["run"]
        .sql("""SELECT "Name", "Self Memory(MB)" FROM op_memory WHERE "Device" = 'host' AND "Self Memory(MB)" <> 0""")
        .rows()
    ):
        key = "ProfilerStep*" if name.startswith("ProfilerStep#") else name  # as key_averages names steps
        ours[key] = ours.get(key, 0) + mb * 1048576
    want = trace["self_memory"]
    assert len(want) > 5 and "aten::addmm" in want and "Optimizer.zero_grad#SGD.zero_grad" in want
    assert ours == pytest.approx(want, abs=2)  # MiB to 6 decimals: ~1 byte


@pytest.fixture(scope="module")
def range_in_op(tmp_path_factory) -> dict:
    """A CPU trace where a record_function range runs inside an op (a custom autograd Function's
    forward, as Inductor's `## Call CompiledFxGraph ##` runs inside `CompiledFunction`), with
    torch's own key_averages() of it: name -> (calls, self µs, total µs)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with record_function("scale_inner"):
                return x * 2 + 1

        @staticmethod
        def backward(ctx, g):
            return g * 2

    tmp = tmp_path_factory.mktemp("range_in_op")
    x = torch.randn(64, 64, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function("outer"):
                Scale.apply(x).sum().backward()
    prof.export_chrome_trace(str(tmp / "trace.json"))
    averages = {a.key: (a.count, a.self_cpu_time_total, a.cpu_time_total) for a in prof.key_averages()}
    prof_engine.import_trace([tmp / "trace.json"], tmp / "run")
    with prof_engine.open(tmp / "run") as run:
        yield {"run": run, "averages": averages}


def test_a_range_inside_an_op_is_a_node_of_torchs_tree(range_in_op):
    """The range is the op's child and its ops' parent: the op's self time is torch's (not the
    range's time too), the range is a row of key_averages with torch's times, and
    operator_details, a table of ops, does not list it."""
    run, averages = range_in_op["run"], range_in_op["averages"]
    ours = {
        n: (c, s, t)
        for n, c, s, t in run.sql('SELECT "Name", "Calls", "Self Host(us)", "Host Total(us)" FROM key_averages').rows()
    }
    assert {"Scale", "scale_inner", "outer", "aten::mul", "aten::add"} <= set(ours)
    assert sorted(ours) == sorted(averages)
    for name, (calls, self_us, total_us) in averages.items():
        assert ours[name] == (
            calls,
            pytest.approx(self_us, abs=0.002 * calls),
            pytest.approx(total_us, abs=0.002 * calls),
        ), name
    ((parent_kind, child_kinds),) = run.sql(
        """SELECT any_value(p.kind), list(DISTINCT c.kind) FROM slices r JOIN slices p ON p.id = r.parent_id
           JOIN slices c ON c.parent_id = r.id WHERE r.name = 'scale_inner'"""
    ).rows()
    assert parent_kind == "host_op" and child_kinds == ["host_op"]
    names = {n for (n,) in run.sql('SELECT DISTINCT "Name" FROM operator_details').rows()}
    assert "Scale" in names and not names & {"scale_inner", "outer"}


def key_averages_of(run) -> dict[str, tuple]:
    return {
        n: (c, s, t)
        for n, c, s, t in run.sql('SELECT "Name", "Calls", "Self Host(us)", "Host Total(us)" FROM key_averages').rows()
    }


def assert_torchs_rows(ours: dict[str, tuple], averages: dict[str, tuple]) -> None:
    """Every row of torch's key_averages, and no other: calls exact, times to the trace's ns."""
    assert sorted(ours) == sorted(averages)
    for name, (calls, self_us, total_us) in averages.items():
        assert ours[name] == (
            calls,
            pytest.approx(self_us, abs=0.002 * calls),
            pytest.approx(total_us, abs=0.002 * calls),
        ), name


@pytest.fixture(scope="module")
def gloo_collectives(tmp_path_factory) -> dict:
    """A CPU trace where gloo collectives run (one process, world size 1), with torch's own
    key_averages() of it: name -> (calls, self µs, total µs)."""
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    from torch.profiler import ProfilerActivity, profile, record_function

    tmp = tmp_path_factory.mktemp("gloo")
    dist.init_process_group("gloo", init_method=(tmp / "store").as_uri(), rank=0, world_size=1)
    try:
        x = torch.randn(1000)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                with record_function("outer"):
                    y = x * 2
                    dist.all_reduce(y)
                    dist.broadcast(y, 0)
                    dist.all_gather([torch.empty_like(y)], y)
    finally:
        dist.destroy_process_group()
    prof.export_chrome_trace(str(tmp / "trace.json"))
    averages = {a.key: (a.count, a.self_cpu_time_total, a.cpu_time_total) for a in prof.key_averages()}
    prof_engine.import_trace([tmp / "trace.json"], tmp / "run")
    with prof_engine.open(tmp / "run") as run:
        yield {"run": run, "averages": averages}


def test_gloo_ranges_are_rows_of_key_averages_as_torch_has_them(gloo_collectives):
    """c10d's `gloo:*` ranges are rows with their calls and total and no self time (torch marks
    them async), every other row is torch's, and communication still counts them."""
    run, averages = gloo_collectives["run"], gloo_collectives["averages"]
    ours = key_averages_of(run)
    assert {"gloo:all_reduce", "gloo:broadcast", "gloo:all_gather", "c10d::allreduce_"} <= set(ours)
    assert ours["gloo:all_reduce"][1] == 0 and ours["gloo:all_reduce"][2] > 0
    assert_torchs_rows(ours, averages)
    ops = {n: c for n, c in run.sql('SELECT "Op Name", count(*) FROM communication GROUP BY ALL').rows()}
    assert ops == {n: averages[n][0] for n in ("gloo:all_reduce", "gloo:broadcast", "gloo:all_gather")}


@pytest.fixture(scope="module")
def overlapping_ranges(tmp_path_factory) -> dict:
    """A CPU trace with two record_function ranges that overlap without nesting on one thread (A
    entered, B entered, A exited, B exited), ops inside each and in both, inside a range `outer`
    with time of its own, with torch's own key_averages() of it."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    tmp = tmp_path_factory.mktemp("overlapping_ranges")
    x = torch.randn(64, 64)
    enter, leave = torch.ops.profiler._record_function_enter_new, torch.ops.profiler._record_function_exit
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function("outer"):
                a = enter("A", None)
                y = x @ x
                b = enter("B", None)
                y = y + 1  # in A and B: B's child (the innermost that holds it)
                leave(a)
                y = y * 2  # in B alone, after A ended: B's child, never A's
                leave(b)
                time.sleep(0.002)  # outer's own time, more than A and B share
    prof.export_chrome_trace(str(tmp / "trace.json"))
    averages = {a.key: (a.count, a.self_cpu_time_total, a.cpu_time_total) for a in prof.key_averages()}
    # torch's self time of `outer` is its time less A's and B's, which overlap: when the machine
    # preempts the op in both (a loaded CI), it goes below 0 in that iteration, where ours stays 0
    calls, self_us, total_us = averages["outer"]
    averages["outer"] = (calls, self_us + _below_zero_us(tmp / "trace.json", "outer"), total_us)
    prof_engine.import_trace([tmp / "trace.json"], tmp / "run")
    with prof_engine.open(tmp / "run") as run:
        yield {"run": run, "averages": averages}


def _below_zero_us(path, name: str) -> float:
    """How far below 0 torch's own tree puts the self times of `name`'s records in the trace at
    `path`, summed over them (µs): `EventList._populate_cpu_children` over its host events."""
    from torch.autograd import profiler_util

    events = [
        e
        for e in json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
    ]
    evs = profiler_util.EventList(
        [
            profiler_util.FunctionEvent(
                id=i,
                name=e["name"],
                thread=(e["pid"], e["tid"]),
                start_us=ns(e["ts"]),
                end_us=ns(e["ts"]) + ns(e["dur"]),
            )
            for i, e in enumerate(events)
        ]
    )
    evs._populate_cpu_children()
    return sum(max(-e.self_cpu_time_total / 1000, 0) for e in evs if e.name == name)


def test_records_overlapping_without_nesting_follow_torchs_tree(overlapping_ranges):
    """B starts inside A and outlives it: torch makes B no child of A, and the ops after A ended
    B's children, so A's self time is its own (not 0), and every row is torch's."""
    run, averages = overlapping_ranges["run"], overlapping_ranges["averages"]
    ours = key_averages_of(run)
    assert averages["A"][1] > 0 and averages["outer"][1] > 0
    assert_torchs_rows(ours, averages)
    ((parents,),) = (
        run.sql("""SELECT list(DISTINCT p.name ORDER BY p.name) FROM slices r JOIN slices p ON p.id = r.parent_id
                               WHERE r.name IN ('A', 'B')""").rows()
    )
    assert parents == ["outer"]
