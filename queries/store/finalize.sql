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
-- This script stops at the lanes' activity (`_lane_activity`): prof_engine.store.lane_pass then
-- makes `_lanes` of it (step 5), queries/store/fill.sql yields the filled-in columns,
-- prof_engine.store.fill_pass puts them in staging order, and queries/store/pair.sql does the rest.
-- Output (of pair.sql): views final_<table>, one per canonical table, with every column filled in,
-- and `_s`, the staged slices' narrow columns, which the macros of queries/store/manifest.sql sum
-- up for the manifest.
--
-- Algorithm:
--   1. Steps are the host `step` records of each rank; a host record belongs to the step whose
--      [start, end) contains its start (of the rank's steps, the latest started at or before it).
--   2. Nesting on one thread of host ops, API calls and user ranges (whose depth the source did
--      not state), in one tree as torch.profiler builds it: a record_function range inside an op
--      (Inductor's `## Call CompiledFxGraph ##` in `CompiledFunction`) is the op's child and the
--      parent of the ops inside it. In order of start, longer first at equal starts, a stack of
--      the thread's records: a record pops those it does not lie within (it starts at or after
--      their end, or ends after it: one that overlaps another without nesting closes it for the
--      records after it), then its parent is the top and its depth the stack's height (torch's
--      `EventList._populate_cpu_children`). Touching is not nesting. torch's async ranges (the
--      c10d Work ranges `nccl:*`, `gloo:*`: kind comm) are not in its tree, and not here. A depth
--      or parent the source stated wins.
--      Steps 1 and 2 of host records are one pass over them sorted by thread and start
--      (prof_engine.store.host_pass, in C), not SQL: DuckDB's window over their starts and ends,
--      and its ASOF joins, sorted 3x as many rows and took 5x as long.
--   3. self_dur of a host op or user range = its duration minus the durations of its direct
--      child host ops and user ranges.
--   4. A device record was launched by the host op with its External id, else by the host op a
--      flow links to device work of its correlation id, else by the host op or user range enclosing
--      the API call with its correlation id, else by that API call; it takes the step of
--      its launcher, falling back to time containment, and its launcher's name (`launch_name`),
--      input shapes and types (where the source gave it none). A kernel whose launch (its API
--      call, else its launcher) lies within a collective op of its thread (`is_collective_op`,
--      queries/_classify.sql) is communication: its kind becomes `comm` (`by_collective`).
--  4b. On a device that records its steps (Kineto's gpu_user_annotation ProfilerStep#N), time
--      containment is in the device's own step windows, not the host's: step N's window is the
--      hull of the device's step N record and of the device records host step N launched; a
--      record with no launcher's step takes the window holding its start, else none (step NULL:
--      the previous step's queued work before the first window is no step's time, and the
--      data-quality rule `device_work_outside_steps`). The host's window would fold it into the
--      step (an H100 trace: 509 such kernels, 13.7 ms, made a 34.9 ms step 49.3 ms long).
--   5. The derived tables `lane_totals` and `lanes`: the step breakdown's lane lengths and the
--      Overlap Analysis lanes per device and step, from the records as finalised, with the macros
--      of queries/_lanes.sql (loaded before this script); views read them as stored. The lanes
--      are one pass over the activity sorted by device, step and start (prof_engine.store.lane_pass);
--      their lengths are the macro `step_lanes`.
--      Whole only where the staged records are every record of their ranks (an import unit).
--   6. A device task's launch is timed by the API call of its rank with its correlation id that
--      started latest (CANN's layers may share an id: the innermost): its name, start and
--      duration (`launch_api`, `launch_api_ts`, `launch_api_dur`), which kernel_launch, idle_time,
--      queue_length and advice read instead of joining the tasks to every API call. Whole only
--      where the staged records are every record of their ranks.
--
-- How (bounded memory): steps 1-6 run on narrow projections of the staged records (ids, times,
-- keys), never on their wide text columns (names, args; the launchers' are read once, for the
-- few distinct (name, shapes, types) they hold, and so are the launching API calls' names). They
-- yield the columns that finalisation fills in, one row per staged slice, with the slice's staging
-- position (fill.sql's `_fill_*` views). prof_engine.store.fill_pass puts those rows in staging
-- order by their positions, with no sort (`_fill`), and `final_slices` (queries/store/pair.sql)
-- reads each staged slice beside its row (a positional scan of both), so the wide columns are
-- read once, in a stream, and never sorted, hashed or joined. (A join of the final pass with the
-- device tasks' launching calls by id, in place of their three filled-in columns, made the 329 MB
-- import ~1.5 s slower.)
-- Point records need nothing but their file and `step_at`: `final_<table>` computes their
-- columns as it reads them.

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
-- to find none): its `ac2g` arrows (`async` before 2021's rename) start at API calls, which
-- correlation ids already link, and its `fwdbwd` arrows end at host ops.
CREATE OR REPLACE TEMP TABLE _op_by_flow AS
WITH fl AS (
    SELECT f.rank, m.category, m.flow_id, m.phase, m.pid, m.tid, m.ts + f.offset_ns AS ts
    FROM staging_flows m JOIN files f ON m.rank = f.file
    WHERE m.category NOT IN ('ac2g', 'async', 'fwdbwd')
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

-- With the call that times a task's launch (step 6): the latest-starting one with the id (its
-- name, start and duration are read with the launchers' names, in `_named`).
CREATE OR REPLACE TEMP TABLE _api_by_corr AS
SELECT rank, api_correlation AS correlation, min(id) AS api_id, min(parent_id) AS api_parent,
       arg_max(id, ts) AS last_api_id
FROM _host WHERE api_correlation IS NOT NULL GROUP BY ALL;

-- Device records but steps: their launcher (by External id, then by correlation), then the
-- launcher's step, else their own (a statement per join, for the same reason).
CREATE OR REPLACE TEMP TABLE _by_ext AS
SELECT d._part, d._row, d.id, d.rank, d.device, d.kind, d.stream, d.ts, d.dur, d.step AS stated_step, d.depth,
       d.parent_id, d.correlation, o.op_id
FROM _s d LEFT JOIN _op_by_ext o ON o.rank = d.rank AND o.external_id = d.external_id
WHERE d.device <> 'host' AND d.kind <> 'step';
DROP TABLE _op_by_ext;

CREATE OR REPLACE TEMP TABLE _launched AS
SELECT d.* EXCLUDE (correlation, op_id), coalesce(d.op_id, f.op_id, c.api_parent, c.api_id) AS launch_id,
       CASE WHEN is_device_task(d.device, d.kind) THEN c.last_api_id END AS launch_api_id
FROM _by_ext d LEFT JOIN _op_by_flow f ON f.rank = d.rank AND f.correlation = d.correlation
LEFT JOIN _api_by_corr c ON c.rank = d.rank AND c.correlation = d.correlation;
DROP TABLE _by_ext;
DROP TABLE _op_by_flow;
DROP TABLE _api_by_corr;

-- The collective ops of each thread in order of start, each with the reach of those started so
-- far (their latest end): a time lies within a collective op of its thread when the last one
-- started at or before it reaches past it.
CREATE OR REPLACE TEMP TABLE _collective_reach AS
SELECT rank, pid, tid, ts, max(ts + dur) OVER (PARTITION BY rank, pid, tid ORDER BY ts
                                               RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS reach
FROM (SELECT f.rank, s.pid, s.tid, s.ts + f.offset_ns AS ts, s.dur FROM staging_slices s JOIN files f ON s.rank = f.file
      WHERE s.device = 'host' AND s.kind <> 'step' AND is_collective_op(s.name));

-- Kernels launched from within a collective op (step 4): their launch's thread and start, on the
-- threads that have collective ops, as of the last collective op started by then.
CREATE OR REPLACE TEMP TABLE _by_collective AS
WITH launches AS (
    SELECT l.id, p.rank, p.pid, p.tid, p.ts FROM _launched l JOIN _s p ON p.id = coalesce(l.launch_api_id, l.launch_id)
    WHERE l.kind = 'kernel' AND p.device = 'host'
      AND (p.rank, p.pid, p.tid) IN (SELECT DISTINCT rank, pid, tid FROM _collective_reach)
)
SELECT a.id FROM launches a ASOF JOIN _collective_reach c
  ON c.rank = a.rank AND c.pid = a.pid AND c.tid = a.tid AND a.ts >= c.ts
WHERE a.ts < c.reach;
DROP TABLE _collective_reach;

-- The devices with steps of their own (Kineto's gpu_user_annotation ProfilerStep#N): step 4b.
CREATE OR REPLACE TEMP TABLE _stepped_devices AS
SELECT DISTINCT rank, device FROM _step_records WHERE device <> 'host' AND step IS NOT NULL;

CREATE OR REPLACE TEMP TABLE _device AS
SELECT l.* REPLACE (CASE WHEN b.id IS NOT NULL THEN 'comm' ELSE l.kind END AS kind), b.id IS NOT NULL AS by_collective,
       CASE WHEN h.step IS NOT NULL THEN h.step
            WHEN sd.rank IS NOT NULL THEN NULL  -- on a device with steps: its windows', below (step 4b)
            ELSE step_at(l.rank, l.ts) END AS step
FROM _launched l LEFT JOIN _by_collective b ON b.id = l.id
-- the launchers alone: a hash table of them, not of every host record (0.07 s at 329 MB, not 0.09)
LEFT JOIN (SELECT id, step FROM _host WHERE id IN (SELECT launch_id FROM _launched)) h ON h.id = l.launch_id
LEFT JOIN _stepped_devices sd ON sd.rank = l.rank AND sd.device = l.device;
DROP TABLE _launched;
DROP TABLE _by_collective;

-- Step 4b: a device's step windows, where the device has steps of its own: step N's window is the
-- hull of its device step records and of the device records its host step launched (ROCm's copy of
-- the step holds only what ProfilerStep itself launched, not what its nested ranges did). A record
-- with no launcher's step takes the window holding its start (the latest-starting one), else none.
CREATE OR REPLACE TEMP TABLE _device_windows AS
SELECT rank, device, step, min(s) AS s, max(e) AS e FROM (
    SELECT rank, device, step, ts AS s, ts + dur AS e FROM _step_records WHERE device <> 'host' AND step IS NOT NULL
    UNION ALL
    SELECT rank, device, step, min(ts), max(ts + dur) FROM _device
    WHERE step IS NOT NULL AND (rank, device) IN (SELECT rank, device FROM _stepped_devices) GROUP BY ALL)
GROUP BY ALL;

UPDATE _device SET step = w.step
FROM (SELECT d.id, arg_max(w.step, w.s) AS step
      FROM _device d JOIN _device_windows w ON w.rank = d.rank AND w.device = d.device AND w.s <= d.ts AND d.ts < w.e
      WHERE d.step IS NULL AND (d.rank, d.device) IN (SELECT rank, device FROM _stepped_devices)
      GROUP BY d.id) w
WHERE _device.id = w.id;
DROP TABLE _stepped_devices;
DROP TABLE _device_windows;

-- The only text finalisation reads before the final pass but collective ops' names (in
-- `_collective_reach`), in one scan: the names of communication
-- records (receive ops are the step breakdown's bubble), the name, input shapes and types of the
-- records that launched device work, and the name, start and duration of the API calls that
-- time device tasks' launches.
CREATE OR REPLACE TEMP TABLE _named AS
SELECT s.id, s.kind = 'comm' AND is_receive(s.name) AS receive, launcher, api_launcher, s.name, s.input_shapes,
       s.input_types, s.ts + file_offset(s.rank) AS ts, s.dur
FROM (SELECT *, id IN (SELECT launch_id FROM _device WHERE launch_id IS NOT NULL) AS launcher,
             id IN (SELECT launch_api_id FROM _device WHERE launch_api_id IS NOT NULL) AS api_launcher
      FROM staging_slices) s
WHERE s.kind = 'comm' OR s.launcher OR s.api_launcher;

-- Each device task's wait on its stream (`stream_wait`, queries/_classify.sql). The device
-- records carry their device, kind, stream and duration from `_by_ext` on: this and the lanes
-- below read them there, not from the staged records again with a join on id.
CREATE OR REPLACE TEMP TABLE _waits AS
SELECT id, stream_wait(rank, device, stream, ts, dur, id) AS wait FROM _device
WHERE is_device_task(device, kind);

-- The lanes of this rank (`lanes`) and the step breakdown's lane lengths (`lane_totals`), from its
-- records as finalised here (step 5). The activity: compute kernels and communication on devices;
-- a rank without device tasks is analysed on its host (CPU ops and communication ranges), as the
-- views' `_activity` does.
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

-- Here prof_engine.store.lane_pass makes `_lanes` of `_lane_activity` (step 5), and
-- queries/store/fill.sql goes on.
