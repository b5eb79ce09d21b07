-- view: _compare_shift
-- answers: how much an item moved between the baseline (run 0) and each other run, with a
--   distribution-free confidence interval and a p-value — the statistics of a comparison, over the
--   samples of every run in `compare_samples` (one row per run, level, item and sample; see _samples.sql).
-- requires: compare_samples, compare_runs
-- Created after compare_samples is filled: _compare_paired, _compare_filled and _compare_sides are
-- tables, computed once; as views, each use would compute the pairing again.
-- Algorithm:
-- 0. Pairs: each other run (`cmp`) meets the baseline on its own, so the baseline's samples are
--    read once per other run. Shapes are matched by name there: in the op level, the input shapes
--    of an op name found on one side only, when that name has such shapes on both sides, become one
--    item whose detail reads `before → after` (several shapes joined by ` | `), its samples summed
--    per rank, device and step — an op whose shapes changed is one item, not a removal and an addition.
-- 1. Zero fill: in the op_type, op, api and communication levels an item that did not run in a
--    sample (rank, device, step) of a side, on a rank where it runs on either side, took 0 µs and
--    0 calls there; ranks that never run it (another pipeline stage) hold no sample of it. An item
--    with no call on one side was added or removed.
-- 2. Each side: median, spread = 1.4826 × MAD (a robust standard deviation), median calls.
-- 3. Shift, within ranks: rank r of one run is compared with rank r of the other (ranks of a job
--    differ: pipeline stages, imbalanced embedding shards), so pairs of samples are formed within a
--    rank; when the two sides share no rank for an item (a different world size, other rank ids)
--    all samples form one stratum. The estimate is the Hodges–Lehmann shift, the median of the
--    within-stratum differences d = candidate − baseline. Its confidence interval inverts the
--    stratified Mann–Whitney test (the sum of per-rank U statistics; normal approximation, no tie
--    correction, which widens it): with N = Σ n_r·m_r pairs and V = Σ n_r·m_r·(n_r+m_r+1)/12,
--    k = floor(N/2 − z·sqrt(V)) and the interval runs from the k-th smallest difference to the
--    k-th largest. When k < 1 the samples are too few for that confidence: the interval and the
--    p-value are NULL (the item is `inconclusive`). The calls per sample get the same interval.
-- 4. p-value of "the shift lies within the noise floor f" (_compare_floor), from the same
--    statistic counted against ±f: U+ = #{d > f} + ½·#{d = f}, U− = #{d < −f} + ½·#{d = −f},
--    z± = (U± − N/2) / sqrt(V), p = min(1, erfc(max(z+, z−) / √2)) — two one-sided tests, so
--    p ≤ 1 − confidence where the interval lies beyond ±f. compare_report adjusts it across items.
-- 5. A side with more than max_samples samples keeps every ceil(n / max_samples)-th of its sorted
--    values, so the pairs stay few; thinning only widens the interval.
CREATE OR REPLACE MACRO compare_filled_level(level) AS level IN ('op_type', 'op', 'api', 'communication');

-- The smallest change that counts: a share of the baseline median, at least min_us (memory: min_mb).
CREATE OR REPLACE MACRO _compare_floor(level, base_median, rel_floor, min_us, min_mb) AS
    greatest(rel_floor * abs(coalesce(base_median, 0)), CASE WHEN level = 'memory' THEN min_mb ELSE min_us END);

-- erfc(x), Numerical Recipes' Chebyshev fit (relative error < 1.2e-7 for every x): DuckDB has no
-- normal distribution function, and a p-value far in the tail must keep its relative precision.
CREATE OR REPLACE MACRO _compare_erfc_fit(t, x) AS t * exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196
    + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
    + t * (-0.82215223 + t * 0.17087277)))))))));
CREATE OR REPLACE MACRO compare_erfc(x) AS
    CASE WHEN x >= 0 THEN _compare_erfc_fit(1 / (1 + 0.5 * x), x) ELSE 2 - _compare_erfc_fit(1 / (1 - 0.5 * x), -x) END;

