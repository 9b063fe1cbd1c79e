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
