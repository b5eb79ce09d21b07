-- view: _compare_shift
-- answers: how much an item moved between the baseline (run 0) and each other run, with a
--   distribution-free confidence interval — the statistics of a comparison, over the samples of
--   every run in `compare_samples` (one row per run, level, item and sample; see _samples.sql).
-- requires: compare_samples
-- Algorithm:
-- 1. Zero fill: in the op_type, op, api and communication levels an item that did not run in a
--    sample (rank, device, step) of a run, on a rank where it runs in either run, took 0 µs and 0
--    calls there; ranks that never run it (another pipeline stage) hold no sample of it. An item
--    with no call on one side was added or removed.
-- 2. Each side: median, spread = 1.4826 × MAD (a robust standard deviation), median calls.
-- 3. Shift, within ranks: rank r of one run is compared with rank r of the other (ranks of a job
--    differ: pipeline stages, imbalanced embedding shards), so pairs of samples are formed within a
--    rank; when the two sides share no rank for an item (a different world size, other rank ids)
--    all samples form one stratum. The estimate is the Hodges–Lehmann shift, the median of the
--    within-stratum differences candidate − baseline. Its confidence interval inverts the
--    stratified Mann–Whitney test (the sum of per-rank U statistics; normal approximation, no tie
--    correction, which widens it): with N = Σ n_r·m_r pairs and V = Σ n_r·m_r·(n_r+m_r+1)/12,
--    k = floor(N/2 − z·sqrt(V)) and the interval runs from the k-th smallest difference to the
--    k-th largest. When k < 1 the samples are too few for that confidence and the interval is NULL.
--    The calls per sample get the same treatment.
-- 4. A side with more than max_samples samples keeps every ceil(n / max_samples)-th of its sorted
--    values, so the pairs stay few; thinning only widens the interval.
CREATE OR REPLACE MACRO compare_filled_level(level) AS level IN ('op_type', 'op', 'api', 'communication');

CREATE OR REPLACE VIEW _compare_filled AS
WITH units AS (
    SELECT DISTINCT run, level, device_type, rank, device, step FROM compare_samples WHERE compare_filled_level(level)
), items AS (
    SELECT DISTINCT level, device_type, item, detail, rank FROM compare_samples WHERE compare_filled_level(level)
)
SELECT u.run, i.level, i.device_type, i.item, i.detail, u.rank, u.device, u.step,
       coalesce(s.value, 0) AS value, coalesce(s.calls, 0) AS calls
FROM items i JOIN units u USING (level, device_type, rank)
LEFT JOIN compare_samples s ON s.run = u.run AND s.level = i.level AND s.device_type = i.device_type
     AND s.item = i.item AND s.detail = i.detail AND s.rank = u.rank AND s.device = u.device
     AND s.step IS NOT DISTINCT FROM u.step
UNION ALL
SELECT run, level, device_type, item, detail, rank, device, step, value, calls
FROM compare_samples WHERE NOT compare_filled_level(level) AND value IS NOT NULL;

CREATE OR REPLACE VIEW _compare_sides AS
SELECT run, level, device_type, item, detail, count(*) AS n, median(value) AS med,
       1.4826 * mad(value) AS spread, median(calls) AS calls_med, sum(calls) AS calls_total
FROM _compare_filled GROUP BY ALL;

CREATE OR REPLACE MACRO _compare_thin(max_samples) AS TABLE
SELECT * EXCLUDE (i, n) FROM (
    SELECT *, row_number() OVER w - 1 AS i, count(*) OVER (PARTITION BY run, level, device_type, item, detail) AS n
    FROM _compare_filled WINDOW w AS (PARTITION BY run, level, device_type, item, detail ORDER BY value, calls)
) WHERE n <= max_samples OR i % ceil(n / max_samples)::BIGINT = 0;

-- The k-th smallest and k-th largest of a sorted list (1-based), NULL when k < 1.
CREATE OR REPLACE MACRO _compare_ci_low(sorted, k) AS CASE WHEN k >= 1 THEN sorted[k::BIGINT] END;
CREATE OR REPLACE MACRO _compare_ci_high(sorted, k) AS CASE WHEN k >= 1 THEN sorted[len(sorted) - k::BIGINT + 1] END;

CREATE OR REPLACE MACRO compare_shift(z, max_samples) AS TABLE
WITH thin AS (
    SELECT * FROM _compare_thin(max_samples)
), ranks AS (
    SELECT DISTINCT run, level, device_type, item, detail, rank FROM thin
), strata AS (  -- per other run and item: are there ranks on both sides?
    SELECT c.run, c.level, c.device_type, c.item, c.detail, bool_or(b.rank IS NOT NULL) AS by_rank
    FROM ranks c LEFT JOIN ranks b ON b.run = 0 AND b.rank = c.rank
         AND (b.level, b.device_type, b.item, b.detail) = (c.level, c.device_type, c.item, c.detail)
    WHERE c.run > 0 GROUP BY ALL
), sides AS (  -- each sample with its stratum; the baseline's once per other run
    SELECT f.run AS cmp, t.run = 0 AS base, t.level, t.device_type, t.item, t.detail,
           CASE WHEN f.by_rank THEN t.rank ELSE -1 END AS stratum, t.value, t.calls
    FROM thin t JOIN strata f ON t.run IN (0, f.run)
         AND (t.level, t.device_type, t.item, t.detail) = (f.level, f.device_type, f.item, f.detail)
), sizes AS (
    SELECT cmp, level, device_type, item, detail, stratum,
           count(*) FILTER (WHERE base) AS n, count(*) FILTER (WHERE NOT base) AS m
    FROM sides GROUP BY ALL
), spread AS (
    SELECT cmp, level, device_type, item, detail, sum(n * m) AS pairs, sum(n * m * (n + m + 1) / 12.0) AS v
    FROM sizes GROUP BY ALL
), diffs AS (
    SELECT c.cmp, c.level, c.device_type, c.item, c.detail, c.value - b.value AS d, c.calls - b.calls AS dc
    FROM sides b JOIN sides c ON b.cmp = c.cmp AND b.stratum = c.stratum
         AND (b.level, b.device_type, b.item, b.detail) = (c.level, c.device_type, c.item, c.detail)
    WHERE b.base AND NOT c.base
), shifts AS (
    SELECT cmp, level, device_type, item, detail, median(d) AS shift, median(dc) AS calls_shift,
           list(d ORDER BY d) AS ds, list(dc ORDER BY dc) AS dcs
    FROM diffs GROUP BY ALL
), k AS (
    SELECT s.*, floor(v.pairs / 2 - z * sqrt(v.v)) AS k
    FROM shifts s JOIN spread v ON v.cmp = s.cmp
         AND (v.level, v.device_type, v.item, v.detail) = (s.level, s.device_type, s.item, s.detail)
)
SELECT cmp AS run, level, device_type, item, detail, shift, _compare_ci_low(ds, k) AS ci_low,
       _compare_ci_high(ds, k) AS ci_high, calls_shift, _compare_ci_low(dcs, k) AS calls_ci_low,
       _compare_ci_high(dcs, k) AS calls_ci_high
FROM k;
