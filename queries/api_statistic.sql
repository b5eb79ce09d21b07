-- view: api_statistic
-- answers: which host API calls take the time — runtime/driver calls (cudaLaunchKernel, ...) per
--   rank; for a rank that recorded none (CPU-only traces), its framework ops.
-- matches: msprof api_statistic_*.csv; torch_npu api_statistic.csv.
-- requires: slices, _units, _classify
-- column `Rank` INTEGER: global rank
-- column `Level` VARCHAR: acl, node, hccl, runtime (CANN levels); runtime, driver (CUDA/HIP); framework (CPU ops)
-- column `API Name` VARCHAR: API or op name
-- column `Time(us)` DOUBLE: summed duration, µs
-- column `Count` BIGINT: number of calls
-- column `Avg(us)` DOUBLE: mean duration, µs
-- column `Min(us)` DOUBLE: shortest, µs
-- column `Max(us)` DOUBLE: longest, µs
-- column `Variance` DOUBLE: population variance of the durations in µs²
WITH api_ranks AS (SELECT DISTINCT rank FROM slices WHERE kind = 'api'),
calls AS (
    SELECT rank, api_level(category, args) AS level, api_name(name) AS name, dur
    FROM slices WHERE kind = 'api'
    UNION ALL
    SELECT rank, 'framework', name, dur FROM slices
    WHERE kind = 'host_op' AND rank NOT IN (SELECT rank FROM api_ranks)
)
SELECT rank AS "Rank", level AS "Level", name AS "API Name", us(sum(dur)) AS "Time(us)", count(*) AS "Count",
       us(avg(dur)) AS "Avg(us)", us(min(dur)) AS "Min(us)", us(max(dur)) AS "Max(us)",
       round(var_pop(dur / 1000.0), 3) AS "Variance"
FROM calls GROUP BY ALL
ORDER BY "Rank", sum(dur) DESC, "API Name"
