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
SELECT wf.start_run('q') IS NOT NULL AS first, wf.start_run('q', '{}', 'key-2') IS NOT NULL AS second;
SELECT wf.start_run('q');
-- a repeated start of a run that exists returns it, also at the limit
SELECT wf.start_run('q', '{}', 'key-2') = (SELECT run_id FROM wf.runs WHERE idempotency_key = 'key-2') AS same_run;
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

-- max_tasks_in_flight: the tenant gets at most that many leased tasks of a queue;
-- the rest wait, wf.explain says why, and a finished attempt makes room
SELECT max_tasks_in_flight FROM wf.set_tenant_policy('default', '{"max_tasks_in_flight": 2}');
SELECT wf.start_run('q') AS r1, wf.start_run('q') AS r2, wf.start_run('q') AS r3 \gset
SELECT count(*) AS claimed FROM wf.claim_tasks('pol_q', 'w', 10);
SELECT count(*) AS claimed_at_limit FROM wf.claim_tasks('pol_q', 'w', 10);
SELECT e->>'waiting_for' AS waiting_for, e->'details'->>'in_flight' AS in_flight,
       e->'details'->>'max_tasks_in_flight' AS lim, e->'details'->>'reason' AS reason
FROM wf.explain((SELECT run_id FROM wf.tasks WHERE queue = 'pol_q' AND status = 'ready' ORDER BY task_id LIMIT 1)) AS e;
-- a waiting claim at the limit sleeps (it does not spin) and comes back empty
SELECT count(*) AS claimed_after_wait FROM wf.claim_tasks('pol_q', 'w', 1, wait => '200 ms');
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.tasks WHERE queue = 'pol_q' AND status = 'leased' ORDER BY task_id LIMIT 1;
SELECT count(*) AS claimed_after_one_ended FROM wf.claim_tasks('pol_q', 'w', 10, wait => '1 s');
SELECT wf.complete_task(task_id, fence, '{}') FROM wf.tasks WHERE queue = 'pol_q' AND status = 'leased';
SELECT max_tasks_in_flight FROM wf.set_tenant_policy('default', '{"max_tasks_in_flight": null}');
SELECT count(*) AS claimed_without_limit FROM wf.claim_tasks('pol_q', 'w', 10);

-- max_definition_depth: how deeply parallel steps nest (1 = none)
SELECT max_definition_depth FROM wf.set_tenant_policy('default', '{"max_definition_depth": 1}');
SELECT wf.publish_definition('flat', '{"steps": [{"name": "a", "queue": "x"}]}') AS flat;
SELECT wf.publish_definition('nested', '{"steps": [{"name": "p", "type": "parallel", "branches": [
  {"steps": [{"name": "a", "queue": "x"}]}, {"steps": [{"name": "b", "queue": "x"}]}]}]}');
SELECT max_definition_depth FROM wf.set_tenant_policy('default', '{"max_definition_depth": null}');

-- max_timers_per_run: a definition whose runs could have more timers pending at once
-- (run timeout, and per step its timeout, retry backoff, sleep, approval expiry) is
-- refused at publish
SELECT max_timers_per_run FROM wf.set_tenant_policy('default', '{"max_timers_per_run": 2}');
SELECT wf.publish_definition('two_timers', '{"timeout": "1d", "steps": [
  {"name": "a", "queue": "pol_loop", "retry": {"max_attempts": 1}, "timeout": {"total": "1h"}},
  {"name": "again", "type": "choice", "choices": [{"when": "$.steps.a.output.again == true", "next": "a"}],
   "default": "end"}]}') AS two_timers;
SELECT wf.publish_definition('three_timers', '{"timeout": "1d", "steps": [
  {"name": "a", "queue": "x", "retry": {"max_attempts": 3}, "timeout": {"total": "1h"}}]}');
-- a loop does not pile timers up: each visit's step timeout supersedes the last
SELECT wf.start_run('two_timers') AS loop \gset
SELECT wf.complete_task(task_id, fence, '{"again": true}') FROM wf.claim_tasks('pol_loop', 'w');
SELECT wf.complete_task(task_id, fence, '{"again": true}') FROM wf.claim_tasks('pol_loop', 'w');
SELECT wf.complete_task(task_id, fence, '{"again": true}') FROM wf.claim_tasks('pol_loop', 'w');
SELECT kind, status, outcome, count(*) FROM wf.timers WHERE run_id = :'loop' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT wf.complete_task(task_id, fence, '{"again": false}') FROM wf.claim_tasks('pol_loop', 'w');
SELECT wf.run_status(:'loop'), wf.verify_run(:'loop');
-- a run of a definition published before the limit was lowered: the transition that
-- would go past it is refused and changes nothing
SELECT max_timers_per_run FROM wf.set_tenant_policy('default', '{"max_timers_per_run": 1}');
SELECT pg_temp.err('SELECT wf.start_run(''two_timers'')');
SELECT count(*) AS runs_of_two_timers FROM wf.runs r JOIN wf.definitions d USING (definition_id) WHERE d.name = 'two_timers';
SELECT max_timers_per_run FROM wf.set_tenant_policy('default', '{"max_timers_per_run": null}');

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
