-- What the manifest sums up of a rank's slices: records, device tasks and time span per device
-- (the run's span is theirs together: one scan for both), each step's span. `tbl` names a table
-- or view with the slices' rank, device, kind, step, ts and dur: finalize.sql's staged records
-- (`_s`), or a run's written slices (the live store's refresh, `store.builder.summarise`); `steps`
-- one with their step records (finalize.sql's `_step_records`, or `tbl` itself: only step
-- records count). Needs is_device_task (queries/_classify.sql).
CREATE OR REPLACE MACRO manifest_devices(tbl) AS TABLE
SELECT rank, device, count(*) AS records, count(*) FILTER (WHERE is_device_task(device, kind)) AS tasks,
       min(ts) AS start_ns, max(ts + dur) AS end_ns
FROM query_table(tbl) GROUP BY ALL ORDER BY rank, device;

CREATE OR REPLACE MACRO manifest_steps(steps) AS TABLE
SELECT rank, step, min(ts) AS start_ns, max(ts + dur) AS end_ns FROM query_table(steps) WHERE kind = 'step'
GROUP BY ALL ORDER BY ALL;

-- The steps of `ranks` (ranks with no step record) as their records state them (an Ascend
-- kernel_details.csv's Step Id, ...), each spanning its records: without them the manifest lists
-- no step where step_trace shows one, and `--step N` refuses it. `tbl`: the canonical slices.
CREATE OR REPLACE MACRO manifest_stated_steps(tbl, ranks) AS TABLE
SELECT rank, step, min(ts) AS start_ns, max(ts + dur) AS end_ns FROM query_table(tbl)
WHERE step IS NOT NULL AND list_contains(ranks, rank)
GROUP BY ALL ORDER BY ALL;
