-- test/pgtap/065_monitor.sql
--
-- wfengine_monitor reads the statistics of every tenant and no payload
-- (issue 29):
--
--   * with two tenants driven through the API so that every table of
--     schemas wf and wfshard holds a row, a login that is a member of
--     wfengine_monitor only (no tenant, no job role, no BYPASSRLS) has no
--     SELECT privilege on any column of any of those tables
--     (has_column_privilege, column by column from the catalog), and a
--     SELECT of each column, as that login, is refused (42501) and returns
--     nothing;
--   * the relations it may read are the four statistics views, whose rows
--     come from no column that holds a payload (pg_depend: the views' columns of
--     wf.runs, wf.tasks, ... are none of input, output, context, error,
--     payload, ...);
--   * it reads the views, the counters and the histograms, with the rows
--     of both tenants at once, while each tenant's own login still sees
--     its own tenant only.
--
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
SELECT plan(10);

-- two tenants, each with a login of every job role and sensitive values
SET LOCAL wfengine.master_keys = 'k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
DO $$ BEGIN PERFORM wf.create_tenant('mon_one'); PERFORM wf.create_tenant('mon_two'); END $$;
CREATE ROLE mon_one_app IN ROLE wfengine_admin, wfengine_worker, wfengine_approver, wfengine_sensitive,
    wf_tenant_mon_one;
CREATE ROLE mon_two_app IN ROLE wfengine_admin, wfengine_worker, wfengine_approver, wfengine_sensitive,
    wf_tenant_mon_two;
CREATE ROLE mon_exporter LOGIN IN ROLE wfengine_monitor;
CREATE TEMP TABLE tokens (tenant text, token text);
GRANT ALL ON tokens TO PUBLIC;

-- rows in every table: definitions, runs, events, tasks (ready, leased,
-- finished), timers (a retry), approvals with tokens and a decision
-- attempt, decide failures, signals, correlations, buffered events,
-- suppressed-event counts are left to the engine; the rest below
CREATE FUNCTION pg_temp.drive() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t record;
    tok text;
BEGIN
    PERFORM wf.publish_definition('mon_def', '{"steps": [
      {"name": "a", "queue": "mon_q", "retry": {"max_attempts": 3, "initial_interval": "1h"}},
      {"name": "ap", "type": "approval", "approvers": ["alice"], "notify_queue": "mon_mail"},
      {"name": "w", "type": "wait_event", "event": "go"},
      {"name": "b", "queue": "mon_q"}],
      "correlation": {"k": "$.input.k"}, "sensitive": {"input": ["secret"]}}');
    PERFORM wf.start_run('mon_def', jsonb_build_object('k', 'key-' || i, 'secret', 'ssn-' || i), 'idem-' || i)
    FROM generate_series(1, 4) i;
    -- one attempt fails (a retry timer), one completes (finished), one is leased
    FOR t IN SELECT * FROM wf.claim_tasks('mon_q', 'w1', 3) LOOP
        IF t.input->>'k' = 'key-1' THEN
            PERFORM wf.fail_task(t.task_id, t.fence, '{"code": "boom"}', true);
        ELSIF t.input->>'k' = 'key-2' THEN
            PERFORM wf.complete_task(t.task_id, t.fence, '{"receipt": "r-2"}');
        ELSE
            PERFORM wf.heartbeat(t.task_id, t.fence, '{"progress": 1}');
        END IF;
    END LOOP;
    -- the approval of run 2: tokens issued, a bad token tried
    FOR t IN SELECT * FROM wf.claim_tasks('mon_mail', 'mailer', 1) LOOP
        FOR tok IN SELECT x.token FROM wf.issue_approval_tokens(t.task_id, t.fence) x WHERE x.decision = 'approve' LOOP
            INSERT INTO tokens VALUES (wf.current_tenant(), tok);
        END LOOP;
        PERFORM wf.complete_task(t.task_id, t.fence, '{"sent": true}');
    END LOOP;
    PERFORM wf.decide('wfa_not-a-token-at-all-xxxxxxxxxxxxxxxxxxxxxx', 'approve', 'alice');
    PERFORM wf.signal(r.run_id, 'go', '{"early": true}', 'ev-early') FROM wf.runs r;
    PERFORM wf.send_event('k:nobody', 'go', '{"kept": true}', 'ev-kept');
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.drive() TO PUBLIC;
SET LOCAL SESSION AUTHORIZATION mon_one_app;
SELECT pg_temp.drive();
SET LOCAL SESSION AUTHORIZATION mon_two_app;
SELECT pg_temp.drive();
RESET SESSION AUTHORIZATION;
DO $$ BEGIN
    PERFORM wf.set_tenant_policy('mon_one', '{"max_live_runs": 100}');
    PERFORM wf.configure_shard('s1', ARRAY['s1'], 0);
