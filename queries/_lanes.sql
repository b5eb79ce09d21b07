-- view: _lanes
-- answers: the Overlap Analysis lanes per rank, device and step, in ns: their intervals, and for
--   the step breakdown their lengths (merged computing and communication, communication not
--   overlapped, free time) with receive ops, the span and the step's start. Macros over tables of
--   intervals, shared by the views (for runs that do not store them) and by the finalisation of
--   an import (which stores them in `lanes` and `lane_totals`).
-- requires: _intervals

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
