-- view: _operator_calls
-- answers: every framework (host) op call with its host time and the device time it launched, in
--   ns: self (the tasks it launched itself) and total (with the tasks of the ops nested in it);
--   operator_details lists them, key_averages sums them per op name. The user ranges the import
--   nested with the ops (record_function, `## Call CompiledFxGraph ##`) are calls
--   too (`is_range`), as in torch.profiler's tree: device time reaches an op through the ranges
--   in it, and a range's time is not its enclosing op's self time.
-- Host self time is the call's less that of the ops and runtime API calls nested in it, as
-- torch.profiler's Self CPU counts it (a CUDA op's cudaLaunchKernel is not its own time; torch_npu
-- launches from its task queue's thread, outside the op, so there it is the op's less its ops').
-- requires: slices, _classify
-- scope: rank
-- Device time counts the tasks of `is_device_task` by their launcher (`launch_id`, filled in at
-- import). A communication op's own tasks (the device records that share its correlation id:
-- Ascend's SDMA copies and notifies inside an HCCL op) are part of it, and count once, as the op.
-- `aicore` is the time of the AI Core's tasks (Ascend; `is_ai_core_task`; the args, where the
-- hardware type is, are read only in runs with CANN sources: `run_cann_args`).
-- The time of the runtime API calls made inside each host record (an op's cudaLaunchKernel,
-- cudaMemcpyAsync...; CANN's calls inside calls), by the record they nest in: not its self time.
CREATE OR REPLACE VIEW _nested_api_time AS
SELECT rank, parent_id AS id, sum(dur) AS dur FROM slices
WHERE device = 'host' AND kind = 'api' AND parent_id IS NOT NULL GROUP BY rank, parent_id;

CREATE OR REPLACE VIEW _operator_calls AS
WITH RECURSIVE comm_ids AS (
    SELECT DISTINCT rank, correlation FROM slices
    WHERE device <> 'host' AND kind = 'comm' AND correlation IS NOT NULL
), launched AS (
    SELECT t.rank, t.launch_id AS id, sum(t.dur) AS dur,
           coalesce(sum(t.dur) FILTER (WHERE is_ai_core_task(coalesce(
               CASE WHEN run_cann_args() THEN t.args ->> 'Task Type' END, t.task_type))), 0) AS aicore
    FROM slices t ANTI JOIN comm_ids c ON c.rank = t.rank AND c.correlation = t.correlation AND t.kind <> 'comm'
    WHERE is_device_task(t.device, t.kind) AND t.launch_id IS NOT NULL
    GROUP BY t.rank, t.launch_id
), host AS (
    SELECT rank, id, parent_id FROM slices
    WHERE device = 'host' AND (kind = 'host_op' OR (kind = 'user_range' AND self_dur IS NOT NULL)) AND parent_id IS NOT NULL
), first AS MATERIALIZED (  -- the launchers' parents, in a plain join (DuckDB spills it; the recursion's own could not)
    SELECT h.rank, h.parent_id AS id, sum(l.dur) AS dur, sum(l.aicore) AS aicore
    FROM launched l JOIN host h ON h.rank = l.rank AND h.id = l.id GROUP BY ALL
), up(rank, id, dur, aicore) AS (  -- handed up a level at a time from there
    SELECT rank, id, dur, aicore FROM first
    UNION ALL
    SELECT u.rank, h.parent_id, sum(u.dur), sum(u.aicore) FROM up u JOIN host h ON h.rank = u.rank AND h.id = u.id
    GROUP BY u.rank, h.parent_id
), device AS (
    SELECT rank, id, sum(self) AS self, sum(dur) AS total, sum(aicore_self) AS aicore_self, sum(aicore) AS aicore_total
    FROM (SELECT rank, id, dur AS self, dur, aicore AS aicore_self, aicore FROM launched
          UNION ALL SELECT rank, id, 0, dur, 0, aicore FROM up) GROUP BY rank, id
)
SELECT o.rank, o.step, o.id, o.ts, o.name, o.kind = 'user_range' AS is_range, o.input_shapes,
       CASE WHEN run_cann_args() THEN o.args ->> 'Call stack' END AS call_stack,
       greatest(o.self_dur - coalesce(a.dur, 0), 0) AS host_self, o.dur AS host_total,
       coalesce(d.self, 0) AS device_self, coalesce(d.total, 0) AS device_total,
       coalesce(d.aicore_self, 0) AS aicore_self, coalesce(d.aicore_total, 0) AS aicore_total
FROM slices o LEFT JOIN device d ON d.rank = o.rank AND d.id = o.id LEFT JOIN _nested_api_time a ON a.rank = o.rank AND a.id = o.id
WHERE o.device = 'host' AND (o.kind = 'host_op' OR (o.kind = 'user_range' AND o.self_dur IS NOT NULL));
