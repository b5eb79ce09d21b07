-- view: _units
-- answers: unit conversions, written once. Tables hold int64 ns; reports show µs with the unit in
--   the column name, as msprof does.
-- requires:
-- scope: rank

-- Duration in ns → µs as DOUBLE rounded to the ns (3 decimals): prints `8873.756`, not float noise.
CREATE OR REPLACE MACRO us(ns) AS round(ns / 1000.0, 3);

-- Absolute time in ns since the epoch → µs as an exact DECIMAL (a DOUBLE cannot hold 1.7e15 µs
-- with 3 decimals: it has ~16 significant digits, this needs 19).
CREATE OR REPLACE MACRO us_ts(ns) AS ns::DECIMAL(22, 0) * 0.001::DECIMAL(4, 3);

-- Duration in ns → ms as DOUBLE, rounded to the ns (msprof reports communication in ms).
CREATE OR REPLACE MACRO ms(ns) AS round(ns / 1e6, 6);
