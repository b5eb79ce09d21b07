-- view: advice
-- answers: what to look at first — findings from the other views that cost a training job time,
--   each with the numbers behind it, what it suggests, which views show it and a query over them
--   that does: communication not hidden by compute, the device idle after the host's
--   synchronizations, during copies from pageable memory, waiting for the DataLoader, before each
--   step's first work and otherwise, launch-bound kernels, slow ranks.
-- matches: the rules of msprof-analyze's advisor and HTA's analyses (idle time, launch stats,
--   communication overlap), as thresholds over this run's views.
-- requires: _advice_rank, slow_rank
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
WITH findings AS (  -- the rank's own findings (`_advice_rank`), then the ranks slower than the others
    SELECT * FROM _advice_rank
    UNION ALL
    SELECT "Rank", any_value("Device"), 'slow_rank', NULL, count(DISTINCT "Step") >= 2,
           format('slower than the other ranks in {} step(s): {} (up to {:,.0f} µs over the median)', count(DISTINCT "Step"),
                  string_agg(DISTINCT "Component", ', ' ORDER BY "Component"), max("Excess(us)")),
           'the other ranks wait for it in their collectives: compare its step_trace with theirs (a slower device, host, data loading or link)',
           'slow_rank, cluster_step_trace',
           'SELECT * FROM slow_rank WHERE "Rank" = {1} ORDER BY "Step", "Component"'
    FROM slow_rank GROUP BY "Rank"
)
SELECT rank AS "Rank", device AS "Device", rule AS "Rule",
       CASE WHEN severe THEN 'high' ELSE 'medium' END AS "Severity",
       finding AS "Finding", suggestion AS "Suggestion", views AS "Views", round(100 * share, 1) AS "Share(%)",
       format(query, format('"Rank" = {} AND "Device" = ''{}''', rank, replace(device, '''', '''''')), rank) AS "Query"
FROM findings
ORDER BY CASE "Severity" WHEN 'high' THEN 0 ELSE 1 END, share DESC NULLS LAST, "Rank", "Rule", "Device"
