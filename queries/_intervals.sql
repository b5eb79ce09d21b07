-- view: _intervals
-- answers: interval algebra over (key, s, e) rows — union and difference — written once and used
--   by the overlap analysis. `key` is any grouping value (a STRUCT of rank, device, step, say);
--   intervals are half-open [s, e) in ns.
-- requires:

-- Union: merge overlapping, nested and touching intervals of each key.
-- Algorithm: order by start; an interval starts a new island when it starts after the largest end
-- seen so far; each island is one merged interval [min start, max end].
CREATE OR REPLACE MACRO interval_union(tbl) AS TABLE
WITH ordered AS (
    SELECT key, s, e,
           max(e) OVER (PARTITION BY key ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM query_table(tbl) WHERE e > s
), islands AS (
    SELECT key, s, e,
           sum(CASE WHEN reach IS NULL OR s > reach THEN 1 ELSE 0 END)
               OVER (PARTITION BY key ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
    FROM ordered
)
SELECT key, min(s) AS s, max(e) AS e FROM islands GROUP BY key, island;

-- Difference: the parts of `a`'s intervals covered by no interval of `b`, merged, per key.
-- Algorithm: a sweep. Emit +1/-1 at the starts/ends of a and of b, sum per time point, take the
-- running sums; between two consecutive time points a segment is in the result when the a-count
-- is > 0 and the b-count is 0. Adjacent result segments are then merged (a new island starts
-- where a segment does not begin at the previous one's end).
CREATE OR REPLACE MACRO interval_subtract(a, b) AS TABLE
WITH ev AS (
    SELECT key, s AS t, 1 AS da, 0 AS db FROM query_table(a) WHERE e > s
    UNION ALL SELECT key, e, -1, 0 FROM query_table(a) WHERE e > s
    UNION ALL SELECT key, s, 0, 1 FROM query_table(b) WHERE e > s
    UNION ALL SELECT key, e, 0, -1 FROM query_table(b) WHERE e > s
), points AS (
    SELECT key, t, sum(da) AS da, sum(db) AS db FROM ev GROUP BY key, t
), sweep AS (
    SELECT key, t AS s, lead(t) OVER w AS e,
           sum(da) OVER (w ROWS UNBOUNDED PRECEDING) AS in_a,
           sum(db) OVER (w ROWS UNBOUNDED PRECEDING) AS in_b
    FROM points WINDOW w AS (PARTITION BY key ORDER BY t)
), kept AS (
    SELECT key, s, e, lag(e) OVER (PARTITION BY key ORDER BY s) AS prev_e
    FROM sweep WHERE in_a > 0 AND in_b = 0 AND e > s
), islands AS (
    SELECT key, s, e,
           sum(CASE WHEN prev_e IS NULL OR s > prev_e THEN 1 ELSE 0 END)
               OVER (PARTITION BY key ORDER BY s ROWS UNBOUNDED PRECEDING) AS island
    FROM kept
)
SELECT key, min(s) AS s, max(e) AS e FROM islands GROUP BY key, island;
