-- test/pgtap/001_schema.sql
--
-- Schema contract of wfengine: the API functions with their signatures,
-- return types and volatility, the engine tables with their columns,
-- keys and indexes, tenant_id on every table, the append-only triggers,
-- and the SQLSTATE of the main errors of the API.
--
-- Run with: pg_prove -d <db> --ext .sql test/pgtap/
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

SELECT plan(243);

-- ---------------------------------------------------------------------
-- extension and schema
-- ---------------------------------------------------------------------
SELECT has_extension('wfengine', 'extension wfengine is installed');
SELECT has_schema('wf', 'schema wf exists');
SELECT is((SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
           WHERE e.extname = 'wfengine'), 'wf', 'wfengine lives in schema wf');

-- ---------------------------------------------------------------------
-- API functions: signature, return type, volatility
-- ---------------------------------------------------------------------
SELECT has_function('wf', 'current_tenant', ARRAY[]::text[], 'wf.current_tenant()');
SELECT has_function('wf', 'preloaded', ARRAY[]::text[], 'wf.preloaded()');
SELECT has_function('wf', 'publish_definition', ARRAY['text', 'jsonb'], 'wf.publish_definition(text, jsonb)');
SELECT has_function('wf', 'start_run', ARRAY['text', 'jsonb', 'text', 'integer', 'text'],
                    'wf.start_run(text, jsonb, text, integer, text)');
SELECT has_function('wf', 'claim_tasks', ARRAY['text', 'text', 'integer', 'interval', 'interval'],
                    'wf.claim_tasks(text, text, integer, interval, interval)');
SELECT has_function('wf', 'complete_task', ARRAY['bigint', 'bigint', 'jsonb'],
                    'wf.complete_task(bigint, bigint, jsonb)');
SELECT has_function('wf', 'fail_task', ARRAY['bigint', 'bigint', 'jsonb', 'boolean'],
                    'wf.fail_task(bigint, bigint, jsonb, boolean)');
SELECT has_function('wf', 'run_status', ARRAY['uuid'], 'wf.run_status(uuid)');
SELECT has_function('wf', 'verify_run', ARRAY['uuid'], 'wf.verify_run(uuid)');
SELECT has_function('wf', 'history', ARRAY['uuid'], 'wf.history(uuid)');
SELECT has_function('wf', 'refuse_change', ARRAY[]::text[], 'wf.refuse_change()');

SELECT function_returns('wf', 'current_tenant', ARRAY[]::text[], 'text');
SELECT function_returns('wf', 'preloaded', ARRAY[]::text[], 'boolean');
SELECT function_returns('wf', 'publish_definition', ARRAY['text', 'jsonb'], 'integer');
SELECT function_returns('wf', 'start_run', ARRAY['text', 'jsonb', 'text', 'integer', 'text'], 'uuid');
SELECT function_returns('wf', 'claim_tasks', ARRAY['text', 'text', 'integer', 'interval', 'interval'], 'setof wf.claimed_task');
SELECT function_returns('wf', 'complete_task', ARRAY['bigint', 'bigint', 'jsonb'], 'text');
SELECT function_returns('wf', 'fail_task', ARRAY['bigint', 'bigint', 'jsonb', 'boolean'], 'text');
SELECT function_returns('wf', 'run_status', ARRAY['uuid'], 'text');
SELECT function_returns('wf', 'verify_run', ARRAY['uuid'], 'boolean');
-- the tamper anchors: the heads of the chains, and a check against an exported one
SELECT has_function('wf', 'verify_run', ARRAY['uuid', 'jsonb'], 'wf.verify_run(uuid, jsonb)');
SELECT function_returns('wf', 'verify_run', ARRAY['uuid', 'jsonb'], 'boolean');
SELECT has_function('wf', 'chain_heads', ARRAY[]::text[], 'wf.chain_heads()');
SELECT is((SELECT proargnames FROM pg_proc WHERE oid = 'wf.chain_heads()'::regprocedure),
          ARRAY['tenant_id', 'run_id', 'seq', 'head_hash', 'signature']::text[],
          'wf.chain_heads() returns tenant_id, run_id, seq, head_hash, signature');
