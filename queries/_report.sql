-- view: _report
-- answers: what the HTML report draws of a run with many steps, where one bar per step would be
--   thousands of pixels: how many steps there are, the distribution of step time and of its parts
--   (percentiles, a histogram), and the slowest steps; the summary the page opens with, and
--   whether the run is CPU-only. Plain views (created unbound at open, as the public ones are), so
--   that opening a run binds none of them.
-- requires: step_trace, op_statistic
-- scope: cluster
-- _report_steps: step_trace's rows within a step (records outside every step are no step), with
-- the step time as `show` prints it; every time in µs.
CREATE OR REPLACE VIEW _report_steps AS
SELECT "Rank", "Device", "Step", round("End Time(us)" - "Start Time(us)", 3)::DOUBLE AS "Step Time(us)",
       "Computing", "Communication(Not Overlapped)", "Overlapped", "Free", "Preparing"
FROM step_trace WHERE "Step" IS NOT NULL;

-- _report_step_count: one row. `Rows` BIGINT: rows of _report_steps (rank, device, step); `Steps`
-- BIGINT: distinct steps; `Devices` BIGINT: distinct (rank, device).
CREATE OR REPLACE VIEW _report_step_count AS
SELECT count(*) AS "Rows", count(DISTINCT "Step") AS "Steps", count(DISTINCT ("Rank", "Device")) AS "Devices"
FROM _report_steps;

-- _report_step_distribution: one row per part of the step (step time first, then the parts in
-- step_trace's order) over every rank, device and step. `Part` VARCHAR; `Count` BIGINT: rows with a
-- value; `Min`, `P50`, `P90`, `P99`, `Max`, `Mean` DOUBLE, µs. Percentiles interpolate linearly
-- between the two nearest values (quantile_cont: numpy's default).
CREATE OR REPLACE VIEW _report_step_distribution AS
WITH parts AS (
    UNPIVOT (SELECT * EXCLUDE ("Rank", "Device", "Step") FROM _report_steps)
    ON COLUMNS(*) INTO NAME part VALUE us
), q AS (
    SELECT part, count(us) AS n, min(us) AS lo, quantile_cont(us, [0.5, 0.9, 0.99]) AS p, max(us) AS hi,
           avg(us::DECIMAL(38, 3)) AS mean  -- an exact sum of the ns-exact µs: the same mean in any row order
    FROM parts GROUP BY part
)
SELECT part AS "Part", n AS "Count", lo AS "Min(us)", round(p[1], 3) AS "P50(us)", round(p[2], 3) AS "P90(us)",
       round(p[3], 3) AS "P99(us)", hi AS "Max(us)", round(mean, 3) AS "Mean(us)"
FROM q
ORDER BY list_position(['Step Time(us)', 'Computing', 'Communication(Not Overlapped)', 'Overlapped', 'Free', 'Preparing'], part);

-- _report_step_histogram: step time in 40 bins of equal width from the shortest step to the
-- longest (one bin where all are equal), empty bins included. `Bin` BIGINT from 0; `From(us)`,
-- `To(us)` DOUBLE: the bin's bounds (the last bin holds its upper bound); `Count` BIGINT: rows.
-- Algorithm: bin = floor((t - min) / (max - min) * 40), the maximum put in the last bin.
CREATE OR REPLACE VIEW _report_step_histogram AS
WITH r AS (
    SELECT min("Step Time(us)") AS lo, max("Step Time(us)") AS hi, CASE WHEN max("Step Time(us)") > min("Step Time(us)") THEN 40 ELSE 1 END AS bins
    FROM _report_steps
), b AS (
    SELECT least(floor(("Step Time(us)" - lo) / nullif(hi - lo, 0) * bins), bins - 1)::BIGINT AS bin, count(*) AS n
    FROM _report_steps, r WHERE "Step Time(us)" IS NOT NULL GROUP BY ALL
)
SELECT g.bin AS "Bin", round(lo + (hi - lo) * g.bin / bins, 3) AS "From(us)",
       round(lo + (hi - lo) * (g.bin + 1) / bins, 3) AS "To(us)", coalesce(b.n, 0) AS "Count"
FROM r, range(0, r.bins) g(bin) LEFT JOIN b ON coalesce(b.bin, 0) = g.bin
WHERE r.lo IS NOT NULL
ORDER BY g.bin;

-- _report_slowest_steps: _report_steps, the longest step first (the report reads the first few).
CREATE OR REPLACE VIEW _report_slowest_steps AS
SELECT * FROM _report_steps ORDER BY "Step Time(us)" DESC NULLS LAST, "Rank", "Device", "Step";

-- _report_summary: one row, what the page opens with: the step time and where it goes. Over the
-- step rows (rank, device, step) of _report_steps; in a run without steps, over step_trace's rows
-- outside every step (the whole trace, one row per device). `In Steps` BOOLEAN: whether these are
-- steps; `Steps` BIGINT: distinct steps; `Devices` BIGINT: distinct (rank, device); `Rows` BIGINT;
-- `Mean(us)`, `Min(us)`, `Max(us)` DOUBLE: step time (the window's span); `Computing(%)`,
-- `Communication(Not Overlapped)(%)`, `Free(%)` DOUBLE: each part's share of the summed step time
-- (torch_npu: step time = Computing + Communication(Not Overlapped) + Free).
CREATE OR REPLACE VIEW _report_summary AS
WITH stepped AS (SELECT count(*) > 0 AS yes FROM step_trace WHERE "Step" IS NOT NULL), r AS (
    SELECT "Rank", "Device", "Step", round("End Time(us)" - "Start Time(us)", 3)::DOUBLE AS t,
           "Computing" AS c, "Communication(Not Overlapped)" AS m, "Free" AS f
    FROM step_trace, stepped WHERE ("Step" IS NOT NULL) = stepped.yes
)
SELECT (SELECT yes FROM stepped) AS "In Steps", count(DISTINCT "Step") AS "Steps",
       count(DISTINCT ("Rank", "Device")) AS "Devices", count(*) AS "Rows", round(avg(t), 3) AS "Mean(us)",
       min(t) AS "Min(us)", max(t) AS "Max(us)", round(100 * sum(c) / nullif(sum(t), 0), 1) AS "Computing(%)",
       round(100 * sum(m) / nullif(sum(t), 0), 1) AS "Communication(Not Overlapped)(%)",
       round(100 * sum(f) / nullif(sum(t), 0), 1) AS "Free(%)"
FROM r;

-- _report_cpu_only: one row, `CPU Only` BOOLEAN: whether no rank has a device in step_trace or a
-- device kernel in op_statistic; the page then hides the device columns that are all zero. From
-- rank-scope views, not `slices`, so that a run computed by groups of ranks answers it too.
CREATE OR REPLACE VIEW _report_cpu_only AS
SELECT NOT EXISTS (SELECT 1 FROM step_trace WHERE "Device" <> 'host')
       AND NOT EXISTS (SELECT 1 FROM op_statistic WHERE "Device" <> 'host') AS "CPU Only";
