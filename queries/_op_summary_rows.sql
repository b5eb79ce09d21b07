-- view: _op_summary_rows
-- answers: op_summary's rows in ns: every device task, and for a rank without any (CPU-only
--   traces) every CPU op, with its wait since the previous op at its depth on its thread ended;
--   a CPU op's OP Type is its op type where the source gives one (MindSpore), else its name.
--   op_summary shows them in µs; `show`'s top ops (summary_top_ops) sum them per name in ns, as
--   they are (not op_summary's µs columns, which DuckDB computes for every row first).
--   `id` is the record's, for what op_summary reads of its args (the hardware task id).
-- requires: _tasks, slices
-- scope: rank
CREATE OR REPLACE VIEW _op_summary_rows AS
SELECT id, rank, device, step, correlation, stream, name, op_type, task_type, ts, dur, wait, input_shapes, input_types
FROM _tasks
UNION ALL
SELECT id, rank, device, step, NULL, NULL, name, coalesce(op_type, name), 'CPU_OP', ts, dur,
       greatest(ts - lag(ts + dur) OVER (PARTITION BY rank, pid, tid, depth ORDER BY ts, id), 0),
       input_shapes, input_types
FROM slices WHERE kind = 'host_op' AND rank IN (SELECT rank FROM _host_only_ranks);
