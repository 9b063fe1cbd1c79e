/* sql/wfengine--0.1.0--0.2.0.sql -- upgrade wfengine from 0.1.0 to 0.2.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wfengine UPDATE TO '0.2.0'" to load this file. \quit

/*
 * 0.1.0 is released and its script, sql/wfengine--0.1.0.sql, never changes
 * again (sql/released.sha256 holds its checksum; `make test` checks it).
 * Every schema change from here on is written in this file, in the order it
 * is made, and reaches a fresh install too: CREATE EXTENSION wfengine runs
 * the 0.1.0 script and then this one (docs/upgrading.md).
 */

/*
 * Durations beside PostgreSQL's interval (issue 14): wf._duration(text)
 * shows what a duration string of a definition or setting means, as the
 * C parser reads it, so that a test can compare it with ::interval.
 * Internal: no role but the owner executes it.
 */
CREATE FUNCTION wf._duration(duration text)
RETURNS interval
AS 'MODULE_PATHNAME', 'wfengine_duration'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION wf._duration(text) IS
'Internal: the interval a duration string of a definition or setting ("90s", "1h30m") means, NULL when it is not one.';
REVOKE ALL ON FUNCTION wf._duration(text) FROM PUBLIC;
