-- Finalisation of an import, last part (queries/store/finalize.sql has the whole algorithm): after
-- prof_engine.store.fill_pass has read fill.sql's `_fill_*` views into `_fill` (the columns
-- finalisation fills in, one row per staged slice, in staging order), the views `final_<table>`.

DROP VIEW _host;
DROP TABLE _child_time;
DROP TABLE _device_waits;
DROP TABLE _api_launchers;
DROP TABLE _launcher_sig;
DROP TABLE _launch_sigs;

-- A staged record and its filled-in row, paired by position: `_fill` holds a row for every staged
-- slice, in the order of a plain scan of them (`fill_pass` checks that it filled each slice of a
-- listed file once), so DuckDB reads both side by side (a positional scan), streaming; error()
-- guards the pairing.
CREATE OR REPLACE TEMP VIEW final_slices AS
SELECT s.* EXCLUDE (_part, _row) REPLACE (
           coalesce(f.kind::VARCHAR, s.kind) AS kind,  -- finalisation's kind where it gave one (step 4)
           file_rank(s.rank) AS rank, s.ts + file_offset(s.rank) AS ts, f.step AS step, f.depth::INTEGER AS depth,
           f.parent_id AS parent_id, f.self_dur AS self_dur, f.launch_id AS launch_id,
           f.launch_name::VARCHAR AS launch_name, coalesce(s.input_shapes, f.launch_shapes::VARCHAR) AS input_shapes,
           coalesce(s.input_types, f.launch_types::VARCHAR) AS input_types,
           -- whole only where the staged records are all of their ranks' (see `finalize_whole`)
           CASE WHEN finalize_whole() THEN f.wait END AS wait,
           CASE WHEN finalize_whole() THEN f.launch_api::VARCHAR END AS launch_api,
           CASE WHEN finalize_whole() THEN f.launch_api_ts END AS launch_api_ts,
           CASE WHEN finalize_whole() THEN f.launch_api_dur END AS launch_api_dur)
FROM staging_slices s POSITIONAL JOIN _fill f
WHERE CASE WHEN fill_position(s._part, s._row) <> f.position THEN error('finalize: slices out of step with their computed columns')
           ELSE file_rank(s.rank) IS NOT NULL END;

-- Point records (marks, counters, memory_events, flows) take the step whose range contains them,
-- unless their source stated it: a projection of their staged rows, in one pass that sorts and
-- joins nothing (their file's rank and clock offset are macros, `step_at` a function).
CREATE OR REPLACE MACRO _point_records(staging) AS TABLE
SELECT m.* EXCLUDE (_part, _row) REPLACE (file_rank(m.rank) AS rank, m.ts + file_offset(m.rank) AS ts,
       coalesce(m.step, step_at(file_rank(m.rank), m.ts + file_offset(m.rank))) AS step)
FROM query_table(staging) m WHERE file_rank(m.rank) IS NOT NULL;

CREATE OR REPLACE TEMP VIEW final_lane_totals AS SELECT * FROM _lane_totals;
CREATE OR REPLACE TEMP VIEW final_lanes AS SELECT * FROM _device_lanes;

CREATE OR REPLACE TEMP VIEW final_marks AS SELECT * FROM _point_records('staging_marks');
CREATE OR REPLACE TEMP VIEW final_counters AS SELECT * FROM _point_records('staging_counters');
CREATE OR REPLACE TEMP VIEW final_memory_events AS SELECT * FROM _point_records('staging_memory_events');
CREATE OR REPLACE TEMP VIEW final_flows AS SELECT * FROM _point_records('staging_flows');

-- Communication details take the rank, device and step of their slice (and go with it): first
-- paired with their slices on narrow columns alone, into a table as small as they are. Joined
-- with the details' own text columns, DuckDB's plan for the pairing took 20-60 MiB above its
-- memory limit at 1 M records. The step by position: a positional scan of every staged slice and
-- its computed columns runs on one thread (0.09 s at 329 MB of JSON, against 0.03 s).
CREATE OR REPLACE TEMP TABLE _comm_place AS
WITH c AS (
    SELECT s.id, file_rank(s.rank) AS rank, s.device, fill_position(s._part, s._row) AS position FROM staging_slices s
    WHERE file_rank(s.rank) IS NOT NULL AND s.id IN (SELECT slice_id FROM staging_comm))
SELECT c.id, c.rank, c.device, f.step FROM c JOIN _fill f USING (position);

CREATE OR REPLACE TEMP VIEW final_comm AS
SELECT c.* EXCLUDE (_part, _row) REPLACE (p.rank AS rank, p.device AS device, p.step AS step)
FROM staging_comm c JOIN _comm_place p ON p.id = c.slice_id;
