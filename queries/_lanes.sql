-- view: _lanes
-- answers: the step breakdown from the Overlap Analysis lanes, in ns: per rank, device and step
--   the lanes' lengths (merged computing and communication, communication not overlapped, free
--   time) with receive ops, the span and the step's start; and the devices' Free by the rule
--   below. Macros that finalisation runs over the lanes the lane pass made (store/lane_pass.py),
--   stored in `lanes` and `lane_totals`.
-- requires:
-- scope: rank

-- The step breakdown from the lanes (`lanes`: the `lanes` table's columns): per rank, device and
-- step their lengths (Communication(Not Overlapped) = |computing ∪ communication| − |computing|),
-- the first activity longer than 0 and the span (the lanes cover it: Free fills what activity
-- does not, empty intervals included); with the receive ops' time (`receives`: rank, device,
-- step, dur) and the step's start (`step_records`: rank, step, ts; the earliest of a rank's
-- records of a step). The columns of the `lane_totals` table, with its types.
CREATE OR REPLACE MACRO step_lanes(lanes, receives, step_records) AS TABLE
WITH totals AS (
    SELECT rank, device, step,
           coalesce(sum(dur) FILTER (WHERE type = 'Computing'), 0) AS computing,
           coalesce(sum(dur) FILTER (WHERE type = 'Communication'), 0) AS communication,
           coalesce(sum(dur) FILTER (WHERE type = 'Communication(Not Overlapped)'), 0) AS not_overlapped,
           coalesce(sum(dur) FILTER (WHERE type = 'Free'), 0) AS free,
           min(ts) FILTER (WHERE type IN ('Computing', 'Communication')) AS first_active,
           min(ts) AS span_start, max(ts + dur) AS span_end
    FROM query_table(lanes) GROUP BY ALL
), bubble AS (
    SELECT rank, device, step, sum(dur) AS bubble FROM query_table(receives) GROUP BY ALL
), step_start AS (
    SELECT rank, step, min(ts) AS start FROM query_table(step_records) GROUP BY ALL
)
SELECT l.rank::INTEGER AS rank, l.device, l.step, l.computing::BIGINT AS computing,
       l.communication::BIGINT AS communication, l.not_overlapped::BIGINT AS not_overlapped,
       l.free::BIGINT AS free, coalesce(b.bubble, 0)::BIGINT AS bubble, l.first_active, l.span_start, l.span_end,
       h.start AS step_start
FROM totals l
LEFT JOIN bubble b ON b.rank = l.rank AND b.device = l.device AND b.step IS NOT DISTINCT FROM l.step
LEFT JOIN step_start h ON h.rank = l.rank AND h.step = l.step;

