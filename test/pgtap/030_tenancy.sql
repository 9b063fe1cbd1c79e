-- test/pgtap/030_tenancy.sql
--
-- Invariants of tenant isolation (issue 6):
--
--   * every engine table has row-level security enabled and forced, with
--     the one policy tenant_isolation;
--   * no job role may INSERT, UPDATE or DELETE any engine table (but
--     wfengine_admin on wf.schedules), and none may read wf.secrets or
--     wf.tenant_keys;
--   * PUBLIC may execute no function of schema wf;
--   * with three tenants driven through the API, a role of each sees, in
--     every table, exactly its tenant's rows, and the API answers "does
--     not exist" for every run of another tenant;
--   * every function a job role may execute is in the attack list below
--     (a new function without an entry fails the test), and every attack
--     by tenant t_one with t_two's ids (runs, tasks and fences, approval
--     tokens, correlation keys, schedules, definitions, sealed envelopes)
--     is refused or answers without t_two's data, and leaves every row of
--     t_two as it was; so does a direct UPDATE or DELETE of every table.
--
-- Everything happens inside one transaction that is rolled back (roles
-- too).

\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SET LOCAL client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS wfengine;
SELECT plan(17);

SELECT is((SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'wf' AND c.relkind = 'r'
             AND NOT (c.relrowsecurity AND c.relforcerowsecurity)), 0::bigint,
          'every table of wf has row-level security enabled and forced');
SELECT is((SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'wf' AND c.relkind = 'r'
             AND (SELECT array_agg(p.polname ORDER BY p.polname) FROM pg_policy p WHERE p.polrelid = c.oid)
                 IS DISTINCT FROM ARRAY['tenant_isolation']::name[]), 0::bigint,
          'every table has exactly the policy tenant_isolation');
SELECT is((SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
                  unnest(ARRAY['wfengine_app', 'wfengine_worker', 'wfengine_approver',
                               'wfengine_operator', 'wfengine_admin', 'wfengine_sensitive']) r,
                  unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p
           WHERE n.nspname = 'wf' AND c.relkind = 'r'
             AND has_table_privilege(r, c.oid, p)
             AND NOT (r = 'wfengine_admin' AND c.relname = 'schedules' AND p <> 'TRUNCATE')), 0::bigint,
          'no job role writes an engine table (but an administrator wf.schedules)');
SELECT is((SELECT count(*) FROM unnest(ARRAY['wfengine_app', 'wfengine_worker', 'wfengine_approver',
                                             'wfengine_operator', 'wfengine_admin', 'wfengine_sensitive']) r,
                  unnest(ARRAY['wf.secrets', 'wf.tenant_keys']) t
           WHERE has_table_privilege(r, t, 'SELECT')), 0::bigint,
          'no job role reads the secrets or the tenant keys');
