-- view: _ranks
-- answers: how a list of ranks is written in one cell: runs of consecutive ranks as ranges,
--   "0-3,6" (slow_rank's groups, advice's findings over several ranks).
-- requires:
-- scope: rank
-- (a macro, of no table: the groups and the driver each create it where a view needs it; no
-- group computes a view of it, `grouped._rank_views`)

-- A list of ranks (any order, repeats allowed) → "0-3,6": each run of consecutive ranks as
-- "first-last", a lone rank as itself, the runs in order (rank minus its position is constant
-- along a run). NULL for an empty list.
CREATE OR REPLACE MACRO rank_ranges(ranks) AS (
    SELECT string_agg(CASE WHEN lo = hi THEN lo::VARCHAR ELSE lo || '-' || hi END, ',' ORDER BY lo)
    FROM (SELECT min(r) AS lo, max(r) AS hi
          FROM (SELECT r, r - row_number() OVER (ORDER BY r) AS run FROM (SELECT DISTINCT unnest(ranks) AS r))
          GROUP BY run)
);
