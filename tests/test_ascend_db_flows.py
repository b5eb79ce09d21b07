"""torch_npu's `.db` export imports the flows trace_view.json draws: framework op → device task
(async_npu), CANN launch → device task (HostToDevice), enqueue → dequeue, forward → backward."""

from __future__ import annotations

import pytest

from conftest import ascend_database

FLOWS = "SELECT category, phase, device, count(*), count(DISTINCT flow_id) FROM flows WHERE rank = ? GROUP BY ALL"


@pytest.fixture(scope="module")
def runs(torch_npu_db_run, torch_npu_text_run):
    return torch_npu_db_run[0], torch_npu_db_run[1], torch_npu_text_run[1]


@pytest.mark.parametrize("rank", [0, 1])
def test_flows_have_the_text_forms_categories_ends_and_counts(runs, rank):
    """Same categories, phases and devices; one start per arrow and an end for each. HostToDevice,
    enqueue → dequeue and forward → backward are as many as the other session's text form draws."""
    _, db_run, text_run = runs
    db = {(c, p, d): (n, ids) for c, p, d, n, ids in db_run.sql(FLOWS, [rank]).rows()}
    text = {(c, p, d): (n, ids) for c, p, d, n, ids in text_run.sql(FLOWS, [rank]).rows()}
    assert db.keys() == text.keys()
    for (category, phase, _), (n, ids) in db.items():
        if phase == "s":
            assert n == ids, category  # one start per arrow
        else:
            assert ids == db[(category, "s", "host")][1], category  # and every arrow ends
    for key in [k for k in db if k[0] in ("HostToDevice", "async_task_queue", "fwdbwd") and k[1] == "s"]:
        assert db[key] == text[key], key


def test_inferred_categories_are_connection_cats_own(runs):
    """Rank 0's database names the categories (connectionCats); rank 1's does not, so they are
    inferred from where the ids appear: on rank 0 they agree with it."""
    src, db_run, _ = runs
    con = ascend_database(src, 0)
    try:
        named = {}
        for cat, cid in con.execute("SELECT cat, connectionId FROM connectionCats"):
            named.setdefault(cat, set()).add(str(cid))
    finally:
        con.close()
    ours = {}
    for cat, cid in db_run.sql("SELECT category, flow_id FROM flows WHERE rank = 0 AND phase = 's'").rows():
        ours.setdefault(cat, set()).add(cid)
    for cat in ("async_npu", "async_task_queue", "fwdbwd"):
        assert ours[cat] == named[cat], cat
    assert named["HostToDevice"] < ours["HostToDevice"]  # also CANN launches of no framework op (trace_view draws them)


def test_every_flow_end_binds_to_its_record(runs):
    """Each end lies on a record of its pid and tid at its time: the host call or op it starts
    from, the device task or communication op it ends on (so the timeline draws it there)."""
    _, db_run, _ = runs
    unbound = db_run.sql("""
        SELECT f.category, f.phase, count(*) FROM flows f ANTI JOIN slices s
          ON s.rank = f.rank AND s.pid IS NOT DISTINCT FROM f.pid AND s.tid IS NOT DISTINCT FROM f.tid AND s.ts = f.ts
        GROUP BY ALL""").rows()
    assert unbound == []
    ends = db_run.sql("""SELECT DISTINCT s.kind FROM flows f JOIN slices s ON s.rank = f.rank AND s.pid = f.pid
                         AND s.tid = f.tid AND s.ts = f.ts WHERE f.phase = 'f' AND f.device <> 'host'""").rows()
    assert {k for (k,) in ends} == {"kernel", "memcpy", "comm"}


def test_a_database_without_connection_ids_imports_without_those_flows(tmp_path):
    """Flows are optional: a schema whose framework records carry no connection ids (older CANN)
    imports, with the launch arrows the CANN calls still give."""
    import sqlite3

    import prof_engine
    from conftest import ascend_db_copy

    db = ascend_db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE PYTORCH_API DROP COLUMN connectionId")  # CONNECTION_IDS stays
    con.close()
    with prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run")) as run:
        assert {c for (c,) in run.sql("SELECT DISTINCT category FROM flows").rows()} == {"HostToDevice"}
        assert run.sql("SELECT count(*) FROM slices WHERE kind = 'kernel'").rows() == [(187,)]