-- buffered correlated events: wf.send_event gained keep, with a default
SELECT has_function('wf', 'send_event', ARRAY['text', 'text', 'jsonb', 'text', 'interval'],
                    'wf.send_event(text, text, jsonb, text, interval)');
SELECT hasnt_function('wf', 'send_event', ARRAY['text', 'text', 'jsonb', 'text'],
                      'no second wf.send_event without keep (one function, so calls stay unambiguous)');
SELECT is((SELECT pronargdefaults::int FROM pg_proc
           WHERE oid = 'wf.send_event(text, text, jsonb, text, interval)'::regprocedure),
          3, 'wf.send_event(): payload, event_id and keep are optional');
SELECT ok(pg_get_function_arguments('wf.send_event(text, text, jsonb, text, interval)'::regprocedure)
          LIKE '%keep interval DEFAULT ''1 day''::interval',
          'wf.send_event(): keep defaults to 1 day');
SELECT function_returns('wf', 'history', ARRAY['uuid'], 'setof record');
SELECT function_returns('wf', 'refuse_change', ARRAY[]::text[], 'trigger');

SELECT volatility_is('wf', 'publish_definition', ARRAY['text', 'jsonb'], 'volatile');
SELECT volatility_is('wf', 'start_run', ARRAY['text', 'jsonb', 'text', 'integer', 'text'], 'volatile');
SELECT volatility_is('wf', 'claim_tasks', ARRAY['text', 'text', 'integer', 'interval', 'interval'], 'volatile');
SELECT volatility_is('wf', 'complete_task', ARRAY['bigint', 'bigint', 'jsonb'], 'volatile');
SELECT volatility_is('wf', 'fail_task', ARRAY['bigint', 'bigint', 'jsonb', 'boolean'], 'volatile');

-- the output columns of the set-returning functions, in order
-- (wf.claim_tasks returns rows of wf.claimed_task since 0.3.0: its columns)
SELECT is((SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
           WHERE a.attrelid = (SELECT t.typrelid FROM pg_proc p JOIN pg_type t ON t.oid = p.prorettype
                               WHERE p.oid = 'wf.claim_tasks(text, text, integer, interval, interval)'::regprocedure)
             AND a.attnum > 0 AND NOT a.attisdropped),
          ARRAY['task_id', 'run_id', 'step', 'attempt', 'fence', 'idempotency_key', 'input',
                'lease_expires_at', 'queue', 'activity', 'deliveries']::text[],
          'wf.claim_tasks() returns task_id, run_id, step, attempt, fence, idempotency_key, input, lease_expires_at, queue, activity, deliveries');
SELECT is((SELECT proargnames[2:] FROM pg_proc WHERE oid = 'wf.history(uuid)'::regprocedure),
          ARRAY['seq', 'type', 'step', 'attempt', 'payload', 'actor', 'created_at', 'hash']::text[],
          'wf.history() returns seq, type, step, attempt, payload, actor, created_at, hash');
-- the defaults of the optional arguments
SELECT is((SELECT pronargdefaults::int FROM pg_proc WHERE oid = 'wf.start_run(text, jsonb, text, integer, text)'::regprocedure),
          4, 'wf.start_run(): input, idempotency_key, version and traceparent are optional');
SELECT is((SELECT pronargdefaults::int FROM pg_proc WHERE oid = 'wf.claim_tasks(text, text, integer, interval, interval)'::regprocedure),
          3, 'wf.claim_tasks(): max_tasks, lease and wait are optional');
SELECT is((SELECT pronargdefaults::int FROM pg_proc WHERE oid = 'wf.fail_task(bigint, bigint, jsonb, boolean)'::regprocedure),
          1, 'wf.fail_task(): retryable is optional');

-- ---------------------------------------------------------------------
-- tables and columns
-- ---------------------------------------------------------------------
SELECT has_table('wf', 'definitions', 'table wf.definitions');
SELECT has_table('wf', 'runs', 'table wf.runs');
SELECT has_table('wf', 'events', 'table wf.events');
SELECT has_table('wf', 'tasks', 'table wf.tasks');
SELECT has_table('wf', 'suppressed_events', 'table wf.suppressed_events');
SELECT has_table('wf', 'decide_failures', 'table wf.decide_failures');
SELECT has_table('wf', 'buffered_events', 'table wf.buffered_events');
SELECT has_column('wf', 'buffered_events', c, 'wf.buffered_events.' || c)
FROM unnest(ARRAY['buffer_id', 'tenant_id', 'key', 'name', 'event_id', 'payload', 'sent_by',
                  'received_at', 'expires_at', 'delivered_at', 'delivered_to']) AS c;
