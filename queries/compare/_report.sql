-- view: compare_report
-- answers: is each run faster or slower than the baseline, where, and is the change real — one row
--   per level, item and run: medians and spreads of both sides, the shift with its confidence
--   interval, its false-discovery-adjusted p-value, and a status. Table macro
--   compare_report(z, rel_floor, min_us, min_mb, max_samples); z is the normal quantile of the
--   confidence (1.96 for 95 %), and α = 1 − confidence = erfc(z/√2) is also the false discovery rate.
-- matches: HTA TraceDiff, TensorBoard Diff Run, nsys diff and msprof-analyze compare (which diff
--   totals and counts), with distributions across steps and ranks and a noise floor.
-- requires: _compare_shift, compare_runs
-- Rule: the noise floor of an item is max(rel_floor × |baseline median|, min_us) for times
-- (min_mb for memory). An item is tested when both sides have it and the samples are enough for an
-- interval at this confidence (see _shift.sql; at 95 % one stratum needs 4 samples a side, or 3
-- against 6); else it is `inconclusive`: an estimate from fewer samples is not judged at all.
-- The p-values of the tested items (_shift.sql: that the shift lies within the floor) are adjusted
-- by Benjamini–Hochberg within each run and level — q_(i) = min over j ≥ i of p_(j)·m/j, m the
-- tested items of that level — so that at most a share α of the changes a level reports are
-- expected to be false. Per level, not over all levels: the levels measure the same time at
-- different grains (a slower op is also a slower op type and step), so one real change shows in
-- each, and the few step lanes are not diluted by hundreds of ops. A time or memory change is
-- significant when q ≤ α and its whole confidence interval lies beyond the floor. Calls change
-- when their interval lies beyond max(rel_floor × |baseline median calls|, 0.5). Status: `added` /
-- `removed` (no call or sample on one side), else `shapes changed` (an op matched by name whose
-- input shapes differ; Significant still judges its time), else `inconclusive` (too few samples),
-- else `count changed` (calls per sample changed), else `slower` / `faster` (`higher` / `lower`
-- for memory) when significant, else `inconclusive` when the estimate lies beyond twice the floor
-- yet is not significant (its interval reaches into the floor, or the false-discovery control
-- rejects it: +169 % over a wide interval is not `no change`; within twice the floor an estimate is
-- of the size run-to-run noise gives), else `no change`. Rows are sorted by level, then by impact:
-- |Delta|, the change of the item's time per sample — time delta × count.
-- column `Level` VARCHAR: step, op_type, op, api, communication or memory
-- column `Device Type` VARCHAR: device or host
-- column `Item` VARCHAR: step lane (Step Time, Computing, ...), op type, op name, API name, communication op type or memory component
-- column `Detail` VARCHAR: core type (op_type), input shapes (op; `before → after` when they changed), API level (api), memory measure (memory); '' when none
-- column `Run` VARCHAR: the run compared with the baseline
-- column `Status` VARCHAR: added, removed, shapes changed, inconclusive (too few samples, or an estimate beyond twice the floor not confirmed), count changed, slower, faster, higher, lower or no change
-- column `Significant` BOOLEAN: the time (memory) change counts: q ≤ α and the interval beyond the noise floor, or the item was added or removed (see Rule)
-- column `Unit` VARCHAR: us/step for times (µs per rank, device and step), MB for memory (peak per rank, device and step)
-- column `Base Median` DOUBLE: baseline median over its samples, in Unit
-- column `Base Spread` DOUBLE: baseline 1.4826 × median absolute deviation, in Unit
-- column `Run Median` DOUBLE: the run's median, in Unit
-- column `Run Spread` DOUBLE: the run's 1.4826 × MAD, in Unit
-- column `Delta` DOUBLE: Hodges–Lehmann shift run − baseline (the impact), in Unit
-- column `CI Low` DOUBLE: lower end of its confidence interval, in Unit (NULL: too few samples)
-- column `CI High` DOUBLE: upper end of its confidence interval, in Unit
-- column `Delta(%)` DOUBLE: Delta relative to the baseline median, % (NULL when that is 0)
-- column `Noise Floor` DOUBLE: the smallest change that counts, in Unit
-- column `P Value` DOUBLE: p-value of "the change lies within the noise floor" (NULL: not tested)
-- column `Q Value` DOUBLE: the p-value adjusted by Benjamini–Hochberg within the run and level (NULL: not tested)
-- column `Base Calls` DOUBLE: baseline median calls per sample
-- column `Run Calls` DOUBLE: the run's median calls per sample
-- column `Base N` BIGINT: baseline samples (ranks × devices × steps)
-- column `Run N` BIGINT: the run's samples
-- A change is beyond `floor` when its interval lies entirely outside ±floor.
CREATE OR REPLACE MACRO _compare_beyond(low, high, floor) AS low > floor OR high < -floor;

