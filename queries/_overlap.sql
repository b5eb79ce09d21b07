-- view: _overlap
-- answers: the overlap lanes in ns — merged computing, merged communication, communication not
--   overlapped by computing, and free time — per rank, device and step (`_overlap`, the base of
--   the timeline, and `_overlap_in_order`, of `overlap`), and their lengths alone with what a
--   step breakdown adds (`_step_lanes`, the base of `step_trace`: the run's `lane_totals`, or
--   computed alike).
-- requires: slices, lanes, lane_totals, _intervals, _lanes, _tasks, _classify
--
-- Activity: on a device, compute kernels are Computing and collective kernels Communication
-- (memcpy/memset are neither, as in Ascend's Overlap Analysis). A rank with no device records
-- (CPU-only trace) is analysed on its host: CPU ops are Computing, gloo/NCCL ranges Communication.
-- Span of a step on a device: from its first to its last activity (as torch_npu's Overlap
-- Analysis lanes: time before the first activity is the step's Preparing, not Free).
CREATE OR REPLACE VIEW _activity AS
SELECT rank, device, step, CASE WHEN kind = 'comm' THEN 'Communication' ELSE 'Computing' END AS type,
       ts AS s, ts + dur AS e
FROM slices WHERE device <> 'host' AND kind IN ('kernel', 'comm')
UNION ALL
SELECT rank, device, step, CASE WHEN kind = 'comm' THEN 'Communication' ELSE 'Computing' END, ts, ts + dur
FROM slices WHERE device = 'host' AND kind IN ('host_op', 'comm') AND rank IN (SELECT rank FROM _host_only_ranks);

-- Lanes: Computing and Communication are the unions of their activity; Communication(Not
-- Overlapped) is merged communication minus merged computing; Free is the gaps of all activity
-- within the span from the first to the last activity. Where a device's steps overlap, a step's
-- Free is the device's idle time in the part of its span no earlier-starting step holds
-- (`device_free`, queries/_lanes.sql). The run's stored ones where it has them
-- (`run_overlap_stored()`, a constant from the manifest; DuckDB folds the other branch away), else
-- computed from slices as finalize computes them at import (`overlap_lanes` and `device_lanes`).
CREATE MACRO IF NOT EXISTS run_overlap_stored() AS false;
CREATE OR REPLACE VIEW _key_lanes AS
SELECT * FROM overlap_lanes('_activity', (SELECT list(DISTINCT device ORDER BY device) FROM slices));
CREATE OR REPLACE VIEW _overlapping_devices AS SELECT * FROM overlapping_devices('_key_lanes');
CREATE OR REPLACE VIEW _device_free AS SELECT * FROM device_free('_key_lanes', '_overlapping_devices');
CREATE OR REPLACE VIEW _lane_intervals AS
SELECT * FROM lanes WHERE run_overlap_stored()
UNION ALL
SELECT * FROM device_lanes('_key_lanes', '_overlapping_devices', '_device_free') WHERE NOT run_overlap_stored();
CREATE OR REPLACE VIEW _overlap AS
SELECT {'rank': rank, 'device': device, 'step': step} AS key, type, ts AS s, ts + dur AS e FROM _lane_intervals;

-- The same in overlap's order: by rank, device, step (NULL last), start and lane. Stored lanes of
-- schema 1.4 on are read in that order (`run_lanes_in_order()`: one file per rank and device, rows
-- in order, listed in order; DuckDB keeps the order of a scan through WHERE, SELECT and UNION
-- ALL), which spares sorting every interval (at 10 M device records, 17 M rows: 3.4 s → 1.2 s);
-- the others are sorted. One branch is folded away.
CREATE MACRO IF NOT EXISTS run_lanes_in_order() AS false;
CREATE OR REPLACE VIEW _overlap_in_order AS
SELECT * FROM _overlap WHERE run_overlap_stored() AND run_lanes_in_order()
UNION ALL
(SELECT * FROM _overlap WHERE NOT (run_overlap_stored() AND run_lanes_in_order())
 ORDER BY key.rank, key.device, key.step NULLS LAST, s, type);  -- integers sort faster than the output's decimals

-- The step breakdown's lanes (the `lane_totals` columns): the run's stored ones where it has them
-- (`run_lanes_stored()`, a constant from the manifest; DuckDB folds the other branch away), else
-- computed from slices as finalize computes them at import (`step_lanes`, queries/_lanes.sql).
CREATE MACRO IF NOT EXISTS run_lanes_stored() AS false;
CREATE OR REPLACE VIEW _receives AS
SELECT rank, device, step, dur FROM slices WHERE kind = 'comm' AND is_receive(name);
CREATE OR REPLACE VIEW _step_records AS
SELECT rank, step, ts FROM slices WHERE kind = 'step';
CREATE OR REPLACE VIEW _step_lanes AS
SELECT * FROM lane_totals WHERE run_lanes_stored()
UNION ALL
SELECT * FROM step_lanes('_lane_intervals', '_receives', '_step_records')
WHERE NOT run_lanes_stored();

-- Steps whose spans on a device overlap (the data-quality rule `overlapping_device_steps`: kernels
-- of a step still running after the next step's first): per rank and device, of its steps in order
-- of their span's start (records outside every step left out), how many run past the start of the
-- next (`overlapping`; `first_step` the first of them), the time their spans hold more than once
-- (`overlap`, ns: Σ span − `span`) and the union of their spans (`span`, ns), the time that Free
-- and the device's idle share are taken within.
CREATE OR REPLACE VIEW _step_overlaps AS
SELECT rank, device, count(*) AS steps, count(*) FILTER (WHERE span_end > next_start) AS overlapping,
       min(step) FILTER (WHERE span_end > next_start) AS first_step,
       (sum(span_end - span_start) - sum(own))::BIGINT AS overlap, sum(own)::BIGINT AS span
FROM (SELECT *, greatest(span_end - greatest(span_start, coalesce(reach, span_start)), 0) AS own
      FROM (SELECT rank, device, step, span_start, span_end, lead(span_start) OVER w AS next_start,
                   max(span_end) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
            FROM _step_lanes WHERE step IS NOT NULL
            WINDOW w AS (PARTITION BY rank, device ORDER BY span_start, step)))
GROUP BY rank, device;
