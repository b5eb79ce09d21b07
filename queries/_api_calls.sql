-- view: _api_calls
-- answers: what api_statistic counts, one row per call with its step: runtime/driver API calls by
--   level and name; for a rank that recorded none (CPU-only traces), its framework ops; in ns.
--   api_statistic sums it per API; a comparison of runs takes it per step.
-- requires: slices, _classify
CREATE OR REPLACE VIEW _api_calls AS
WITH api_ranks AS (SELECT DISTINCT rank FROM slices WHERE kind = 'api')
SELECT rank, step, api_level(category, args) AS level, api_name(name) AS name, dur
FROM slices WHERE kind = 'api'
UNION ALL
SELECT rank, step, 'framework', name, dur FROM slices
WHERE kind = 'host_op' AND rank NOT IN (SELECT rank FROM api_ranks);
