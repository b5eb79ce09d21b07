-- view: _op_calls
-- answers: what op_statistic counts, one row per call with its step: compute kernels on devices by
--   op type and core type, CPU ops on the host by self time (nested ops never count twice), in ns;
--   a CPU op counts under its op type where the source gives one (MindSpore's host CPU ops: MatMul
--   for `.../MatMul-op0`, as its cpu_op_type_info does), else under its name (torch's aten::mm).
--   op_statistic sums it per op type; a comparison of runs takes it per step.
-- requires: _tasks, slices
-- scope: rank
CREATE OR REPLACE VIEW _op_calls AS
SELECT rank, device, step, op_type, task_type AS core_type, dur FROM _task_ops WHERE kind = 'kernel'
UNION ALL
SELECT rank, device, step, coalesce(op_type, name), 'CPU', self_dur FROM slices WHERE kind = 'host_op';
