-- view: advice
-- answers: what to look at first — findings from the other views that usually cost a training
--   job time, each with the numbers behind it, what it suggests and which views show it: the
--   device idle within its steps, communication not hidden by compute, a slow start of each step,
--   waiting for the DataLoader, launch-bound kernels, copies from pageable memory, the host
--   waiting on the device, slow ranks.
-- matches: the rules of msprof-analyze's advisor and HTA's analyses (idle time, launch stats,
--   communication overlap), as thresholds over this run's views.
-- requires: step_trace, _overlap, _task_launches, memcpy_statistic, api_statistic, slow_rank, slices, _classify, run_ranks
-- column `Rank` INTEGER: global rank the finding is about
-- column `Device` VARCHAR: its device (`host` for findings about the host)
-- column `Rule` VARCHAR: device_idle, exposed_communication, slow_step_start, slow_dataloader, launch_bound, pageable_copies, host_sync, slow_rank
-- column `Severity` VARCHAR: high (over the rule's second threshold: 30 % of the steps' time, 3 in 4 tasks launch-bound, a rank slow in 2 steps or more) or medium
-- column `Finding` VARCHAR: what the numbers say
-- column `Suggestion` VARCHAR: what usually helps
-- column `Views` VARCHAR: where to look next
-- column `Share(%)` DOUBLE: the time the finding is about, as a share of the steps' time (NULL where not a time)
-- Thresholds: a share of the steps' device time (the union of step_trace's spans) of 10 % is a finding,
-- 30 % a high one (host syncs: 5 %, pageable copies: 1 %); launch-bound: half of at least 100
-- tasks shorter than their launch call (a CUDA graph's tasks do not count: one call launched them all).
WITH steps AS (  -- each device's steps, summed; shares are of the union of the steps' spans
                -- (`span`, µs), as steps that overlap hold some time twice
    SELECT t."Rank" AS rank, t."Device" AS device, count(*) AS n,
           coalesce(any_value(o.span) / 1e3, sum("End Time(us)" - "Start Time(us)"))::DOUBLE AS span,
           sum("Free") AS free, sum("Communication(Not Overlapped)") AS exposed, sum("Preparing") AS preparing
    FROM step_trace t LEFT JOIN _step_overlaps o ON o.rank = t."Rank" AND o.device = t."Device"
    WHERE t."Step" IS NOT NULL AND t."Device" <> 'host' GROUP BY t."Rank", t."Device"
    HAVING sum("End Time(us)" - "Start Time(us)") > 0
), streams AS (  -- per stream, in one pass over the tasks: their launches (kernel_launch) and the
                 -- causes of the gaps between them within the steps (idle_time)
    -- (a CUDA graph's tasks share one launch call: none of them was launched on its own)
    SELECT rank, device, stream, count(launch_ts) FILTER (WHERE NOT graph) AS launched,
           count(*) FILTER (WHERE dur < launch_dur AND NOT graph) AS short,
           count(*) FILTER (WHERE step IS NOT NULL AND gap_cause IS NOT NULL) AS gaps,
           sum(wait) FILTER (WHERE step IS NOT NULL AND gap_cause IS NOT NULL) AS idle,
           coalesce(sum(wait) FILTER (WHERE step IS NOT NULL AND gap_cause = 'host wait'), 0) AS host,
           coalesce(sum(wait) FILTER (WHERE step IS NOT NULL AND gap_cause = 'kernel wait'), 0) AS kernel
    FROM (SELECT *, coalesce(is_graph_launch(launch_api), false) AS graph
          FROM _task_launches)
    GROUP BY rank, device, stream
), remedies AS (  -- the usual cures for launch overhead, less what the rank already uses
    SELECT rank, CASE
        WHEN graphs AND compiled THEN 'more work per kernel and per graph: a larger batch, more of the step in the captured graphs (the run already replays CUDA graphs of compiled kernels)'
        WHEN graphs THEN 'fewer, larger kernels (torch.compile) or a larger batch; the run already replays CUDA graphs: capture more of the step'
        WHEN compiled THEN 'fewer launches (CUDA graphs: torch.compile''s mode="reduce-overhead") or a larger batch; the run already runs compiled (Triton) kernels'
        ELSE 'fewer, larger kernels (torch.compile, CUDA graphs) or a larger batch' END AS remedy
    -- every rank, also one without calls or kernels (copies only); the names tested in filters the
    -- scans take (at 10 M device records 0.31 s, against 0.48 s testing every name in a group-by)
    FROM (SELECT rank, rank IN (SELECT rank FROM slices WHERE kind = 'api' AND is_graph_launch(name)) AS graphs,
                 rank IN (SELECT rank FROM slices WHERE kind = 'kernel' AND name LIKE 'triton\_%' ESCAPE '\') AS compiled
          FROM run_ranks)
), launches AS (
    SELECT rank, device, sum(launched) AS n, sum(short) AS short FROM streams GROUP BY rank, device
), pageable AS (
    SELECT "Rank" AS rank, "Device" AS device, sum("Count") AS n, sum("Total Time(us)") AS t
    FROM memcpy_statistic WHERE "Operation" ILIKE '%pageable%' GROUP BY ALL
), syncs AS (
    SELECT "Rank" AS rank, sum("Count") AS n, sum("Time(us)") AS t,
           string_agg(DISTINCT "API Name", ', ' ORDER BY "API Name") AS names
    FROM api_statistic WHERE "API Name" ILIKE '%synchronize%' GROUP BY ALL
), loader AS (  -- the host's waits for the next batch (torch's `enumerate(DataLoader)#...__next__`) within its steps, ns
    SELECT d.rank, count(*) AS n, sum(d.dur)::DOUBLE AS t, any_value(st.total) AS total
    FROM slices d JOIN (SELECT rank, sum(dur)::DOUBLE AS total FROM slices WHERE kind = 'step' AND device = 'host' GROUP BY rank) st
        ON st.rank = d.rank
    WHERE d.device = 'host' AND d.step IS NOT NULL AND d.kind IN ('host_op', 'user_range')
      AND d.name LIKE 'enumerate(DataLoader)%' AND d.name LIKE '%__next__%'
    GROUP BY d.rank
), gaps AS (  -- on each device's busiest stream (the most gaps: the most tasks), each cause's share
    SELECT rank, device, arg_max(stream, gaps) AS stream, arg_max(host / idle, gaps) AS host,
           arg_max(kernel / idle, gaps) AS kernel FROM streams WHERE gaps > 0 GROUP BY rank, device
), host_span AS (  -- the steps' time of a rank, for findings about its host
    SELECT rank, max(span) AS span FROM steps GROUP BY rank
), findings AS (
    SELECT s.rank, s.device, 'device_idle' AS rule, free / span AS share, free / span > 0.30 AS severe,
           format('the device was idle {:.1f} % of its {} step(s) ({:,.0f} of {:,.0f} µs)', 100 * free / span, s.n, free, span)
           || coalesce(format('; of the gaps on its busiest stream ({}): {:.0f} % host wait, {:.0f} % kernel wait, {:.0f} % other',
                              g.stream, 100 * g.host, 100 * g.kernel, 100 * greatest(1 - g.host - g.kernel, 0)), '') AS finding,
           CASE WHEN g.host >= 0.5 THEN 'the host launches too late to keep the device busy: see which host calls are slow (api_statistic) and how long kernels wait for their launch (kernel_launch); ' || r.remedy
                WHEN g.kernel >= 0.5 THEN 'the device idles between short back-to-back kernels (launch overhead): ' || r.remedy
                WHEN 1 - g.host - g.kernel >= 0.5 THEN 'the streams wait on work other than the host''s launches: events, other streams (communication), synchronisation; see which tasks follow the long gaps (idle_time, overlap) and overlap or shorten what they wait for'
                ELSE 'the host does not keep the device busy: see how long kernels wait for their launch and which host calls are slow; ' || r.remedy END AS suggestion,
           'step_trace, idle_time, kernel_launch, api_statistic' AS views
    FROM steps s LEFT JOIN gaps g ON g.rank = s.rank AND g.device = s.device LEFT JOIN remedies r ON r.rank = s.rank
    WHERE free / span > 0.10
    UNION ALL
    SELECT rank, device, 'exposed_communication', exposed / span, exposed / span > 0.30,
           format('communication not hidden by computation took {:.1f} % of its {} step(s) ({:,.0f} µs)', 100 * exposed / span, n, exposed),
           'overlap communication with computation (gradient bucket sizes, FSDP prefetch, gradient accumulation); if one rank is slow the others wait for it in their collectives',
           'step_trace, communication, slow_rank'
    FROM steps WHERE exposed / span > 0.10
    UNION ALL
    SELECT rank, device, 'slow_step_start', preparing / (span + preparing), preparing / (span + preparing) > 0.30,
           format('each step''s first device work started {:,.0f} µs after the step began on the host (mean over {} step(s))', preparing / n, n),
           'data loading or host work ahead of the first launch: more DataLoader workers, pin_memory, prefetching the next batch',
           'step_trace'
    FROM steps WHERE preparing / (span + preparing) > 0.10
    UNION ALL
    SELECT rank, 'host', 'slow_dataloader', t / total, t / total > 0.30,
           format('waiting for the DataLoader took {:.1f} % of the host''s steps ({} batches, {:,.0f} µs)', 100 * t / total, n, t / 1e3),
           'the input pipeline does not keep up: more DataLoader workers (num_workers), persistent_workers, a larger prefetch_factor, pin_memory; lighter or on-device preprocessing',
           'range_statistic, operator_details'
    FROM loader WHERE t / total > 0.10
    UNION ALL
    SELECT l.rank, l.device, 'launch_bound', NULL, short >= 0.75 * n,
           format('{} of {} device tasks ({:.0f} %) ran shorter than the runtime call that launched them', short, n, 100.0 * short / n),
           'launch-bound: the device finishes each task before the host can launch the next; ' || r.remedy,
           'kernel_launch, kernel_statistic'
    FROM launches l LEFT JOIN remedies r ON r.rank = l.rank WHERE n >= 100 AND short >= 0.5 * n
    UNION ALL
    SELECT p.rank, p.device, 'pageable_copies', p.t / nullif(s.span, 0), coalesce(p.t / nullif(s.span, 0) > 0.30, false),
           format('{} copies to or from pageable host memory took {:,.0f} µs', p.n, p.t),
           'pageable memory makes a copy synchronous and slower: pin the host tensors (DataLoader pin_memory=True) and copy with non_blocking=True',
           'memcpy_statistic'
    FROM pageable p LEFT JOIN steps s ON s.rank = p.rank AND s.device = p.device
    WHERE coalesce(p.t / nullif(s.span, 0) > 0.01, true)  -- a handful of small copies is no finding
    UNION ALL
    SELECT y.rank, 'host', 'host_sync', y.t / nullif(h.span, 0), y.t / nullif(h.span, 0) > 0.30,
           format('the host waited {:,.0f} µs in {} device synchronizations ({})', y.t, y.n, y.names),
           'each synchronization stalls the launch pipeline: avoid .item(), .cpu(), printing or logging device values every step, and explicit synchronize calls',
           'api_statistic'
    FROM syncs y LEFT JOIN host_span h ON h.rank = y.rank
    WHERE y.t / nullif(h.span, 0) > 0.05
    UNION ALL
    SELECT "Rank", any_value("Device"), 'slow_rank', NULL, count(DISTINCT "Step") >= 2,
           format('slower than the other ranks in {} step(s): {} (up to {:,.0f} µs over the median)', count(DISTINCT "Step"),
                  string_agg(DISTINCT "Component", ', ' ORDER BY "Component"), max("Excess(us)")),
           'the other ranks wait for it in their collectives: compare its step_trace with theirs (a slower device, host, data loading or link)',
           'slow_rank, cluster_step_trace'
    FROM slow_rank GROUP BY "Rank"
)
SELECT rank AS "Rank", device AS "Device", rule AS "Rule",
       CASE WHEN severe THEN 'high' ELSE 'medium' END AS "Severity",
       finding AS "Finding", suggestion AS "Suggestion", views AS "Views", round(100 * share, 1) AS "Share(%)"
FROM findings
ORDER BY CASE "Severity" WHEN 'high' THEN 0 ELSE 1 END, share DESC NULLS LAST, "Rank", "Rule"
