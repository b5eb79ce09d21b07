-- view: _tasks
-- answers: every device task (kernel, communication, memcpy, memset) with its op type (the
--   source's own, else the framework op that launched it), in ns; the shared base of op_summary, op_statistic and task_time.
-- requires: slices, _classify
CREATE OR REPLACE VIEW _tasks AS
SELECT t.id, t.rank, t.device, t.step, t.kind, t.name, t.ts, t.dur, t.stream, t.correlation,
       coalesce(t.op_type, l.name, t.name) AS op_type,
       coalesce(t.task_type, task_type(t.kind)) AS task_type,
       coalesce(t.input_shapes, l.input_shapes) AS input_shapes,
       coalesce(t.input_types, l.input_types) AS input_types,
       -- idle time on the stream before this task: since the latest end of the tasks before it
       greatest(t.ts - max(t.ts + t.dur) OVER (PARTITION BY t.rank, t.device, t.stream ORDER BY t.ts, t.id
                                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS wait
FROM slices t LEFT JOIN slices l ON l.id = t.launch_id
WHERE t.device <> 'host' AND t.kind IN ('kernel', 'comm', 'memcpy', 'memset');

-- Ranks that recorded no device task: their reports fall back to host ops.
CREATE OR REPLACE VIEW _host_only_ranks AS
SELECT DISTINCT rank FROM slices WHERE device = 'host'
EXCEPT SELECT DISTINCT rank FROM slices WHERE device <> 'host' AND kind IN ('kernel', 'comm', 'memcpy', 'memset');
