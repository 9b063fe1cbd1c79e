/* sql/wfengine--0.2.0--0.3.0.sql -- upgrade wfengine from 0.2.0 to 0.3.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wfengine UPDATE TO '0.3.0'" to load this file. \quit

/*
 * 0.2.0 is released: sql/wfengine--0.1.0--0.2.0.sql never changes again
 * (sql/released.sha256).  Every schema change from here on is written in
 * this file, in the order it is made (docs/upgrading.md).
 */
