-- scenario: the extension installs, owns its schema and reports preloading
CREATE EXTENSION wfengine;
SELECT extname, extversion FROM pg_extension WHERE extname = 'wfengine';
SELECT wf.preloaded() AS preloaded, wf.current_tenant() AS tenant;
-- the API
SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid) AS args,
       pg_catalog.format_type(p.prorettype, NULL) AS returns
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'wf' ORDER BY p.proname, args;
-- the tables
SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'wf' AND c.relkind IN ('r', 'S') ORDER BY c.relname;
-- every table carries tenant_id
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'wf' AND c.relkind = 'r'
  AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id');
-- drop and create again: cached plans and definitions of the old install are not reused
SELECT wf.publish_definition('reinstall', '{"steps":[{"name":"a","queue":"q_reinstall"}]}');
DROP EXTENSION wfengine;
CREATE EXTENSION wfengine;
SELECT wf.publish_definition('reinstall', '{"steps":[{"name":"b","queue":"q_reinstall"}]}');
SELECT wf.start_run('reinstall') IS NOT NULL AS started;
SELECT step FROM wf.claim_tasks('q_reinstall', 'w');
