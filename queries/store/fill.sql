-- Finalisation of an import, last part (queries/store/finalize.sql has the whole algorithm): after
-- the lane pass (prof_engine.store.lane_pass) has made `_lanes` of finalize.sql's `_lane_activity`,
-- the step breakdown's lane lengths, what device records take from their launcher, the columns
-- finalisation fills in, and the views `final_<table>`.

DROP TABLE _lane_activity;

CREATE OR REPLACE TEMP TABLE _lane_totals AS SELECT * FROM step_lanes('_lanes', '_lane_receives', '_lane_steps');

-- What a device record takes from its launcher: the name, input shapes and types. The views of
-- kernels by op (op_statistic, op_summary) then read them from the device record, instead of
-- joining 10 M device records to the host ops. Launchers repeat a few (name, shapes, types), so
-- each launcher maps to a small number (`_launch_sigs`), and the tables the final join holds
-- stay narrow whatever the number of launchers.
CREATE OR REPLACE TEMP TABLE _launcher_rows AS
SELECT id, name, input_shapes, input_types FROM _named WHERE launcher;
-- The API calls that time device tasks' launches (step 6).
CREATE OR REPLACE TEMP TABLE _api_launchers AS SELECT id, name, ts, dur FROM _named WHERE api_launcher;
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
CREATE OR REPLACE TYPE _launch_api_t AS ENUM (SELECT DISTINCT name FROM _api_launchers WHERE name IS NOT NULL);

-- Device records with what they take from their stream and their launcher (a statement per hash
-- join, as above: 1 GB of JSON, 3.4 M records, finalises in 80 MB of DuckDB memory).
CREATE OR REPLACE TEMP TABLE _device_waits AS
SELECT d._part, d._row, d.id, d.rank, d.ts, coalesce(d.stated_step, d.step) AS step, d.depth, d.parent_id, d.launch_id,
       d.launch_api_id, w.wait
FROM _device d LEFT JOIN _waits w ON w.id = d.id;
DROP TABLE _device;
DROP TABLE _waits;

CREATE OR REPLACE TEMP TABLE _device_fill AS
SELECT d.*, g.name::_launch_name_t AS launch_name, g.input_shapes::_launch_shapes_t AS launch_shapes,
       g.input_types::_launch_types_t AS launch_types,
       -- the API call that times a device task's launch (step 6)
       a.name::_launch_api_t AS launch_api, a.ts AS launch_api_ts, a.dur AS launch_api_dur
FROM _device_waits d LEFT JOIN _launcher_sig l ON l.id = d.launch_id LEFT JOIN _launch_sigs g ON g.sig = l.sig
LEFT JOIN _api_launchers a ON a.id = d.launch_api_id;
DROP TABLE _device_waits;
DROP TABLE _api_launchers;
DROP TABLE _launcher_sig;
DROP TABLE _launch_sigs;

-- What finalisation fills in, for every staged slice (one of a file `files` does not list: NULLs,
-- and the final pass leaves it out); a table, so that the final sort reads nothing else (and the
-- tables before it can go). Not the rank and the time on the run's clock, nor the id: the final
-- pass has them from the staged record and its file, and the sort carries ~20 B less per record
-- (at 329 MB of JSON it spilled 61 MiB with them, 47 without). The position as two 4-byte
-- integers, 8 B less again (a staged file holds far fewer than 2^32 records: ~1 TB of JSON): with
-- the three columns of the launching API calls, 600 MB of JSON ran out of memory at half of its
-- 80 MB in the copy (COPY_MEMORY_SHARE is 0.6), and passes at 0.45 so, as it did without them.
CREATE OR REPLACE TEMP TABLE _fill_slices AS
SELECT h._part::UINTEGER AS _part, h._row::UINTEGER AS _row, coalesce(h.stated_step, h.step) AS step,  -- a step the source stated wins
       coalesce(h.stated_depth, h.depth) AS depth, coalesce(h.stated_parent_id, h.parent_id) AS parent_id,
       -- BIGINT, the schema's type: sum() makes a HUGEINT, which DuckDB's Parquet writer stores as DOUBLE
       CASE WHEN h.is_host_op OR h.is_nested_range THEN greatest(h.dur - coalesce(c.child_dur, 0), 0) END::BIGINT AS self_dur,
       NULL::BIGINT AS launch_id, NULL::_launch_name_t AS launch_name, NULL::_launch_shapes_t AS launch_shapes,
       NULL::_launch_types_t AS launch_types, NULL::BIGINT AS wait, NULL::_launch_api_t AS launch_api,
       NULL::BIGINT AS launch_api_ts, NULL::BIGINT AS launch_api_dur
FROM _host h LEFT JOIN _child_time c USING (id);
DROP VIEW _host;  -- (the parts go in a statement each, each input dropped once in)
DROP TABLE _child_time;
INSERT INTO _fill_slices
SELECT _part, _row, step, depth, parent_id, NULL, launch_id, launch_name, launch_shapes, launch_types, wait,
       launch_api, launch_api_ts, launch_api_dur
FROM _device_fill;
DROP TABLE _device_fill;
INSERT INTO _fill_slices
SELECT _part, _row, step, depth, parent_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM _step_records
UNION ALL
SELECT s._part, s._row, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM staging_slices s ANTI JOIN files f ON s.rank = f.file;

-- A staged record and its filled-in row, paired by position; error() guards the pairing.
CREATE OR REPLACE TEMP VIEW final_slices AS
SELECT s.* EXCLUDE (_part, _row) REPLACE (
           file_rank(s.rank) AS rank, s.ts + file_offset(s.rank) AS ts, f.step AS step, f.depth::INTEGER AS depth,
           f.parent_id AS parent_id, f.self_dur AS self_dur, f.launch_id AS launch_id,
           f.launch_name::VARCHAR AS launch_name, coalesce(s.input_shapes, f.launch_shapes::VARCHAR) AS input_shapes,
           coalesce(s.input_types, f.launch_types::VARCHAR) AS input_types,
           -- whole only where the staged records are all of their ranks' (see `finalize_whole`)
           CASE WHEN finalize_whole() THEN f.wait END AS wait,
           CASE WHEN finalize_whole() THEN f.launch_api::VARCHAR END AS launch_api,
           CASE WHEN finalize_whole() THEN f.launch_api_ts END AS launch_api_ts,
           CASE WHEN finalize_whole() THEN f.launch_api_dur END AS launch_api_dur)
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
