-- view: op_statistic
-- answers: which op types take the time — per rank and device, count and time of each op type.
--   Device rows count compute kernels (as msprof: communication and memory copies have their own
--   reports) by op type — the source's (Ascend OP Type) or the framework op that launched them;
--   host rows (device `host`) count CPU ops by their self time, so nested ops never count twice.
-- matches: msprof op_statistic_*.csv; torch_npu op_statistic.csv.
-- requires: _op_calls, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device, or `host` for CPU ops
-- column `OP Type` VARCHAR: op type (framework op for device tasks; for CPU ops their op type where the source gives one, else their name)
-- column `Core Type` VARCHAR: core/task type (AI_CORE, AI_VECTOR_CORE, ... on Ascend; KERNEL on GPUs) or CPU
-- column `Count` BIGINT: number of tasks or ops
-- column `Total Time(us)` DOUBLE: summed duration (self time for CPU ops), µs
-- column `Min Time(us)` DOUBLE: shortest, µs
-- column `Avg Time(us)` DOUBLE: mean, µs
-- column `Max Time(us)` DOUBLE: longest, µs
-- column `Ratio(%)` DOUBLE: share of the device's total; sums to 100 per rank and device
WITH agg AS (
    SELECT rank, device, op_type, core_type, count(*) AS n, sum(dur) AS total, min(dur) AS lo,
           avg(dur) AS mean, max(dur) AS hi
    FROM _op_calls GROUP BY rank, device, op_type, core_type
)
SELECT rank AS "Rank", device AS "Device", op_type AS "OP Type", core_type AS "Core Type", n AS "Count",
       us(total) AS "Total Time(us)", us(lo) AS "Min Time(us)", us(mean) AS "Avg Time(us)", us(hi) AS "Max Time(us)",
       round(100.0 * total / nullif(sum(total) OVER (PARTITION BY rank, device), 0), 3) AS "Ratio(%)"
FROM agg
ORDER BY "Rank", "Device", total DESC, "OP Type"