SELECT col_is_unique('wf', 'buffered_events', ARRAY['tenant_id', 'key', 'event_id'],
                     'a buffered event id is unique per tenant and key');
-- the event ids of wf.send_event, per tenant and key, until their keep passes
SELECT has_table('wf', 'event_ids', 'table wf.event_ids');
SELECT has_column('wf', 'event_ids', c, 'wf.event_ids.' || c)
FROM unnest(ARRAY['tenant_id', 'key', 'event_id', 'sent_at', 'expires_at']) AS c;
SELECT col_is_pk('wf', 'event_ids', ARRAY['tenant_id', 'key', 'event_id'],
                 'an event id is recorded once per tenant and key');
SELECT has_index('wf', 'event_ids', 'event_ids_expiry_idx', ARRAY['expires_at'],
                 'wf.event_ids is purged through expires_at');
SELECT has_column('wf', 'tenant_policies', 'max_buffered_events', 'wf.tenant_policies.max_buffered_events');
SELECT has_sequence('wf', 'task_id_seq', 'sequence wf.task_id_seq');

SELECT has_column('wf', 'definitions', c, 'wf.definitions.' || c)
FROM unnest(ARRAY['definition_id', 'tenant_id', 'name', 'version', 'digest', 'spec',
                  'created_by', 'created_at']) AS c;
SELECT has_column('wf', 'runs', c, 'wf.runs.' || c)
FROM unnest(ARRAY['run_id', 'tenant_id', 'definition_id', 'definition_name', 'definition_version',
                  'status', 'current_step', 'current_attempt', 'current_task', 'seq', 'input',
                  'context', 'output', 'idempotency_key', 'last_hash', 'created_at', 'updated_at',
                  'finished_at', 'input_digest']) AS c;
SELECT has_column('wf', 'events', c, 'wf.events.' || c)
FROM unnest(ARRAY['run_id', 'seq', 'tenant_id', 'type', 'step', 'attempt', 'payload', 'actor',
                  'created_at', 'hash']) AS c;
SELECT has_column('wf', 'tasks', c, 'wf.tasks.' || c)
FROM unnest(ARRAY['task_id', 'tenant_id', 'run_id', 'step', 'visit', 'attempt', 'queue', 'activity',
                  'status', 'available_at', 'lease_expires_at', 'fence', 'deliveries',
                  'idempotency_key', 'worker', 'input', 'output', 'error', 'created_at',
                  'claimed_at', 'finished_at']) AS c;

SELECT col_type_is('wf', 'runs', 'run_id', 'uuid', 'wf.runs.run_id is uuid');
SELECT col_type_is('wf', 'events', 'seq', 'integer', 'wf.events.seq is integer');
SELECT col_type_is('wf', 'events', 'hash', 'bytea', 'wf.events.hash is bytea');
SELECT col_type_is('wf', 'tasks', 'fence', 'bigint', 'wf.tasks.fence is bigint');
SELECT col_type_is('wf', 'tasks', 'task_id', 'bigint', 'wf.tasks.task_id is bigint');
SELECT col_type_is('wf', 'tasks', 'available_at', 'timestamp with time zone', 'wf.tasks.available_at is timestamptz');

-- every table carries tenant_id, NOT NULL
SELECT col_not_null('wf', t, 'tenant_id', 'wf.' || t || '.tenant_id is NOT NULL')
FROM unnest(ARRAY['definitions', 'runs', 'events', 'tasks', 'suppressed_events', 'decide_failures',
                  'buffered_events']) AS t;
SELECT is((SELECT array_agg(c.relname::text ORDER BY c.relname)
           FROM pg_class c
           WHERE c.relnamespace = 'wf'::regnamespace AND c.relkind IN ('r', 'p')
             AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                             WHERE a.attrelid = c.oid AND a.attname = 'tenant_id'
                               AND a.attnotnull AND NOT a.attisdropped)),
          NULL, 'no table in schema wf lacks a NOT NULL tenant_id');