-- Free where a device's steps overlap (kernels of step N still running after step N+1's first):
-- a step's Free is the time its device runs no Computing or Communication of any step, within the
-- part of its span that no key before it holds (keys in order of their span's start, the records
-- outside every step last). So a step's Free never counts another step's kernel, and the Free of
-- a device's keys adds up to its idle time within the union of their spans. Where a device's
-- spans are disjoint this is each key's own Free (the gaps of its activity within its span).
-- The devices (rank, device) of `lanes` (per key, as the lane pass makes them) where two keys'
-- spans share time: those whose Free `device_free` computes.
CREATE OR REPLACE MACRO overlapping_devices(lanes) AS TABLE
SELECT DISTINCT rank, device FROM (
    SELECT rank, device, s, max(e) OVER (PARTITION BY rank, device ORDER BY s
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM (SELECT rank, device, step, min(ts) AS s, max(ts + dur) AS e FROM query_table(lanes) GROUP BY ALL))
WHERE s < reach;

-- The Free rows (the `lanes` table's columns) of the devices in `devices` (rank, device: those of
-- `overlapping_devices`) by the rule above. Algorithm: the keys' spans cut the device's time into
-- segments, each held by the first key in order whose span covers it (a key's window: its
-- segments merged); one sorted pass over all keys' activity and the windows' bounds yields the
-- gaps of the activity cut at those bounds, and each gap piece goes to the window it lies in.
CREATE OR REPLACE MACRO device_free(lanes, devices) AS TABLE
WITH spans AS (
    SELECT rank, device, step, min(ts) AS s, max(ts + dur) AS e FROM query_table(lanes)
    SEMI JOIN query_table(devices) USING (rank, device) GROUP BY ALL
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY rank, device ORDER BY step IS NULL, s, step) AS ord FROM spans
), bounds AS (
    SELECT DISTINCT rank, device, p FROM (SELECT rank, device, s AS p FROM spans UNION ALL SELECT rank, device, e FROM spans)
), segments AS (  -- between consecutive bounds: the first key in the order whose span holds it
    SELECT g.rank, g.device, g.s, g.e, min(r.ord) AS ord
    FROM (SELECT rank, device, p AS s, lead(p) OVER (PARTITION BY rank, device ORDER BY p) AS e FROM bounds) g
    JOIN ranked r ON r.rank = g.rank AND r.device = g.device AND r.s <= g.s AND g.e <= r.e
    GROUP BY ALL
), windows AS (  -- a key's segments, merged where they touch
    SELECT rank, device, ord, min(s) AS s, max(e) AS e FROM (
        SELECT *, sum(CASE WHEN prev_ord = ord AND prev_e = s THEN 0 ELSE 1 END)
                  OVER (PARTITION BY rank, device ORDER BY s ROWS UNBOUNDED PRECEDING) AS island
        FROM (SELECT *, lag(ord) OVER w AS prev_ord, lag(e) OVER w AS prev_e FROM segments
              WINDOW w AS (PARTITION BY rank, device ORDER BY s)))
    GROUP BY rank, device, ord, island
), busy AS (  -- all keys' activity on the device, with its range's ends as empty intervals
    SELECT rank, device, ts AS s, ts + dur AS e FROM query_table(lanes) SEMI JOIN query_table(devices) USING (rank, device)
    WHERE type IN ('Computing', 'Communication')
    UNION ALL
    SELECT rank, device, p, p FROM bounds
    QUALIFY p IN (min(p) OVER (PARTITION BY rank, device), max(p) OVER (PARTITION BY rank, device))
), sweep AS (  -- the activity, and the windows' bounds (`cut`) where its gaps are cut
    SELECT rank, device, s, e, false AS cut FROM busy
    UNION ALL
    SELECT DISTINCT rank, device, p, p, true FROM (SELECT rank, device, s AS p FROM windows UNION ALL SELECT rank, device, e FROM windows)
), pieces AS (  -- the gaps of the activity (from the reach of all before a start to it), cut at the bounds
    SELECT rank, device, greatest(reach, cut0) AS s, s AS e FROM (
        SELECT rank, device, s, max(e) FILTER (WHERE NOT cut) OVER w AS reach, max(s) FILTER (WHERE cut) OVER w AS cut0
        FROM sweep WINDOW w AS (PARTITION BY rank, device ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING))
    WHERE s > greatest(reach, cut0)  -- (greatest skips NULLs)
)
-- each piece lies in one window or none: the window starting last at or before it, if it ends in it
SELECT r.rank::INTEGER AS rank, r.device, r.step, 'Free' AS type, p.s::BIGINT AS ts, (p.e - p.s)::BIGINT AS dur
FROM pieces p
ASOF JOIN windows w ON w.rank = p.rank AND w.device = p.device AND p.s >= w.s
JOIN ranked r ON r.rank = w.rank AND r.device = w.device AND r.ord = w.ord
WHERE p.e <= w.e;

-- The lanes (`lanes`: per key, as the lane pass makes them) with Free by the rule above:
-- `devices` as `device_free` takes it, `free` its rows for them.
CREATE OR REPLACE MACRO device_lanes(lanes, devices, free) AS TABLE
SELECT rank, device, step, type, ts, dur FROM query_table(lanes) l
WHERE type <> 'Free' OR NOT EXISTS (SELECT 1 FROM query_table(devices) d WHERE d.rank = l.rank AND d.device = l.device)
UNION ALL
SELECT * FROM query_table(free);
