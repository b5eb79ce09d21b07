-- view: _overlap
-- answers: the overlap lanes in ns — merged computing, merged communication, communication not
--   overlapped by computing, and free time — per rank, device and step; the base of `overlap`
--   and `step_trace`.
-- requires: slices, _intervals, _tasks
--
-- Activity: on a device, compute kernels are Computing and collective kernels Communication
-- (memcpy/memset are neither, as in Ascend's Overlap Analysis). A rank with no device records
-- (CPU-only trace) is analysed on its host: CPU ops are Computing, gloo/NCCL ranges Communication.
-- Span of a step on a device: from its first to its last activity (as torch_npu's Overlap
-- Analysis lanes: time before the first activity is the step's Preparing, not Free).
CREATE OR REPLACE VIEW _activity AS
SELECT {'rank': rank, 'device': device, 'step': step} AS key,
       CASE WHEN kind = 'comm' THEN 'Communication' ELSE 'Computing' END AS type, ts AS s, ts + dur AS e
FROM slices WHERE device <> 'host' AND kind IN ('kernel', 'comm')
UNION ALL
SELECT {'rank': rank, 'device': device, 'step': step},
       CASE WHEN kind = 'comm' THEN 'Communication' ELSE 'Computing' END, ts, ts + dur
FROM slices WHERE device = 'host' AND kind IN ('host_op', 'comm') AND rank IN (SELECT rank FROM _host_only_ranks);

CREATE OR REPLACE VIEW _computing AS SELECT key, s, e FROM _activity WHERE type = 'Computing';
CREATE OR REPLACE VIEW _communication AS SELECT key, s, e FROM _activity WHERE type = 'Communication';
CREATE OR REPLACE VIEW _any_activity AS SELECT key, s, e FROM _activity;

CREATE OR REPLACE VIEW _step_span AS
SELECT key, min(s) AS s, max(e) AS e FROM _activity GROUP BY key;

CREATE OR REPLACE VIEW _overlap AS
SELECT key, 'Computing' AS type, s, e FROM interval_union('_computing')
UNION ALL SELECT key, 'Communication', s, e FROM interval_union('_communication')
UNION ALL SELECT key, 'Communication(Not Overlapped)', s, e FROM interval_subtract('_communication', '_computing')
UNION ALL SELECT key, 'Free', s, e FROM interval_subtract('_step_span', '_any_activity');
