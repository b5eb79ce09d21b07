-- view: _summary
-- answers: the tables `prof-engine show` prints, as table macros of the row count row_limit.
-- requires: step_trace, op_summary, op_statistic, api_statistic
-- Step breakdown: where each step's time went, per rank and device.
CREATE OR REPLACE MACRO summary_steps(row_limit) AS TABLE
SELECT "Rank", "Device", "Step", round("End Time(us)" - "Start Time(us)", 3)::DOUBLE AS "Step Time(us)",
       "Computing", "Communication(Not Overlapped)", "Overlapped", "Free", "Preparing"
FROM step_trace ORDER BY "Rank", "Device", "Step" NULLS LAST LIMIT row_limit;

-- The longest individual tasks (or CPU ops, for CPU-only traces).
CREATE OR REPLACE MACRO summary_top_ops(row_limit) AS TABLE
SELECT "Rank", "Device", "Step", "Op Name", "OP Type", "Task Type", "Task Duration(us)"
FROM op_summary ORDER BY "Task Duration(us)" DESC, "Task Start Time(us)" LIMIT row_limit;

-- The op types that take the most time, over all devices.
CREATE OR REPLACE MACRO summary_op_types(row_limit) AS TABLE
SELECT * FROM op_statistic ORDER BY "Total Time(us)" DESC, "OP Type" LIMIT row_limit;

CREATE OR REPLACE MACRO summary_apis(row_limit) AS TABLE
SELECT * FROM api_statistic ORDER BY "Time(us)" DESC, "API Name" LIMIT row_limit;