SELECT col_not_null('wf', 'events', 'hash', 'wf.events.hash is NOT NULL');
SELECT col_not_null('wf', 'runs', 'last_hash', 'wf.runs.last_hash is NOT NULL');
SELECT col_not_null('wf', 'tasks', 'idempotency_key', 'wf.tasks.idempotency_key is NOT NULL');
SELECT col_not_null('wf', 'tasks', 'fence', 'wf.tasks.fence is NOT NULL');

-- keys
SELECT col_is_pk('wf', 'definitions', 'definition_id', 'wf.definitions primary key');
SELECT col_is_pk('wf', 'runs', ARRAY['run_id', 'tenant_id'], 'wf.runs primary key: run_id, and tenant_id for the replica identity of a move (issue 30)');
SELECT col_is_pk('wf', 'events', ARRAY['run_id', 'seq'], 'wf.events primary key is (run_id, seq)');
SELECT col_is_pk('wf', 'tasks', ARRAY['task_id', 'tenant_id'], 'wf.tasks primary key: task_id, and tenant_id for the replica identity of a move (issue 30)');
SELECT col_is_unique('wf', 'definitions', ARRAY['tenant_id', 'name', 'version'],
                     'a definition version is unique per tenant and name');
SELECT col_is_unique('wf', 'definitions', ARRAY['tenant_id', 'name', 'digest'],
                     'a definition digest is unique per tenant and name');
SELECT index_is_unique('wf', 'runs', 'runs_tenant_id_idempotency_key_key',
                       'a run idempotency key is unique per tenant (an index of the runs that have one)');
SELECT fk_ok('wf', 'runs', 'definition_id', 'wf', 'definitions', 'definition_id');

-- indexes
SELECT has_index('wf', 'tasks', 'tasks_claim_idx', ARRAY['tenant_id', 'queue', 'priority', 'available_at', 'task_id'],
                 'claim index on wf.tasks');
SELECT is((SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
           WHERE i.indexrelid = 'wf.tasks_claim_idx'::regclass),
          '(status = ''ready''::text)',
          'the claim index covers only ready tasks');
-- One unique index holds both rules of attempts (0.3.0): a live attempt's
-- key is (run_id, step, 0, 0), a finished one's (run_id, step, visit,
-- attempt).  What it refuses is checked on rows of a run of its own.
SELECT index_is_unique('wf', 'tasks', 'tasks_attempt_key', 'tasks_attempt_key is unique');
SELECT hasnt_index('wf', 'tasks', 'tasks_one_live_attempt',
                   'tasks_one_live_attempt is folded into tasks_attempt_key');
SELECT wf.publish_definition('schema_one', '{"steps": [{"name": "only", "queue": "schema_attempts_q"}]}') IS NOT NULL AS published \gset
CREATE TEMP TABLE schema_run AS SELECT wf.start_run('schema_one', '{}') AS run_id;
SELECT throws_ok($$INSERT INTO wf.tasks SELECT (jsonb_populate_record(t, jsonb_build_object('task_id', nextval('wf.task_id_seq'), 'attempt', 2))).*
                     FROM wf.tasks t WHERE t.run_id = (SELECT run_id FROM schema_run)$$,
                 '23505', NULL, 'a second live attempt of a step is refused by the database');
UPDATE wf.tasks SET status = 'failed', finished_at = now() WHERE run_id = (SELECT run_id FROM schema_run);
SELECT throws_ok($$INSERT INTO wf.tasks SELECT (jsonb_populate_record(t, jsonb_build_object('task_id', nextval('wf.task_id_seq')))).*
                     FROM wf.tasks t WHERE t.run_id = (SELECT run_id FROM schema_run)$$,
                 '23505', NULL, 'an attempt of a visit is numbered once');
SELECT lives_ok($$INSERT INTO wf.tasks SELECT (jsonb_populate_record(t, jsonb_build_object('task_id', nextval('wf.task_id_seq'), 'attempt', 2,
                                                                                  'status', 'ready', 'finished_at', NULL))).*
                    FROM wf.tasks t WHERE t.run_id = (SELECT run_id FROM schema_run)$$,
                'the next attempt of a step with a failed one is live beside it');
