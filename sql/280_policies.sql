-- scenario: per-tenant policies: quotas on live runs, the start rate and definitions,
-- retention of finished runs with legal hold, and the pg_cron job that purges
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>', 'g');
END
$$;
SELECT wf.publish_definition('q', '{"steps": [{"name": "a", "queue": "pol_q"}]}');

-- max_live_runs: the start that would exceed it is refused; a finished run makes room
SELECT max_live_runs, retention FROM wf.set_tenant_policy('default', '{"max_live_runs": 2}');
SELECT wf.start_run('q') IS NOT NULL AS first, wf.start_run('q') IS NOT NULL AS second;
SELECT wf.start_run('q');
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.claim_tasks('pol_q', 'w', 1);
SELECT wf.start_run('q') IS NOT NULL AS after_one_finished;
SELECT count(*) AS live FROM wf.runs WHERE status = 'running';

-- max_starts_per_second with a burst: the third start at once waits for a token
SELECT max_live_runs, max_starts_per_second, start_burst
FROM wf.set_tenant_policy('default', '{"max_live_runs": null, "max_starts_per_second": 2, "start_burst": 2}');
SELECT pg_sleep(1.1);
SELECT wf.start_run('q') IS NOT NULL AS a, wf.start_run('q') IS NOT NULL AS b;
SELECT regexp_replace(pg_temp.err('SELECT wf.start_run(''q'')'), '\d+ ms', 'N ms');
SELECT pg_sleep(0.6);
SELECT wf.start_run('q') IS NOT NULL AS after_a_token;
SELECT max_starts_per_second FROM wf.set_tenant_policy('default', '{"max_starts_per_second": null, "start_burst": null}');

-- definition limits of the tenant, counted across branches
SELECT max_definition_steps FROM wf.set_tenant_policy('default', '{"max_definition_steps": 2, "max_definition_bytes": 400}');
SELECT pg_sleep(1.1);
SELECT wf.publish_definition('small', '{"steps": [{"name": "a", "queue": "x"}, {"name": "b", "queue": "x"}]}') AS fits;
SELECT wf.publish_definition('wide', '{"steps": [{"name": "p", "type": "parallel", "branches": [
  {"steps": [{"name": "a", "queue": "x"}]}, {"steps": [{"name": "b", "queue": "x"}]}]}]}');
SELECT wf.publish_definition('long', jsonb_build_object('description', repeat('x', 400),
                             'steps', jsonb_build_array(jsonb_build_object('name', 'a', 'queue', 'x'))));
SELECT max_definition_steps FROM wf.set_tenant_policy('default', '{"max_definition_steps": null, "max_definition_bytes": null}');

-- max_events_per_run: a run that has that many events takes no more signals
SELECT wf.publish_definition('chatty', '{"steps": [{"name": "w", "type": "wait_event", "event": "go"}]}');
SELECT wf.start_run('chatty') AS chatty \gset
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": 4}');
SELECT wf.signal(:'chatty', 'noise'), wf.signal(:'chatty', 'noise');
SELECT regexp_replace(pg_temp.err(format('SELECT wf.signal(%L, %L)', :'chatty', 'noise')), '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>');
SELECT seq FROM wf.runs WHERE run_id = :'chatty';
SELECT max_events_per_run FROM wf.set_tenant_policy('default', '{"max_events_per_run": null}');

-- retention: finished runs older than the tenant's retention are purged with all they
-- own; a live run and a run under legal hold are not
SELECT wf.publish_definition('keep', '{"steps": [{"name": "a", "queue": "keep_q"}]}');
SELECT wf.start_run('keep', '{"n": 1}') AS done_run \gset
SELECT wf.start_run('keep', '{"n": 2}') AS failed_run \gset
SELECT wf.start_run('keep', '{"n": 3}') AS held_run \gset
SELECT wf.start_run('keep', '{"n": 4}') AS live_run \gset
SELECT CASE t.input->>'n' WHEN '2' THEN wf.fail_task(t.task_id, t.fence, '{"code": "no"}', false)
                           ELSE wf.complete_task(t.task_id, t.fence, '{}') END AS verdict
FROM wf.claim_tasks('keep_q', 'w', 3) t ORDER BY t.input->>'n';
SELECT wf.set_legal_hold(:'held_run', true, 'litigation 2026-17') AS old_hold;
SELECT retention FROM wf.set_tenant_policy('default', '{"retention": "10 milliseconds"}');
SELECT pg_sleep(0.05);
SELECT wf.purge_runs(100) AS purged;
SELECT input->>'n' AS n, status, legal_hold FROM wf.runs WHERE definition_name = 'keep' ORDER BY 1;
SELECT count(*) AS events_left FROM wf.events WHERE run_id IN (:'done_run', :'failed_run');
SELECT count(*) AS tasks_left FROM wf.tasks WHERE run_id IN (:'done_run', :'failed_run');
SELECT type, payload->>'reason' AS reason, payload->>'hold' AS hold FROM wf.history(:'held_run')
WHERE type = 'legal_hold_set';
SELECT wf.verify_run(:'held_run');
-- released from hold, it goes with the next purge
SELECT wf.set_legal_hold(:'held_run', false, 'case closed') AS old_hold;
SELECT wf.purge_runs(100) AS purged;
SELECT input->>'n' AS n, status FROM wf.runs WHERE definition_name = 'keep' ORDER BY 1;
-- the history stays append-only for everyone else, a superuser too
SELECT pg_temp.err('DELETE FROM wf.events');
SELECT wf.purge_runs(0);
SELECT wf.set_legal_hold(:'live_run', true, '');

-- policy errors
SELECT wf.set_tenant_policy('nobody', '{"retention": "1 day"}');
SELECT wf.set_tenant_policy('default', '{"retension": "1 day"}');
SELECT wf.set_tenant_policy('default', '{"max_live_runs": 0}');
SELECT wf.set_tenant_policy('default', '{"max_live_runs": 2.5}');
SELECT wf.set_tenant_policy('default', '{"retention": "-1 day"}');
SELECT wf.set_tenant_policy('default', '[]');

-- the purge job, in the database where pg_cron runs its jobs
SELECT current_setting('cron.database_name') AS cron_db \gset
\c :cron_db
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SELECT NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron') AS own_cron,
       NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'wfengine') AS own_wf \gset
\if :own_cron
CREATE EXTENSION pg_cron;
\endif
\if :own_wf
CREATE EXTENSION wfengine;
\endif
RESET client_min_messages;
SELECT wf.schedule_purge('*/5 * * * *', 500) AS job \gset
SELECT jobname, schedule, command, username = current_user AS mine FROM cron.job WHERE jobid = :job;
SELECT wf.schedule_purge('*/7 * * * *') = :job AS same_job;
SELECT schedule, command FROM cron.job WHERE jobid = :job;
SELECT cron.unschedule('wfengine:purge') AS removed;
SELECT wf.schedule_purge('not cron');
SET client_min_messages = warning;
\if :own_wf
DROP EXTENSION wfengine;
\endif
\if :own_cron
DROP EXTENSION pg_cron;
\endif
