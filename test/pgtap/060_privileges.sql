-- test/pgtap/060_privileges.sql
--
-- Every role's EXECUTE set in schema wf is exactly what docs/reference.md
-- documents (issue 29): the table between the markers "privileges of the
-- roles: begin" and "... end" of its section "Privileges of the roles" is
-- read from the file (pg_prove runs in the repository's root, as make
-- pgtap does) and compared with the catalog:
--
--   * per role, the functions granted to the role itself (aclexplode of
--     proacl) equal the table's list, and its memberships among the roles
--     of the table equal the column "Member of";
--   * per role, every function of wf it may execute, directly or through
--     the roles it is a member of (has_function_privilege), equals the
--     union of the lists of the role and those roles;
--   * no role outside the table is granted EXECUTE on a function of wf
--     (a new role, or a grant to some other role, fails the test), PUBLIC
--     may execute nothing there, nor may a tenant role, a login of a
--     tenant without a job role, or pg_read_all_data;
--   * no role may execute a function whose name begins with "_".
--
-- A function added to the API without its row here, or a grant the docs do
-- not list, fails the test; so does a table the docs change without the
-- install script.

\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set privdoc `sed -n '/<!-- privileges of the roles: begin/,/<!-- privileges of the roles: end -->/p' docs/reference.md`

BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS wfengine;
SELECT plan(10);

-- the documented table: one row per role, its members-of and its functions
-- (signatures compared without blanks around commas and parentheses, as
-- regprocedure prints them)
CREATE FUNCTION pg_temp.norm(sig text) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT regexp_replace(sig, '\s*([,()])\s*', '\1', 'g') $$;
CREATE TEMP TABLE doc_roles AS
SELECT substring(cells[2] FROM '`([a-z_]+)`') AS role,
       ARRAY(SELECT m[1] FROM regexp_matches(cells[3], '`([a-z_]+)`', 'g') m ORDER BY 1) AS member_of,
       ARRAY(SELECT pg_temp.norm(m[1])
             FROM regexp_matches(cells[4], '`(wf\.[a-z_]+\([^`]*\))`', 'g') m ORDER BY 1) AS fns
FROM (SELECT string_to_array(l, '|') AS cells
      FROM regexp_split_to_table(:'privdoc', E'\n') l
      WHERE l ~ '^\| `[a-z_]+` \|') x;
CREATE TEMP TABLE doc_fns AS SELECT d.role, unnest(d.fns) AS fn FROM doc_roles d;

SELECT ok((SELECT count(*) FROM doc_roles) >= 8 AND (SELECT count(*) FROM doc_fns) >= 60,
          'docs/reference.md: the table "Privileges of the roles" is read (' ||
          (SELECT count(*) FROM doc_roles) || ' roles, ' || (SELECT count(*) FROM doc_fns) || ' grants)');
SELECT is((SELECT string_agg(f.fn, ', ' ORDER BY f.fn) FROM doc_fns f
           WHERE to_regprocedure(f.fn) IS NULL
              OR (SELECT n.nspname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                  WHERE p.oid = to_regprocedure(f.fn)) <> 'wf'), NULL,
          'every function the table names exists in schema wf');

-- the catalog: what each role is granted itself, on the functions of wf
CREATE TEMP TABLE granted AS
SELECT a.grantee::regrole::text AS role, pg_temp.norm(p.oid::regprocedure::text) AS fn
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
     aclexplode(COALESCE(p.proacl, acldefault('f', p.proowner))) a
WHERE n.nspname = 'wf' AND a.privilege_type = 'EXECUTE' AND a.grantee <> 0
  AND a.grantee <> p.proowner;

SELECT is((SELECT string_agg(g.role || ': ' || g.fn, '; ' ORDER BY g.role, g.fn) FROM granted g
           WHERE NOT EXISTS (SELECT 1 FROM doc_fns d WHERE d.role = g.role AND d.fn = g.fn)), NULL,
          'every EXECUTE grant on a function of wf is listed for its role in the docs');
SELECT is((SELECT string_agg(d.role || ': ' || d.fn, '; ' ORDER BY d.role, d.fn) FROM doc_fns d
           WHERE NOT EXISTS (SELECT 1 FROM granted g WHERE g.role = d.role AND g.fn = d.fn)), NULL,
          'every function the docs list for a role is granted to that role');
SELECT is((SELECT string_agg(d.role || ' is a member of ' || COALESCE(array_to_string(actual, ', '), 'nothing')
                             || ', not ' || COALESCE(NULLIF(array_to_string(d.member_of, ', '), ''), 'nothing'), '; ')
           FROM doc_roles d,
                LATERAL (SELECT array_agg(m.roleid::regrole::text ORDER BY m.roleid::regrole::text) AS actual
                         FROM pg_auth_members m
                         WHERE m.member = d.role::regrole
                           AND m.roleid::regrole::text IN (SELECT role FROM doc_roles)) x
           WHERE COALESCE(x.actual, '{}') <> d.member_of), NULL,
          'each role is a member of the roles the docs say, among the documented roles');

-- what each role may execute in the end: its own and its roles' lists
CREATE TEMP TABLE expected_set AS
WITH RECURSIVE up(role, via) AS (
    SELECT d.role, d.role FROM doc_roles d
    UNION
    SELECT up.role, m FROM up JOIN doc_roles d ON d.role = up.via, unnest(d.member_of) m)
SELECT DISTINCT up.role, f.fn FROM up JOIN doc_fns f ON f.role = up.via;
CREATE TEMP TABLE actual_set AS
SELECT d.role, pg_temp.norm(p.oid::regprocedure::text) AS fn
FROM doc_roles d, pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'wf' AND has_function_privilege(d.role, p.oid, 'EXECUTE');
SELECT is((SELECT string_agg(role || ': ' || fn, '; ' ORDER BY role, fn)
           FROM (SELECT * FROM actual_set EXCEPT SELECT * FROM expected_set) x), NULL,
          'no role may execute a function of wf beyond its documented set (with its memberships)');
SELECT is((SELECT string_agg(role || ': ' || fn, '; ' ORDER BY role, fn)
           FROM (SELECT * FROM expected_set EXCEPT SELECT * FROM actual_set) x), NULL,
          'every role may execute all of its documented set');

-- nobody else
SELECT is((SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text)
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
                aclexplode(COALESCE(p.proacl, acldefault('f', p.proowner))) a
           WHERE n.nspname = 'wf' AND a.privilege_type = 'EXECUTE' AND a.grantee = 0), NULL,
          'PUBLIC may execute no function of wf');
DO $$ BEGIN PERFORM wf.create_tenant('priv_t'); END $$;
CREATE ROLE priv_login LOGIN IN ROLE wf_tenant_priv_t;
SELECT is((SELECT string_agg(r || ': ' || p.oid::regprocedure::text, ', ' ORDER BY r, p.oid::regprocedure::text)
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
                unnest(ARRAY['wf_tenant_priv_t', 'priv_login', 'pg_read_all_data', 'pg_write_all_data']) r
           WHERE n.nspname = 'wf' AND has_function_privilege(r, p.oid, 'EXECUTE')), NULL,
          'a tenant role, a login of a tenant without a job role and pg_read_all_data execute nothing in wf');
SELECT is((SELECT string_agg(g.role || ': ' || g.fn, ', ' ORDER BY g.role, g.fn) FROM granted g
           WHERE g.fn LIKE 'wf.\_%'), NULL,
          'no role is granted an internal function (wf._*)');

SELECT * FROM finish();
ROLLBACK;
