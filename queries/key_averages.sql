-- view: key_averages
-- answers: which framework ops take the time, on the host and on the device — per rank and op
--   name, its calls with their host self and total time and the device time they launched, as
--   torch.profiler's `key_averages().table()` prints it.
-- matches: torch.profiler key_averages (group by name): as it does, a call whose only child is a
--   call of the same name (the dispatcher's redispatch, `aten::div_` in `aten::div_`) is one call
--   with it. Host self time is the op's less that of its nested ops, ranges and runtime API
--   calls, which are rows of their own (cudaLaunchKernel...: host time, no device time), as in
--   torch's table; so are record_function ranges (`## forward ##`, Inductor's `## Call
--   CompiledFxGraph ##`). c10d's collective ranges (`nccl:*`,
--   `gloo:*`, kind comm) are rows with their calls and host total and no self time: torch marks
--   them async (they may end on another thread), keeps them out of its tree (they are no op's
--   child, their op keeps their time as self time, and no op is theirs) and gives them no self
--   time. Ops that overlap without nesting follow torch's tree (finalize.sql step 2), except that
--   a self time is never below 0 (torch's can be). Steps (ProfilerStep*) are not rows
--   (step_trace has them), nor are kernels (kernel_statistic lists them). Unlike torch's table:
--   CUPTI's own host work (`Activity Buffer Request`, category `overhead`) is not a row, and the
--   op it interrupted keeps it in its self time: torch nests it in that op, but the exported
--   trace gives it no thread (pid -1), so which op it interrupted is unknown.
-- requires: _operator_calls, _units, slices
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Name` VARCHAR: op name
-- column `Calls` BIGINT: number of calls
-- column `Self Host(us)` DOUBLE: summed host self time, µs
-- column `Self Host %` DOUBLE: share of the rank's host self time (ops and runtime API calls)
-- column `Host Total(us)` DOUBLE: summed host time (an op nested in one of its own name counts in both, unless it is a redispatch), µs
-- column `Host Avg(us)` DOUBLE: mean host time per call, µs
-- column `Self Device(us)` DOUBLE: summed duration of the device tasks the calls launched themselves, µs
-- column `Self Device %` DOUBLE: share of the rank's device time launched by ops
-- column `Device Total(us)` DOUBLE: the same with the tasks their nested ops launched (counted as Host Total is), µs
-- column `Device Avg(us)` DOUBLE: mean Device Total per call, µs
WITH only_child AS (  -- host records with exactly one record nested in them, an op: which one
    SELECT rank, parent_id AS id, any_value(name) AS name, any_value(dur) AS dur FROM slices
    WHERE device = 'host' AND kind IN ('host_op', 'api', 'user_range') AND parent_id IS NOT NULL
    GROUP BY rank, parent_id HAVING count(*) = 1 AND any_value(kind) = 'host_op'
), calls AS (  -- `folds`: the call's only child is a call of its name, whose row it takes in
    SELECT c.*, k.dur AS child_host_total, c.device_total - c.device_self AS child_device_total,
           k.id IS NOT NULL AS folds
    FROM _operator_calls c LEFT JOIN only_child k ON k.rank = c.rank AND k.id = c.id AND k.name = c.name
), agg AS (  -- the child's self times stay in (same name); its totals are inside its parent's
    SELECT rank, name, count(*) - count(*) FILTER (WHERE folds) AS calls, sum(host_self) AS host_self,
           sum(host_total) - coalesce(sum(child_host_total) FILTER (WHERE folds), 0) AS host_total,
           sum(device_self) AS device_self,
           sum(device_total) - coalesce(sum(child_device_total) FILTER (WHERE folds), 0) AS device_total
    FROM calls GROUP BY rank, name
    UNION ALL
    SELECT a.rank, a.name, count(*), sum(greatest(a.dur - coalesce(n.dur, 0), 0)), sum(a.dur), 0, 0
    FROM slices a LEFT JOIN _nested_api_time n ON n.rank = a.rank AND n.id = a.id  -- CANN's calls inside calls
    WHERE a.device = 'host' AND a.kind = 'api' GROUP BY a.rank, a.name
    UNION ALL  -- torch's async ranges: c10d's collective record_function ranges
    SELECT rank, name, count(*), 0, sum(dur), 0, 0 FROM slices
    WHERE device = 'host' AND kind = 'comm' AND lower(category) = 'user_annotation' GROUP BY rank, name
)
SELECT rank AS "Rank", name AS "Name", calls AS "Calls",
       us(host_self) AS "Self Host(us)",
       round(100.0 * host_self / nullif(sum(host_self) OVER (PARTITION BY rank), 0), 2) AS "Self Host %",
       us(host_total) AS "Host Total(us)", us(host_total / calls) AS "Host Avg(us)",
       us(device_self) AS "Self Device(us)",
       round(100.0 * device_self / nullif(sum(device_self) OVER (PARTITION BY rank), 0), 2) AS "Self Device %",
       us(device_total) AS "Device Total(us)", us(device_total / calls) AS "Device Avg(us)"
FROM agg
ORDER BY "Rank", device_total DESC, host_total DESC, "Name"
