-- view: _durations
-- answers: the duration statistics nsys stats prints per name, written once: kernel_statistic,
--   range_statistic and communication_statistic call it on their records.
-- requires:
-- scope: rank
-- `records`: a table or view with rank, device, name and dur (ns). Per rank, device and name: the
-- share of the device's summed time, the total, count, mean, median, shortest, longest and sample
-- standard deviation (0 for one record), in ns.
CREATE OR REPLACE MACRO duration_stats(records) AS TABLE
SELECT rank, device, name, 100.0 * sum(dur) / nullif(sum(sum(dur)) OVER (PARTITION BY rank, device), 0) AS share,
       sum(dur) AS total, count(*) AS n, avg(dur) AS mean, median(dur) AS med, min(dur) AS lo, max(dur) AS hi,
       coalesce(stddev_samp(dur), 0) AS sd
FROM query_table(records) GROUP BY rank, device, name;