CREATE OR REPLACE TABLE _compare_paired AS
WITH pairs AS (
    SELECT run AS cmp FROM compare_runs WHERE run > 0
), keys AS (
    SELECT DISTINCT p.cmp, s.run = 0 AS base, s.device_type, s.item, s.detail
    FROM pairs p JOIN compare_samples s ON s.run IN (0, p.cmp) WHERE s.level = 'op'
), lone AS (  -- op names and shapes found on one side of a pair only
    SELECT k.* FROM keys k ANTI JOIN keys o ON o.cmp = k.cmp AND o.base <> k.base
         AND (o.device_type, o.item, o.detail) = (k.device_type, k.item, k.detail)
), changed AS (  -- op names with lone shapes on both sides: one item, `before → after`
    SELECT cmp, device_type, item, string_agg(detail, ' | ' ORDER BY detail) FILTER (WHERE base) || ' → '
           || string_agg(detail, ' | ' ORDER BY detail) FILTER (WHERE NOT base) AS shapes
    FROM lone GROUP BY ALL HAVING bool_or(base) AND bool_or(NOT base)
)
SELECT p.cmp, s.run = 0 AS base, s.level, s.device_type, s.item, coalesce(c.shapes, s.detail) AS detail,
       c.shapes IS NOT NULL AS shapes_changed, s.rank, s.device, s.step, sum(s.value) AS value, sum(s.calls) AS calls
FROM pairs p JOIN compare_samples s ON s.run IN (0, p.cmp)
LEFT JOIN changed c ON c.cmp = p.cmp AND s.level = 'op' AND (c.device_type, c.item) = (s.device_type, s.item)
     AND EXISTS (SELECT 1 FROM lone l WHERE l.cmp = p.cmp AND l.base = (s.run = 0)
                 AND (l.device_type, l.item, l.detail) = (s.device_type, s.item, s.detail))
GROUP BY ALL;

CREATE OR REPLACE TABLE _compare_filled AS
WITH units AS (
    SELECT DISTINCT cmp, base, level, device_type, rank, device, step FROM _compare_paired WHERE compare_filled_level(level)
), items AS (
    SELECT DISTINCT cmp, level, device_type, item, detail, shapes_changed, rank FROM _compare_paired
    WHERE compare_filled_level(level)
)
SELECT u.cmp, u.base, i.level, i.device_type, i.item, i.detail, i.shapes_changed, u.rank, u.device, u.step,
       coalesce(s.value, 0) AS value, coalesce(s.calls, 0) AS calls
FROM items i JOIN units u USING (cmp, level, device_type, rank)
LEFT JOIN _compare_paired s ON s.cmp = u.cmp AND s.base = u.base AND s.level = i.level AND s.device_type = i.device_type
     AND s.item = i.item AND s.detail = i.detail AND s.rank = u.rank AND s.device = u.device
     AND s.step IS NOT DISTINCT FROM u.step
UNION ALL
SELECT cmp, base, level, device_type, item, detail, shapes_changed, rank, device, step, value, calls
FROM _compare_paired WHERE NOT compare_filled_level(level) AND value IS NOT NULL;

CREATE OR REPLACE TABLE _compare_sides AS
SELECT cmp, base, level, device_type, item, detail, shapes_changed, count(*) AS n, median(value) AS med,
       1.4826 * mad(value) AS spread, median(calls) AS calls_med, sum(calls) AS calls_total
FROM _compare_filled GROUP BY ALL;

CREATE OR REPLACE MACRO _compare_thin(max_samples) AS TABLE
SELECT * EXCLUDE (i, n) FROM (
    SELECT *, row_number() OVER w - 1 AS i, count(*) OVER (PARTITION BY cmp, base, level, device_type, item, detail) AS n
    FROM _compare_filled WINDOW w AS (PARTITION BY cmp, base, level, device_type, item, detail ORDER BY value, calls)
) WHERE n <= max_samples OR i % ceil(n / max_samples)::BIGINT = 0;

