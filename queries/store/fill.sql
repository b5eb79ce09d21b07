-- Finalisation of an import (queries/store/finalize.sql has the whole algorithm): after the lane
-- pass (prof_engine.store.lane_pass) has made `_lanes` of finalize.sql's `_lane_activity`, the
-- step breakdown's lane lengths, what device records take from their launcher, and the columns
-- finalisation fills in, by source (`_fill_*`), for prof_engine.store.fill_pass.

DROP TABLE _lane_activity;

-- Free where a device's steps overlap (`device_free`, queries/_lanes.sql): only those devices'
-- Free is computed again, and kept beside the lane pass's other lanes.
CREATE OR REPLACE TEMP TABLE _overlapping AS SELECT * FROM overlapping_devices('_lanes');
CREATE OR REPLACE TEMP TABLE _free_lanes AS SELECT * FROM device_free('_lanes', '_overlapping');
CREATE OR REPLACE TEMP VIEW _device_lanes AS SELECT * FROM device_lanes('_lanes', '_overlapping', '_free_lanes');

CREATE OR REPLACE TEMP TABLE _lane_totals AS SELECT * FROM step_lanes('_device_lanes', '_lane_receives', '_lane_steps');

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

-- Their values as ENUMs, so that the fill pass carries a small integer per device record (the
-- value's code) instead of its launcher's strings, and stores the values once.
CREATE OR REPLACE TYPE _launch_name_t AS ENUM (SELECT DISTINCT name FROM _launch_sigs WHERE name IS NOT NULL);
CREATE OR REPLACE TYPE _launch_shapes_t AS ENUM (
    SELECT DISTINCT input_shapes FROM _launch_sigs WHERE input_shapes IS NOT NULL);
CREATE OR REPLACE TYPE _launch_types_t AS ENUM (
    SELECT DISTINCT input_types FROM _launch_sigs WHERE input_types IS NOT NULL);
CREATE OR REPLACE TYPE _launch_api_t AS ENUM (SELECT DISTINCT name FROM _api_launchers WHERE name IS NOT NULL);
-- The kind finalisation gives a record in place of its staged one (kernels launched by a collective op).
CREATE OR REPLACE TYPE _fill_kind_t AS ENUM ('comm');

-- Device records with what they take from their stream and their launcher (a statement per hash
-- join, as above: 1 GB of JSON, 3.4 M records, finalises in 80 MB of DuckDB memory).
CREATE OR REPLACE TEMP TABLE _device_waits AS
SELECT d._part, d._row, coalesce(d.stated_step, d.step) AS step, d.depth, d.parent_id, d.launch_id, d.launch_api_id,
       w.wait, d.by_collective
FROM _device d LEFT JOIN _waits w ON w.id = d.id;
DROP TABLE _device;
DROP TABLE _waits;

-- What finalisation fills in, by source, each row with its staged slice's position (`_part`,
-- `_row`): prof_engine.store.fill_pass reads them (a stream each) into the columns `_fill`, in
-- staging order, which queries/store/pair.sql pairs with the staged slices. A slice of a file
-- `files` does not list has none (the final pass leaves it out).
-- Host records: a step the source stated wins; self_dur as BIGINT, the schema's type (sum() makes
-- a HUGEINT, which DuckDB's Parquet writer stores as DOUBLE).
CREATE OR REPLACE TEMP VIEW _fill_host AS
SELECT h._part, h._row, coalesce(h.stated_step, h.step) AS step, coalesce(h.stated_depth, h.depth) AS depth,
       coalesce(h.stated_parent_id, h.parent_id) AS parent_id,
       CASE WHEN h.is_host_op OR h.is_nested_range THEN greatest(h.dur - coalesce(c.child_dur, 0), 0) END::BIGINT AS self_dur
FROM _host h LEFT JOIN _child_time c USING (id);

-- Device records, with their launcher's name, shapes and types and the API call that times their
-- launch (step 6), as the ENUMs' codes (`fill_pass` reads the ENUMs' values once), and their kind
-- where finalisation changed it (step 4).
CREATE OR REPLACE TEMP VIEW _fill_device AS
SELECT d._part, d._row, d.step, d.depth, d.parent_id, d.launch_id, enum_code(g.name::_launch_name_t) AS launch_name,
       enum_code(g.input_shapes::_launch_shapes_t) AS launch_shapes,
       enum_code(g.input_types::_launch_types_t) AS launch_types, d.wait,
       enum_code(a.name::_launch_api_t) AS launch_api, a.ts AS launch_api_ts, a.dur AS launch_api_dur,
       enum_code(CASE WHEN d.by_collective THEN 'comm' END::_fill_kind_t) AS kind
FROM _device_waits d LEFT JOIN _launcher_sig l ON l.id = d.launch_id LEFT JOIN _launch_sigs g ON g.sig = l.sig
LEFT JOIN _api_launchers a ON a.id = d.launch_api_id;

-- Step records.
CREATE OR REPLACE TEMP VIEW _fill_steps AS SELECT _part, _row, step, depth, parent_id FROM _step_records;

-- The ENUMs' values, for `fill_pass`.
CREATE OR REPLACE TEMP VIEW _fill_dictionaries AS
SELECT enum_range(NULL::_launch_name_t) AS launch_name, enum_range(NULL::_launch_shapes_t) AS launch_shapes,
       enum_range(NULL::_launch_types_t) AS launch_types, enum_range(NULL::_launch_api_t) AS launch_api,
       enum_range(NULL::_fill_kind_t) AS kind;

-- Here prof_engine.store.fill_pass makes `_fill`, and queries/store/pair.sql goes on.
