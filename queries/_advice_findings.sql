-- view: _advice_findings
-- answers: advice's findings, one per rule and device: each rank's own (`_advice_rank`), then the
--   ranks slower than the others (`slow_rank`); `advice_by_rank` shows them one per device,
--   `advice` one per rule over the ranks (algorithm and thresholds: queries/advice.sql).
-- requires: _advice_rank, slow_rank
-- scope: cluster
CREATE OR REPLACE VIEW _advice_findings AS
SELECT * FROM _advice_rank
UNION ALL
-- the value a slow rank's finding leads with: how far it stands out from its group, at most, µs
SELECT "Rank", any_value("Device"), 'slow_rank', NULL, count(DISTINCT "Step") >= 2,
       format('slower than the other ranks of its group ({}) in {} step(s): {} (up to {:,.0f} µs from the median; threshold 5 % of the mean step, {:,.0f} µs)',
              any_value("Compared With"), count(DISTINCT "Step"),
              string_agg(DISTINCT "Component" || ' ' || "Direction", ', ' ORDER BY "Component" || ' ' || "Direction"),
              max("Excess(us)"), min("Threshold(us)")),
       'the other ranks wait for it in their collectives: compare its step_trace with theirs (a slower device, host, data loading or link)',
       'slow_rank, cluster_step_trace',
       'SELECT "Rank", "Device", "Step", "Component", "Direction", "Value(us)", "Median(us)", "Excess(us)", "Threshold(us)", "Compared With" FROM slow_rank WHERE "Rank" IN ({1}) ORDER BY "Rank", "Step", "Component"',
       max("Excess(us)"), 'µs'
FROM slow_rank GROUP BY "Rank";