SELECT has_index('wf', 'runs', 'runs_status_idx', ARRAY['tenant_id', 'status', 'created_at'],
                 'status index on wf.runs');

-- append-only triggers
SELECT has_trigger('wf', 'events', 'events_append_only', 'wf.events has trigger events_append_only');
SELECT has_trigger('wf', 'events', 'events_no_truncate', 'wf.events has trigger events_no_truncate');
SELECT trigger_is('wf', 'events', 'events_append_only', 'wf', 'refuse_change',
                  'events_append_only calls wf.refuse_change()');
SELECT is((SELECT tgenabled::text FROM pg_trigger
           WHERE tgrelid = 'wf.events'::regclass AND tgname = 'events_append_only'),
          'O', 'events_append_only is enabled');
SELECT has_trigger('wf', 'definitions', 'definitions_immutable', 'wf.definitions has trigger definitions_immutable');
SELECT has_trigger('wf', 'definitions', 'definitions_no_truncate', 'wf.definitions has trigger definitions_no_truncate');
SELECT trigger_is('wf', 'definitions', 'definitions_immutable', 'wf', 'refuse_change',
                  'definitions_immutable calls wf.refuse_change()');

-- check constraints on states
SELECT throws_ok($$INSERT INTO wf.runs (run_id, tenant_id, definition_id, definition_name, definition_version,
                                      status, seq, input, context, last_hash, created_at, updated_at)
                  VALUES (gen_random_uuid(), 'default', -1, 'x', 1, 'sleeping', 1, '{}', '{}', '\x00', now(), now())$$,
                 '23514', NULL, 'wf.runs.status accepts only running, paused, completed and failed');
SELECT throws_ok($$INSERT INTO wf.tasks (tenant_id, run_id, step, visit, attempt, queue, status,
                                       available_at, idempotency_key, input, created_at)
                  VALUES ('default', gen_random_uuid(), 's', 1, 1, 'q', 'running', now(), 'k', '{}', now())$$,
                 '23514', NULL, 'wf.tasks.status accepts only ready, leased, completed, failed and cancelled');

-- ---------------------------------------------------------------------
-- behaviour of the API that the contract promises
-- ---------------------------------------------------------------------
SELECT is(wf.current_tenant(), 'default', 'the tenant of a plain session is "default"');

SELECT is(wf.publish_definition('schema_t', '{"steps": [{"name": "a", "queue": "schema_q"}]}'), 1,
          'the first version of a definition is 1');
SELECT is(wf.publish_definition('schema_t', '{"steps":[{"queue":"schema_q",  "name":"a"}]}'), 1,
          'publishing the same spec, however formatted, returns the existing version');
SELECT is(wf.publish_definition('schema_t', '{"steps": [{"name": "a", "queue": "schema_q"}, {"name": "b", "queue": "schema_q"}]}'), 2,
          'a changed spec gets the next version');
SELECT is((SELECT count(*)::int FROM wf.definitions WHERE name = 'schema_t'), 2,
          'two versions are stored');

CREATE TEMP TABLE schema_runs AS
SELECT wf.start_run('schema_t', '{"k": 1}', 'schema-key-1') AS r1,
       wf.start_run('schema_t', '{"k": 1}', 'schema-key-1') AS r2,
       wf.start_run('schema_t', '{"k": 2}', NULL, 1) AS r3;
SELECT is(r1, r2, 'wf.start_run() with the same idempotency key and input returns the same run') FROM schema_runs;
SELECT isnt(r1, r3, 'a start without a key is a new run') FROM schema_runs;
SELECT throws_ok($$INSERT INTO wf.runs SELECT (jsonb_populate_record(r, jsonb_build_object('run_id', gen_random_uuid()))).*
                     FROM wf.runs r, schema_runs WHERE r.run_id = r1$$,
                 '23505', NULL, 'a second run of a tenant with the same idempotency key is refused by the database');
SELECT is((SELECT definition_version FROM wf.runs, schema_runs WHERE run_id = r3), 1,
          'wf.start_run(..., version => 1) pins version 1');
