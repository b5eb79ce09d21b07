-- view: _intervals
-- answers: interval algebra over (key, s, e) rows — union, gaps and difference — written once and
--   used by the overlap analysis. `key` is any grouping value (a STRUCT of rank, device, step, say);
--   intervals are half-open [s, e) in ns.
-- requires:

-- Island ends: where each key's merged intervals end, and where the next one starts.
-- Algorithm: order a key's intervals by start and keep the running maximum of their ends (the
-- reach); an island ends at an interval whose reach falls short of the next interval's start (a
-- touching start continues it), or at the key's last interval. Intervals with equal starts can come
-- in any order: only the last of them can end an island, and its reach covers them all. One pass.
CREATE OR REPLACE MACRO _interval_ends(tbl) AS TABLE
SELECT key, first_s, e, next_s FROM (
    SELECT key, first_value(s) OVER w AS first_s, max(e) OVER w AS e, lead(s) OVER w AS next_s
    FROM query_table(tbl) WHERE e > s
    WINDOW w AS (PARTITION BY key ORDER BY s ROWS UNBOUNDED PRECEDING)
) WHERE next_s IS NULL OR next_s > e;

-- Union: merge overlapping, nested and touching intervals of each key.
-- Algorithm: an island runs from where the previous island's end said the next one starts (the
-- key's first start for its first island) to its own end.
CREATE OR REPLACE MACRO interval_union(tbl) AS TABLE
SELECT key, coalesce(lag(next_s) OVER (PARTITION BY key ORDER BY e), first_s) AS s, e FROM _interval_ends(tbl);

-- Gaps: the parts of each key's span — from its first start to its last end, empty intervals
-- included — that none of its intervals covers.
-- Algorithm: from each island's end to the next island's start; and where empty intervals stretch
-- the span, from its start to the first island and from the last island to its end (the whole span
-- when no interval is longer than 0).
CREATE OR REPLACE MACRO interval_gaps(tbl) AS TABLE
WITH ends AS MATERIALIZED (
    SELECT * FROM _interval_ends(tbl)
), span AS (
    SELECT key, min(s) AS s, max(e) AS e FROM query_table(tbl) GROUP BY key HAVING max(e) > min(s)
), last AS (
    SELECT key, first_s, e FROM ends WHERE next_s IS NULL
)
SELECT key, e AS s, next_s AS e FROM ends WHERE next_s IS NOT NULL
UNION ALL
SELECT p.key, p.s, coalesce(l.first_s, p.e) FROM span p LEFT JOIN last l ON l.key IS NOT DISTINCT FROM p.key
WHERE coalesce(l.first_s, p.e) > p.s
UNION ALL
SELECT p.key, l.e, p.e FROM span p JOIN last l ON l.key IS NOT DISTINCT FROM p.key WHERE p.e > l.e;

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

-- Totals: per key, the lengths of the union of its `a` intervals (b false), of its `b` intervals
-- (b true) and of all of them, the first start of an interval longer than 0, and the span: the
-- first start and the last end of all of them, empty intervals included. The lengths of the
-- lanes without the lanes themselves (what a step breakdown sums), from one sort.
-- Algorithm: order each key's intervals by start and keep the reach (running maximum of the ends)
-- of the a, and of the b intervals before each; an interval adds to its class's union the part of
-- it beyond that reach, max(0, e - max(s, reach)) (every earlier interval starts no later, so
-- their union meets [s, ∞) exactly in [s, reach)), and to the union of all the part beyond the
-- greater reach. Intervals with equal starts can come in any order. The keys are numbered and
-- each reach is packed with its key's number above it (`number << 64 | end + 2^63`, exact), so
-- one running maximum over all keys in (key, start) order never carries a reach into the next
-- key, and the windows stream over the sorted rows instead of sorting a partition each.
CREATE OR REPLACE MACRO interval_totals(tbl) AS TABLE
WITH keys AS (
    SELECT key, (row_number() OVER (ORDER BY key))::HUGEINT << 64 AS kb FROM (SELECT DISTINCT key FROM query_table(tbl))
), ordered AS (
    SELECT k.kb, t.b, t.s, t.e FROM query_table(tbl) t JOIN keys k ON k.key IS NOT DISTINCT FROM t.key ORDER BY k.kb, t.s
), reach AS (
    SELECT kb, b, s, e,
           max(CASE WHEN NOT b AND e > s THEN kb + e + 9223372036854775808 ELSE kb END) OVER (ROWS UNBOUNDED PRECEDING) AS ra,
           max(CASE WHEN b AND e > s THEN kb + e + 9223372036854775808 ELSE kb END) OVER (ROWS UNBOUNDED PRECEDING) AS rb
    FROM ordered
), before AS (  -- the reaches of the rows before; the previous row's position, to check the order
    SELECT kb, b, s, e, lag(ra) OVER () AS ra, lag(rb) OVER () AS rb, lag(kb + s) OVER () AS prev FROM reach
), parts AS (
    SELECT kb, b, s, e, prev,
           greatest(e - greatest(s, CASE WHEN ra > kb THEN (ra - kb - 9223372036854775808)::BIGINT ELSE s END), 0) AS new_a,
           greatest(e - greatest(s, CASE WHEN rb > kb THEN (rb - kb - 9223372036854775808)::BIGINT ELSE s END), 0) AS new_b
    FROM before
), totals AS (
    SELECT kb, sum(CASE WHEN b THEN 0 ELSE new_a END) AS a_len, sum(CASE WHEN b THEN new_b ELSE 0 END) AS b_len,
           sum(least(new_a, new_b)) AS ab_len, min(s) FILTER (WHERE e > s) AS first_s, min(s) AS span_s,
           max(e) AS span_e, bool_and(prev IS NULL OR prev <= kb + s) AS in_order
    FROM parts GROUP BY kb
)
SELECT k.key, t.a_len, t.b_len, t.ab_len, t.first_s, t.span_s, t.span_e
FROM totals t JOIN keys k USING (kb)
WHERE CASE WHEN t.in_order THEN true ELSE error('interval_totals: rows reached the running maximum out of order') END;
