-- view: data_quality
-- answers: what did the import have to guess, and how much of the data does each guess touch —
--   per rank and device, each rule that fired with its count and share; empty when nothing was
--   guessed. Read it before trusting a report: a rule here means some number elsewhere rests on it.
-- matches: no peer has one (HTA, Perfetto, nsys and msprof import silently); the rules are in
--   prof_engine/store/quality.py, each with its meaning (the `quality_rules` table).
-- requires: slices, run_findings, quality_rules, _classify, _units, _overlap, communication_matrix, _held_ranks, _ranks
-- scope: rank
-- Two sources: the findings the importers recorded in the manifest (`run_findings`: dropped or
-- clamped values, unclosed slices, invented ranks, ...), and rules computed here from the tables:
--   other_records: records the import could not classify (`is_unclassified`: no report counts
--     them; those of a category it does not know are its `unknown_categories` finding instead);
--   unlinked_device_records: device tasks with no launching host record (no launch_id);
--   overlapping_device_steps: steps whose device span (step_trace's) runs past the start of the
--     next step's on the same device (`_step_overlaps`; step_trace's Free counts such time once);
--   overlapping_host_records: host records that start inside an earlier sibling on their thread
--     and end after it (no nesting): torch's tree rule closes the sibling at their start;
--   device_work_outside_steps: on a device that records its steps (a step record of its own,
--     Kineto's GPU ProfilerStep#N), device tasks in none of its step windows (step NULL: e.g. the
--     previous step's queued work before the first window), with their summed duration;
--   links_to_absent_ranks (a note): a rank's communication_matrix links (src→dst pairs) with an
--     end on a rank the run does not hold — kept as the vendor lists them, with no peer side to
--     compare — naming those ranks and the MB moved over such links.
-- column `Rank` INTEGER: global rank; NULL for the run as a whole
-- column `Device` VARCHAR: device it concerns; NULL for a whole source or the run
-- column `Rule` VARCHAR: rule that fired (see `quality_rules`)
-- column `Count` BIGINT: records (or steps, ranks, files) it concerns
-- column `Total` BIGINT: what Count is a part of (records of the device or source, steps, ranks); NULL where none
-- column `Share(%)` DOUBLE: Count / Total × 100; NULL where Total is
-- column `Detail` VARCHAR: what and where, in one line
-- column `Meaning` VARCHAR: what the rule means for the numbers
-- column `Level` VARCHAR: warning (a number may rest on a guess) or note (how the data was read)
WITH per_device AS (
    SELECT rank, device,
           count(*) FILTER (WHERE is_unclassified(kind, category)) AS other,
           count(*) AS records,
           count(*) FILTER (WHERE is_device_task(device, kind) AND launch_id IS NULL) AS unlinked,
           count(*) FILTER (WHERE is_device_task(device, kind)) AS tasks,
           count(*) FILTER (WHERE is_device_task(device, kind) AND step IS NULL) AS outside,
           sum(dur) FILTER (WHERE is_device_task(device, kind) AND step IS NULL) AS outside_dur,
           min(name) FILTER (WHERE is_device_task(device, kind) AND step IS NULL) AS outside_name,
           count(*) FILTER (WHERE kind = 'step') AS device_steps,
           min(name) FILTER (WHERE is_unclassified(kind, category)) AS other_name
    FROM slices
    GROUP BY rank, device
),
host_siblings AS (
    SELECT rank, device, name, ts < max(ts + dur) OVER (
               PARTITION BY rank, device, pid, tid, parent_id ORDER BY ts, dur DESC, id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS crosses
    FROM slices
    WHERE device = 'host' AND depth IS NOT NULL
),
host_overlaps AS (
    SELECT rank, device, count(*) FILTER (WHERE crosses) AS n, count(*) AS records,
           min(name) FILTER (WHERE crosses) AS first_name
    FROM host_siblings
    GROUP BY rank, device
),
-- Judged against every rank the run holds (`run_held_ranks()`, a constant `session.attach` sets from
-- the whole manifest), not the ranks it was opened with: so a rank's row is the same on a run
-- restricted to it (scope rank).
matrix_links AS (
    SELECT "Rank" AS rank, "Device" AS device, "Src Rank" AS src, "Dst Rank" AS dst,
           sum("Transit Size(MB)") AS mb,
           NOT list_contains(run_held_ranks(), "Src Rank") AS src_absent,
           NOT list_contains(run_held_ranks(), "Dst Rank") AS dst_absent
    FROM communication_matrix
    GROUP BY ALL
),
absent_links AS (
    SELECT rank, device, count(*) FILTER (WHERE src_absent OR dst_absent) AS n, count(*) AS links,
           sum(mb) FILTER (WHERE src_absent OR dst_absent) AS mb
    FROM matrix_links
    GROUP BY rank, device
),
-- The ranks a rank's links reach that the run does not hold (rank_ranges writes them "2-7").
absent_ranks AS (
    SELECT rank, device, list(DISTINCT r) AS absent
    FROM (SELECT rank, device, src AS r FROM matrix_links WHERE src_absent
          UNION SELECT rank, device, dst FROM matrix_links WHERE dst_absent)
    GROUP BY rank, device
),
computed AS (
    SELECT rank, device, 'other_records' AS rule, other AS count, records AS total,
           'e.g. ' || other_name AS detail
    FROM per_device WHERE other > 0
    UNION ALL
    SELECT rank, device, 'unlinked_device_records', unlinked, tasks, NULL
    FROM per_device WHERE unlinked > 0
    UNION ALL
    SELECT rank, device, 'overlapping_device_steps', overlapping, steps,
           'from step ' || first_step || ': ' || us(overlap) || ' µs of ' || us(span) || ' µs held by two steps'
    FROM _step_overlaps WHERE overlapping > 0
    UNION ALL
    SELECT rank, device, 'overlapping_host_records', n, records, 'e.g. ' || first_name
    FROM host_overlaps WHERE n > 0
    UNION ALL
    SELECT rank, device, 'device_work_outside_steps', outside, tasks,
           us(outside_dur) || ' µs of device time (summed) in no step window, e.g. ' || outside_name
    FROM per_device WHERE device <> 'host' AND device_steps > 0 AND outside > 0
    UNION ALL
    SELECT rank, device, 'links_to_absent_ranks', n, links,
           CASE WHEN len(absent) > 1 THEN 'ranks ' ELSE 'rank ' END || rank_ranges(absent)
               || ', not in the run: ' || round(mb, 3) || ' MB over these links (communication_matrix)'
    FROM absent_links JOIN absent_ranks USING (rank, device) WHERE n > 0
),
found AS (
    SELECT rank, device, rule, count, total, detail FROM computed
    UNION ALL
    SELECT rank, device, rule, count, total, detail FROM run_findings
)
SELECT f.rank AS "Rank", f.device AS "Device", f.rule AS "Rule", f.count AS "Count", f.total AS "Total",
       round(100.0 * f.count / nullif(f.total, 0), 2) AS "Share(%)", f.detail AS "Detail", q.meaning AS "Meaning",
       q.level AS "Level"
FROM found f LEFT JOIN quality_rules q USING (rule)
ORDER BY "Level" DESC, "Rank" NULLS FIRST, "Device" NULLS FIRST, "Rule"
