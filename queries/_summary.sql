-- view: _summary
-- answers: the tables `prof-engine show` prints, as table macros of the row count row_limit.
-- requires: step_trace, _op_summary_rows, op_statistic, api_statistic, communication, memory, key_averages, advice, op_memory, idle_time, op_flops
-- scope: cluster
-- Step breakdown: where each step's time went, per rank and device.
CREATE OR REPLACE MACRO summary_steps(row_limit) AS TABLE
SELECT "Rank", "Device", "Step", round("End Time(us)" - "Start Time(us)", 3)::DOUBLE AS "Step Time(us)",
       "Computing", "Communication(Not Overlapped)", "Overlapped", "Free", "Preparing"
FROM step_trace ORDER BY "Rank", "Device", "Step" NULLS LAST LIMIT row_limit;

-- The ops that take the most time: op_summary's rows (device tasks, or CPU ops for CPU-only
-- traces) one row per name over every rank, device and step, with how many ran and their total,
-- mean and longest time in µs (one row per task listed ten instances of one kernel as the top 10).
CREATE OR REPLACE MACRO summary_top_ops(row_limit) AS TABLE
SELECT name AS "Op Name", string_agg(DISTINCT task_type, ', ' ORDER BY task_type) AS "Task Type",
       count(*) AS "Count", us(sum(dur)) AS "Total(us)", round(avg(dur) / 1000.0, 3) AS "Mean(us)",
       us(max(dur)) AS "Max(us)"
FROM _op_summary_rows GROUP BY name ORDER BY sum(dur) DESC, name LIMIT row_limit;

-- The op types that take the most time, over all devices: a rank's device op types where it has
-- them (its CPU ops' self time is key_averages' to show), its CPU op types where it has none.
-- (op_statistic once: read twice, DuckDB computed it twice, 1.2 s more at 10 M device records)
CREATE OR REPLACE MACRO summary_op_types(row_limit) AS TABLE
WITH types AS MATERIALIZED (SELECT * FROM op_statistic)
SELECT * FROM types
WHERE "Device" <> 'host' OR "Rank" NOT IN (SELECT "Rank" FROM types WHERE "Device" <> 'host')
ORDER BY "Total Time(us)" DESC, "OP Type", "Rank", "Device", "Core Type" LIMIT row_limit;

CREATE OR REPLACE MACRO summary_apis(row_limit) AS TABLE
SELECT * FROM api_statistic ORDER BY "Time(us)" DESC, "API Name", "Rank", "Level" LIMIT row_limit;

-- What to look at first (`advice`: one row per finding, with the ranks it holds on), most severe
-- first. Where no rule fired, one row says so and what was checked (which rules, over how many
-- steps), so that no face shows an empty advice.
CREATE OR REPLACE MACRO summary_advice(row_limit) AS TABLE
WITH found AS MATERIALIZED (SELECT * FROM advice), checked AS (
    SELECT count(DISTINCT "Step") AS steps, count(DISTINCT "Rank") AS ranks, bool_or("Device" <> 'host') AS on_device
    FROM step_trace WHERE "Step" IS NOT NULL
)
SELECT "Ranks", "Severity", "Finding", "Suggestion" FROM (
    SELECT "Ranks", "Severity", "Finding", "Suggestion", "Rule",
           CASE "Severity" WHEN 'high' THEN 0 ELSE 1 END AS o, "Share(%)" AS share
    FROM found
    UNION ALL
    SELECT NULL, NULL, CASE WHEN steps = 0
        THEN 'advice: no findings; the run has no steps (no ProfilerStep# or step ranges), so only launch_bound was checked'
        ELSE format('advice: no findings; checked {}{} over {} step(s) of {} rank(s)',
                    CASE WHEN on_device THEN 'exposed_communication, host_sync, pageable_copies, slow_dataloader, slow_step_start, device_idle, launch_bound'
                         ELSE 'exposed_communication, slow_dataloader, slow_step_start (CPU only)' END,
                    CASE WHEN ranks >= 3 THEN ', slow_rank' ELSE '' END, steps, ranks) END,
           NULL, NULL, 2, NULL
    FROM checked WHERE NOT EXISTS (SELECT 1 FROM found))
ORDER BY o, share DESC NULLS LAST, "Rule", "Ranks" LIMIT row_limit;

-- The framework ops that launched the most device time (then the most host time), as
-- torch.profiler's key_averages table sorted by device time.
CREATE OR REPLACE MACRO summary_framework_ops(row_limit) AS TABLE
SELECT * FROM key_averages ORDER BY "Device Total(us)" DESC, "Self Host(us)" DESC, "Rank", "Name" LIMIT row_limit;

-- Communication by op type: how long the collectives ran and how much of it was waiting.
CREATE OR REPLACE MACRO summary_comm(row_limit) AS TABLE
SELECT "Rank", "Op Type", count(*) AS "Count", round(sum("Elapse Time(ms)"), 6) AS "Elapse Time(ms)",
       round(sum("Transit Time(ms)"), 6) AS "Transit Time(ms)", round(sum("Wait Time(ms)"), 6) AS "Wait Time(ms)"
FROM communication GROUP BY "Rank", "Op Type" ORDER BY "Elapse Time(ms)" DESC, "Rank", "Op Type" LIMIT row_limit;

-- The ops that allocated the most memory themselves (`op_memory`), largest first. A step's own row
-- (`ProfilerStep#N`: what no op inside it allocated) is no op, and would fill the table one per step.
CREATE OR REPLACE MACRO summary_op_memory(row_limit) AS TABLE
SELECT * FROM op_memory WHERE NOT regexp_full_match("Name", 'ProfilerStep#\d+')
ORDER BY "Allocated(MB)" DESC, "Rank", "Device", "Name" LIMIT row_limit;

-- Memory: each allocator's or module's peaks, largest first.
CREATE OR REPLACE MACRO summary_memory(row_limit) AS TABLE
SELECT * FROM memory ORDER BY "Peak Reserved(MB)" DESC NULLS LAST, "Peak Allocated(MB)" DESC NULLS LAST, "Rank", "Component"
LIMIT row_limit;

-- Idle gaps per stream and cause over all steps (`idle_time`), most idle first.
CREATE OR REPLACE MACRO summary_idle(row_limit) AS TABLE
SELECT "Rank", "Device", "Stream", "Category", sum("Count")::BIGINT AS "Count", round(sum("Idle Time(us)"), 3) AS "Idle Time(us)",
       round(100.0 * sum("Idle Time(us)") / sum(sum("Idle Time(us)")) OVER (PARTITION BY "Rank", "Device", "Stream"), 2) AS "Ratio(%)"
FROM idle_time WHERE "Step" IS NOT NULL GROUP BY "Rank", "Device", "Stream", "Category"
ORDER BY "Idle Time(us)" DESC, "Rank", "Device", "Stream", "Category" LIMIT row_limit;

-- The matrix multiplies and convolutions that take the most device time (`op_flops`), with the
-- rate they reached and its share of the device's peak.
CREATE OR REPLACE MACRO summary_flops(row_limit) AS TABLE
SELECT "Rank", "OP Name", "Input Shapes", "Count", "GFLOPs", "Time(us)", "TFLOPS", "Precision", "FLOPS Utilization(%)"
FROM op_flops ORDER BY "Time(us)" DESC, "Rank", "OP Name", "Input Shapes" LIMIT row_limit;
