-- view: _advice_rank
-- answers: advice's findings of each rank, every rule but slow_rank (which compares ranks): a
--   rank's rows depend on its records only, so groups of ranks compute them apart (`advice`
--   reads them, and their algorithm and thresholds are documented there). Each row also holds
--   the number its finding leads with (`value`, in `unit`), which `advice` ranges over ranks.
-- requires: step_trace, _overlap, _task_launches, slices, _classify, run_ranks
-- scope: rank
CREATE OR REPLACE VIEW _advice_rank AS
WITH steps AS MATERIALIZED (  -- each step's span on each device, with the host's step start before it, ns
    SELECT rank, device, step, least(coalesce(step_start, span_start), span_start) AS s0, span_start, span_end,
           coalesce(free, 0) AS free, coalesce(not_overlapped, 0) AS exposed, first_active - step_start AS preparing
    FROM _step_lanes WHERE step IS NOT NULL AND span_end > span_start
), waits AS MATERIALIZED (  -- the gaps on the streams that the host's late launches caused, ns
    SELECT rank, device, stream, ts - wait AS s, ts AS e FROM _task_launches WHERE gap_cause = 'host wait'
), causes AS MATERIALIZED (  -- the intervals of the idle rules' causes on each device, ns
    SELECT g.rank, g.device, 'host_sync' AS class, g.s, g.e
    FROM (SELECT y.rank, d.device, d.stream, y.ts + y.dur AS ended
          FROM slices y JOIN (SELECT DISTINCT rank, device, stream FROM waits) d ON d.rank = y.rank
          WHERE y.kind = 'api' AND y.name ILIKE '%synchronize%') y
    -- the first host-waited gap of each stream that ends after the call ended: it holds that end, or none does
    ASOF JOIN waits g ON g.rank = y.rank AND g.device = y.device AND g.stream = y.stream AND g.e >= y.ended
    WHERE g.s <= y.ended
    UNION ALL
    SELECT rank, device, 'pageable_copies', ts, ts + dur FROM slices
    WHERE device <> 'host' AND kind = 'memcpy' AND name ILIKE '%pageable%' AND step IS NOT NULL
    UNION ALL
    SELECT d.rank, k.device, 'slow_dataloader', d.ts, d.ts + d.dur
    FROM slices d JOIN (SELECT DISTINCT rank, device FROM steps) k ON k.rank = d.rank
    WHERE d.device = 'host' AND d.step IS NOT NULL AND d.kind IN ('host_op', 'user_range')
      AND d.name LIKE 'enumerate(DataLoader)%' AND d.name LIKE '%__next__%'
), islands AS (  -- the union of each device's cause intervals: disjoint, in order
    SELECT rank, device, min(s) AS s, max(e) AS e FROM (
        SELECT *, sum(CASE WHEN s <= reach THEN 0 ELSE 1 END) OVER (PARTITION BY rank, device ORDER BY s, e) AS island
        FROM (SELECT rank, device, s, e, max(e) OVER (PARTITION BY rank, device ORDER BY s, e
                                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
              FROM causes WHERE e > s))
    GROUP BY rank, device, island
), pieces AS (
    SELECT rank, device, 'span' AS class, span_start AS s, span_end AS e FROM steps
    UNION ALL SELECT rank, device, 'pre', s0, span_start FROM steps WHERE s0 < span_start
    -- device work in no step (step_trace's Step NULL: e.g. the previous step's queued work) is no idle
    UNION ALL SELECT rank, device, 'outside', ts, ts + dur FROM _lane_intervals
    WHERE step IS NULL AND type IN ('Computing', 'Communication') AND dur > 0
    UNION ALL SELECT rank, device, class, s, e FROM causes WHERE e > s
    -- the Free intervals a cause shares time with: the last island that starts before one's end
    -- overlaps it, or none does (the islands before it end before it starts)
    UNION ALL SELECT l.rank, l.device, 'free', l.ts, l.ts + l.dur
    FROM (SELECT * FROM _lane_intervals WHERE type = 'Free' AND step IS NOT NULL AND dur > 0) l
    ASOF JOIN islands i ON i.rank = l.rank AND i.device = l.device AND i.s < l.ts + l.dur
    WHERE i.e > l.ts
), deltas AS (  -- per device and instant: how many pieces of each class start there, less those that end
    SELECT rank, device, t, sum(d) FILTER (WHERE class = 'span') AS span, sum(d) FILTER (WHERE class = 'pre') AS pre,
           sum(d) FILTER (WHERE class = 'free') AS free, sum(d) FILTER (WHERE class = 'host_sync') AS sync,
           sum(d) FILTER (WHERE class = 'outside') AS outside,
           sum(d) FILTER (WHERE class = 'pageable_copies') AS copy, sum(d) FILTER (WHERE class = 'slow_dataloader') AS loader
    FROM (SELECT rank, device, class, s AS t, 1 AS d FROM pieces UNION ALL SELECT rank, device, class, e, -1 FROM pieces)
    GROUP BY rank, device, t
), cuts AS (  -- how many pieces of each class cover [t, the next cut)
    SELECT rank, device, t, coalesce(sum(span) OVER w, 0) AS span, coalesce(sum(pre) OVER w, 0) AS pre,
           coalesce(sum(free) OVER w, 0) AS free, coalesce(sum(sync) OVER w, 0) AS sync,
           coalesce(sum(outside) OVER w, 0) AS outside,
           coalesce(sum(copy) OVER w, 0) AS copy, coalesce(sum(loader) OVER w, 0) AS loader
    FROM deltas WINDOW w AS (PARTITION BY rank, device ORDER BY t ROWS UNBOUNDED PRECEDING)
), cut AS (
    SELECT *, lead(t) OVER (PARTITION BY rank, device ORDER BY t) - t AS len,
           CASE WHEN free > 0 THEN 'free' WHEN pre > 0 AND span = 0 AND outside = 0 THEN 'pre' END AS idle,
           CASE WHEN sync > 0 THEN 'host_sync' WHEN copy > 0 THEN 'pageable_copies' WHEN loader > 0 THEN 'slow_dataloader' END AS cause
    FROM cuts
), lost AS (  -- per device: its steps' time, the idle before its spans, and the idle each cause holds, ns
    SELECT c.rank, c.device, coalesce(sum(len) FILTER (WHERE span > 0 OR pre > 0), 0)::DOUBLE AS total,
           coalesce(sum(len) FILTER (WHERE idle = 'pre'), 0)::DOUBLE AS pre,
           coalesce(sum(len) FILTER (WHERE idle = 'pre' AND cause IS NOT NULL), 0)::DOUBLE AS pre_caused,
           coalesce(sum(len) FILTER (WHERE idle = 'free' AND cause IS NOT NULL), 0)::DOUBLE AS free_caused,
           coalesce(sum(len) FILTER (WHERE idle IS NOT NULL AND cause = 'host_sync'), 0)::DOUBLE AS sync,
           coalesce(sum(len) FILTER (WHERE idle IS NOT NULL AND cause = 'pageable_copies'), 0)::DOUBLE AS copies,
           coalesce(sum(len) FILTER (WHERE idle IS NOT NULL AND cause = 'slow_dataloader'), 0)::DOUBLE AS loader
    FROM cut c GROUP BY c.rank, c.device
), shares AS (  -- per device, µs: the steps' time and each rule's part of it
    SELECT s.rank, s.device, count(*) AS n, any_value(t.total) / 1e3 AS total, sum(s.exposed) / 1e3 AS exposed,
           any_value(t.sync) / 1e3 AS sync, any_value(t.copies) / 1e3 AS copies, any_value(t.loader) / 1e3 AS loader,
           (any_value(t.pre) - any_value(t.pre_caused)) / 1e3 AS start,
           (sum(s.free) - any_value(t.free_caused)) / 1e3 AS idle, sum(s.free) / 1e3 AS free,
           avg(s.preparing) / 1e3 AS preparing
    FROM steps s JOIN lost t ON t.rank = s.rank AND t.device = s.device
    GROUP BY s.rank, s.device HAVING any_value(t.total) > 0
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
), counts AS (  -- how many copies and waits for a batch each device's causes hold, and their time, µs
    SELECT rank, device, count(*) FILTER (WHERE class = 'pageable_copies') AS copies,
           sum(e - s) FILTER (WHERE class = 'pageable_copies') / 1e3 AS copy_time,
           count(*) FILTER (WHERE class = 'slow_dataloader') AS batches,
           sum(e - s) FILTER (WHERE class = 'slow_dataloader') / 1e3 AS batch_time
    FROM causes GROUP BY rank, device
), syncs AS (  -- each rank's synchronization calls, µs
    SELECT rank, count(*) AS n, sum(dur) / 1e3 AS t, string_agg(DISTINCT name, ', ' ORDER BY name) AS names
    FROM slices WHERE kind = 'api' AND name ILIKE '%synchronize%' GROUP BY rank
), gaps AS (  -- on each device's busiest stream (the most gaps: the most tasks), each cause's share
    SELECT rank, device, arg_max(stream, gaps) AS stream, arg_max(host / idle, gaps) AS host,
           arg_max(kernel / idle, gaps) AS kernel FROM streams WHERE gaps > 0 GROUP BY rank, device
), findings AS (  -- `query`: {0} stands for the finding's ranks and devices, {1} for its ranks (a list);
                  -- `value` (in `unit`): the number the finding leads with, which `advice` ranges over ranks
    SELECT rank, device, 'exposed_communication' AS rule, exposed / total AS share, exposed / total > 0.30 AS severe,
           format('communication not hidden by computation took {:.1f} % of its {} step(s) ({:,.0f} µs)', 100 * exposed / total, n, exposed) AS finding,
           'overlap communication with computation (gradient bucket sizes, FSDP prefetch, gradient accumulation); if one rank is slow the others wait for it in their collectives' AS suggestion,
           'step_trace, communication, slow_rank' AS views,
           'SELECT "Rank", "Device", "Step", "Communication(Not Overlapped)", "Communication", "Overlapped", "Computing" FROM step_trace WHERE {0} ORDER BY "Rank", "Device", "Step"' AS query,
           100 * exposed / total AS value, '%' AS unit
    FROM shares WHERE exposed / total > 0.10
    UNION ALL
    SELECT s.rank, s.device, 'host_sync', sync / total, sync / total > 0.30,
           format('the device sat idle {:,.0f} µs ({:.1f} % of its {} step(s)) after the host''s synchronizations, until the host launched again; the host waited {:,.0f} µs in {} calls ({})',
                  sync, 100 * sync / total, s.n, y.t, y.n, y.names),
           'each synchronization drains the launch pipeline: avoid .item(), .cpu(), printing or logging device values every step, and explicit synchronize calls',
           'idle_time, api_statistic',
           'SELECT "Rank", "Device", "Step", "Stream", "Count", "Idle Time(us)", "Max(us)" FROM idle_time WHERE {0} AND "Category" = ''host wait'' ORDER BY "Idle Time(us)" DESC',
           100 * sync / total, '%'
    FROM shares s LEFT JOIN syncs y ON y.rank = s.rank WHERE sync / total > 0.05
    UNION ALL
    SELECT s.rank, s.device, 'pageable_copies', s.copies / total, s.copies / total > 0.30,
           format('{} copies to or from pageable host memory took {:,.0f} µs; the device did nothing else for {:,.0f} µs of it ({:.1f} % of its {} step(s))',
                  c.copies, c.copy_time, s.copies, 100 * s.copies / total, s.n),
           'pageable memory makes a copy synchronous and slower: pin the host tensors (DataLoader pin_memory=True) and copy with non_blocking=True',
           'memcpy_statistic',
           'SELECT * FROM memcpy_statistic WHERE {0} AND "Operation" ILIKE ''%pageable%''',
           100 * s.copies / total, '%'
    FROM shares s JOIN counts c ON c.rank = s.rank AND c.device = s.device WHERE s.copies / total > 0.01
    UNION ALL
    SELECT s.rank, s.device, 'slow_dataloader', loader / total, loader / total > 0.30,
           format('waiting for the DataLoader left the {} idle {:.1f} % of its {} step(s) ({:,.0f} µs; the host waited {:,.0f} µs for {} batches)',
                  CASE WHEN s.device = 'host' THEN 'host' ELSE 'device' END, 100 * loader / total, s.n, loader, c.batch_time, c.batches),
           'the input pipeline does not keep up: more DataLoader workers (num_workers), persistent_workers, a larger prefetch_factor, pin_memory; lighter or on-device preprocessing',
           'range_statistic, operator_details',
           'SELECT * FROM range_statistic WHERE "Rank" IN ({1}) AND "Device" = ''host'' AND "Range" LIKE ''enumerate(DataLoader)%''',
           100 * loader / total, '%'
    FROM shares s JOIN counts c ON c.rank = s.rank AND c.device = s.device WHERE loader / total > 0.10
    UNION ALL
    SELECT rank, device, 'slow_step_start', start / total, start / total > 0.30,
           format('each step''s first {} started {:,.0f} µs after the step began on the host (mean over {} step(s)); the {} idled for it {:.1f} % of the steps'' time ({:,.0f} µs)',
                  CASE WHEN device = 'host' THEN 'op' ELSE 'device work' END, preparing, n,
                  CASE WHEN device = 'host' THEN 'host' ELSE 'device' END, 100 * start / total, start),
           'data loading or host work ahead of the first launch: more DataLoader workers, pin_memory, prefetching the next batch',
           'step_trace',
           'SELECT "Rank", "Device", "Step", "Preparing", "Start Time(us)" FROM step_trace WHERE {0} ORDER BY "Rank", "Device", "Step"',
           100 * start / total, '%'
    FROM shares WHERE start / total > 0.10
    UNION ALL
    SELECT s.rank, s.device, 'device_idle', idle / total, idle / total > 0.30,
           format('the device was idle {:.1f} % of its {} step(s) ({:,.0f} of {:,.0f} µs{})', 100 * idle / total, s.n, idle, total,
                  CASE WHEN free - idle >= 0.01 * total THEN format('; another {:,.0f} µs of idle went to host_sync, pageable_copies or slow_dataloader', free - idle) ELSE '' END)
           || coalesce(format('; of the gaps on its busiest stream ({}): {:.0f} % host wait, {:.0f} % kernel wait, {:.0f} % other',
                              g.stream, 100 * g.host, 100 * g.kernel, 100 * greatest(1 - g.host - g.kernel, 0)), ''),
           CASE WHEN g.host >= 0.5 THEN 'the host launches too late to keep the device busy: see which host calls are slow (api_statistic) and how long kernels wait for their launch (kernel_launch); ' || r.remedy
                WHEN g.kernel >= 0.5 THEN 'the device idles between short back-to-back kernels (launch overhead): ' || r.remedy
                WHEN 1 - g.host - g.kernel >= 0.5 THEN 'the streams wait on work other than the host''s launches: events, other streams (communication), synchronisation; see which tasks follow the long gaps (idle_time, overlap) and overlap or shorten what they wait for'
                ELSE 'the host does not keep the device busy: see how long kernels wait for their launch and which host calls are slow; ' || r.remedy END,
           'step_trace, idle_time, kernel_launch, api_statistic',
           'SELECT "Rank", "Device", "Step", "Free", "Computing", "Communication", "End Time(us)" - "Start Time(us)" AS "Span(us)" FROM step_trace WHERE {0} ORDER BY "Rank", "Device", "Step"',
           100 * idle / total, '%'
    FROM shares s LEFT JOIN gaps g ON g.rank = s.rank AND g.device = s.device LEFT JOIN remedies r ON r.rank = s.rank
    WHERE s.device <> 'host' AND idle / total > 0.10
    UNION ALL
    SELECT l.rank, l.device, 'launch_bound', NULL, short >= 0.75 * n,
           format('{} of {} device tasks ({:.0f} %) ran shorter than the runtime call that launched them', short, n, 100.0 * short / n),
           'launch-bound: the device finishes each task before the host can launch the next; ' || r.remedy,
           'kernel_launch, kernel_statistic',
           'SELECT "Rank", "Device", "Task Name", count(*) AS "Tasks", count(*) FILTER (WHERE "Task Duration(us)" < "Launch Duration(us)") AS "Shorter Than Their Launch" FROM kernel_launch WHERE {0} GROUP BY ALL ORDER BY "Tasks" DESC, "Rank", "Device"',
           100.0 * short / n, '%'
    FROM launches l LEFT JOIN remedies r ON r.rank = l.rank WHERE n >= 100 AND short >= 0.5 * n
)
SELECT * FROM findings;
