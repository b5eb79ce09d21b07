-- view: advice
-- answers: what to look at first — findings from the other views that cost a training job time,
--   one per finding over the ranks it holds on (their min/median/max), each with the numbers
--   behind it, what it suggests, which views show it and a query over them that does:
--   communication not hidden by compute, the device idle after the host's
--   synchronizations, during copies from pageable memory, waiting for the DataLoader, before each
--   step's first work and otherwise, launch-bound kernels, slow ranks.
-- matches: the rules of msprof-analyze's advisor and HTA's analyses (idle time, launch stats,
--   communication overlap), as thresholds over this run's views.
-- requires: _advice_findings, _ranks
-- scope: cluster
-- One row per finding: a rule's findings on every rank and device it fired on, grouped (a rank's
-- own numbers: `advice_by_rank`). Over one device the finding is that device's sentence; over
-- several it gives the ranks and the minimum–maximum (median) over them of the number each rank's
-- finding leads with (a share of the steps' time, of the tasks, or µs from the median).
-- column `Rule` VARCHAR: exposed_communication, host_sync, pageable_copies, slow_dataloader, slow_step_start, device_idle, launch_bound, slow_rank
-- column `Severity` VARCHAR: high (over the rule's second threshold on one of its ranks at least: 30 % of the steps' time, 3 in 4 tasks launch-bound, a rank slow in 2 steps or more) or medium
-- column `Ranks` VARCHAR: the ranks it fired on, runs of consecutive ranks as ranges ("0-3,6")
-- column `Devices` BIGINT: how many devices it fired on (a rank's device, or its host where it has no device records)
-- column `Finding` VARCHAR: what the numbers say
-- column `Suggestion` VARCHAR: what usually helps (on several devices: the worst one's)
-- column `Views` VARCHAR: where to look next
-- column `Share(%)` DOUBLE: the time the finding holds, as a share of the device's steps' time, on its worst device (NULL where not a time); a device's shares add up to 100 % at most
-- column `Min` DOUBLE: the smallest over its devices of the number the finding leads with, in `Unit`
-- column `Median` DOUBLE: their median
-- column `Max` DOUBLE: their largest
-- column `Unit` VARCHAR: % (of the steps' time; launch_bound: of the tasks) or µs (slow_rank: from its group's median)
-- column `Query` VARCHAR: a query over the views above that shows the finding's numbers, on all its ranks
-- A time rule counts only time lost to the device (a rank without device records: to its host),
-- within its steps' time: the union of each step's span (first to last Computing or
-- Communication, step_trace) and of the time before it from the host's step start, where no
-- step's span runs (Preparing less what an earlier step's span holds). Each instant of it is
-- one rule's at most, first that applies of:
--   exposed_communication: communication no computing hides (Communication(Not Overlapped));
--   host_sync: idle in a stream's gap that a synchronization call ended in and whose task the
--     host launched after the gap began (idle_time's `host wait`): the device drained, then
--     waited for the host; a host blocked while the device works loses nothing;
--   pageable_copies: idle while a copy to or from pageable host memory ran;
--   slow_dataloader: idle while the host waited for the next batch (`enumerate(DataLoader)...__next__`);
--   slow_step_start: the rest of the idle before each step's first work;
--   device_idle: the rest of the idle within the steps' spans (Free).
-- Idle: no Computing or Communication of any step (step_trace's Free and the time before a span).
-- Thresholds: 10 % of the steps' time is a finding, 30 % a high one (host_sync: 5 %,
-- pageable_copies: 1 %); launch-bound: half of at least 100 tasks shorter than their launch call
-- (a CUDA graph's tasks do not count: one call launched them all); slow_rank: as slow_rank lists
-- ranks (3 ranks or more). A rank without device records is checked for the rules that apply to
-- its host: exposed_communication, slow_dataloader, slow_step_start and slow_rank.
-- Algorithm of the shares: the steps' spans, the time before them, the causes' intervals and the
-- Free intervals that share time with a cause cut each device's time at every start and end (+1
-- at a start, -1 at an end, a cumulative sum per class); each piece between two cuts goes to the
-- first rule that covers it.
WITH f AS (
    SELECT * FROM _advice_findings
), groups AS (  -- per rule (a host's findings apart from devices'), over the devices it fired on
    SELECT rule, device = 'host' AS on_host, count(*) AS n, bool_or(severe) AS severe, bool_and(severe) AS all_severe,
           rank_ranges(list(rank)) AS ranks, rank_ranges(list(rank) FILTER (WHERE severe)) AS severe_ranks,
           min(value) AS lo, median(value) AS mid, max(value) AS hi, any_value(unit) AS unit,
           max(share) AS share, arg_max(suggestion, coalesce(share, value)) AS suggestion, any_value(views) AS views,
           any_value(finding) AS finding, any_value(query) AS query,
           -- the query's {0}: its devices; {1}: its ranks
           CASE WHEN count(*) = 1
                THEN format('"Rank" = {} AND "Device" = ''{}''', any_value(rank), replace(any_value(device), '''', ''''''))
                ELSE format('("Rank", "Device") IN ({})',
                            string_agg(format('({}, ''{}'')', rank, replace(device, '''', '''''')), ', ' ORDER BY rank, device)) END AS devices,
           array_to_string(list_sort(list(DISTINCT rank)), ', ') AS rank_list
    FROM f GROUP BY rule, device = 'host'
), worded AS (
    SELECT *, CASE WHEN unit = '%' THEN
                   CASE WHEN round(lo, 1) = round(hi, 1) THEN format('{:.1f} %', hi)
                        ELSE format('{:.1f}–{:.1f} % (median {:.1f} %)', lo, hi, mid) END
              ELSE CASE WHEN round(lo) = round(hi) THEN format('{:,.0f} µs', hi)
                        ELSE format('{:,.0f}–{:,.0f} µs (median {:,.0f} µs)', lo, hi, mid) END END AS r,
              CASE WHEN on_host THEN 'host' ELSE 'device' END AS what
    FROM groups
)
SELECT rule AS "Rule", CASE WHEN severe THEN 'high' ELSE 'medium' END AS "Severity", ranks AS "Ranks", n AS "Devices",
       CASE WHEN n = 1 THEN finding ELSE CASE rule
           WHEN 'exposed_communication' THEN format('communication not hidden by computation took {} of the steps'' time on ranks {}', r, ranks)
           WHEN 'host_sync' THEN format('the device sat idle {} of the steps'' time after the host''s synchronizations, until the host launched again, on ranks {}', r, ranks)
           WHEN 'pageable_copies' THEN format('copies to or from pageable host memory left the device idle {} of the steps'' time on ranks {}', r, ranks)
           WHEN 'slow_dataloader' THEN format('waiting for the DataLoader left the {} idle {} of the steps'' time on ranks {}', what, r, ranks)
           WHEN 'slow_step_start' THEN format('the {} idled before each step''s first {} {} of the steps'' time on ranks {}',
                                              what, CASE WHEN on_host THEN 'op' ELSE 'device work' END, r, ranks)
           WHEN 'device_idle' THEN format('the device was idle {} of its steps on ranks {}', r, ranks)
           WHEN 'launch_bound' THEN format('{} of the device tasks ran shorter than the runtime call that launched them, on ranks {}', r, ranks)
           WHEN 'slow_rank' THEN format('ranks {} are slower than the other ranks of their group, which wait for them in their collectives: by {} from the group''s median', ranks, r)
           ELSE format('{} on ranks {}: {}', rule, ranks, r) END
           || CASE WHEN severe AND NOT all_severe THEN format('; over the high threshold on ranks {}', severe_ranks) ELSE '' END
       END AS "Finding",
       suggestion AS "Suggestion", views || CASE WHEN n > 1 THEN ', advice_by_rank' ELSE '' END AS "Views",
       round(100 * share, 1) AS "Share(%)", round(lo, 3) AS "Min", round(mid, 3) AS "Median", round(hi, 3) AS "Max", unit AS "Unit",
       format(query, devices, rank_list) AS "Query"
FROM worded
ORDER BY CASE "Severity" WHEN 'high' THEN 0 ELSE 1 END, share DESC NULLS LAST, "Rule", "Ranks"
