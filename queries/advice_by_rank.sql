-- view: advice_by_rank
-- answers: advice's findings one per rank and device — each with that device's own numbers, what
--   it suggests, which views show it and a query over them that does (`advice` groups them by rule
--   over the ranks; the rules, thresholds and algorithm are documented in queries/advice.sql).
-- matches: the rules of msprof-analyze's advisor and HTA's analyses, per rank (as they report them).
-- requires: _advice_findings
-- scope: cluster
-- column `Rank` INTEGER: global rank the finding is about
-- column `Device` VARCHAR: its device (`host` for a rank without device records: its CPU ops are the activity)
-- column `Rule` VARCHAR: exposed_communication, host_sync, pageable_copies, slow_dataloader, slow_step_start, device_idle, launch_bound, slow_rank
-- column `Severity` VARCHAR: high (over the rule's second threshold: 30 % of the steps' time, 3 in 4 tasks launch-bound, a rank slow in 2 steps or more) or medium
-- column `Finding` VARCHAR: what the numbers say
-- column `Suggestion` VARCHAR: what usually helps
-- column `Views` VARCHAR: where to look next
-- column `Share(%)` DOUBLE: the time the finding holds, as a share of the device's steps' time (NULL where not a time); a device's shares add up to 100 % at most
-- column `Query` VARCHAR: a query over the views above that shows the finding's numbers
SELECT rank AS "Rank", device AS "Device", rule AS "Rule",
       CASE WHEN severe THEN 'high' ELSE 'medium' END AS "Severity",
       finding AS "Finding", suggestion AS "Suggestion", views AS "Views", round(100 * share, 1) AS "Share(%)",
       format(query, format('"Rank" = {} AND "Device" = ''{}''', rank, replace(device, '''', '''''')), rank) AS "Query"
FROM _advice_findings
ORDER BY CASE "Severity" WHEN 'high' THEN 0 ELSE 1 END, share DESC NULLS LAST, "Rank", "Rule", "Device"
