-- view: _api_groups
-- answers: what api_statistic counts, in groups of calls of one rank and step that share a level
--   and a name: runtime/driver API calls; for a rank that recorded none (CPU-only traces), its
--   framework ops. Per group: the calls, their summed, shortest and longest duration in ns, and the
--   population variance of their durations in µs². api_statistic merges the groups per API; a
--   comparison of runs sums them per step.
-- requires: slices, run_ranks, _classify
-- scope: rank
-- The calls are grouped by what was recorded (level argument, category, name) before the groups
-- are levelled and named: api_level and api_name on each of 10 M calls took as long as the whole
-- count besides (1.6 s against 0.8). Recorded names that name the same API (`AscendCL@aclrtFree`,
-- `aclrtFree`) stay groups of their own, which api_statistic merges.
-- The framework-op branch takes the ranks it is for (the run's, from its manifest, but those with
-- API calls) from a semi join, so where every rank has API calls (the usual case) the host ops are
-- not read at all; and the ranks with API calls are the groups', not a scan of their own (which
-- took 0.25 s at 12 M API calls, and another for the ranks with host ops, before).
CREATE OR REPLACE VIEW _api_groups AS
WITH recorded AS MATERIALIZED (
    SELECT rank, step, api_arg_level(args) AS arg_level, category, name, count(*) AS calls, sum(dur) AS total,
           min(dur) AS lo, max(dur) AS hi, var_pop(dur / 1000.0) AS var_us2
    FROM slices WHERE kind = 'api' GROUP BY rank, step, arg_level, category, name
)
SELECT rank, step, coalesce(arg_level, api_category_level(category)) AS level, api_name(name) AS name,
       calls, total, lo, hi, var_us2
FROM recorded
UNION ALL
SELECT rank, step, 'framework', name, count(*), sum(dur), min(dur), max(dur), var_pop(dur / 1000.0) FROM slices
WHERE kind = 'host_op' AND rank IN (SELECT rank FROM run_ranks EXCEPT SELECT rank FROM recorded)
GROUP BY rank, step, name;
