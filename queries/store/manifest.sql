-- What the manifest sums up of a rank's slices: records and device tasks per device, each step's
-- span, the time span of all. `tbl` names a table or view with the slices' rank, device, kind,
-- step, ts and dur: finalize.sql's staged records (`_s`), or a run's written slices (the live
-- store's refresh, `store.builder.summarise`). Needs is_device_task (queries/_classify.sql).
CREATE OR REPLACE MACRO manifest_devices(tbl) AS TABLE
SELECT rank, device, count(*) AS records, count(*) FILTER (WHERE is_device_task(device, kind)) AS tasks
FROM query_table(tbl) GROUP BY ALL ORDER BY rank, device;

CREATE OR REPLACE MACRO manifest_steps(tbl) AS TABLE
SELECT rank, step, min(ts) AS start_ns, max(ts + dur) AS end_ns FROM query_table(tbl) WHERE kind = 'step'
GROUP BY ALL ORDER BY ALL;

CREATE OR REPLACE MACRO manifest_span(tbl) AS TABLE
SELECT min(ts) AS start_ns, max(ts + dur) AS end_ns FROM query_table(tbl);