SELECT is((SELECT definition_version FROM wf.runs, schema_runs WHERE run_id = r1), 2,
          'wf.start_run() without a version pins the latest');
SELECT is(wf.run_status(r1), 'running', 'wf.run_status() of a new run is running') FROM schema_runs;
SELECT results_eq($$SELECT type, step, attempt FROM schema_runs, wf.history(r1) ORDER BY seq$$,
                  $$VALUES ('run_started'::text, NULL::text, NULL::integer), ('task_scheduled', 'a', 1)$$,
                  'a new run has run_started and task_scheduled of its first step');
SELECT ok(wf.verify_run(r1), 'wf.verify_run() of a new run is true') FROM schema_runs;

-- ---------------------------------------------------------------------
-- SQLSTATEs of the main errors
-- ---------------------------------------------------------------------
-- 42704 undefined_object: unknown runs, definitions, versions and tasks
SELECT throws_ok($$SELECT wf.run_status('00000000-0000-0000-0000-000000000000')$$, '42704', NULL,
                 'wf.run_status() of an unknown run: 42704');
SELECT throws_ok($$SELECT wf.verify_run('00000000-0000-0000-0000-000000000000')$$, '42704', NULL,
                 'wf.verify_run() of an unknown run: 42704');
SELECT throws_ok($$SELECT * FROM wf.history('00000000-0000-0000-0000-000000000000')$$, '42704', NULL,
                 'wf.history() of an unknown run: 42704');
SELECT throws_ok($$SELECT wf.start_run('schema_no_such_definition')$$, '42704', NULL,
                 'wf.start_run() of an unknown definition: 42704');
SELECT throws_ok($$SELECT wf.start_run('schema_t', '{}', NULL, 99)$$, '42704', NULL,
                 'wf.start_run() of an unknown version: 42704');
SELECT throws_ok($$SELECT wf.complete_task(-1, 1)$$, '42704', NULL,
                 'wf.complete_task() of an unknown task: 42704');
SELECT throws_ok($$SELECT wf.fail_task(-1, 1, '{"code": "x"}')$$, '42704', NULL,
                 'wf.fail_task() of an unknown task: 42704');

-- 22023 invalid_parameter_value: invalid definitions and arguments
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '{}')$$, '22023', NULL,
                 'a definition without steps: 22023');
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '[]')$$, '22023', NULL,
                 'a definition that is not an object: 22023');
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '{"steps": [{"name": "a", "queue": "q", "next": "zz"}]}')$$,
                 '22023', NULL, 'a definition whose next names no step: 22023');
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '{"steps": [{"name": "a", "queue": "q", "next": "b"}, {"name": "b", "queue": "q", "next": "a"}]}')$$,
                 '22023', NULL, 'a definition with a cycle without a way out: 22023');
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '{"steps": [{"name": "a", "queue": "q", "bogus": 1}]}')$$,
                 '22023', NULL, 'a definition with an unknown field: 22023');
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"initial_interval": "soon"}}]}')$$,
                 '22023', NULL, 'a definition with an invalid duration: 22023');
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '{"steps": [{"name": "a", "queue": "q", "input": {"x": "$.a[[["}}]}')$$,
                 '22023', NULL, 'a definition with an invalid JSONPath: 22023');
SELECT throws_like($$SELECT wf.publish_definition('schema_bad', '{"steps": [{"name": "a", "queue": "q"}, {"name": "b", "queue": "q", "next": "nowhere"}]}')$$,
                   '%"schema_bad"%step "b"%"next"%',
                   'a definition error names the definition, the step and the field');
SELECT throws_ok($$SELECT wf.publish_definition('', '{"steps": [{"name": "a", "queue": "q"}]}')$$,
                 '22023', NULL, 'an empty definition name: 22023');
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '{"steps": [{"name": "a", "queue": "q"}, {"name": "a", "queue": "q"}]}')$$,
                 '42710', NULL, 'a definition with a step name used twice: 42710');
SELECT throws_ok($$SELECT wf.publish_definition('schema_bad', '{"steps": [{"name": "a", "queue": "q", "type": "timer"}]}')$$,
                 '0A000', NULL, 'a definition with an unsupported step type: 0A000');
