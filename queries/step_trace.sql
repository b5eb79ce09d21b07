-- view: step_trace
-- answers: where did each step's time go on each device — computing, communication (overlapped
--   or not), free, pipeline bubble, and the preparation before the device started; device work in
--   no step window (a device's ProfilerStep#N where it records one) in a row of its own, Step NULL.
-- matches: torch_npu / MindSpore step_trace_time.csv (columns and definitions, µs);
--   msprof-analyze cluster_step_trace_time.csv per rank.
-- requires: _overlap, _units
-- scope: rank
-- Definitions (torch_npu): each lane is the summed duration of its merged intervals in the step;
-- Overlapped = Communication − Communication(Not Overlapped); Bubble = time of receive ops;
-- Stage = step span − Bubble; Communication(Not Overlapped and Exclude Receive) =
-- max(Communication(Not Overlapped) − Bubble, 0); Preparing = first Computing/Communication start −
-- host step start. For a rank without device records, Device is `host` and the lanes are its CPU
-- ops (Computing) and gloo/NCCL ranges (Communication) within the host step.
-- A device record's step (queries/store/finalize.sql steps 4 and 4b): its launcher's host step;
-- without one, on a device that records its steps (Kineto's gpu_user_annotation ProfilerStep#N),
-- the step window holding its start (step N's window: the hull of the device's step N record and
-- of what host step N launched), else none: e.g. the previous step's queued work that runs before
-- the first window is the row of Step NULL and the data-quality rule `device_work_outside_steps`,
-- never part of a neighbouring step's time; on other devices, the host step holding its start.
-- Free where steps overlap on a device (kernels of step N still running after step N+1's first):
-- the time the device runs no Computing or Communication of any step, within the part of the step's
-- span no step that started before it holds; so Σ Free ≤ the device's idle time (queries/_lanes.sql).
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device, or `host` for a rank without device records
-- column `Step` BIGINT: training step (NULL: records outside every step; on a device that records its steps, device work outside its step windows)
-- column `Computing` DOUBLE: merged computing time, µs
-- column `Communication(Not Overlapped)` DOUBLE: communication not hidden by computing, µs
-- column `Overlapped` DOUBLE: communication hidden by computing, µs
-- column `Communication` DOUBLE: merged communication time, µs
-- column `Free` DOUBLE: span time with neither, of any step (see above), µs
-- column `Stage` DOUBLE: step span minus bubble, µs
-- column `Bubble` DOUBLE: time of receive ops, µs
-- column `Communication(Not Overlapped and Exclude Receive)` DOUBLE: not-overlapped communication minus bubble, µs
-- column `Preparing` DOUBLE: from host step start to the device's first activity, µs
-- column `Start Time(us)` DECIMAL(26,3): step span start on this device, µs since the Unix epoch
-- column `End Time(us)` DECIMAL(26,3): step span end on this device, µs since the Unix epoch
WITH t AS (
    SELECT l.*, coalesce(l.computing, 0) AS c, coalesce(l.communication, 0) AS m, coalesce(l.not_overlapped, 0) AS n,
           coalesce(l.free, 0) AS f, coalesce(l.bubble, 0) AS b
    FROM _step_lanes l
)
SELECT rank AS "Rank", device AS "Device", step AS "Step", us(c) AS "Computing",
       us(n) AS "Communication(Not Overlapped)", us(m - n) AS "Overlapped", us(m) AS "Communication",
       us(f) AS "Free", us(span_end - span_start - b) AS "Stage", us(b) AS "Bubble",
       us(greatest(n - b, 0)) AS "Communication(Not Overlapped and Exclude Receive)",
       us(first_active - step_start) AS "Preparing",
       us_ts(span_start) AS "Start Time(us)", us_ts(span_end) AS "End Time(us)"
FROM t
ORDER BY "Rank", "Device", "Step" NULLS LAST
