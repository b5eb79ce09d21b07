-- view: compare_report
-- answers: is each run faster or slower than the baseline, where, and is the change real — one row
--   per level, item and run: medians and spreads of both sides, the shift with its confidence
--   interval, and a status. Table macro compare_report(z, rel_floor, min_us, min_mb, max_samples).
-- matches: HTA TraceDiff, TensorBoard Diff Run, nsys diff and msprof-analyze compare (which diff
--   totals and counts), with distributions across steps and ranks and a noise floor.
-- requires: _compare_shift, compare_runs
-- Rule: the noise floor of an item is max(rel_floor × |baseline median|, min_us) for times
-- (min_mb for memory). A time or memory change is significant when its whole confidence interval
-- lies beyond the floor (below −floor or above +floor); when the samples are too few for an
-- interval, when the shift itself does. Calls change the same way with the floor
-- max(rel_floor × |baseline median calls|, 0.5). Status: `added` / `removed` (no call or sample on
-- one side), else `count changed` (calls per sample changed), else `slower` / `faster` (`higher` /
-- `lower` for memory) when significant, else `no change`. Rows are sorted by level, then by impact:
-- |Delta|, the change of the item's time per sample — time delta × count.
-- column `Level` VARCHAR: step, op_type, op, api, communication or memory
-- column `Device Type` VARCHAR: device or host
-- column `Item` VARCHAR: step lane (Step Time, Computing, ...), op type, op name, API name, communication op type or memory component
-- column `Detail` VARCHAR: core type (op_type), input shapes (op), API level (api), memory measure (memory); '' when none
-- column `Run` VARCHAR: the run compared with the baseline
-- column `Status` VARCHAR: added, removed, count changed, slower, faster, higher, lower or no change
-- column `Significant` BOOLEAN: the time (memory) change lies beyond the noise floor (see Rule)
-- column `Unit` VARCHAR: us/step for times (µs per rank, device and step), MB for memory
-- column `Base Median` DOUBLE: baseline median over its samples, in Unit
-- column `Base Spread` DOUBLE: baseline 1.4826 × median absolute deviation, in Unit
-- column `Run Median` DOUBLE: the run's median, in Unit
-- column `Run Spread` DOUBLE: the run's 1.4826 × MAD, in Unit
-- column `Delta` DOUBLE: Hodges–Lehmann shift run − baseline (the impact), in Unit
-- column `CI Low` DOUBLE: lower end of its confidence interval, in Unit (NULL: too few samples)
-- column `CI High` DOUBLE: upper end of its confidence interval, in Unit
-- column `Delta(%)` DOUBLE: Delta relative to the baseline median, % (NULL when that is 0)
-- column `Noise Floor` DOUBLE: the smallest change that counts, in Unit
-- column `Base Calls` DOUBLE: baseline median calls per sample
-- column `Run Calls` DOUBLE: the run's median calls per sample
-- column `Base N` BIGINT: baseline samples (ranks × devices × steps)
-- column `Run N` BIGINT: the run's samples
-- A change is beyond `floor` when its interval (else the estimate) lies entirely outside ±floor.
CREATE OR REPLACE MACRO _compare_beyond(estimate, low, high, floor) AS
    CASE WHEN low IS NULL THEN abs(estimate) > floor ELSE low > floor OR high < -floor END;

CREATE OR REPLACE MACRO compare_report(z, rel_floor, min_us, min_mb, max_samples) AS TABLE
WITH keys AS (
    SELECT DISTINCT r.run, s.level, s.device_type, s.item, s.detail
    FROM _compare_sides s JOIN compare_runs r ON r.run > 0 AND s.run IN (0, r.run)
), joined AS (
    SELECT k.*, b.n AS b_n, b.med AS b_med, b.spread AS b_spread, b.calls_med AS b_calls, b.calls_total AS b_total,
           c.n AS c_n, c.med AS c_med, c.spread AS c_spread, c.calls_med AS c_calls, c.calls_total AS c_total,
           coalesce(x.shift, c.med - coalesce(b.med, 0), -b.med) AS delta, x.ci_low, x.ci_high,
           x.calls_shift, x.calls_ci_low, x.calls_ci_high,
           greatest(rel_floor * abs(coalesce(b.med, 0)), CASE WHEN k.level = 'memory' THEN min_mb ELSE min_us END) AS floor,
           greatest(rel_floor * abs(coalesce(b.calls_med, 0)), 0.5) AS calls_floor
    FROM keys k
    LEFT JOIN _compare_sides b ON b.run = 0 AND (b.level, b.device_type, b.item, b.detail) = (k.level, k.device_type, k.item, k.detail)
    LEFT JOIN _compare_sides c ON c.run = k.run AND (c.level, c.device_type, c.item, c.detail) = (k.level, k.device_type, k.item, k.detail)
    LEFT JOIN compare_shift(z, max_samples) x ON x.run = k.run
         AND (x.level, x.device_type, x.item, x.detail) = (k.level, k.device_type, k.item, k.detail)
), judged AS (
    SELECT *, b_n IS NULL OR coalesce(b_total, -1) = 0 AS absent_base, c_n IS NULL OR coalesce(c_total, -1) = 0 AS absent_run,
           _compare_beyond(delta, ci_low, ci_high, floor) AS significant,
           compare_filled_level(level) AND _compare_beyond(calls_shift, calls_ci_low, calls_ci_high, calls_floor) AS calls_changed
    FROM joined
)
SELECT j.level AS "Level", j.device_type AS "Device Type", j.item AS "Item", j.detail AS "Detail", r.label AS "Run",
       CASE WHEN absent_base THEN 'added' WHEN absent_run THEN 'removed'
            WHEN calls_changed THEN 'count changed'
            WHEN significant AND delta > 0 THEN CASE WHEN j.level = 'memory' THEN 'higher' ELSE 'slower' END
            WHEN significant THEN CASE WHEN j.level = 'memory' THEN 'lower' ELSE 'faster' END
            ELSE 'no change' END AS "Status",
       significant OR absent_base OR absent_run AS "Significant",
       CASE WHEN j.level = 'memory' THEN 'MB' ELSE 'us/step' END AS "Unit",
       round(b_med, 3) AS "Base Median", round(b_spread, 3) AS "Base Spread",
       round(c_med, 3) AS "Run Median", round(c_spread, 3) AS "Run Spread",
       round(delta, 3) AS "Delta", round(ci_low, 3) AS "CI Low", round(ci_high, 3) AS "CI High",
       round(100 * delta / nullif(abs(b_med), 0), 2) AS "Delta(%)", round(floor, 3) AS "Noise Floor",
       b_calls AS "Base Calls", c_calls AS "Run Calls", b_n AS "Base N", c_n AS "Run N"
FROM judged j JOIN compare_runs r ON r.run = j.run
WHERE NOT (absent_base AND absent_run)
ORDER BY j.run, list_position(['step', 'op_type', 'op', 'api', 'communication', 'memory'], j.level),
         abs(delta) DESC NULLS LAST, "Item", "Detail", "Device Type";
