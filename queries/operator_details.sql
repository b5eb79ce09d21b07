-- view: operator_details
-- answers: what each framework op call cost on the host and on the device — one row per call of a
--   host op, with its self and total host time and the device time of the tasks it launched
--   (self) and of those its nested ops launched too (total).
-- matches: torch_npu operator_details.csv (a rank's rows, in its order; see the test for the one
--   difference); the per-call rows of torch.profiler's key_averages.
-- requires: _operator_calls, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Step` BIGINT: step of the call
-- column `Name` VARCHAR: op name
-- column `Input Shapes` VARCHAR: input shapes, as the source wrote them
-- column `Call Stack` VARCHAR: Python call stack, where the source recorded it (with_stack)
-- column `Host Self Duration(us)` DOUBLE: host time less that of the ops and runtime API calls nested in it, µs
-- column `Host Total Duration(us)` DOUBLE: host time, µs
-- column `Device Self Duration(us)` DOUBLE: summed duration of the device tasks the call launched itself, µs
-- column `Device Total Duration(us)` DOUBLE: the same with the tasks its nested ops launched, µs
-- column `Device Self Duration With AICore(us)` DOUBLE: Device Self Duration of the AI_CORE tasks (Ascend), µs
-- column `Device Total Duration With AICore(us)` DOUBLE: Device Total Duration of the AI_CORE tasks (Ascend), µs
SELECT rank AS "Rank", step AS "Step", name AS "Name", input_shapes AS "Input Shapes", call_stack AS "Call Stack",
       us(host_self) AS "Host Self Duration(us)", us(host_total) AS "Host Total Duration(us)",
       us(device_self) AS "Device Self Duration(us)", us(device_total) AS "Device Total Duration(us)",
       us(aicore_self) AS "Device Self Duration With AICore(us)",
       us(aicore_total) AS "Device Total Duration With AICore(us)"
FROM _operator_calls
WHERE NOT is_range
ORDER BY "Rank", ts, id