CREATE OR REPLACE MACRO compare_report(z, rel_floor, min_us, min_mb, max_samples) AS TABLE
WITH keys AS (
    SELECT DISTINCT cmp AS run, level, device_type, item, detail, shapes_changed FROM _compare_sides
), joined AS (
    SELECT k.*, b.n AS b_n, b.med AS b_med, b.spread AS b_spread, b.calls_med AS b_calls, b.calls_total AS b_total,
           c.n AS c_n, c.med AS c_med, c.spread AS c_spread, c.calls_med AS c_calls, c.calls_total AS c_total,
           coalesce(x.shift, c.med - coalesce(b.med, 0), -b.med) AS delta, x.ci_low, x.ci_high, x.p,
           x.calls_shift, x.calls_ci_low, x.calls_ci_high,
           _compare_floor(k.level, b.med, rel_floor, min_us, min_mb) AS floor,
           greatest(rel_floor * abs(coalesce(b.calls_med, 0)), 0.5) AS calls_floor
    FROM keys k
    LEFT JOIN _compare_sides b ON b.cmp = k.run AND b.base
         AND (b.level, b.device_type, b.item, b.detail) = (k.level, k.device_type, k.item, k.detail)
    LEFT JOIN _compare_sides c ON c.cmp = k.run AND NOT c.base
         AND (c.level, c.device_type, c.item, c.detail) = (k.level, k.device_type, k.item, k.detail)
    LEFT JOIN compare_shift(z, rel_floor, min_us, min_mb, max_samples) x ON x.run = k.run
         AND (x.level, x.device_type, x.item, x.detail) = (k.level, k.device_type, k.item, k.detail)
), tested AS (
    SELECT *, b_n IS NULL OR coalesce(b_total, -1) = 0 AS absent_base, c_n IS NULL OR coalesce(c_total, -1) = 0 AS absent_run,
           p IS NOT NULL AND NOT (b_n IS NULL OR coalesce(b_total, -1) = 0 OR c_n IS NULL OR coalesce(c_total, -1) = 0) AS is_tested
    FROM joined
), ranked AS (  -- Benjamini–Hochberg: i-th smallest of the m tested p-values in each run and level
    SELECT *, row_number() OVER (PARTITION BY run, level, is_tested ORDER BY p, item, detail, device_type) AS i,
           count(*) OVER (PARTITION BY run, level, is_tested) AS m
    FROM tested
), judged AS (
    SELECT *, CASE WHEN is_tested THEN least(1, min(p * m / i) OVER (PARTITION BY run, level, is_tested ORDER BY i DESC
                                                                  ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) END AS q
    FROM ranked
), decided AS (
    SELECT *, is_tested AND q <= compare_erfc(z / sqrt(2)) AND _compare_beyond(ci_low, ci_high, floor) AS significant,
           is_tested AND compare_filled_level(level) AND _compare_beyond(calls_ci_low, calls_ci_high, calls_floor) AS calls_changed
    FROM judged
)
SELECT j.level AS "Level", j.device_type AS "Device Type", j.item AS "Item", j.detail AS "Detail", r.label AS "Run",
       CASE WHEN absent_base THEN 'added' WHEN absent_run THEN 'removed'
            WHEN shapes_changed THEN 'shapes changed'
            WHEN NOT is_tested THEN 'inconclusive'
            WHEN calls_changed THEN 'count changed'
            WHEN significant AND delta > 0 THEN CASE WHEN j.level = 'memory' THEN 'higher' ELSE 'slower' END
            WHEN significant THEN CASE WHEN j.level = 'memory' THEN 'lower' ELSE 'faster' END
            WHEN abs(delta) > 2 * floor THEN 'inconclusive'  -- a large estimate the test cannot confirm
            ELSE 'no change' END AS "Status",
       significant OR absent_base OR absent_run AS "Significant",
       CASE WHEN j.level = 'memory' THEN 'MB' ELSE 'us/step' END AS "Unit",
       round(b_med, 3) AS "Base Median", round(b_spread, 3) AS "Base Spread",
       round(c_med, 3) AS "Run Median", round(c_spread, 3) AS "Run Spread",
       round(delta, 3) AS "Delta", round(ci_low, 3) AS "CI Low", round(ci_high, 3) AS "CI High",
       round(100 * delta / nullif(abs(b_med), 0), 2) AS "Delta(%)", round(floor, 3) AS "Noise Floor",
       p AS "P Value", q AS "Q Value",
       b_calls AS "Base Calls", c_calls AS "Run Calls", b_n AS "Base N", c_n AS "Run N"
FROM decided j JOIN compare_runs r ON r.run = j.run
WHERE NOT (absent_base AND absent_run)
ORDER BY j.run, list_position(['step', 'op_type', 'op', 'api', 'communication', 'memory'], j.level),
         abs(delta) DESC NULLS LAST, "Item", "Detail", "Device Type";
