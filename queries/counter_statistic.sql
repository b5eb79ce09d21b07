-- view: counter_statistic
-- answers: what the sampled counters read — per rank, device, counter and series (CPU and memory
--   use the collector sampled, Ascend's AI Core frequency, HBM and LLC bandwidth, allocator
--   totals): samples, lowest, time-weighted average, highest and last value.
-- matches: the summary rows of msprof's hardware summaries (ai_core_freq, hbm, llc, npu_mem) and
--   of nsys's sampled metrics; the values over time are in `counters` (and the timeline).
-- requires: counters, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device, or `host`
-- column `Counter` VARCHAR: counter name (e.g. `HBM 0/Read`, `memory/PTA`, `cpu`)
-- column `Series` VARCHAR: series of the counter, which names its unit where the source does (e.g. `Read(MB/s)`, `KB`)
-- column `Samples` BIGINT: number of samples
-- column `Min` DOUBLE: lowest value
-- column `Avg` DOUBLE: average over time (each value holds until the next sample; the mean of the samples where there is one)
-- column `Max` DOUBLE: highest value
-- column `Last` DOUBLE: the last value
-- column `First Time(us)` DECIMAL(26,3): first sample, µs since the Unix epoch
-- column `Last Time(us)` DECIMAL(26,3): last sample, µs since the Unix epoch
-- Samples of one series at the same time (Ascend's per-accelerator rows) are taken in order of
-- value, so that which of them holds until the next time, and is the last, is the same however
-- the rows were stored.
WITH held AS (
    SELECT rank, device, name, series, ts, value,
           lead(ts) OVER (PARTITION BY rank, device, name, series ORDER BY ts, value) - ts AS held
    FROM counters WHERE value IS NOT NULL
)
SELECT rank AS "Rank", device AS "Device", name AS "Counter", series AS "Series", count(*) AS "Samples",
       min(value) AS "Min",
       round(coalesce(sum(value * held) / nullif(sum(held), 0), avg(value)), 6) AS "Avg",
       max(value) AS "Max", arg_max(value, (ts, value)) AS "Last",
       us_ts(min(ts)) AS "First Time(us)", us_ts(max(ts)) AS "Last Time(us)"
FROM held GROUP BY rank, device, name, series
ORDER BY "Rank", "Device", "Counter", "Series"
