-- scenario: tenants: a login acts for the tenant of its wf_tenant_* role; one tenant never
-- sees or touches another's rows, through the API or direct SQL; roles get what their job needs
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
DROP ROLE IF EXISTS regress_acme_admin, regress_acme_app, regress_acme_worker, regress_acme_ops,
    regress_globex_admin, regress_globex_app, regress_globex_worker, regress_nobody, regress_double;
DROP ROLE IF EXISTS wf_tenant_acme, wf_tenant_globex;
RESET client_min_messages;
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>', 'g');
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;
SELECT wf.create_tenant('acme'), wf.create_tenant('globex');
CREATE ROLE regress_acme_admin IN ROLE wfengine_admin;
CREATE ROLE regress_acme_app IN ROLE wfengine_app;
CREATE ROLE regress_acme_worker IN ROLE wfengine_worker;
CREATE ROLE regress_acme_ops IN ROLE wfengine_operator;
CREATE ROLE regress_globex_admin IN ROLE wfengine_admin;
CREATE ROLE regress_globex_app IN ROLE wfengine_app;
CREATE ROLE regress_globex_worker IN ROLE wfengine_worker;
CREATE ROLE regress_nobody IN ROLE wfengine_app;
CREATE ROLE regress_double IN ROLE wfengine_app;
SELECT wf.add_tenant_member('acme', r) FROM unnest(ARRAY['regress_acme_admin', 'regress_acme_app',
    'regress_acme_worker', 'regress_acme_ops', 'regress_double']::regrole[]) r;
SELECT wf.add_tenant_member('globex', r) FROM unnest(ARRAY['regress_globex_admin', 'regress_globex_app',
    'regress_globex_worker', 'regress_double']::regrole[]) r;

-- each tenant publishes its own "order" and starts a run
SET SESSION AUTHORIZATION regress_acme_admin;
SELECT wf.current_tenant();
SELECT wf.publish_definition('order', '{"steps": [{"name": "work", "queue": "work"}]}');
SET SESSION AUTHORIZATION regress_acme_app;
SELECT wf.start_run('order', '{"secret": "acme"}') AS acme_run \gset
SET SESSION AUTHORIZATION regress_globex_admin;
SELECT wf.publish_definition('order', '{"steps": [{"name": "work", "queue": "work"}, {"name": "more", "queue": "work"}]}');
SET SESSION AUTHORIZATION regress_globex_app;
SELECT wf.current_tenant();
SELECT wf.start_run('order', '{"secret": "globex"}') AS globex_run \gset

-- globex sees its own rows only, in every table
SELECT count(*) AS runs, bool_and(input->>'secret' = 'globex') AS own FROM wf.runs;
SELECT count(*) AS acme_events FROM wf.events WHERE run_id = :'acme_run';
SELECT count(*) FILTER (WHERE e.run_id = :'acme_run') AS acme_events_in_log,
       count(*) FILTER (WHERE e.run_id = :'globex_run') AS own_events_in_log
FROM wf.event_log e WHERE e.run_id IN (:'acme_run', :'globex_run');
SELECT count(*) AS definitions FROM wf.definitions;
SELECT count(*) AS tasks FROM wf.tasks;
-- and the API does not know acme's run
SELECT pg_temp.err(format('SELECT wf.run_status(%L)', :'acme_run'));
SELECT pg_temp.err(format('SELECT wf.explain(%L)', :'acme_run'));
SELECT pg_temp.err(format('SELECT * FROM wf.history(%L)', :'acme_run'));
SELECT pg_temp.err(format('SELECT wf.signal(%L, %L)', :'acme_run', 'go'));
SELECT pg_temp.err(format('SELECT wf.verify_run(%L)', :'acme_run'));
SELECT pg_temp.err(format('SELECT wf.run_graph(%L)', :'acme_run'));
-- direct writes are refused, whatever the tenant
SELECT pg_temp.err('UPDATE wf.tasks SET status = ''ready''');
SELECT pg_temp.err('DELETE FROM wf.events');
SELECT pg_temp.err('INSERT INTO wf.timers (tenant_id) VALUES (''acme'')');
-- an application cannot run operator or worker commands
SELECT pg_temp.err(format('SELECT wf.cancel_run(%L, %L)', :'globex_run', 'mine'));
SELECT pg_temp.err('SELECT * FROM wf.claim_tasks(''work'', ''w'')');
RESET SESSION AUTHORIZATION;
SELECT task_id AS acme_task FROM wf.tasks WHERE run_id = :'acme_run' \gset

-- workers claim the tasks of their own tenant from the queue of the same name
SET SESSION AUTHORIZATION regress_globex_worker;
SELECT count(*) AS claimed, bool_and(input->>'secret' = 'globex') AS own FROM wf.claim_tasks('work', 'g', 10);
SELECT pg_temp.err(format('SELECT wf.complete_task(%s, 1, %L)', :acme_task, '{}'));
SELECT pg_temp.err(format('SELECT wf.heartbeat(%s, 1)', :acme_task));
SET SESSION AUTHORIZATION regress_acme_worker;
SELECT wf.complete_task(task_id, fence, '{"done": true}') FROM wf.claim_tasks('work', 'a', 10);
SELECT pg_temp.err(format('SELECT wf.start_run(%L)', 'order'));
SET SESSION AUTHORIZATION regress_acme_app;
SELECT wf.start_run('order', '{"secret": "acme 2"}') IS NOT NULL AS started;