SELECT is((SELECT count(*)::int FROM wf.definitions WHERE name = 'schema_bad'), 0,
          'no invalid definition was stored');

SELECT throws_ok($$SELECT * FROM wf.claim_tasks('', 'w')$$, '22023', NULL, 'an empty queue name: 22023');
SELECT throws_ok($$SELECT * FROM wf.claim_tasks('schema_q', '')$$, '22023', NULL, 'an empty worker name: 22023');
SELECT throws_ok($$SELECT * FROM wf.claim_tasks('schema_q', 'w', 0)$$, '22023', NULL, 'max_tasks 0: 22023');
SELECT throws_ok($$SELECT * FROM wf.claim_tasks('schema_q', 'w', 1, '0 seconds')$$, '22023', NULL, 'a zero lease: 22023');
SELECT throws_ok($$SELECT * FROM wf.claim_tasks('schema_q', 'w', 1, '8 days')$$, '22023', NULL, 'a lease over 7 days: 22023');
SELECT throws_ok($$SELECT wf.start_run('schema_t', '{}', '')$$, '22023', NULL, 'an empty idempotency key: 22023');
SELECT throws_ok($$SELECT wf.start_run('schema_t', '{}', repeat('k', 256))$$, '54000',
                 'idempotency key is 256 bytes, more than the limit of 255 bytes',
                 'an idempotency key over 255 bytes: 54000');
SELECT throws_ok($$SELECT wf.start_run('schema_t', '[1]')$$, '22023',
                 'input must be a JSON object, not an array', 'a run input that is not an object: 22023');
SELECT throws_ok($$SELECT * FROM wf.claim_tasks(repeat('q', 201), 'w')$$, '54000',
                 'queue name is 201 bytes, more than the limit of 200 bytes', 'a queue name over 200 bytes: 54000');
SELECT throws_ok($$SELECT wf.cancel_run('00000000-0000-0000-0000-000000000000', repeat('x', 2001))$$, '54000',
                 'reason is 2001 bytes, more than the limit of 2000 bytes', 'a reason over 2000 bytes: 54000');

-- a fence that was never issued
CREATE TEMP TABLE schema_claim AS
SELECT * FROM wf.claim_tasks('schema_q', 'schema-worker', 1, '1 minute');
SELECT is((SELECT count(*)::int FROM schema_claim), 1, 'one task of schema_q was claimed');
SELECT throws_ok(format('SELECT wf.complete_task(%s, %s)', task_id, fence + 1), '22023', NULL,
                 'a result under a fence that was never issued: 22023') FROM schema_claim;
SELECT throws_ok(format('SELECT wf.complete_task(%s, 0)', task_id), '22023', NULL,
                 'a result under fence 0: 22023') FROM schema_claim;

-- 22004 null_value_not_allowed
SELECT throws_ok($$SELECT wf.start_run(NULL)$$, '22004', NULL, 'a NULL definition name: 22004');
SELECT throws_ok($$SELECT wf.start_run('schema_t', NULL)$$, '22004', NULL, 'a NULL run input: 22004');
SELECT throws_ok($$SELECT wf.complete_task(NULL, 1)$$, '22004', NULL, 'a NULL task id: 22004');
SELECT throws_ok(format('SELECT wf.complete_task(%s, NULL)', task_id), '22004', NULL,
                 'a NULL fence: 22004') FROM schema_claim;
SELECT throws_ok(format('SELECT wf.fail_task(%s, %s, NULL)', task_id, fence), '22004', NULL,
                 'a NULL error: 22004') FROM schema_claim;
SELECT throws_ok(format('SELECT wf.fail_task(%s, %s, %L, NULL)', task_id, fence, '{}'), '22004', NULL,
                 'a NULL retryable: 22004') FROM schema_claim;

-- 23505 unique_violation: an idempotency key reused for another request
SELECT throws_ok($$SELECT wf.start_run('schema_t', '{"k": 99}', 'schema-key-1')$$, '23505', NULL,
                 'an idempotency key reused with another input: 23505');

-- 54000 program_limit_exceeded: the limits
SET LOCAL wfengine.max_steps = 2;
SELECT throws_ok($$SELECT wf.publish_definition('schema_big', '{"steps": [{"name": "a", "queue": "q"}, {"name": "b", "queue": "q"}, {"name": "c", "queue": "q"}]}')$$,
                 '54000', NULL, 'more steps than wfengine.max_steps: 54000');
