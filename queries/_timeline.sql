-- view: _timeline
-- answers: the run as Chrome trace events (one JSON object per row, ordered by lane) that
--   Perfetto and chrome://tracing open: a process per rank and device, threads as recorded
--   (streams on devices), plus an "Overlap Analysis" process per device with one thread per lane,
--   as in Ascend timelines, and the flows as arrows between their slices. Written by
--   `prof-engine export RUN --timeline -o FILE.json`.
-- matches: msprof msprof_*.json / torch_npu trace_view.json (lanes and Overlap Analysis).
-- requires: slices, marks, counters, flows, _overlap, _units
-- scope: cluster
CREATE OR REPLACE VIEW _timeline AS
WITH ov AS MATERIALIZED (
    SELECT key.rank AS rank, key.device AS device, type, s, e FROM _overlap
), lanes AS MATERIALIZED (
    -- a process per rank and device (host first), and one more beside it for its overlap lanes
    SELECT rank, device, rank * 1000 + 2 * (row_number() OVER (PARTITION BY rank ORDER BY device = 'host' DESC, device) - 1) AS pid,
           (rank, device) IN (SELECT rank, device FROM ov) AS has_overlap
    FROM (SELECT DISTINCT rank, device FROM slices)
), threads AS (
    SELECT DISTINCT rank, device, coalesce(CASE WHEN device <> 'host' THEN 'stream ' || stream END, tid, '0') AS thread
    FROM slices
), numbered AS (
    SELECT *, try_cast(regexp_extract(thread, '(\d+)$') AS BIGINT) AS num FROM threads
), tids AS (
    -- a thread keeps the number its name ends with (`12`, `stream 7`), unless another thread of
    -- its device has it (`async:cat:0x313` beside thread 313; the bare number wins): those, and
    -- names with no number, get numbers of their own above any real tid
    SELECT rank, device, thread,
           CASE WHEN num IS NOT NULL AND row_number() OVER (
                    PARTITION BY rank, device, num ORDER BY thread = num::VARCHAR DESC, thread) = 1 THEN num
                ELSE 1073741824 + row_number() OVER (PARTITION BY rank, device ORDER BY thread) END AS tid
    FROM numbered
), lane_types(type, tid) AS (
    VALUES ('Computing', 0), ('Communication', 1), ('Communication(Not Overlapped)', 2), ('Free', 3)
), endpoints AS (
    -- a flow names its ends by the source's pid and tid (Kineto: a launch on the host's thread, its
    -- kernel on the GPU's pid and stream): the process and thread of this timeline that the records
    -- of that pid and tid are on
    SELECT rank, pid, tid, min(device) AS device,
           min(coalesce(CASE WHEN device <> 'host' THEN 'stream ' || stream END, tid, '0')) AS thread
    FROM slices WHERE rank IN (SELECT DISTINCT rank FROM flows) GROUP BY rank, pid, tid
)
SELECT json_object('ph', 'M', 'name', 'process_name', 'pid', pid, 'tid', 0,
                   'args', json_object('name', 'Rank ' || rank || ' ' || device)) AS event
FROM lanes
UNION ALL
SELECT json_object('ph', 'M', 'name', 'process_name', 'pid', pid + 1, 'tid', 0,
                   'args', json_object('name', 'Rank ' || rank || ' ' || device || ' Overlap Analysis'))
FROM lanes WHERE has_overlap
UNION ALL
SELECT json_object('ph', 'M', 'name', 'thread_name', 'pid', l.pid, 'tid', t.tid, 'args', json_object('name', t.thread))
FROM tids t JOIN lanes l USING (rank, device)
UNION ALL
SELECT json_object('ph', 'M', 'name', 'thread_name', 'pid', l.pid + 1, 'tid', lt.tid, 'args', json_object('name', lt.type))
FROM lanes l CROSS JOIN lane_types lt WHERE l.has_overlap
UNION ALL
SELECT json_object('ph', 'X', 'cat', coalesce(s.category, s.kind), 'name', s.name, 'pid', l.pid, 'tid', t.tid,
                   'ts', us_ts(s.ts), 'dur', us_ts(s.dur),
                   'args', json_merge_patch(coalesce(try_cast(s.args AS JSON), '{}'::JSON),
                                            json_object('step', s.step, 'kind', s.kind)))
FROM slices s JOIN lanes l USING (rank, device)
JOIN tids t ON t.rank = s.rank AND t.device = s.device
           AND t.thread = coalesce(CASE WHEN s.device <> 'host' THEN 'stream ' || s.stream END, s.tid, '0')
UNION ALL
SELECT json_object('ph', 'X', 'cat', 'overlap', 'name', o.type, 'pid', l.pid + 1, 'tid', lt.tid,
                   'ts', us_ts(o.s), 'dur', us_ts(o.e - o.s))
FROM ov o JOIN lanes l USING (rank, device)
JOIN lane_types lt ON lt.type = o.type
UNION ALL
SELECT json_object('ph', 'i', 's', coalesce(m.scope, 't'), 'cat', m.category, 'name', m.name, 'pid', l.pid,
                   'tid', coalesce(try_cast(m.tid AS BIGINT), 0), 'ts', us_ts(m.ts))
FROM marks m JOIN lanes l USING (rank, device)
UNION ALL
SELECT json_object('ph', 'C', 'name', c.name, 'pid', l.pid, 'ts', us_ts(c.ts), 'args', json_object(c.series, c.value))
FROM counters c JOIN lanes l USING (rank, device)
UNION ALL
-- flow arrows (launch → kernel, forward → backward, enqueue → dequeue), bound to the slice they are in;
-- ids are renumbered per flow (rank, category, flow_id): each rank's source numbers its own, and
-- Perfetto joins every end sharing an id, category and name, so theirs would link arrows across ranks
SELECT json_object('ph', f.phase, 'id', dense_rank() OVER (ORDER BY f.rank, f.category, f.flow_id), 'cat', f.category, 'name', f.category, 'pid', l.pid, 'tid', t.tid,
                   'ts', us_ts(f.ts), 'bp', 'e')
FROM flows f JOIN endpoints e ON e.rank = f.rank AND e.pid IS NOT DISTINCT FROM f.pid AND e.tid IS NOT DISTINCT FROM f.tid
JOIN lanes l ON l.rank = e.rank AND l.device = e.device
JOIN tids t ON t.rank = e.rank AND t.device = e.device AND t.thread = e.thread;
