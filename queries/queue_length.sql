-- view: queue_length
-- answers: how far the host runs ahead of each device stream — per rank, device, stream and step,
--   the number of tasks launched but not yet started (one more at each launch call, one less at
--   each task's start), summed up over its changes: a queue near 0 means the device waits for
--   the host, a long one that the host is ahead (and blocks once the queue is full: 1024 on CUDA).
-- matches: HTA get_queue_length_summary (count, mean, std, min, quartiles, max of the queue length
--   time series: its values at each change, not weighted by time).
-- requires: _task_launches
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Stream` BIGINT: stream (queue) the tasks ran on
-- column `Step` BIGINT: training step of the tasks (NULL outside every step)
-- column `Count` BIGINT: changes of the queue length (two per task: its launch and its start)
-- column `Mean` DOUBLE: mean queue length over the changes
-- column `Std` DOUBLE: its sample standard deviation
-- column `Min` BIGINT: shortest queue
-- column `P25` DOUBLE: 25th percentile (interpolated, as pandas' describe)
-- column `Median` DOUBLE: 50th percentile
-- column `P75` DOUBLE: 75th percentile
-- column `Max` BIGINT: longest queue
-- A task's launch call is kernel_launch's (`_task_launches`); a task without one in the trace is
-- left out. The queue is counted over each stream's whole run, in time order (a launch before a
-- start at the same time); the steps split its values by the step of the task that changed it.
WITH launched AS (
    SELECT rank, device, stream, step, ts, launch_ts FROM _task_launches WHERE launch_ts IS NOT NULL
), changes AS (  -- both of a task's changes from one pass over the tasks
    SELECT rank, device, stream, step, unnest([launch_ts, ts]) AS ts, unnest([1, -1]) AS d FROM launched
), series AS (
    SELECT rank, device, stream, step,
           sum(d) OVER (PARTITION BY rank, device, stream ORDER BY ts, d DESC ROWS UNBOUNDED PRECEDING) AS queue
    FROM changes
), hist AS MATERIALIZED (  -- the queue is a small integer: its quantiles come from a histogram, not from every value held
    SELECT rank, device, stream, step, queue, count(*) AS n FROM series GROUP BY ALL
), stats AS (
    SELECT rank, device, stream, step, sum(n) AS n, sum(n * queue) / sum(n) AS mean,
           sqrt(greatest(sum(n * queue * queue) - sum(n * queue) * sum(n * queue) / sum(n), 0) / nullif(sum(n) - 1, 0)) AS std,
           min(queue) AS lo, max(queue) AS hi
    FROM hist GROUP BY ALL
), cum AS (  -- the positions each value takes in the sorted series: [first, first + n)
    SELECT *, sum(n) OVER (PARTITION BY rank, device, stream, step ORDER BY queue) - n AS first FROM hist
), positions AS (  -- each quartile's position, and the two values around it
    SELECT s.rank, s.device, s.stream, s.step, p.p, p.p * (s.n - 1) AS pos, k.k
    FROM stats s, (VALUES (0.25), (0.5), (0.75)) p(p), LATERAL (SELECT unnest([floor(p.p * (s.n - 1)), ceil(p.p * (s.n - 1))]) AS k) k
), quartiles AS (  -- interpolated between them, as pandas' describe and quantile_cont do
    SELECT x.rank, x.device, x.stream, x.step, x.p, min(c.queue) + (any_value(x.pos) - floor(any_value(x.pos))) * (max(c.queue) - min(c.queue)) AS v
    FROM positions x JOIN cum c ON c.rank = x.rank AND c.device = x.device AND c.stream = x.stream
     AND c.step IS NOT DISTINCT FROM x.step AND c.first <= x.k AND x.k < c.first + c.n
    GROUP BY x.rank, x.device, x.stream, x.step, x.p
)
SELECT s.rank AS "Rank", s.device AS "Device", s.stream AS "Stream", s.step AS "Step", s.n::BIGINT AS "Count",
       round(s.mean, 6) AS "Mean", round(s.std, 6) AS "Std", s.lo::BIGINT AS "Min",
       any_value(q.v) FILTER (WHERE q.p = 0.25)::DOUBLE AS "P25", any_value(q.v) FILTER (WHERE q.p = 0.5)::DOUBLE AS "Median",
       any_value(q.v) FILTER (WHERE q.p = 0.75)::DOUBLE AS "P75", s.hi::BIGINT AS "Max"
FROM stats s JOIN quartiles q ON q.rank = s.rank AND q.device = s.device AND q.stream = s.stream AND q.step IS NOT DISTINCT FROM s.step
GROUP BY s.rank, s.device, s.stream, s.step, s.n, s.mean, s.std, s.lo, s.hi
ORDER BY "Rank", "Device", "Stream", "Step" NULLS FIRST
