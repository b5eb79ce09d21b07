-- view: _held_ranks
-- answers: the ranks the run holds, whichever of them it was opened with: `run_held_ranks()`.
-- requires: run_ranks
-- scope: rank

-- A constant `session.attach` sets from the whole manifest before any view is created, so a view
-- that judges a rank's peers by it (data_quality's links_to_absent_ranks) gives that rank the same
-- rows on every restriction. This stand-in, the ranks opened, serves only a session that attached
-- no run (the views' build test).
CREATE MACRO IF NOT EXISTS run_held_ranks() AS (SELECT list(rank ORDER BY rank) FROM run_ranks);