RESET wfengine.max_steps;
SET LOCAL wfengine.max_definition_size = 1024;
SELECT throws_ok($$SELECT wf.publish_definition('schema_big', jsonb_build_object('description', repeat('x', 2000), 'steps', '[{"name": "a", "queue": "q"}]'::jsonb))$$,
                 '54000', NULL, 'a definition over wfengine.max_definition_size: 54000');
RESET wfengine.max_definition_size;
SET LOCAL wfengine.max_payload_size = 1024;
SELECT throws_ok($$SELECT wf.start_run('schema_t', jsonb_build_object('x', repeat('y', 2000)))$$,
                 '54000', NULL, 'a run input over wfengine.max_payload_size: 54000');
SELECT throws_ok(format('SELECT wf.complete_task(%s, %s, %L)', task_id, fence,
                        jsonb_build_object('x', repeat('y', 2000))),
                 '54000', NULL, 'a task output over wfengine.max_payload_size: 54000') FROM schema_claim;
SELECT throws_ok(format('SELECT wf.fail_task(%s, %s, %L)', task_id, fence,
                        jsonb_build_object('x', repeat('y', 2000))),
                 '54000', NULL, 'a task error over wfengine.max_payload_size: 54000') FROM schema_claim;
RESET wfengine.max_payload_size;
SET LOCAL wfengine.max_claim_batch = 5;
SELECT throws_ok($$SELECT * FROM wf.claim_tasks('schema_q', 'w', 6)$$, '22023', NULL,
                 'max_tasks over wfengine.max_claim_batch: 22023');
RESET wfengine.max_claim_batch;
SELECT is((SELECT count(*)::int FROM wf.definitions WHERE name = 'schema_big'), 0,
          'no definition over a limit was stored');

-- the limits are superuser settings: an ordinary role cannot raise them
SELECT results_eq($$SELECT name::text, context::text FROM pg_settings
                    WHERE name IN ('wfengine.max_claim_batch', 'wfengine.max_definition_size',
                                   'wfengine.max_payload_size', 'wfengine.max_steps',
                                   'wfengine.decide_failure_limit', 'wfengine.decide_failure_window')
                    ORDER BY name$$,
                  $$VALUES ('wfengine.decide_failure_limit', 'superuser'),
                           ('wfengine.decide_failure_window', 'superuser'),
                           ('wfengine.max_claim_batch', 'superuser'),
                           ('wfengine.max_definition_size', 'superuser'),
                           ('wfengine.max_payload_size', 'superuser'),
                           ('wfengine.max_steps', 'superuser')$$,
                  'the wfengine limits exist and only a superuser can change them');

-- after the errors, the claimed task still takes its result exactly once
SELECT is(wf.complete_task(task_id, fence, '{"ok": true}'), 'accepted',
          'the claimed task accepts its result after the refused reports') FROM schema_claim;
SELECT is(wf.complete_task(task_id, fence, '{"ok": true}'), 'duplicate',
          'a second report under the same fence is a duplicate') FROM schema_claim;
SELECT ok(wf.verify_run(run_id), 'the run of the claimed task verifies') FROM schema_claim;


-- time: heartbeats, the synchronous tick, the timers table
SELECT has_function('wf', 'heartbeat', ARRAY['bigint', 'bigint', 'jsonb'], 'wf.heartbeat(bigint, bigint, jsonb)');
SELECT has_function('wf', 'tick', ARRAY['integer'], 'wf.tick(integer)');
SELECT has_table('wf', 'timers', 'wf.timers exists');
SELECT col_not_null('wf', 'timers', 'generation', 'every timer has a generation');
SELECT has_index('wf', 'timers', 'timers_due_idx', 'due timers are found by an index');
SELECT has_index('wf', 'tasks', 'tasks_deadline_idx', 'task deadlines are found by an index');
SELECT ok(NOT has_function_privilege('public', 'wf.tick(integer)', 'EXECUTE'),
          'wf.tick() is not executable by PUBLIC');

SELECT * FROM finish();
ROLLBACK;
