-- view: _overlap
-- answers: the overlap lanes in ns — merged computing, merged communication, communication not
--   overlapped by computing, and free time — per rank, device and step (`_overlap`, the base of
--   the timeline, and `_overlap_in_order`, of `overlap`), and their lengths alone with what a
--   step breakdown adds (`_step_lanes`, the base of `step_trace`: the run's `lane_totals`).
-- requires: lanes, lane_totals
-- scope: rank
--
-- Finalisation stores both (queries/store/finalize.sql step 5, the macros of queries/_lanes.sql):
-- on a device, compute kernels are Computing and collective kernels Communication (memcpy/memset
-- are neither, as in Ascend's Overlap Analysis); a rank with no device records (CPU-only trace) is
-- analysed on its host: CPU ops are Computing, gloo/NCCL ranges Communication. Communication(Not
-- Overlapped) is merged communication minus merged computing; Free is the gaps of all activity
-- within the span from a step's first to its last activity on the device (time before the first
-- is the step's Preparing, as torch_npu's lanes have it); where a device's steps overlap, a step's
-- Free is the device's idle time in the part of its span no earlier-starting step holds.
CREATE OR REPLACE VIEW _lane_intervals AS SELECT * FROM lanes;
CREATE OR REPLACE VIEW _overlap AS
SELECT {'rank': rank, 'device': device, 'step': step} AS key, type, ts AS s, ts + dur AS e FROM _lane_intervals;

-- The same in overlap's order: by rank, device, step (NULL last), start and lane. The stored lanes
-- are written in that order, one file per rank and device, and read so (`run_lanes_in_order()`, a
-- constant: the files are listed in order; DuckDB keeps the order of a scan through WHERE, SELECT
-- and UNION ALL), which spares sorting every interval (at 10 M device records, 17 M rows: 3.4 s →
-- 1.2 s); lanes whose files are not so (a run's files rewritten by hand) are sorted. One branch is
-- folded away.
CREATE MACRO IF NOT EXISTS run_lanes_in_order() AS false;
CREATE OR REPLACE VIEW _overlap_in_order AS
SELECT * FROM _overlap WHERE run_lanes_in_order()
UNION ALL
(SELECT * FROM _overlap WHERE NOT run_lanes_in_order()
 ORDER BY key.rank, key.device, key.step NULLS LAST, s, type);  -- integers sort faster than the output's decimals

-- The step breakdown's lanes (the `lane_totals` columns), as finalisation stored them.
CREATE OR REPLACE VIEW _step_lanes AS SELECT * FROM lane_totals;

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
