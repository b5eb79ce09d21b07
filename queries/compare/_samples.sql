-- view: _compare_samples
-- answers: what a comparison of runs measures in one run — for each level and item, one sample
--   per rank, device and step, built on the run's own views: a
--   table macro per level, _compare_<level>(), created in each run's schema of a comparison
--   session (prof_engine.engine.compare) and called there, so the views it reads are that run's.
-- requires: slices, step_trace, _op_calls, op_summary, _api_groups, communication, memory_timeline, _classify
-- Levels and items: `step` — the step time (device span, End − Start) and each step_trace lane;
-- `op_type` — op types as op_statistic counts them (op type and core type); `op` — individual
-- tasks of op_summary matched by name and input shapes; `api` — API calls as api_statistic
-- counts them; `communication` — communication ops by collective (allreduce, allgather, ...:
-- collective_kind of the op type, else of the op name, so HCCL ops and NCCL kernels meet); `memory` — peak allocated and reserved memory per allocator component in each step
-- (memory's peaks, step by step; components that never held memory left out, as there).
-- Records outside every step are left out unless the run has no steps at all.
-- column `level` VARCHAR: step, op_type, op, api, communication or memory
-- column `device_type` VARCHAR: `device` or `host`, so that a GPU run and an NPU run meet
-- column `item` VARCHAR: the step lane, op type, op name, API name, communication op type or memory component
-- column `detail` VARCHAR: core type, input shapes, API level or memory measure ('' when none)
-- column `rank` INTEGER: global rank of the sample
-- column `device` VARCHAR: device of the sample
-- column `step` BIGINT: step of the sample (NULL: a run without steps)
-- column `value` DOUBLE: the item's summed time in the sample, µs (memory: MB)
-- column `calls` BIGINT: how many calls or tasks the sample holds (step: 1; memory: NULL)
CREATE OR REPLACE MACRO _compare_device_type(device) AS CASE WHEN device = 'host' THEN 'host' ELSE 'device' END;

-- Keep a record when it lies in a step, or when the run has none (cheap: the step partitions).
CREATE OR REPLACE MACRO _compare_counted(step) AS
    step IS NOT NULL OR NOT EXISTS (SELECT 1 FROM slices WHERE slices.step IS NOT NULL);

CREATE OR REPLACE MACRO _compare_step() AS TABLE
WITH lanes AS (
    UNPIVOT (
        SELECT "Rank", "Device", "Step", ("End Time(us)" - "Start Time(us)")::DOUBLE AS "Step Time",
               "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Preparing", "Bubble"
        FROM step_trace WHERE _compare_counted("Step")
    ) ON "Step Time", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
         "Preparing", "Bubble" INTO NAME item VALUE value
)
SELECT 'step' AS level, _compare_device_type("Device") AS device_type, item, '' AS detail, "Rank" AS rank,
       "Device" AS device, "Step" AS step, value, 1::BIGINT AS calls
FROM lanes;

CREATE OR REPLACE MACRO _compare_op_type() AS TABLE
SELECT 'op_type' AS level, _compare_device_type(device) AS device_type, op_type AS item, core_type AS detail,
       rank, device, step, sum(dur) / 1e3 AS value, count(*) AS calls
FROM _op_calls WHERE _compare_counted(step) GROUP BY ALL;

CREATE OR REPLACE MACRO _compare_op() AS TABLE
SELECT 'op' AS level, _compare_device_type("Device") AS device_type, "Op Name" AS item,
       coalesce("Input Shapes", '') AS detail, "Rank" AS rank, "Device" AS device, "Step" AS step,
       sum("Task Duration(us)") AS value, count(*) AS calls
FROM op_summary WHERE _compare_counted("Step") GROUP BY ALL;

CREATE OR REPLACE MACRO _compare_api() AS TABLE
SELECT 'api' AS level, 'host' AS device_type, name AS item, level AS detail, rank, 'host' AS device, step,
       sum(total) / 1e3 AS value, sum(calls)::BIGINT AS calls
FROM _api_groups WHERE _compare_counted(step) GROUP BY ALL;

CREATE OR REPLACE MACRO _compare_communication() AS TABLE
SELECT 'communication' AS level, _compare_device_type("Device") AS device_type,
       coalesce(collective_kind(coalesce("Op Type", "Op Name")), "Op Type", "Op Name") AS item, '' AS detail, "Rank" AS rank, "Device" AS device, "Step" AS step,
       sum("Elapse Time(ms)") * 1e3 AS value, count(*) AS calls
FROM communication WHERE _compare_counted("Step") GROUP BY ALL;

CREATE OR REPLACE MACRO _compare_memory() AS TABLE
WITH steps AS (
    SELECT "Rank", "Device", "Component", "Step", max("Allocated(MB)") AS "Peak Allocated(MB)",
           max("Reserved(MB)") AS "Peak Reserved(MB)"
    FROM memory_timeline WHERE _compare_counted("Step") GROUP BY ALL
), held AS (  -- components that held memory at some point, as the memory view keeps them
    SELECT * FROM steps
    WINDOW c AS (PARTITION BY "Rank", "Device", "Component")
    QUALIFY coalesce(max("Peak Allocated(MB)") OVER c, 0) > 0 OR coalesce(max("Peak Reserved(MB)") OVER c, 0) > 0
), peaks AS (
    UNPIVOT (SELECT "Rank", "Device", "Component", "Step", "Peak Allocated(MB)", "Peak Reserved(MB)" FROM held)
    ON "Peak Allocated(MB)", "Peak Reserved(MB)" INTO NAME detail VALUE value
)
SELECT 'memory' AS level, _compare_device_type("Device") AS device_type, "Component" AS item, detail,
       "Rank" AS rank, "Device" AS device, "Step" AS step, value, NULL::BIGINT AS calls
FROM peaks;
