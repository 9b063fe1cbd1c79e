-- test/pgtap/050_catalog.sql
--
-- Catalog invariants of a hostile-tenant-proof install (issue 10):
--
--   * every function of schema wf that is not written in C (PL/pgSQL, SQL)
--     pins its search_path to exactly "pg_catalog, pg_temp": pg_temp last,
--     so that a caller's temporary types and relations never win a name
--     lookup inside it, and no schema of the caller is searched at all;
--   * no function of wf is SECURITY DEFINER without that pinned search_path;
--   * every view of wf applies row-level security as its caller
--     (security_invoker) or keeps a caller's functions behind its own
--     filter (security_barrier);
--   * nothing of wf (functions, tables, views, sequences, the schema) is
--     granted to PUBLIC; a NULL ACL counts as the default privileges, which
--     for a function include EXECUTE for PUBLIC.
--
-- The C functions cannot carry the setting themselves without a cost on
-- every call: the engine pins search_path when it switches to the owner
-- (src/tenant.c); sql/310_hostile.sql proves that part by running a
-- caller's shadow objects against every API call.
--
-- Each test lists the offending objects, so that a failure names them.
-- Everything happens inside one transaction that is rolled back.

\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS wfengine;
SELECT plan(9);

-- the functions of wf, with their language and settings
CREATE TEMP TABLE wf_functions AS
SELECT p.oid::regprocedure::text AS fn, l.lanname, p.prosecdef, p.proconfig, p.proowner,
       p.proacl
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_language l ON l.oid = p.prolang
WHERE n.nspname = 'wf';

SELECT cmp_ok((SELECT count(*) FROM wf_functions WHERE lanname <> 'c'), '>', 0::bigint,
              'wf has functions that are not written in C');
SELECT is(ARRAY(SELECT fn FROM wf_functions
                WHERE lanname <> 'c'
                  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (proconfig), false)
                ORDER BY fn),
          '{}'::text[],
          'every PL/pgSQL and SQL function of wf has SET search_path = pg_catalog, pg_temp');
SELECT is(ARRAY(SELECT fn || ': ' || s FROM wf_functions, unnest(proconfig) s
                WHERE s LIKE 'search_path=%' AND s NOT LIKE '%pg\_temp'
                ORDER BY 1),
          '{}'::text[],
          'no function of wf sets a search_path that does not end in pg_temp');
SELECT is(ARRAY(SELECT fn FROM wf_functions
                WHERE prosecdef
                  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (proconfig), false)
                ORDER BY fn),
          '{}'::text[],
          'no function of wf is SECURITY DEFINER without SET search_path = pg_catalog, pg_temp');

-- views
SELECT cmp_ok((SELECT count(*) FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'wf' AND c.relkind = 'v'), '>', 0::bigint,
              'wf has views');
SELECT is(ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class c
                JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'wf' AND c.relkind = 'v'
                  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_options_to_table(c.reloptions) o
                                  WHERE o.option_name IN ('security_invoker', 'security_barrier')
                                    AND o.option_value::boolean)
                ORDER BY 1),
          '{}'::text[],
          'every view of wf has security_invoker or security_barrier');

-- grants to PUBLIC (grantee 0), the default privileges of a NULL ACL included
SELECT is(ARRAY(SELECT fn || ' (' || a.privilege_type || ')'
                FROM wf_functions, aclexplode(coalesce(proacl, acldefault('f', proowner))) a
                WHERE a.grantee = 0
                ORDER BY 1),
          '{}'::text[],
          'no function of wf is granted to PUBLIC');
SELECT is(ARRAY(SELECT c.relname || ' ' || c.relkind::text || ' (' || a.privilege_type || ')'
                FROM pg_catalog.pg_class c
                JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
                     aclexplode(coalesce(c.relacl, acldefault((CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END)::"char",
                                                              c.relowner))) a
                WHERE n.nspname = 'wf' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
                  AND a.grantee = 0
                ORDER BY 1),
          '{}'::text[],
          'no table, view or sequence of wf is granted to PUBLIC');
SELECT is(ARRAY(SELECT a.privilege_type::text
                FROM pg_catalog.pg_namespace n,
                     aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
                WHERE n.nspname = 'wf' AND a.grantee = 0
                ORDER BY 1),
          '{}'::text[],
          'schema wf is not granted to PUBLIC');

SELECT * FROM finish();
ROLLBACK;
