-- view: _api_calls
-- answers: what api_statistic counts, one row per call with its step: runtime/driver API calls by
--   level and name; for a rank that recorded none (CPU-only traces), its framework ops; in ns.
--   api_statistic sums it per API; a comparison of runs takes it per step.
-- requires: slices, _classify
-- The framework-op branch takes the ranks it is for from a semi join, so where every rank has API
-- calls (the usual case) the host ops are not read at all.
CREATE OR REPLACE VIEW _api_calls AS
SELECT rank, step, api_level(category, args) AS level, api_name(name) AS name, dur
FROM slices WHERE kind = 'api'
UNION ALL
SELECT rank, step, 'framework', name, dur FROM slices
WHERE kind = 'host_op' AND rank IN (SELECT DISTINCT rank FROM slices WHERE kind = 'host_op'
                                    EXCEPT SELECT DISTINCT rank FROM slices WHERE kind = 'api');