END $$;
INSERT INTO wf.schedules (tenant_id, name, cron, definition, input)
VALUES ('mon_one', 'mon_sched', '0 0 1 1 *', 'mon_def', '{"secret": "in-a-schedule"}');
INSERT INTO wf.suppressed_events (tenant_id, run_id, type, count, first_at, last_at)
SELECT r.tenant_id, r.run_id, 'signal_refused', 1, now(), now() FROM wf.runs r LIMIT 1;
-- what a move's subscription notes on its target (issue 30)
INSERT INTO wfshard.moved_runs (run_id) SELECT r.run_id FROM wf.runs r LIMIT 1;

-- every table of wf and wfshard, every column
CREATE TEMP TABLE cols AS
SELECT c.oid::regclass::text AS tbl, a.attname::text AS col
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname IN ('wf', 'wfshard') AND c.relkind IN ('r', 'p');
CREATE FUNCTION pg_temp.empty_tables() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t text;
    n bigint;
    out text;
BEGIN
    FOR t IN SELECT DISTINCT tbl FROM cols ORDER BY 1 LOOP
        EXECUTE format('SELECT count(*) FROM %s', t) INTO n;
        IF n = 0 THEN
            out := concat_ws(', ', out, t);
        END IF;
    END LOOP;
    RETURN out;
END
$$;
SELECT is(pg_temp.empty_tables(), NULL, 'every table of wf and wfshard holds a row');

SELECT is((SELECT string_agg(tbl || '.' || col, ', ' ORDER BY tbl, col) FROM cols
           WHERE has_column_privilege('mon_exporter', tbl, col, 'SELECT')
              OR has_column_privilege('wfengine_monitor', tbl, col, 'SELECT')), NULL,
          'wfengine_monitor may select no column of any table of wf and wfshard');

