-- view: api_statistic
-- answers: which host API calls take the time — runtime/driver calls (cudaLaunchKernel, ...) per
--   rank; for a rank that recorded none (CPU-only traces), its framework ops.
-- matches: msprof api_statistic_*.csv; torch_npu api_statistic.csv.
-- requires: _api_groups, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Level` VARCHAR: acl, node, hccl, runtime (CANN levels); runtime, driver (CUDA/HIP); framework (CPU ops)
-- column `API Name` VARCHAR: API or op name
-- column `Time(us)` DOUBLE: summed duration, µs
-- column `Count` BIGINT: number of calls
-- column `Avg(us)` DOUBLE: mean duration, µs
-- column `Min(us)` DOUBLE: shortest, µs
-- column `Max(us)` DOUBLE: longest, µs
-- column `Variance` DOUBLE: population variance of the durations in µs²
-- The groups of a rank's API merged: their variances by Chan et al.'s pairwise formula, the
-- variance within the groups plus that between their means (both sums of non-negative terms).
WITH groups AS (
    SELECT *, sum(total) OVER api / sum(calls) OVER api AS mean
    FROM _api_groups WINDOW api AS (PARTITION BY rank, level, name)
)
SELECT rank AS "Rank", level AS "Level", name AS "API Name", us(sum(total)) AS "Time(us)", sum(calls)::BIGINT AS "Count",
       us(sum(total) / sum(calls)) AS "Avg(us)", us(min(lo)) AS "Min(us)", us(max(hi)) AS "Max(us)",
       round((sum(var_us2 * calls) + sum(calls * ((total / calls - mean) / 1000.0) ** 2)) / sum(calls), 3) AS "Variance"
FROM groups GROUP BY rank, level, name
ORDER BY "Rank", sum(total) DESC, "API Name"
