-- view: _overlap
-- answers: the overlap lanes in ns — merged computing, merged communication, communication not
--   overlapped by computing, and free time — per rank, device and step (`_overlap`, the base of
--   `overlap` and the timeline), and their lengths alone (`_overlap_totals`, the base of `step_trace`).
-- requires: slices, _intervals, _tasks
--
-- Activity: on a device, compute kernels are Computing and collective kernels Communication
-- (memcpy/memset are neither, as in Ascend's Overlap Analysis). A rank with no device records
-- (CPU-only trace) is analysed on its host: CPU ops are Computing, gloo/NCCL ranges Communication.
-- Span of a step on a device: from its first to its last activity (as torch_npu's Overlap
-- Analysis lanes: time before the first activity is the step's Preparing, not Free).
CREATE OR REPLACE VIEW _activity AS
SELECT rank, device, step, CASE WHEN kind = 'comm' THEN 'Communication' ELSE 'Computing' END AS type,
       ts AS s, ts + dur AS e
FROM slices WHERE device <> 'host' AND kind IN ('kernel', 'comm')
UNION ALL
SELECT rank, device, step, CASE WHEN kind = 'comm' THEN 'Communication' ELSE 'Computing' END, ts, ts + dur
FROM slices WHERE device = 'host' AND kind IN ('host_op', 'comm') AND rank IN (SELECT rank FROM _host_only_ranks);

-- The interval passes partition and sort by one integer key, which DuckDB's windows handle far
-- faster than a STRUCT with text in it: rank, the device's number in the run's sorted device list
-- and step (NULL apart from every step) packed into one HUGEINT, exactly; _overlap unpacks it.
CREATE OR REPLACE MACRO _pack_key(rank, device_no, step) AS
    ((rank::HUGEINT + 2147483648) << 82) + (device_no::HUGEINT << 65)
    + ((step IS NOT NULL)::INTEGER::HUGEINT << 64) + (coalesce(step, 0)::HUGEINT + 9223372036854775808);
CREATE OR REPLACE MACRO _unpack_key(key, devices) AS {
    'rank': ((key >> 82) - 2147483648)::INTEGER,
    'device': devices[((key >> 65) & 131071)::INTEGER],
    'step': CASE WHEN (key >> 64) & 1 = 1 THEN ((key & 18446744073709551615) - 9223372036854775808)::BIGINT END};

-- Lanes: Computing and Communication are the unions of their activity; Communication(Not
-- Overlapped) is merged communication minus merged computing, where only computing that meets
-- communication can hide any (found by an ASOF join: the latest communication island starting
-- before a computing island ends), so the subtraction's sweep sees few intervals; Free is the gaps
-- of all activity within the span from the first to the last activity. The activity is read once.
CREATE OR REPLACE VIEW _overlap AS
WITH devices AS (
    SELECT list(DISTINCT device ORDER BY device) AS names FROM slices
), activity AS MATERIALIZED (
    SELECT _pack_key(rank, list_position((SELECT names FROM devices), device), step) AS key, type, s, e FROM _activity
), computing AS (
    SELECT key, s, e FROM activity WHERE type = 'Computing'
), communication AS (
    SELECT key, s, e FROM activity WHERE type = 'Communication'
), computing_union AS MATERIALIZED (
    SELECT key, s, e FROM interval_union('computing')
), communication_union AS MATERIALIZED (
    SELECT key, s, e FROM interval_union('communication')
), hiding AS (
    SELECT c.key, c.s, c.e FROM computing_union c
    ASOF JOIN communication_union m ON m.key = c.key AND c.e > m.s
    WHERE m.e > c.s
), lanes AS (
    SELECT key, 'Computing' AS type, s, e FROM computing_union
    UNION ALL SELECT key, 'Communication', s, e FROM communication_union
    UNION ALL SELECT key, 'Communication(Not Overlapped)', s, e FROM interval_subtract('communication_union', 'hiding')
    UNION ALL SELECT key, 'Free', s, e FROM interval_gaps('activity')
)
SELECT _unpack_key(key, (SELECT names FROM devices)) AS key, type, s, e FROM lanes;

-- The lanes' lengths and spans without the lanes, from one sorted pass (`interval_totals`):
-- Communication(Not Overlapped) is all activity's union less computing's (|B − A| = |A ∪ B| − |A|),
-- Free the span less all activity's union. A key has a row where _overlap has lanes: where its
-- span is longer than 0.
CREATE OR REPLACE VIEW _overlap_totals AS
WITH devices AS (
    SELECT list(DISTINCT device ORDER BY device) AS names FROM slices
), activity AS (
    SELECT _pack_key(rank, list_position((SELECT names FROM devices), device), step) AS key,
           type = 'Communication' AS b, s, e
    FROM _activity
), totals AS (
    SELECT _unpack_key(key, (SELECT names FROM devices)) AS key, a_len, b_len, ab_len, first_s, span_s, span_e
    FROM interval_totals('activity')
)
SELECT key.rank AS rank, key.device AS device, key.step AS step, a_len AS computing, b_len AS comm,
       ab_len - a_len AS not_overlapped, span_e - span_s - ab_len AS free, first_s AS first_active,
       span_s AS span_start, span_e AS span_end
FROM totals WHERE span_e > span_s;
