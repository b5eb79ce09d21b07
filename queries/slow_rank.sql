-- view: slow_rank
-- answers: which ranks are slow, in which step and in which part of the step — the step_trace
--   components of a rank that stand out from the other ranks of the same step.
-- matches: the slow-rank analyses of msprof-analyze (advisor "slow rank", cluster recipe
--   slow_rank) and MindInsight's cluster view, with an explicit statistical rule.
-- requires: step_trace
-- scope: cluster
-- Rule: for each step and component (Computing, Communication(Not Overlapped), Free, Preparing),
-- take the median and the median absolute deviation (MAD) over ranks (one value per rank and
-- device). A rank is listed when its value exceeds the median by more than the threshold
-- max(3 × 1.4826 × MAD, 5 % of the median, 1 µs): 3 robust standard deviations, but never a
-- difference too small to matter. Needs at least 3 values per step (with 2 nobody is "the" slow one).
-- column `Step` BIGINT: training step
-- column `Rank` INTEGER: the slow rank
-- column `Device` VARCHAR: its device
-- column `Component` VARCHAR: which step_trace column stands out
-- column `Value(us)` DOUBLE: the rank's value, µs
-- column `Median(us)` DOUBLE: median over the step's ranks, µs
-- column `Excess(us)` DOUBLE: value minus median, µs
-- column `Threshold(us)` DOUBLE: the excess above which a rank is listed, µs
-- column `Ranks` BIGINT: how many values the step had
WITH long AS (
    UNPIVOT (SELECT "Step", "Rank", "Device", "Computing", "Communication(Not Overlapped)", "Free", "Preparing"
             FROM step_trace WHERE "Step" IS NOT NULL)
    ON "Computing", "Communication(Not Overlapped)", "Free", "Preparing" INTO NAME component VALUE v
), stats AS (
    SELECT "Step", component, median(v) AS med, count(*) AS n FROM long GROUP BY ALL
), mad AS (
    SELECT l."Step", l.component, median(abs(l.v - s.med)) AS mad
    FROM long l JOIN stats s USING ("Step", component) GROUP BY ALL
)
SELECT l."Step", l."Rank", l."Device", l.component AS "Component", l.v AS "Value(us)", s.med AS "Median(us)",
       round(l.v - s.med, 3) AS "Excess(us)",
       round(greatest(3 * 1.4826 * m.mad, 0.05 * s.med, 1.0), 3) AS "Threshold(us)", s.n AS "Ranks"
FROM long l JOIN stats s USING ("Step", component) JOIN mad m USING ("Step", component)
WHERE s.n >= 3 AND l.v - s.med > greatest(3 * 1.4826 * m.mad, 0.05 * s.med, 1.0)
ORDER BY "Excess(us)" DESC, l."Step", l."Rank"
