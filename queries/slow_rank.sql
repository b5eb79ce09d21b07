-- view: slow_rank
-- answers: which ranks are slow (stragglers), in which step and in which part of the step. A slow
--   rank is one whose own work — Computing, Free (its device idle, not waiting in a collective),
--   Preparing — is longer than the other ranks', so that they wait for it in their collectives:
--   it stands out above the others in its own work, or below them in Communication(Not Overlapped).
-- matches: the slow-rank analyses of msprof-analyze (advisor "slow rank": a gap of 5 % of the mean
--   step; cluster recipe slow_rank) and MindInsight's cluster view, with an explicit rule per rank.
-- requires: step_trace, run_ranks, _ranks
-- scope: cluster
-- Rule: per step, ranks are compared within their pipeline stage (`run_ranks.pp_stage`, from the
-- profiler's parallel-group metadata): a stage's receive waits (its pipeline bubble) are no
-- straggler. Without that metadata, ranks whose receive time (Bubble) differs by more than the
-- threshold are taken as different stages (sorted by Bubble, a new group where the gap to the
-- previous rank exceeds it); where no rank has receive time, all ranks form one group.
-- In each group and for each component, take the median over its ranks (one value per rank and
-- device). A rank is listed when Computing, Free or Preparing exceeds the median, or
-- Communication(Not Overlapped) falls short of it (the others waited that much longer for it), by
-- more than the threshold: 5 % of the group's mean step (Computing + Communication(Not Overlapped)
-- + Free, msprof-analyze's step), at least 1 µs. The median, not a spread (MAD, standard
-- deviation), is the baseline: when several ranks are slow, a spread grows past all of them.
-- A rank without communication in the step is not compared on it (none of the others'
-- collectives waits for it). Needs at least 3 values per group (with 2 nobody is "the" slow
-- one). A rank listed only for Communication(Not Overlapped) is the one the others wait for, its
-- own excess spread over components none of which crosses the threshold alone.
-- column `Step` BIGINT: training step
-- column `Rank` INTEGER: the slow rank
-- column `Device` VARCHAR: its device
-- column `Component` VARCHAR: which step_trace column stands out
-- column `Direction` VARCHAR: above (its own work is longer) or below (it waited less in communication) the median
-- column `Value(us)` DOUBLE: the rank's value, µs
-- column `Median(us)` DOUBLE: median over the group's ranks, µs
-- column `Excess(us)` DOUBLE: how far the value stands out in the slow direction (value minus median, or median minus value below), µs
-- column `Threshold(us)` DOUBLE: the excess above which a rank is listed (5 % of the group's mean step), µs
-- column `Ranks` BIGINT: how many values the group had
-- column `Compared With` VARCHAR: the group: "pipeline stage N: ranks …" (metadata), "ranks … (like receive time, no stage metadata)" or "ranks …"
WITH base AS (
    SELECT t."Step", t."Rank", t."Device", r.pp_stage, t."Computing", t."Communication(Not Overlapped)", t."Free",
           t."Preparing", coalesce(t."Bubble", 0) AS bubble, coalesce(t."Communication", 0) > 0 AS communicates,
           t."Computing" + t."Communication(Not Overlapped)" + t."Free" AS step_time
    FROM step_trace t LEFT JOIN run_ranks r ON r.rank = t."Rank"
    WHERE t."Step" IS NOT NULL
), gaps AS (  -- the ranks without stage metadata, in order of receive time: a new group at each wide gap
    SELECT *, CASE WHEN pp_stage IS NULL
                    AND bubble - lag(bubble) OVER (PARTITION BY "Step", pp_stage IS NULL ORDER BY bubble, "Rank", "Device")
                        > greatest(0.05 * avg(step_time) OVER (PARTITION BY "Step", pp_stage IS NULL), 1.0)
               THEN 1 ELSE 0 END AS new_group
    FROM base
), grouped AS (
    SELECT *, CASE WHEN pp_stage IS NOT NULL THEN 'stage ' || pp_stage
                   ELSE 'bubble ' || sum(new_group) OVER (PARTITION BY "Step", pp_stage IS NULL
                                                          ORDER BY bubble, "Rank", "Device" ROWS UNBOUNDED PRECEDING) END AS grp
    FROM gaps
), groups AS (
    SELECT "Step", grp, count(*) AS n, greatest(0.05 * avg(step_time), 1.0) AS threshold,
           CASE WHEN any_value(pp_stage) IS NOT NULL
                THEN format('pipeline stage {}: ranks {}', any_value(pp_stage), rank_ranges(list("Rank")))
                WHEN count(*) OVER (PARTITION BY "Step") > 1 OR max(bubble) > 0
                THEN format('ranks {} (like receive time, no stage metadata)', rank_ranges(list("Rank")))
                ELSE format('ranks {}', rank_ranges(list("Rank"))) END AS compared
    FROM grouped GROUP BY "Step", grp
), long AS (
    UNPIVOT (SELECT "Step", grp, "Rank", "Device", communicates, "Computing", "Communication(Not Overlapped)", "Free", "Preparing"
             FROM grouped)
    ON "Computing", "Communication(Not Overlapped)", "Free", "Preparing" INTO NAME component VALUE v
), compared AS (
    SELECT * FROM long WHERE component <> 'Communication(Not Overlapped)' OR communicates
), stats AS (
    SELECT "Step", grp, component, median(v) AS med FROM compared GROUP BY ALL
), scored AS (
    SELECT l.*, s.med, g.n, g.threshold, g.compared,
           CASE WHEN l.component = 'Communication(Not Overlapped)' THEN 'below' ELSE 'above' END AS direction,
           CASE WHEN l.component = 'Communication(Not Overlapped)' THEN s.med - l.v ELSE l.v - s.med END AS excess
    FROM compared l JOIN stats s USING ("Step", grp, component) JOIN groups g USING ("Step", grp)
)
SELECT "Step", "Rank", "Device", component AS "Component", direction AS "Direction", v AS "Value(us)",
       med AS "Median(us)", round(excess, 3) AS "Excess(us)", round(threshold, 3) AS "Threshold(us)",
       n AS "Ranks", compared AS "Compared With"
FROM scored
WHERE n >= 3 AND excess > threshold
ORDER BY "Excess(us)" DESC, "Step", "Rank", "Device", "Component"