-- The k-th smallest and k-th largest of a sorted list (1-based), NULL when k < 1.
CREATE OR REPLACE MACRO _compare_ci_low(sorted, k) AS CASE WHEN k >= 1 THEN sorted[k::BIGINT] END;
CREATE OR REPLACE MACRO _compare_ci_high(sorted, k) AS CASE WHEN k >= 1 THEN sorted[len(sorted) - k::BIGINT + 1] END;

CREATE OR REPLACE MACRO compare_shift(z, rel_floor, min_us, min_mb, max_samples) AS TABLE
WITH thin AS (
    SELECT * FROM _compare_thin(max_samples)
), ranks AS (
    SELECT DISTINCT cmp, base, level, device_type, item, detail, rank FROM thin
), strata AS (  -- per other run and item: are there ranks on both sides?
    SELECT c.cmp, c.level, c.device_type, c.item, c.detail, bool_or(b.rank IS NOT NULL) AS by_rank
    FROM ranks c LEFT JOIN ranks b ON b.cmp = c.cmp AND b.base AND b.rank = c.rank
         AND (b.level, b.device_type, b.item, b.detail) = (c.level, c.device_type, c.item, c.detail)
    WHERE NOT c.base GROUP BY ALL
), sides AS (  -- each sample with its stratum
    SELECT t.cmp, t.base, t.level, t.device_type, t.item, t.detail,
           CASE WHEN f.by_rank THEN t.rank ELSE -1 END AS stratum, t.value, t.calls
    FROM thin t JOIN strata f ON t.cmp = f.cmp
         AND (t.level, t.device_type, t.item, t.detail) = (f.level, f.device_type, f.item, f.detail)
), sizes AS (
    SELECT cmp, level, device_type, item, detail, stratum,
           count(*) FILTER (WHERE base) AS n, count(*) FILTER (WHERE NOT base) AS m
    FROM sides GROUP BY ALL
), spread AS (
    SELECT cmp, level, device_type, item, detail, sum(n * m) AS pairs, sum(n * m * (n + m + 1) / 12.0) AS v
    FROM sizes GROUP BY ALL
), floors AS (
    SELECT cmp, level, device_type, item, detail, _compare_floor(level, med, rel_floor, min_us, min_mb) AS floor
    FROM _compare_sides WHERE base
), diffs AS (
    SELECT c.cmp, c.level, c.device_type, c.item, c.detail, c.value - b.value AS d, c.calls - b.calls AS dc
    FROM sides b JOIN sides c ON b.cmp = c.cmp AND b.stratum = c.stratum
         AND (b.level, b.device_type, b.item, b.detail) = (c.level, c.device_type, c.item, c.detail)
    WHERE b.base AND NOT c.base
), shifts AS (
    SELECT d.cmp, d.level, d.device_type, d.item, d.detail, median(d) AS shift, median(dc) AS calls_shift,
           list(d ORDER BY d) AS ds, list(dc ORDER BY dc) AS dcs,
           count(*) FILTER (WHERE d > f.floor) + 0.5 * count(*) FILTER (WHERE d = f.floor) AS u_above,
           count(*) FILTER (WHERE d < -f.floor) + 0.5 * count(*) FILTER (WHERE d = -f.floor) AS u_below
    FROM diffs d JOIN floors f USING (cmp, level, device_type, item, detail) GROUP BY ALL
), k AS (
    SELECT s.*, v.pairs, v.v, floor(v.pairs / 2 - z * sqrt(v.v)) AS k
    FROM shifts s JOIN spread v ON v.cmp = s.cmp
         AND (v.level, v.device_type, v.item, v.detail) = (s.level, s.device_type, s.item, s.detail)
)
SELECT cmp AS run, level, device_type, item, detail, shift, _compare_ci_low(ds, k) AS ci_low,
       _compare_ci_high(ds, k) AS ci_high, calls_shift, _compare_ci_low(dcs, k) AS calls_ci_low,
       _compare_ci_high(dcs, k) AS calls_ci_high,
       CASE WHEN k >= 1 THEN least(1, compare_erfc(greatest(u_above - pairs / 2, u_below - pairs / 2) / sqrt(2 * v))) END AS p
FROM k;
