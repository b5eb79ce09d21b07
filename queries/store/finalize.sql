-- Finalisation of an import: staging records → canonical records.
--
-- Input (created by prof_engine.store before this script runs):
--   staging_<table>  the records as importers wrote them: `rank` holds the index of the source
--                    file, `ts` is on the file's own clock, `step` is set on step records (and on
--                    records whose source knows its step, as the collector's markers and samples
--                    do), depth/parent_id are NULL unless the source knows the nesting (the
--                    collector's push/pop ranges), self_dur/launch_id are NULL.
--   files(file, rank, offset_ns)  per source file: its global rank and the ns to add to its clock.
-- Output: views final_<table>, one per canonical table, with every column filled in.
--
-- Algorithm:
--   1. Steps are the host `step` records of each rank; a host record belongs to the step whose
--      [start, end) contains its start (ASOF join on start).
--   2. Nesting on one thread, in two layers that do not mix: host ops with API calls, and user
--      ranges (whose depth the source did not state). Emit +1 at each start and -1 at each end,
--      ordered by time with ends before starts at equal times (touching is not nesting) and, at
--      equal starts, longer first; the running sum at a start is the depth + 1. The parent is the
--      latest earlier start one level up (ASOF join on sweep position). A depth or parent the
--      source stated wins.
--   3. self_dur of a host op = its duration minus the durations of its direct child host ops.
--   4. A device record was launched by the host op with its External id, else by the host op
--      enclosing the API call with its correlation id, else by that API call; it takes the step of
--      its launcher, falling back to time containment.

CREATE OR REPLACE TEMP VIEW _s AS
SELECT s.* REPLACE (f.rank AS rank, s.ts + f.offset_ns AS ts)
FROM staging_slices s JOIN files f ON s.rank = f.file;

-- The host's step records define a rank's steps; a GPU trace also has each step as a device range
-- (Kineto's gpu_user_annotation ProfilerStep#N), shorter than the host's, which must not cut the
-- host's span short. A rank with no host step records takes its steps from its devices' ones.
CREATE OR REPLACE TEMP TABLE _steps AS
WITH st AS (SELECT rank, device, step, ts, dur FROM _s WHERE kind = 'step'),
host_ranks AS (SELECT DISTINCT rank FROM st WHERE device = 'host')
SELECT rank, step, min(ts) AS start_ns, max(ts + dur) AS end_ns FROM st
WHERE device = 'host' OR rank NOT IN (SELECT rank FROM host_ranks)
GROUP BY rank, step;

CREATE OR REPLACE TEMP TABLE _nest_input AS
SELECT id, rank, pid, tid, (kind = 'user_range')::INTEGER AS layer, ts, dur FROM _s
WHERE device = 'host' AND (kind IN ('host_op', 'api') OR (kind = 'user_range' AND depth IS NULL));

CREATE OR REPLACE TEMP TABLE _sweep AS
WITH ev AS (
    SELECT id, rank, pid, tid, layer, ts AS t, 1 AS d, 1 AS cls, -dur AS tie FROM _nest_input
    UNION ALL
    SELECT id, rank, pid, tid, layer, ts + dur, -1, CASE WHEN dur > 0 THEN 0 ELSE 2 END, dur FROM _nest_input
), ordered AS (
    SELECT *, row_number() OVER w AS pos, sum(d) OVER (w ROWS UNBOUNDED PRECEDING) AS open_count
    FROM ev WINDOW w AS (PARTITION BY rank, pid, tid, layer ORDER BY t, cls, tie, id)
)
SELECT id, rank, pid, tid, layer, pos, (open_count - 1)::INTEGER AS depth FROM ordered WHERE d = 1;

CREATE OR REPLACE TEMP TABLE _nesting AS
SELECT c.id, c.depth, p.id AS parent_id
FROM _sweep c ASOF LEFT JOIN _sweep p
  ON c.rank = p.rank AND c.pid IS NOT DISTINCT FROM p.pid AND c.tid IS NOT DISTINCT FROM p.tid
 AND c.layer = p.layer AND p.depth = c.depth - 1 AND c.pos > p.pos;

CREATE OR REPLACE TEMP TABLE _host AS
WITH stepped AS (
    SELECT r.id, r.kind, r.dur, CASE WHEN r.ts < st.end_ns THEN st.step END AS step
    FROM _s r ASOF LEFT JOIN _steps st ON r.rank = st.rank AND r.ts >= st.start_ns
    WHERE r.device = 'host' AND r.kind <> 'step'
), child_time AS (
    SELECT n.parent_id AS id, sum(s.dur) AS child_dur
    FROM _nesting n JOIN stepped s USING (id) WHERE s.kind = 'host_op' AND n.parent_id IS NOT NULL
    GROUP BY n.parent_id
)
SELECT s.id, s.step, n.depth, n.parent_id,
       -- BIGINT, the schema's type: sum() makes a HUGEINT, which DuckDB's Parquet writer stores as DOUBLE
       CASE WHEN s.kind = 'host_op' THEN greatest(s.dur - coalesce(c.child_dur, 0), 0) END::BIGINT AS self_dur
FROM stepped s LEFT JOIN _nesting n USING (id) LEFT JOIN child_time c USING (id);

CREATE OR REPLACE TEMP TABLE _device AS
WITH dev AS (
    SELECT id, rank, ts, correlation, external_id FROM _s WHERE device <> 'host' AND kind <> 'step'
), op_by_ext AS (
    SELECT rank, external_id, min(id) AS op_id FROM _s
    WHERE device = 'host' AND kind = 'host_op' AND external_id IS NOT NULL GROUP BY ALL
), api_by_corr AS (
    SELECT a.rank, a.correlation, min(a.id) AS api_id, min(h.parent_id) AS api_parent
    FROM _s a JOIN _host h USING (id)
    WHERE a.device = 'host' AND a.kind = 'api' AND a.correlation IS NOT NULL GROUP BY ALL
), launched AS (
    SELECT d.id, d.rank, d.ts, coalesce(o.op_id, c.api_parent, c.api_id) AS launch_id
    FROM dev d
    LEFT JOIN op_by_ext o ON o.rank = d.rank AND o.external_id = d.external_id
    LEFT JOIN api_by_corr c ON c.rank = d.rank AND c.correlation = d.correlation
)
SELECT l.id, l.launch_id,
       coalesce(h.step, CASE WHEN l.ts < st.end_ns THEN st.step END) AS step
FROM launched l
LEFT JOIN _host h ON h.id = l.launch_id
ASOF LEFT JOIN _steps st ON l.rank = st.rank AND l.ts >= st.start_ns;

CREATE OR REPLACE TEMP VIEW final_slices AS
SELECT s.* REPLACE (
           coalesce(s.step, h.step, d.step) AS step,  -- a step the source stated wins
           coalesce(s.depth, h.depth) AS depth, coalesce(s.parent_id, h.parent_id) AS parent_id,
           h.self_dur AS self_dur, d.launch_id AS launch_id)
FROM _s s LEFT JOIN _host h USING (id) LEFT JOIN _device d USING (id);

-- Point records (marks, counters, memory_events, flows) take the step whose range contains them,
-- unless their source stated it.
CREATE OR REPLACE MACRO _point_records(staging) AS TABLE
SELECT m.* REPLACE (f.rank AS rank, m.ts + f.offset_ns AS ts,
                    coalesce(m.step, CASE WHEN m.ts + f.offset_ns < st.end_ns THEN st.step END) AS step)
FROM query_table(staging) m JOIN files f ON m.rank = f.file
ASOF LEFT JOIN _steps st ON f.rank = st.rank AND m.ts + f.offset_ns >= st.start_ns;

CREATE OR REPLACE TEMP VIEW final_marks AS SELECT * FROM _point_records('staging_marks');
CREATE OR REPLACE TEMP VIEW final_counters AS SELECT * FROM _point_records('staging_counters');
CREATE OR REPLACE TEMP VIEW final_memory_events AS SELECT * FROM _point_records('staging_memory_events');
CREATE OR REPLACE TEMP VIEW final_flows AS SELECT * FROM _point_records('staging_flows');

-- Communication details take the device and step of their slice.
CREATE OR REPLACE TEMP VIEW final_comm AS
SELECT c.* REPLACE (s.rank AS rank, s.device AS device, s.step AS step)
FROM staging_comm c JOIN final_slices s ON s.id = c.slice_id;