-- and a real SELECT of each, as the login
CREATE FUNCTION pg_temp.read_as_monitor() RETURNS TABLE (tbl text, col text, outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    c record;
    v text;
BEGIN
    FOR c IN SELECT * FROM cols ORDER BY 1, 2 LOOP
        tbl := c.tbl;
        col := c.col;
        BEGIN
            SET LOCAL SESSION AUTHORIZATION mon_exporter;
            EXECUTE format('SELECT %I::text FROM %s LIMIT 1', c.col, c.tbl) INTO v;
            outcome := 'read ' || COALESCE(v, 'nothing');
            RESET SESSION AUTHORIZATION;
        EXCEPTION WHEN OTHERS THEN
            outcome := SQLSTATE;
        END;
        RETURN NEXT;
    END LOOP;
END
$$;
CREATE TEMP TABLE reads AS SELECT * FROM pg_temp.read_as_monitor();
SELECT ok((SELECT count(*) FROM reads) > 100, 'every column was tried (' || (SELECT count(*) FROM reads) || ')');
SELECT is((SELECT string_agg(tbl || '.' || col || ': ' || outcome, ', ' ORDER BY tbl, col) FROM reads
           WHERE outcome <> '42501'), NULL,
          'a SELECT of every column of every table, as a wfengine_monitor login, is refused (42501)');

-- what it may read: the four views, none of them made of a payload column
SELECT is((SELECT string_agg(c.oid::regclass::text, ', ' ORDER BY c.oid::regclass::text)
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname IN ('wf', 'wfshard') AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
             AND (has_table_privilege('mon_exporter', c.oid, 'SELECT')
                  OR has_any_column_privilege('mon_exporter', c.oid, 'SELECT'))),
          'wf.approval_stats, wf.queue_stats, wf.run_stats, wf.timer_stats',
          'wfengine_monitor may read the four statistics views, no other relation of wf and wfshard');
SELECT is((SELECT string_agg(DISTINCT v.relname || ' reads ' || t.oid::regclass::text || '.' || a.attname, ', ')
           FROM pg_class v
           JOIN pg_rewrite rw ON rw.ev_class = v.oid
           JOIN pg_depend d ON d.objid = rw.oid AND d.classid = 'pg_rewrite'::regclass
                           AND d.refclassid = 'pg_class'::regclass AND d.refobjsubid > 0
           JOIN pg_class t ON t.oid = d.refobjid AND t.oid <> v.oid
           JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
           WHERE v.oid IN ('wf.queue_stats'::regclass, 'wf.run_stats'::regclass,
                           'wf.timer_stats'::regclass, 'wf.approval_stats'::regclass)
             AND (a.atttypid = 'jsonb'::regtype
                  OR a.attname IN ('input', 'output', 'context', 'error', 'payload', 'result', 'details',
                                   'heartbeat_details', 'spec', 'data', 'comment', 'last_error', 'value',
                                   'wrapped', 'idempotency_key', 'event_id', 'key', 'input_digest'))), NULL,
          'the statistics views are made of no payload column');

-- the statistics of both tenants at once, to the monitor
SET LOCAL SESSION AUTHORIZATION mon_exporter;
CREATE TEMP TABLE seen AS
SELECT 'queue_stats' AS v, tenant_id FROM wf.queue_stats WHERE queue IN ('mon_q', 'mon_mail')
UNION ALL SELECT 'run_stats', tenant_id FROM wf.run_stats WHERE definition_name = 'mon_def'
UNION ALL SELECT 'timer_stats', tenant_id FROM wf.timer_stats WHERE kind = 'retry'
UNION ALL SELECT 'approval_stats', tenant_id FROM wf.approval_stats WHERE definition_name = 'mon_def';
SELECT is((SELECT string_agg(v || ':' || tenants, ' ' ORDER BY v)
           FROM (SELECT v, string_agg(DISTINCT tenant_id, ',' ORDER BY tenant_id) AS tenants FROM seen GROUP BY v) x),
          'approval_stats:mon_one,mon_two queue_stats:mon_one,mon_two run_stats:mon_one,mon_two timer_stats:mon_one,mon_two',
          'the monitor reads the four views with the rows of both tenants');
SELECT is((SELECT sum(running) FROM wf.run_stats WHERE definition_name = 'mon_def'), 8::numeric,
          'run_stats counts the running runs of both tenants (4 + 4)');
SELECT ok((SELECT count(*) FROM wf.engine_counters()) > 0
          AND (SELECT count(*) FROM wf.timer_lag_histogram()) > 0
          AND (SELECT count(*) FROM wf.claim_latency_histogram()) > 0
          AND (SELECT count(*) >= 0 FROM wf.worker_status()),
          'the monitor reads the counters, the histograms and wf.worker_status()');
RESET SESSION AUTHORIZATION;

-- a tenant's login still sees its own tenant only
SET LOCAL SESSION AUTHORIZATION mon_one_app;
CREATE TEMP TABLE seen_one AS
SELECT tenant_id FROM wf.queue_stats UNION ALL SELECT tenant_id FROM wf.run_stats
UNION ALL SELECT tenant_id FROM wf.timer_stats UNION ALL SELECT tenant_id FROM wf.approval_stats;
RESET SESSION AUTHORIZATION;
SELECT is((SELECT string_agg(DISTINCT tenant_id, ',') FROM seen_one), 'mon_one',
          'a tenant''s login reads its own tenant''s rows of the views, no other');

SELECT * FROM finish();
ROLLBACK;
