-- The SQL oracle of the lane pass (prof_engine/store/lane_pass.py, prof_engine/_native/lanes.c):
-- interval algebra over (key, b, s, e) rows of two classes of intervals (b false and b true), the
-- lanes of their unions, difference and gaps, from DuckDB windows. An implementation that shares
-- nothing with the pass, for tests only: the product computes lanes once, in the pass.
-- Intervals are half-open [s, e) in ns.

-- A value packed with its key's number `kb` (`number << 64`) above it, exactly; and unpacked: NULL
-- where the packed value is the key's number alone (nothing yet) or belongs to an earlier key.
CREATE OR REPLACE MACRO _interval_pack(value, kb) AS kb + value + 9223372036854775808;
CREATE OR REPLACE MACRO _interval_unpack(packed, kb) AS
    CASE WHEN packed > kb THEN (packed - kb - 9223372036854775808)::BIGINT END;

-- Lanes: per key, from rows (key, b, s, e) of two classes of intervals — a (b false) and b (b
-- true) — the intervals of four lanes: 0, the union of the a intervals; 1, the union of the b
-- intervals; 2, the parts of b's union that a's union does not cover; 3, the gaps of all of them
-- within the key's span, from its first start to its last end (empty intervals stretch the span).
-- Unions merge overlapping, nested and touching intervals. Out: (key, lane, s, e).
-- Algorithm: one sort of all rows by (key, start) and one pass over it: running maxima over all
-- keys at once, each value packed with its key's number above it (`_interval_pack`), so that a
-- maximum never carries into the next key and the windows stream over the sorted rows instead
-- of sorting a partition each. Before each row: the reach (running maximum of the ends) of the
-- a, of the b and of all intervals of the key before it. A row starts an island of its class (a, b, all)
-- when it is longer than 0 and starts beyond that class's reach (a touching start continues an
-- island); the island before it ends at that reach. The start of the current island is carried
-- as a running maximum too, so a start row holds the whole island before it; the key's last
-- islands end at its final reaches. A gap runs from the reach of all before a start of all to
-- that start. Lane 2: between two consecutive starts s_i <= s_j of a key every interval that
-- covers a point of [s_i, s_j) started at or before s_i, so a covers exactly [s_i, reach_a) of
-- it and b [s_i, reach_b), reaches taken through row i; b less a there is [max(s_i, reach_a),
-- min(reach_b, s_j)). These pieces are merged where they touch (rarely many: only where
-- communication runs).
CREATE OR REPLACE MACRO interval_lanes(tbl) AS TABLE
WITH keys AS (
    SELECT key, (row_number() OVER (ORDER BY key))::HUGEINT << 64 AS kb FROM (SELECT DISTINCT key FROM query_table(tbl))
), ordered AS (
    SELECT k.kb, t.b, t.s, t.e FROM query_table(tbl) t JOIN keys k ON k.key IS NOT DISTINCT FROM t.key ORDER BY k.kb, t.s
), reach AS (  -- packed; the key's number alone: none yet
    SELECT kb, b, s, e,
           max(CASE WHEN NOT b AND e > s THEN _interval_pack(e, kb) ELSE kb END) OVER (ROWS UNBOUNDED PRECEDING) AS ra,
           max(CASE WHEN b AND e > s THEN _interval_pack(e, kb) ELSE kb END) OVER (ROWS UNBOUNDED PRECEDING) AS rb,
           max(CASE WHEN e > s THEN _interval_pack(e, kb) ELSE kb END) OVER (ROWS UNBOUNDED PRECEDING) AS rall
    FROM ordered
), before AS (  -- the reaches before each row, and the previous row's start (NULL: none in the key)
    SELECT kb, b, s, e, _interval_unpack(lag(ra) OVER (), kb) AS a0, _interval_unpack(lag(rb) OVER (), kb) AS b0,
           _interval_unpack(lag(rall) OVER (), kb) AS all0, _interval_unpack(lag(_interval_pack(s, kb)) OVER (), kb) AS prev_s
    FROM reach
), starts AS (
    SELECT kb, b, s, e, a0, b0, all0, prev_s,
           NOT b AND e > s AND (a0 IS NULL OR s > a0) AS a_start, b AND e > s AND (b0 IS NULL OR s > b0) AS b_start,
           e > s AND (all0 IS NULL OR s > all0) AS all_start
    FROM before
), islands AS (  -- on a start row, the start of the island before it (the current one's, carried);
    -- and the previous row's position, to check the order the passes saw
    SELECT kb, b, s, e, a_start, b_start, a0, b0, _interval_unpack(lag(sa) OVER (), kb) AS sa0,
           _interval_unpack(lag(sb) OVER (), kb) AS sb0, lag(_interval_pack(s, kb)) OVER () AS prev
    FROM (
        SELECT *, max(CASE WHEN a_start THEN _interval_pack(s, kb) ELSE kb END) OVER (ROWS UNBOUNDED PRECEDING) AS sa,
                  max(CASE WHEN b_start THEN _interval_pack(s, kb) ELSE kb END) OVER (ROWS UNBOUNDED PRECEDING) AS sb
        FROM starts)
), last AS (  -- per key: its final reaches and last island starts, span, last and first starts
    SELECT kb, max(e) FILTER (WHERE NOT b AND e > s) AS a1, max(e) FILTER (WHERE b AND e > s) AS b1,
           max(e) FILTER (WHERE e > s) AS all1, max(s) FILTER (WHERE a_start) AS sa1, max(s) FILTER (WHERE b_start) AS sb1,
           min(s) AS span_s, max(e) AS span_e, max(s) AS last_s, min(s) FILTER (WHERE e > s) AS first_s,
           bool_and(prev IS NULL OR prev <= _interval_pack(s, kb)) AS in_order
    FROM islands GROUP BY kb
), pieces AS (  -- b less a between consecutive starts, and after the last one
    SELECT kb, greatest(prev_s, a0) AS s, least(b0, s) AS e FROM starts  -- (greatest and least skip NULLs)
    WHERE prev_s IS NOT NULL AND b0 IS NOT NULL AND least(b0, s) > greatest(prev_s, a0)
    UNION ALL
    SELECT kb, greatest(last_s, a1), b1 FROM last WHERE b1 > greatest(last_s, a1)
), merged AS (
    SELECT kb, s, e, sum(CASE WHEN prev_e IS NULL OR s > prev_e THEN 1 ELSE 0 END)
               OVER (PARTITION BY kb ORDER BY s ROWS UNBOUNDED PRECEDING) AS island
    FROM (SELECT kb, s, e, lag(e) OVER (PARTITION BY kb ORDER BY s) AS prev_e FROM pieces)
), lanes AS (
    SELECT kb, 0 AS lane, sa0 AS s, a0 AS e FROM islands WHERE a_start AND sa0 IS NOT NULL
    UNION ALL SELECT kb, 0, sa1, a1 FROM last WHERE sa1 IS NOT NULL
    UNION ALL SELECT kb, 1, sb0, b0 FROM islands WHERE b_start AND sb0 IS NOT NULL
    UNION ALL SELECT kb, 1, sb1, b1 FROM last WHERE sb1 IS NOT NULL
    UNION ALL SELECT kb, 2, min(s), max(e) FROM merged GROUP BY kb, island
    UNION ALL SELECT kb, 3, all0, s FROM starts WHERE all_start AND all0 IS NOT NULL
    UNION ALL SELECT kb, 3, span_s, coalesce(first_s, span_e) FROM last WHERE coalesce(first_s, span_e) > span_s
    UNION ALL SELECT kb, 3, all1, span_e FROM last WHERE span_e > all1
)
SELECT k.key, l.lane, l.s, l.e FROM lanes l JOIN keys k USING (kb)
WHERE CASE WHEN (SELECT bool_and(in_order) FROM last) IS NOT false THEN true
           ELSE error('interval_lanes: rows reached the running maximum out of order') END;

-- The interval passes partition and sort by one integer key, which DuckDB's windows handle far
-- faster than a STRUCT with text in it: rank, the device's number in the run's sorted device list
-- and step (NULL apart from every step) packed into one HUGEINT, exactly; _unpack_key unpacks it.
CREATE OR REPLACE MACRO _pack_key(rank, device_no, step) AS
    ((rank::HUGEINT + 2147483648) << 82) + (device_no::HUGEINT << 65)
    + ((step IS NOT NULL)::INTEGER::HUGEINT << 64) + (coalesce(step, 0)::HUGEINT + 9223372036854775808);
CREATE OR REPLACE MACRO _unpack_key(key, devices) AS {
    'rank': ((key >> 82) - 2147483648)::INTEGER,
    'device': devices[((key >> 65) & 131071)::INTEGER],
    'step': CASE WHEN (key >> 64) & 1 = 1 THEN ((key & 18446744073709551615) - 9223372036854775808)::BIGINT END};

-- The lanes (the `lanes` table's columns): merged computing and communication, the communication
-- computing does not hide, and the free time of each span, from one sorted pass (`interval_lanes`)
-- over `activity` (rank, device, step, type 'Computing' or 'Communication', s, e); `devices` is
-- the sorted list of its device names. A key has lanes where its span is longer than 0.
CREATE OR REPLACE MACRO overlap_lanes(activity, devices) AS TABLE
WITH keyed AS (
    SELECT _pack_key(rank, list_position(devices, device), step) AS key, type = 'Communication' AS b, s, e
    FROM query_table(activity)
), lanes AS (
    SELECT _unpack_key(key, devices) AS key, lane, s, e FROM interval_lanes('keyed')
)
SELECT key.rank AS rank, key.device AS device, key.step AS step,
       ['Computing', 'Communication', 'Communication(Not Overlapped)', 'Free'][lane + 1] AS type, s AS ts, e - s AS dur
FROM lanes;