-- operators act within their tenant; the actor of each event is the role that called
SET SESSION AUTHORIZATION regress_acme_ops;
SELECT wf.run_status(:'acme_run');
SELECT pg_temp.err(format('SELECT wf.pause_run(%L, %L)', :'globex_run', 'not mine'));
SELECT count(*) FROM wf.cancel_runs('all of them', '{"definition": "order"}');
RESET SESSION AUTHORIZATION;
SELECT r.input->>'secret' AS run, r.status, e.type, e.actor
FROM wf.runs r CROSS JOIN LATERAL wf._run_events(r.run_id, r.tenant_id) e WHERE r.tenant_id = 'acme' ORDER BY 1, e.seq;
SELECT tenant_id, status FROM wf.runs ORDER BY tenant_id, status;

-- each tenant has its own LISTEN channels, which name no tenant and which
-- another tenant cannot compute; a run of acme notifies acme's channel only
SET SESSION AUTHORIZATION regress_acme_app;
SELECT wf.channel('runs') AS acme_runs, wf.channel('queue', 'work') AS acme_work \gset
SET SESSION AUTHORIZATION regress_globex_app;
SELECT wf.channel('runs') AS globex_runs, wf.channel('queue', 'work') AS globex_work \gset
SELECT :'acme_runs' <> :'globex_runs' AND :'acme_work' <> :'globex_work' AS distinct_channels,
       strpos(:'acme_runs' || :'acme_work' || :'globex_runs' || :'globex_work', 'acme') = 0
       AND strpos(:'acme_runs' || :'acme_work' || :'globex_runs' || :'globex_work', 'globex') = 0 AS no_names;
RESET SESSION AUTHORIZATION;
LISTEN :"acme_runs";
LISTEN :"globex_runs";
LISTEN :"acme_work";
LISTEN :"globex_work";
\getenv abs_builddir PG_ABS_BUILDDIR
\set notify_log :abs_builddir '/results/270_tenancy.notifications'
\o :notify_log
SET SESSION AUTHORIZATION regress_acme_app;
SELECT wf.start_run('order', '{"secret": "acme 3"}') IS NOT NULL AS started;
RESET SESSION AUTHORIZATION;
\o
\set log `cat :'notify_log'`
SELECT CASE WHEN line LIKE '%' || :'acme_runs' || '%' THEN 'acme runs channel'
            WHEN line LIKE '%' || :'acme_work' || '%' THEN 'acme queue channel'
            WHEN line LIKE '%' || :'globex_runs' || '%' THEN 'globex runs channel'
            WHEN line LIKE '%' || :'globex_work' || '%' THEN 'globex queue channel' END AS notified
FROM regexp_split_to_table(:'log', E'\n') AS line WHERE line LIKE 'Asynchronous%' ORDER BY 1;
UNLISTEN *;

-- the engine worker (here wf.tick(), as a superuser of tenant "default") joins a
-- parallel step of acme and cancels the losing branch, which belongs to acme
SET SESSION AUTHORIZATION regress_acme_admin;
SELECT wf.publish_definition('race', '{"steps": [{"name": "p", "type": "parallel", "join": {"first": 1},
  "branches": [{"steps": [{"name": "fast", "queue": "race_q"}]}, {"steps": [{"name": "slow", "queue": "race_slow"}]}]}]}') AS v;
SET SESSION AUTHORIZATION regress_acme_app;
SELECT wf.start_run('race') AS race \gset
SET SESSION AUTHORIZATION regress_acme_worker;
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.claim_tasks('race_q', 'w');
RESET SESSION AUTHORIZATION;
SELECT wf.tick() > 0 AS fired;
SELECT definition_name, status FROM wf.runs WHERE run_id = :'race' OR parent_run_id = :'race' ORDER BY 1;
SELECT count(*) AS timers_in_error FROM wf.timers WHERE errors > 0;

-- a role of no tenant, and a role of two, are refused
SET SESSION AUTHORIZATION regress_nobody;
SELECT pg_temp.err('SELECT wf.current_tenant()');
SELECT pg_temp.err('SELECT count(*) FROM wf.runs');
SET SESSION AUTHORIZATION regress_double;
SELECT pg_temp.err('SELECT wf.current_tenant()');
RESET SESSION AUTHORIZATION;
-- SET ROLE does not change the tenant: it follows the session user
SET SESSION AUTHORIZATION regress_acme_admin;
SET ROLE wfengine_admin;
SELECT current_user, wf.current_tenant();
RESET ROLE;
RESET SESSION AUTHORIZATION;
SELECT wf.current_tenant() AS superuser_tenant;

-- tenant management is for superusers
SELECT wf.create_tenant('Bad Name');
SELECT wf.create_tenant('acme');
SELECT wf.add_tenant_member('initech', 'regress_nobody');
SELECT wf.remove_tenant_member('initech', 'regress_nobody');
SELECT wf.remove_tenant_member('acme', 'regress_globex_app');
SET SESSION AUTHORIZATION regress_acme_admin;
SELECT pg_temp.err('SELECT wf.create_tenant(''mine'')');
RESET SESSION AUTHORIZATION;
-- every table has row-level security, enabled and forced
SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
       (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) AS policies
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'wf' AND c.relkind = 'r' ORDER BY 1;

SET client_min_messages = warning;
DROP ROLE regress_acme_admin, regress_acme_app, regress_acme_worker, regress_acme_ops,
    regress_globex_admin, regress_globex_app, regress_globex_worker, regress_nobody, regress_double;
DROP ROLE wf_tenant_acme, wf_tenant_globex;
RESET client_min_messages;