SELECT is((SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'wf' AND p.prorettype <> 'trigger'::regtype
             AND (p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a
                                              WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'))), 0::bigint,
          'PUBLIC executes no function of wf');

-- three tenants, each with a role that starts, works and reads
SELECT wf.create_tenant(t) FROM unnest(ARRAY['t_one', 't_two', 't_three']) t;
CREATE ROLE tap_t_one IN ROLE wfengine_admin, wfengine_worker, wfengine_approver, wf_tenant_t_one;
CREATE ROLE tap_t_two IN ROLE wfengine_admin, wfengine_worker, wfengine_approver, wf_tenant_t_two;
CREATE ROLE tap_t_three IN ROLE wfengine_admin, wfengine_worker, wfengine_approver, wf_tenant_t_three;
CREATE FUNCTION pg_temp.drive(n integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    PERFORM wf.publish_definition('shared', '{"steps": [
      {"name": "a", "queue": "q", "retry": {"max_attempts": 2, "initial_interval": "1ms"}},
      {"name": "w", "type": "wait_event", "event": "go"},
      {"name": "b", "queue": "q"}],
      "correlation": {"k": "$.input.k"}}');
    PERFORM wf.start_run('shared', jsonb_build_object('i', i, 'k', 'same-key')) FROM generate_series(1, n) i;
    FOR t IN SELECT * FROM wf.claim_tasks('q', 'w', n) LOOP
        IF t.input->>'i' = '1' THEN
            PERFORM wf.fail_task(t.task_id, t.fence, '{"code": "x"}', false);
        ELSE
            PERFORM wf.complete_task(t.task_id, t.fence, '{}');
        END IF;
    END LOOP;
    PERFORM wf.send_event('k:same-key', 'go', '{}', 'ev-1');
    PERFORM wf.send_event('k:nobody-yet', 'go', '{}', 'ev-buffered');   -- kept: wf.buffered_events
    PERFORM wf.complete_task(c.task_id, c.fence, '{}') FROM wf.claim_tasks('q', 'w', n) c;
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.drive(integer) TO PUBLIC;
SET LOCAL SESSION AUTHORIZATION tap_t_one;
SELECT pg_temp.drive(3);
SET LOCAL SESSION AUTHORIZATION tap_t_two;
SELECT pg_temp.drive(4);
SET LOCAL SESSION AUTHORIZATION tap_t_three;
SELECT pg_temp.drive(5);
RESET SESSION AUTHORIZATION;

-- what each tenant sees, table by table, against what belongs to it
CREATE FUNCTION pg_temp.seen(role text) RETURNS TABLE (tbl text, visible bigint, foreign_rows bigint)
LANGUAGE plpgsql AS $$
DECLARE
    t text;
    tenant text := substr(role, 5);
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'wf' AND c.relkind = 'r' AND c.relname NOT IN ('secrets', 'tenant_keys')
             ORDER BY 1 LOOP
        EXECUTE format('SET LOCAL SESSION AUTHORIZATION %I', role);
        EXECUTE format('SELECT count(*), count(*) FILTER (WHERE tenant_id <> %L) FROM wf.%I', tenant, t)
            INTO visible, foreign_rows;
        RESET SESSION AUTHORIZATION;
        tbl := t;
        RETURN NEXT;
    END LOOP;
END
$$;
SELECT is((SELECT sum(foreign_rows) FROM pg_temp.seen('tap_t_one')), 0::numeric, 'tenant t_one sees no row of another tenant');
SELECT is((SELECT sum(foreign_rows) FROM pg_temp.seen('tap_t_two')), 0::numeric, 'tenant t_two sees no row of another tenant');
CREATE FUNCTION pg_temp.owned(tenant text, tbl text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM wf.%I WHERE tenant_id = %L', tbl, tenant) INTO n;
    RETURN n;
END
$$;
SELECT ok((SELECT bool_and(s.visible = pg_temp.owned('t_three', s.tbl)) FROM pg_temp.seen('tap_t_three') s),
          'tenant t_three sees all of its own rows in every table');
SELECT ok((SELECT count(*) FILTER (WHERE s.visible > 0) >= 6 FROM pg_temp.seen('tap_t_three') s),
          'the drive left rows in the tables checked (runs, events, tasks, signals, definitions, correlations)');
SELECT is((SELECT count(*) FROM wf.runs GROUP BY tenant_id HAVING tenant_id = 't_three'), 5::bigint,
          'tenant t_three has its five runs');

-- the API of one tenant knows no run of another
CREATE FUNCTION pg_temp.foreign_runs_known(role text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r uuid;
    known bigint := 0;
    runs uuid[];
BEGIN
    SELECT array_agg(x.run_id) INTO runs FROM wf.runs x WHERE x.tenant_id <> substr(role, 5);
    EXECUTE format('SET LOCAL SESSION AUTHORIZATION %I', role);
    FOREACH r IN ARRAY runs LOOP
        BEGIN
            PERFORM wf.run_status(r);
            known := known + 1;
        EXCEPTION WHEN undefined_object THEN
            NULL;
        END;
        BEGIN
            PERFORM wf.signal(r, 'go');
            known := known + 1;
        EXCEPTION WHEN undefined_object THEN
            NULL;
        END;
    END LOOP;
    RESET SESSION AUTHORIZATION;
    RETURN known;
END
$$;
SELECT is(pg_temp.foreign_runs_known('tap_t_one'), 0::bigint, 'the API of t_one knows no run of another tenant');
SELECT is(pg_temp.foreign_runs_known('tap_t_two'), 0::bigint, 'the API of t_two knows no run of another tenant');

-- Attacks: tenant t_one holds every job role and calls every function it
-- may execute with the ids of tenant t_two.  First t_two gets rows of
-- every kind: a claimed task (id and fence), a ready task, an approval
-- with minted tokens, a run waiting for a correlated event, a schedule,
-- a sealed input.
SET LOCAL wfengine.master_keys = 'k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
GRANT wfengine_sensitive TO tap_t_one;
CREATE TEMP TABLE b_ids (k text PRIMARY KEY, v text);
GRANT ALL ON b_ids TO PUBLIC;
SET LOCAL SESSION AUTHORIZATION tap_t_two;
SELECT wf.publish_definition('b_def', '{"steps": [{"name": "s", "queue": "q"},
  {"name": "ap", "type": "approval", "approvers": ["alice"], "notify_queue": "b_mail"},
  {"name": "w", "type": "wait_event", "event": "go"}],
  "correlation": {"k": "$.input.k"}, "sensitive": {"input": ["secret"]}}');
INSERT INTO b_ids SELECT 'claimed_run', wf.start_run('b_def', '{"k": "same-key", "secret": "b-secret"}', 'b-key-1');
INSERT INTO b_ids SELECT 'task', task_id FROM wf.claim_tasks('q', 'b-worker', 1);
INSERT INTO b_ids SELECT 'fence', fence FROM wf.tasks WHERE task_id = (SELECT v::bigint FROM b_ids WHERE k = 'task');
INSERT INTO b_ids SELECT 'approval_run', wf.start_run('b_def', '{"k": "same-key", "secret": "b3"}', 'b-key-3');
SELECT wf.complete_task(c.task_id, c.fence, '{}') FROM wf.claim_tasks('q', 'b-worker', 1) c;
INSERT INTO b_ids SELECT 'ready_run', wf.start_run('b_def', '{"k": "same-key", "secret": "b2"}', 'b-key-2');
INSERT INTO b_ids SELECT 'mail_task', task_id FROM wf.claim_tasks('b_mail', 'b-mailer', 1);
INSERT INTO b_ids SELECT 'mail_fence', fence FROM wf.tasks WHERE task_id = (SELECT v::bigint FROM b_ids WHERE k = 'mail_task');
INSERT INTO b_ids SELECT 'token', token FROM wf.issue_approval_tokens(
    (SELECT v::bigint FROM b_ids WHERE k = 'mail_task'), (SELECT v::bigint FROM b_ids WHERE k = 'mail_fence'))
WHERE decision = 'approve';
INSERT INTO b_ids SELECT 'envelope', input->'secret' FROM wf.runs WHERE run_id = (SELECT v::uuid FROM b_ids WHERE k = 'claimed_run');
SELECT outcome FROM wf.send_event('k:b-only', 'go', '{"b": 1}', 'b-buffered');
INSERT INTO b_ids SELECT 'anchor', to_jsonb(h)::text FROM wf.chain_heads() h
WHERE h.run_id = (SELECT v::uuid FROM b_ids WHERE k = 'claimed_run');
RESET SESSION AUTHORIZATION;
INSERT INTO wf.schedules (tenant_id, name, cron, definition, input) VALUES ('t_two', 'b_sched', '* * * * *', 'b_def', '{}');
INSERT INTO b_ids SELECT 'sched', schedule_id FROM wf.schedules WHERE tenant_id = 't_two';

-- t_two's rows, every table, as one digest
CREATE FUNCTION pg_temp.b_digest() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t text;
    d text := '';
    x text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'wf' AND c.relkind = 'r' ORDER BY 1 LOOP
        EXECUTE format('SELECT md5(coalesce(string_agg(r::text, %L ORDER BY r::text), %L)) FROM wf.%I r WHERE r.tenant_id = %L',
                       E'\n', '', t, 't_two') INTO x;
        d := d || t || ':' || x || ' ';
    END LOOP;
    RETURN d;
END
$$;

CREATE TEMP TABLE b_before AS SELECT pg_temp.b_digest() AS digest;

-- one attack per function a job role may execute: SQL whose text result is
-- checked against expect ('error' = must be refused, else a regex)
CREATE TEMP TABLE attacks (fn text PRIMARY KEY, sql text NOT NULL, expect text NOT NULL);
INSERT INTO attacks VALUES
 ('wf.start_run(text,jsonb,text,integer,text)', $q$SELECT wf.start_run('b_def', '{}', 'b-key-1')$q$, 'error'),
 ('wf.run_traceparent(uuid)', $q$SELECT COALESCE(wf.run_traceparent(':claimed_run'), 'hidden')$q$, '^hidden$'),
 ('wf.claim_tasks(text,text,integer,interval,interval)',
  $q$SELECT count(*) FROM wf.claim_tasks('q', 'evil', 100) c WHERE c.run_id IN (SELECT run_id FROM wf.runs WHERE tenant_id <> 't_one')$q$, '^0$'),
 ('wf.claim_tasks_any(text[],text,integer,interval,interval)',
  $q$SELECT count(*) FROM wf.claim_tasks_any(ARRAY['q', 'b_mail'], 'evil', 100) c WHERE c.run_id IN (SELECT run_id FROM wf.runs WHERE tenant_id <> 't_one')$q$, '^0$'),
 ('wf.run_status(uuid)', $q$SELECT wf.run_status(':claimed_run')$q$, 'error'),
 ('wf.run_context(uuid)', $q$SELECT wf.run_context(':claimed_run')$q$, 'error'),
 ('wf.history(uuid)', $q$SELECT count(*) FROM wf.history(':claimed_run')$q$, 'error'),
 ('wf.explain(uuid)', $q$SELECT wf.explain(':approval_run')$q$, 'error'),
 ('wf.verify_run(uuid)', $q$SELECT wf.verify_run(':claimed_run')$q$, 'error'),
 ('wf.run_graph(uuid,text)', $q$SELECT wf.run_graph(':claimed_run', 'mermaid')$q$, 'error'),
 ('wf.terminate_run(uuid,text)', $q$SELECT wf.terminate_run(':claimed_run', 'attack')$q$, 'error'),
 ('wf.retry_step(uuid,text,interval)', $q$SELECT wf.retry_step(':claimed_run', 'attack')$q$, 'error'),
 ('wf.skip_step(uuid,jsonb,text,text)', $q$SELECT wf.skip_step(':approval_run', '{}', 'attack')$q$, 'error'),
 ('wf.cancel_run(uuid,text)', $q$SELECT wf.cancel_run(':ready_run', 'attack')$q$, 'error'),
 ('wf.migrate_run(uuid,integer,text)', $q$SELECT wf.migrate_run(':ready_run', 1, 'attack')$q$, 'error'),
 ('wf.pause_run(uuid,text)', $q$SELECT wf.pause_run(':ready_run', 'attack')$q$, 'error'),
 ('wf.resume_run(uuid,text)', $q$SELECT wf.resume_run(':ready_run', 'attack')$q$, 'error'),
 ('wf.update_context(uuid,jsonb,text)', $q$SELECT wf.update_context(':ready_run', '{"x": 1}', 'attack')$q$, 'error'),
 ('wf.set_legal_hold(uuid,boolean,text)', $q$SELECT wf.set_legal_hold(':ready_run', true, 'attack')$q$, 'error'),
 ('wf.signal(uuid,text,jsonb,text)', $q$SELECT wf.signal(':ready_run', 'go', '{}', 'ev-x')$q$, 'error'),
 ('wf.cancel_runs(text,jsonb,integer,uuid)', $q$SELECT count(*) FROM wf.cancel_runs('attack') c WHERE c.run_id IN (SELECT v::uuid FROM b_ids WHERE k LIKE '%run')$q$, '^0$'),
 ('wf.start_and_claim(text,jsonb,text,interval,text)', $q$SELECT count(*) FROM wf.start_and_claim('b_def', '{}', 'evil') c WHERE c.run_id IN (SELECT run_id FROM wf.runs WHERE tenant_id <> 't_one')$q$, 'error'),
 ('wf.list_runs(jsonb,integer,uuid)', $q$SELECT count(*) FROM wf.list_runs() c WHERE c.run_id IN (SELECT v::uuid FROM b_ids WHERE k LIKE '%run')$q$, '^0$'),
 ('wf.retry_runs(text,jsonb,integer,uuid)', $q$SELECT count(*) FROM wf.retry_runs('attack') c WHERE c.run_id IN (SELECT v::uuid FROM b_ids WHERE k LIKE '%run')$q$, '^0$'),
 ('wf.resume_runs(text,jsonb,integer,uuid)', $q$SELECT count(*) FROM wf.resume_runs('attack') c WHERE c.run_id IN (SELECT v::uuid FROM b_ids WHERE k LIKE '%run')$q$, '^0$'),
 ('wf.revoke_approval_tokens(uuid,text,text)', $q$SELECT wf.revoke_approval_tokens(':approval_run', 'ap', 'attack')$q$, 'error'),
 ('wf.reissue_approval_tokens(uuid,text,text)', $q$SELECT wf.reissue_approval_tokens(':approval_run', 'ap', 'attack')$q$, 'error'),
 ('wf.set_approvers(uuid,text,text[],text)', $q$SELECT wf.set_approvers(':approval_run', 'ap', ARRAY['mallory'], 'attack')$q$, 'error'),
 ('wf.publish_definition(text,jsonb)', $q$SELECT wf.publish_definition('b_def', '{"steps": [{"name": "evil", "queue": "q"}]}')$q$, '^1$'),
 ('wf.worker_status()', $q$SELECT count(*) >= 0 FROM wf.worker_status()$q$, '^true$'),
 ('wf.schedule(text,text,text,jsonb,integer)', $q$SELECT wf.schedule('b_sched', '* * * * *', 'b_def')$q$, '.*'),
 ('wf.unschedule(text)', $q$SELECT wf.unschedule('b_sched')$q$, '^false$'),
 ('wf.fire_schedule(bigint)', $q$SELECT wf.fire_schedule(:sched)$q$, '^$'),
 ('wf.cron_next(text,timestamp with time zone)', $q$SELECT wf.cron_next('* * * * *') > now()$q$, '^true$'),
 ('wf.current_tenant()', $q$SELECT wf.current_tenant()$q$, '^t_one$'),
 ('wf.preloaded()', $q$SELECT wf.preloaded()$q$, '.*'),
 ('wf.channel(text,text)', $q$SELECT wf.channel('queue', 'q') = (SELECT v FROM b_ids WHERE k = 'b_channel')$q$, '^false$'),
 ('wf.send_event(text,text,jsonb,text,interval)', $q$SELECT count(*) FROM wf.send_event('k:same-key', 'go', '{}', 'ev-attack') s WHERE s.run_id IN (SELECT v::uuid FROM b_ids WHERE k LIKE '%run')$q$, '^0$'),
 ('wf.chain_heads()', $q$SELECT count(*) FROM wf.chain_heads() h WHERE h.tenant_id <> 't_one' OR h.run_id IN (SELECT v::uuid FROM b_ids WHERE k LIKE '%run')$q$, '^0$'),
 ('wf.verify_run(uuid,jsonb)', $q$SELECT wf.verify_run(':claimed_run', ':anchor')$q$, 'error'),
 ('wf.definition_graph(text,integer,text)', $q$SELECT wf.definition_graph('b_def', 1, 'mermaid')$q$, 'error'),
 ('wf.complete_task(bigint,bigint,jsonb)', $q$SELECT wf.complete_task(:task, :fence, '{}')$q$, 'error'),
 ('wf.fail_task(bigint,bigint,jsonb,boolean)', $q$SELECT wf.fail_task(:task, :fence, '{}', false)$q$, 'error'),
 ('wf.complete_and_claim(bigint,bigint,jsonb,text,text,integer,interval)',
  $q$SELECT count(*) FROM wf.complete_and_claim(:task, :fence, '{}', 'q', 'evil', 100)$q$, 'error'),
 ('wf.fail_and_claim(bigint,bigint,jsonb,boolean,text,text,integer,interval)',
  $q$SELECT count(*) FROM wf.fail_and_claim(:task, :fence, '{}', false, 'q', 'evil', 100)$q$, 'error'),
 ('wf.complete_tasks(bigint[],bigint[],jsonb[])',
  $q$SELECT string_agg(answer, ',') FROM wf.complete_tasks(ARRAY[:task], ARRAY[:fence])$q$, '^unknown_task$'),
 ('wf.fail_tasks(bigint[],bigint[],jsonb[],boolean[])',
  $q$SELECT string_agg(answer, ',') FROM wf.fail_tasks(ARRAY[:task], ARRAY[:fence], ARRAY['{}'::jsonb])$q$, '^unknown_task$'),
 ('wf.complete_tasks_and_claim(bigint[],bigint[],jsonb[],text,text,integer,interval)',
  $q$SELECT min(array_to_string(answers, ',')) || ':' || count(*) FILTER (WHERE run_id IN (SELECT v::uuid FROM b_ids WHERE k LIKE '%run')) FROM wf.complete_tasks_and_claim(ARRAY[:task], ARRAY[:fence], NULL, 'q', 'evil', 100)$q$, '^unknown_task:0$'),
 ('wf.fail_tasks_and_claim(bigint[],bigint[],jsonb[],boolean[],text,text,integer,interval)',
  $q$SELECT min(array_to_string(answers, ',')) || ':' || count(*) FILTER (WHERE run_id IN (SELECT v::uuid FROM b_ids WHERE k LIKE '%run')) FROM wf.fail_tasks_and_claim(ARRAY[:task], ARRAY[:fence], ARRAY['{}'::jsonb], NULL, 'q', 'evil', 100)$q$, '^unknown_task:0$'),
 ('wf.start_runs(text,jsonb[],text[],integer)', $q$SELECT count(*) FROM wf.start_runs('b_def', ARRAY['{}'::jsonb], ARRAY['b-key-1'])$q$, 'error'),
 ('wf.heartbeat(bigint,bigint,jsonb)', $q$SELECT wf.heartbeat(:task, :fence, '{}')$q$, 'error'),
 ('wf.issue_approval_tokens(bigint,bigint)', $q$SELECT count(*) FROM wf.issue_approval_tokens(:mail_task, :mail_fence)$q$, 'error'),
 ('wf.decide(text,text,text,text,jsonb)', $q$SELECT wf.decide(':token', 'approve', 'alice')$q$, '^invalid$'),
 ('wf.decrypt(jsonb)', $q$SELECT wf.decrypt(':envelope')$q$, 'error');
SET LOCAL SESSION AUTHORIZATION tap_t_two;
INSERT INTO b_ids VALUES ('b_channel', wf.channel('queue', 'q'));
RESET SESSION AUTHORIZATION;

SELECT is((SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY 1)
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'wf'
             AND EXISTS (SELECT 1 FROM unnest(ARRAY['wfengine_app', 'wfengine_worker', 'wfengine_approver',
                                                    'wfengine_operator', 'wfengine_admin', 'wfengine_sensitive']) r
                         WHERE has_function_privilege(r, p.oid, 'EXECUTE'))
             AND p.oid::regprocedure::text NOT IN (SELECT fn FROM attacks)), NULL,
          'every function a job role may execute has an attack in the list');

CREATE FUNCTION pg_temp.attack(q text, OUT outcome text, OUT digest text) LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        SET LOCAL SESSION AUTHORIZATION tap_t_one;
        BEGIN
            EXECUTE q INTO outcome;
            outcome := coalesce(outcome, '');
        EXCEPTION WHEN OTHERS THEN
            outcome := 'error: ' || SQLERRM;
        END;
        RESET SESSION AUTHORIZATION;
        digest := pg_temp.b_digest();
        RAISE EXCEPTION 'roll back the attack' USING ERRCODE = 'P0099';
    EXCEPTION WHEN SQLSTATE 'P0099' THEN
        NULL;
    END;
END
$$;

CREATE TEMP TABLE outcomes (fn text, expect text, outcome text, untouched boolean);
DO $$
DECLARE
    a record;
    q text;
    r record;
    before text := pg_temp.b_digest();
BEGIN
    FOR a IN SELECT * FROM attacks ORDER BY fn LOOP
        q := a.sql;
        FOR r IN SELECT k, v FROM b_ids LOOP
            q := replace(q, ':' || r.k, r.v);
        END LOOP;
        SELECT * INTO r FROM pg_temp.attack(q);
        INSERT INTO outcomes VALUES (a.fn, a.expect, r.outcome, r.digest = before);
    END LOOP;
END
$$;
SELECT is((SELECT string_agg(fn || ' answered ' || outcome, '; ' ORDER BY fn) FROM outcomes
           WHERE NOT (CASE WHEN expect = 'error' THEN outcome LIKE 'error:%' ELSE outcome ~ expect END)), NULL,
          'every attack with t_two''s ids is refused or answers without them');
SELECT is((SELECT string_agg(fn, ', ' ORDER BY fn) FROM outcomes WHERE NOT untouched), NULL,
          'no attack changed a row of t_two');

-- direct writes to every table, as t_one, with and without t_two's ids
DO $$
DECLARE
    t text;
    n integer := 0;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'wf' AND c.relkind = 'r' ORDER BY 1 LOOP
        BEGIN
            SET LOCAL SESSION AUTHORIZATION tap_t_one;
            BEGIN
                EXECUTE format('UPDATE wf.%I SET tenant_id = %L WHERE tenant_id = %L', t, 't_one', 't_two');
                n := n + 1;
            EXCEPTION WHEN insufficient_privilege THEN NULL;
            END;
            BEGIN
                EXECUTE format('DELETE FROM wf.%I', t);
                n := n + 1;
            EXCEPTION WHEN insufficient_privilege THEN NULL;
            END;
            RESET SESSION AUTHORIZATION;
            INSERT INTO outcomes VALUES ('direct ' || t, CASE WHEN t = 'schedules' THEN 'admin' ELSE '' END, n::text, true);
            n := 0;
        END;
    END LOOP;
END
$$;

SELECT is((SELECT string_agg(fn || ' (' || outcome || ' statements not refused)', ', ' ORDER BY fn) FROM outcomes
           WHERE fn LIKE 'direct %' AND expect = '' AND outcome <> '0'), NULL,
          'direct UPDATE and DELETE of every table are refused to a tenant''s roles');
SELECT is(pg_temp.b_digest(), (SELECT digest FROM b_before), 'and t_two''s rows are as they were');

SELECT * FROM finish();
ROLLBACK;
