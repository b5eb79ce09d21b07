-- view: iteration_trace
-- answers: where each graph-mode iteration's time went on each device, as CANN's training trace
--   marks it — forward start, backward end, iteration end, the forward+backward time, the refresh
--   after it (optimizer, all-reduce tail), the data-augmentation gap before it, and the reduces.
-- matches: msprof step_trace_*.csv (graph mode: `Iteration N`, `FP_BP Time N`, `Iteration Refresh N`
--   and `Reduce_N_k` of the timeline's Step Trace lane); the reduces are summed here, where msprof
--   repeats a Reduce Start/Duration pair per reduce. Runs without a training trace have no rows.
-- requires: slices, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Iteration ID` BIGINT: iteration (the run's step)
-- column `FP Start(us)` DECIMAL(26,3): forward start, µs since the Unix epoch
-- column `BP End(us)` DECIMAL(26,3): backward end, µs since the Unix epoch
-- column `Iteration End(us)` DECIMAL(26,3): iteration end, µs since the Unix epoch
-- column `Iteration Time(us)` DOUBLE: the iteration's duration, µs
-- column `FP to BP Time(us)` DOUBLE: BP End − FP Start, µs
-- column `Iteration Refresh(us)` DOUBLE: Iteration End − BP End, µs
-- column `Data Aug Bound(us)` DOUBLE: FP Start − the previous iteration's end (NULL for the first), µs
-- column `Reduce Count` BIGINT: reduces (all-reduce ranges) in the iteration
-- column `Reduce Start(us)` DECIMAL(26,3): the first reduce's start, µs since the Unix epoch
-- column `Reduce Time(us)` DOUBLE: summed duration of the reduces, µs
WITH marks AS (
    SELECT rank, device, step, ts, dur,
           CASE WHEN kind = 'step' THEN 'iteration' WHEN name LIKE 'FP\_BP Time %' ESCAPE '\' THEN 'fp_bp'
                WHEN name LIKE 'Iteration Refresh %' THEN 'refresh' WHEN name LIKE 'Reduce\_%' ESCAPE '\' THEN 'reduce' END AS mark
    FROM slices
    WHERE device <> 'host' AND (kind = 'step' OR (kind = 'device_range' AND (name LIKE 'FP\_BP Time %' ESCAPE '\'
          OR name LIKE 'Iteration Refresh %' OR name LIKE 'Reduce\_%' ESCAPE '\')))
), iterations AS (
    SELECT rank, device, step,
           min(ts) FILTER (WHERE mark = 'fp_bp') AS fp, max(ts + dur) FILTER (WHERE mark = 'fp_bp') AS bp,
           max(ts + dur) FILTER (WHERE mark = 'iteration') AS iter_end, max(dur) FILTER (WHERE mark = 'iteration') AS iter,
           max(dur) FILTER (WHERE mark = 'refresh') AS refresh,
           count(*) FILTER (WHERE mark = 'reduce') AS reduces, min(ts) FILTER (WHERE mark = 'reduce') AS reduce_start,
           sum(dur) FILTER (WHERE mark = 'reduce') AS reduce_time
    FROM marks GROUP BY rank, device, step
    HAVING count(*) FILTER (WHERE mark = 'fp_bp') > 0  -- a training trace, not just steps
)
SELECT rank AS "Rank", device AS "Device", step AS "Iteration ID", us_ts(fp) AS "FP Start(us)", us_ts(bp) AS "BP End(us)",
       us_ts(iter_end) AS "Iteration End(us)", us(iter) AS "Iteration Time(us)", us(bp - fp) AS "FP to BP Time(us)",
       us(refresh) AS "Iteration Refresh(us)",
       us(fp - lag(iter_end) OVER (PARTITION BY rank, device ORDER BY step)) AS "Data Aug Bound(us)",
       reduces AS "Reduce Count", us_ts(reduce_start) AS "Reduce Start(us)", us(coalesce(reduce_time, 0)) AS "Reduce Time(us)"
FROM iterations
ORDER BY "Rank", "Device", "Iteration ID"
