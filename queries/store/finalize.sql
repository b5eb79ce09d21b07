-- Finalisation of an import: staging records → canonical records.
--
-- Input (created by prof_engine.store before this script runs):
--   staging_<table>  the records as importers wrote them: `rank` holds the index of the source
--                    file, `ts` is on the file's own clock, `step` is set on step records (and on
--                    records whose source knows its step, as the collector's markers and samples
--                    do), depth/parent_id are NULL unless the source knows the nesting (the
--                    collector's push/pop ranges), self_dur/launch_id are NULL. Two more columns
--                    say where a record sits: `_part` (its staging file's position in the list)
--                    and `_row` (its row in that file); they are the order of a plain scan.
--   files(file, rank, offset_ns)  per source file: its global rank and the ns to add to its clock;
--                    also as the macros file_rank(file) and file_offset(file) (NULL: not listed).
--   finalize_whole()  a macro: true when the staged records are every record of their ranks (an
--                    import unit), false for a batch of a live run, whose waits stay NULL.
--   _s, _step_records, _steps  from queries/store/stage.sql, run first;
--   _host            the host records but steps (`_host_input` of stage.sql) with their `step`,
--                    `depth` and `parent_id` (steps 1 and 2), from prof_engine.store.host_pass,
--                    run in between, which also defines
--   step_at(rank, ts)  the step of `_steps` that holds a time (NULL: none), as step 1 defines it.
-- Output: views final_<table>, one per canonical table, with every column filled in, and `_s`,
-- the staged slices' narrow columns, which the macros of queries/store/manifest.sql sum up for
-- the manifest.
--
-- Algorithm:
--   1. Steps are the host `step` records of each rank; a host record belongs to the step whose
--      [start, end) contains its start (of the rank's steps, the latest started at or before it).
--   2. Nesting on one thread of host ops, API calls and user ranges (whose depth the source did
--      not state), in one tree as torch.profiler builds it: a record_function range inside an op
--      (Inductor's `## Call CompiledFxGraph ##` in `CompiledFunction`) is the op's child and the
--      parent of the ops inside it. In order of start, longer first at equal starts: a record's
--      depth is the number of records of its thread open when it starts, where at equal times an
--      end comes before a start (touching is not nesting) but a zero-length record's end after the
--      starts at its time; its parent is the latest record before it one level up. A depth or
--      parent the source stated wins.
--      Steps 1 and 2 of host records are one pass over them sorted by thread and start
--      (prof_engine.store.host_pass, in C), not SQL: DuckDB's window over their starts and ends,
--      and its ASOF joins, sorted 3x as many rows and took 5x as long.
--   3. self_dur of a host op or user range = its duration minus the durations of its direct
--      child host ops and user ranges.
--   4. A device record was launched by the host op with its External id, else by the host op a
--      flow links to device work of its correlation id, else by the host op or user range enclosing
--      the API call with its correlation id, else by that API call; it takes the step of
--      its launcher, falling back to time containment, and its launcher's name (`launch_name`),
--      input shapes and types (where the source gave it none).
--   5. The derived tables `lane_totals` and `lanes`: the step breakdown's lane lengths and the
--      Overlap Analysis lanes per device and step, by the macros of queries/_lanes.sql (loaded
--      before this script), from the records as finalised.
--      Whole only where the staged records are every record of their ranks (an import unit).
--
-- How (bounded memory): steps 1-5 run on narrow projections of the staged records (ids, times,
-- keys), never on their wide text columns (names, args; the launchers' are read once, for the
-- few distinct (name, shapes, types) they hold). They yield the columns that finalisation
-- fills in, one row per staged slice (`_fill_slices`). `final_slices` pairs each staged slice
-- with its filled-in row by position (POSITIONAL JOIN over both in `_part`, `_row` order), so the
-- wide columns are read once, in a stream, and never sorted, hashed or joined. Point records need
-- nothing but their file and `step_at`: `final_<table>` computes their columns as it reads them.

-- Each intermediate table is dropped as soon as nothing reads it any more: they live in DuckDB's
-- memory budget, and what the last statements need to sort and join must fit beside them.

-- Time of each host op's or range's direct child host ops and ranges (for self_dur).
CREATE OR REPLACE TEMP TABLE _child_time AS
SELECT parent_id AS id, sum(dur) AS child_dur FROM _host
WHERE (is_host_op OR is_nested_range) AND parent_id IS NOT NULL GROUP BY ALL;

-- Launchers of device records: host ops by External id, API calls by correlation id (tables of
-- their own: one hash table per statement keeps DuckDB within its memory limit).
CREATE OR REPLACE TEMP TABLE _op_by_ext AS
SELECT rank, op_external_id AS external_id, min(id) AS op_id FROM _host WHERE op_external_id IS NOT NULL GROUP BY ALL;

-- Host ops that a flow links straight to device work: torch_npu's `async_npu` arrows run from a
-- framework op, on the thread that queued it, to the first device task of its launch, whose API
-- call ran on another thread (the task queue's), outside the op. A flow starts where its op starts
-- and ends where its task starts; the op launched every device record of that task's correlation
-- id. Kineto's arrows are left out before the joins (at 329 MB of JSON, 700 k of them took 0.13 s
-- to find none): its `ac2g` arrows start at API calls, which correlation ids already link, and its
-- `fwdbwd` arrows end at host ops.
CREATE OR REPLACE TEMP TABLE _op_by_flow AS
WITH fl AS (
    SELECT f.rank, m.category, m.flow_id, m.phase, m.pid, m.tid, m.ts + f.offset_ns AS ts
    FROM staging_flows m JOIN files f ON m.rank = f.file
    WHERE m.category NOT IN ('ac2g', 'fwdbwd')
), op_flows AS (
    SELECT fl.rank, fl.category, fl.flow_id, o.id AS op_id
    FROM fl JOIN _s o ON o.rank = fl.rank AND o.pid = fl.pid AND o.tid = fl.tid AND o.ts = fl.ts
    WHERE fl.phase = 's' AND o.kind = 'host_op'
)
SELECT d.rank, d.correlation, min(s.op_id) AS op_id
FROM op_flows s JOIN fl e ON e.rank = s.rank AND e.category = s.category AND e.flow_id = s.flow_id
JOIN _s d ON d.rank = e.rank AND d.pid = e.pid AND d.tid = e.tid AND d.ts = e.ts
WHERE e.phase = 'f' AND d.device <> 'host' AND d.correlation IS NOT NULL
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE _api_by_corr AS
SELECT rank, api_correlation AS correlation, min(id) AS api_id, min(parent_id) AS api_parent FROM _host
WHERE api_correlation IS NOT NULL GROUP BY ALL;

-- Device records but steps: their launcher (by External id, then by correlation), the
-- launcher's step, then their own step (a statement each, for the same reason).
CREATE OR REPLACE TEMP TABLE _by_ext AS
SELECT d._part, d._row, d.id, d.rank, d.device, d.kind, d.stream, d.ts, d.dur, d.step AS stated_step, d.depth,
       d.parent_id, d.correlation, o.op_id
FROM _s d LEFT JOIN _op_by_ext o ON o.rank = d.rank AND o.external_id = d.external_id
WHERE d.device <> 'host' AND d.kind <> 'step';
DROP TABLE _op_by_ext;

CREATE OR REPLACE TEMP TABLE _launched AS
SELECT d.* EXCLUDE (correlation, op_id), coalesce(d.op_id, f.op_id, c.api_parent, c.api_id) AS launch_id
FROM _by_ext d LEFT JOIN _op_by_flow f ON f.rank = d.rank AND f.correlation = d.correlation
LEFT JOIN _api_by_corr c ON c.rank = d.rank AND c.correlation = d.correlation;
DROP TABLE _by_ext;
DROP TABLE _op_by_flow;
DROP TABLE _api_by_corr;

CREATE OR REPLACE TEMP TABLE _launcher_step AS
SELECT l.*, h.step AS launcher_step FROM _launched l LEFT JOIN _host h ON h.id = l.launch_id;
DROP TABLE _launched;

CREATE OR REPLACE TEMP TABLE _device AS
SELECT l.* EXCLUDE (launcher_step), coalesce(l.launcher_step, step_at(l.rank, l.ts)) AS step FROM _launcher_step l;
DROP TABLE _launcher_step;

-- The only text finalisation reads before the final pass, in one scan: the names of communication
-- records (receive ops are the step breakdown's bubble) and the name, input shapes and types of
-- the records that launched device work.
CREATE OR REPLACE TEMP TABLE _named AS
SELECT s.id, s.kind = 'comm' AND is_receive(s.name) AS receive, launcher, s.name, s.input_shapes, s.input_types
FROM (SELECT *, id IN (SELECT launch_id FROM _device WHERE launch_id IS NOT NULL) AS launcher FROM staging_slices) s
WHERE s.kind = 'comm' OR s.launcher;

-- Each device task's wait on its stream (`stream_wait`, as the views compute it for runs without
-- it). The device records carry their device, kind, stream and duration from `_by_ext` on: this
-- and the lanes below read them there, not from the staged records again with a join on id.
CREATE OR REPLACE TEMP TABLE _waits AS
SELECT id, stream_wait(rank, device, stream, ts, dur, id) AS wait FROM _device
WHERE is_device_task(device, kind);

-- The step breakdown's lanes of this rank (`lane_totals`), from its records as finalised here,
-- computed by the macros the views use for runs that do not store them (queries/_lanes.sql). The
-- activity: compute kernels and communication on devices; a rank without device tasks is
-- analysed on its host (CPU ops and communication ranges), as the views' `_activity` does.
CREATE OR REPLACE TEMP TABLE _lane_activity AS
SELECT rank, device, coalesce(stated_step, step) AS step,
       CASE WHEN kind = 'comm' THEN 'Communication' ELSE 'Computing' END AS type, ts AS s, ts + dur AS e
FROM _device WHERE kind IN ('kernel', 'comm')
UNION ALL
SELECT rank, 'host', coalesce(stated_step, step), CASE WHEN is_comm THEN 'Communication' ELSE 'Computing' END,
       ts, ts + dur
FROM _host WHERE (is_host_op OR is_comm)
 AND rank NOT IN (SELECT DISTINCT rank FROM _device WHERE is_device_task(device, kind));

CREATE OR REPLACE TEMP VIEW _lane_receives AS
SELECT rank, device, coalesce(stated_step, step) AS step, dur FROM _device
WHERE id IN (SELECT id FROM _named WHERE receive)
UNION ALL
SELECT rank, 'host', coalesce(stated_step, step), dur FROM _host WHERE id IN (SELECT id FROM _named WHERE receive);

CREATE OR REPLACE TEMP VIEW _lane_steps AS SELECT rank, step, ts FROM _step_records;

CREATE OR REPLACE TEMP TABLE _lanes AS
SELECT * FROM overlap_lanes('_lane_activity', (SELECT list(DISTINCT device ORDER BY device) FROM _lane_activity));
DROP TABLE _lane_activity;

CREATE OR REPLACE TEMP TABLE _lane_totals AS SELECT * FROM step_lanes('_lanes', '_lane_receives', '_lane_steps');

-- What a device record takes from its launcher: the name, input shapes and types. The views of
-- kernels by op (op_statistic, op_summary) then read them from the device record, instead of
-- joining 10 M device records to the host ops. Launchers repeat a few (name, shapes, types), so
-- each launcher maps to a small number (`_launch_sigs`), and the tables the final join holds
-- stay narrow whatever the number of launchers.
CREATE OR REPLACE TEMP TABLE _launcher_rows AS
SELECT id, name, input_shapes, input_types FROM _named WHERE launcher;
DROP TABLE _named;

CREATE OR REPLACE TEMP TABLE _launch_sigs AS
SELECT row_number() OVER () AS sig, name, input_shapes, input_types
FROM (SELECT DISTINCT name, input_shapes, input_types FROM _launcher_rows);

CREATE OR REPLACE TEMP TABLE _launcher_sig AS
SELECT r.id, g.sig FROM _launcher_rows r JOIN _launch_sigs g
  ON r.name IS NOT DISTINCT FROM g.name AND r.input_shapes IS NOT DISTINCT FROM g.input_shapes
 AND r.input_types IS NOT DISTINCT FROM g.input_types;
DROP TABLE _launcher_rows;

-- Their values as ENUMs, so that the final sort (by staging position) carries a small integer per
-- device record instead of its launcher's strings.
CREATE OR REPLACE TYPE _launch_name_t AS ENUM (SELECT DISTINCT name FROM _launch_sigs WHERE name IS NOT NULL);
CREATE OR REPLACE TYPE _launch_shapes_t AS ENUM (
    SELECT DISTINCT input_shapes FROM _launch_sigs WHERE input_shapes IS NOT NULL);
CREATE OR REPLACE TYPE _launch_types_t AS ENUM (
    SELECT DISTINCT input_types FROM _launch_sigs WHERE input_types IS NOT NULL);

-- Device records with what they take from their stream and their launcher (a statement per hash
-- join, as above: 1 GB of JSON, 3.4 M records, finalises in 80 MB of DuckDB memory).
CREATE OR REPLACE TEMP TABLE _device_waits AS
SELECT d._part, d._row, d.id, d.rank, d.ts, coalesce(d.stated_step, d.step) AS step, d.depth, d.parent_id, d.launch_id,
       w.wait
FROM _device d LEFT JOIN _waits w ON w.id = d.id;
DROP TABLE _device;
DROP TABLE _waits;

CREATE OR REPLACE TEMP TABLE _device_fill AS
SELECT d.*, g.name::_launch_name_t AS launch_name, g.input_shapes::_launch_shapes_t AS launch_shapes,
       g.input_types::_launch_types_t AS launch_types
FROM _device_waits d LEFT JOIN _launcher_sig l ON l.id = d.launch_id LEFT JOIN _launch_sigs g ON g.sig = l.sig;
DROP TABLE _device_waits;
DROP TABLE _launcher_sig;
DROP TABLE _launch_sigs;

-- What finalisation fills in, for every staged slice (one of a file `files` does not list: NULLs,
-- and the final pass leaves it out); a table, so that the final sort reads nothing else (and the
-- tables before it can go). Not the rank and the time on the run's clock, nor the id: the final
-- pass has them from the staged record and its file, and the sort carries ~20 B less per record
-- (at 329 MB of JSON it spilled 61 MiB with them, 47 without).
CREATE OR REPLACE TEMP TABLE _fill_slices AS
SELECT h._part, h._row, coalesce(h.stated_step, h.step) AS step,  -- a step the source stated wins
       coalesce(h.stated_depth, h.depth) AS depth, coalesce(h.stated_parent_id, h.parent_id) AS parent_id,
       -- BIGINT, the schema's type: sum() makes a HUGEINT, which DuckDB's Parquet writer stores as DOUBLE
       CASE WHEN h.is_host_op OR h.is_nested_range THEN greatest(h.dur - coalesce(c.child_dur, 0), 0) END::BIGINT AS self_dur,
       NULL::BIGINT AS launch_id, NULL::_launch_name_t AS launch_name, NULL::_launch_shapes_t AS launch_shapes,
       NULL::_launch_types_t AS launch_types, NULL::BIGINT AS wait
FROM _host h LEFT JOIN _child_time c USING (id);
DROP VIEW _host;  -- (the parts go in a statement each, each input dropped once in)
DROP TABLE _child_time;
INSERT INTO _fill_slices
SELECT _part, _row, step, depth, parent_id, NULL, launch_id, launch_name, launch_shapes, launch_types, wait
FROM _device_fill;
DROP TABLE _device_fill;
INSERT INTO _fill_slices
SELECT _part, _row, step, depth, parent_id, NULL, NULL, NULL, NULL, NULL, NULL FROM _step_records
UNION ALL
SELECT s._part, s._row, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM staging_slices s ANTI JOIN files f ON s.rank = f.file;

-- A staged record and its filled-in row, paired by position; error() guards the pairing.
CREATE OR REPLACE TEMP VIEW final_slices AS
SELECT s.* EXCLUDE (_part, _row) REPLACE (
           file_rank(s.rank) AS rank, s.ts + file_offset(s.rank) AS ts, f.step AS step, f.depth::INTEGER AS depth,
           f.parent_id AS parent_id, f.self_dur AS self_dur, f.launch_id AS launch_id,
           f.launch_name::VARCHAR AS launch_name, coalesce(s.input_shapes, f.launch_shapes::VARCHAR) AS input_shapes,
           coalesce(s.input_types, f.launch_types::VARCHAR) AS input_types,
           -- whole only where the staged records are all of their ranks' (see `finalize_whole`)
           CASE WHEN finalize_whole() THEN f.wait END AS wait)
FROM staging_slices s POSITIONAL JOIN (SELECT * FROM _fill_slices ORDER BY _part, _row) f
WHERE CASE WHEN s._part <> f._part OR s._row <> f._row THEN error('finalize: slices out of step with their computed columns')
           ELSE file_rank(s.rank) IS NOT NULL END;

-- Point records (marks, counters, memory_events, flows) take the step whose range contains them,
-- unless their source stated it: a projection of their staged rows, in one pass that sorts and
-- joins nothing (their file's rank and clock offset are macros, `step_at` a function).
CREATE OR REPLACE MACRO _point_records(staging) AS TABLE
SELECT m.* EXCLUDE (_part, _row) REPLACE (file_rank(m.rank) AS rank, m.ts + file_offset(m.rank) AS ts,
       coalesce(m.step, step_at(file_rank(m.rank), m.ts + file_offset(m.rank))) AS step)
FROM query_table(staging) m WHERE file_rank(m.rank) IS NOT NULL;

CREATE OR REPLACE TEMP VIEW final_lane_totals AS SELECT * FROM _lane_totals;
CREATE OR REPLACE TEMP VIEW final_lanes AS SELECT * FROM _lanes;

CREATE OR REPLACE TEMP VIEW final_marks AS SELECT * FROM _point_records('staging_marks');
CREATE OR REPLACE TEMP VIEW final_counters AS SELECT * FROM _point_records('staging_counters');
CREATE OR REPLACE TEMP VIEW final_memory_events AS SELECT * FROM _point_records('staging_memory_events');
CREATE OR REPLACE TEMP VIEW final_flows AS SELECT * FROM _point_records('staging_flows');

-- Communication details take the rank, device and step of their slice (and go with it): first
-- paired with their slices on narrow columns alone, into a table as small as they are. Joined
-- with the details' own text columns, DuckDB's plan for the pairing took 20-60 MiB above its
-- memory limit at 1 M records.
CREATE OR REPLACE TEMP TABLE _comm_place AS
SELECT s.id, file_rank(s.rank) AS rank, s.device, f.step
FROM _fill_slices f JOIN staging_slices s ON s._part = f._part AND s._row = f._row
WHERE file_rank(s.rank) IS NOT NULL AND s.id IN (SELECT slice_id FROM staging_comm);

CREATE OR REPLACE TEMP VIEW final_comm AS
SELECT c.* EXCLUDE (_part, _row) REPLACE (p.rank AS rank, p.device AS device, p.step AS step)
FROM staging_comm c JOIN _comm_place p ON p.id = c.slice_id;
