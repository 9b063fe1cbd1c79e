-- scenario: the row writer keeps each table's prepared CHECK constraints
-- and index predicates across transactions (src/rowwrite.c); a constraint
-- or an index added, or dropped, in the middle of a session is what the
-- next transition obeys, and every index holds every row written.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
SELECT wf.publish_definition('kept', '{"steps": [
  {"name": "one", "queue": "kept_q"}, {"name": "two", "queue": "kept_q"},
  {"name": "three", "queue": "kept_q"}, {"name": "four", "queue": "kept_q"}]}');
SELECT wf.start_run('kept', '{}') AS run \gset
-- step one: the writer prepares wf.tasks, wf.runs and wf.events
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('kept_q', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"n": 1}');

-- a CHECK constraint added now: the next transition fails it and changes nothing
ALTER TABLE wf.runs ADD CONSTRAINT regress_not_three
    CHECK (current_step IS DISTINCT FROM 'three');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('kept_q', 'w') \gset
SELECT seq AS seq_before FROM wf.runs WHERE run_id = :'run' \gset
\set VERBOSITY terse
SELECT wf.complete_task(:t, :f, '{"n": 2}');
\set VERBOSITY default
SELECT seq = :seq_before AS unchanged, current_step FROM wf.runs WHERE run_id = :'run';
SELECT status FROM wf.tasks WHERE task_id = :t;
-- dropped again: the same report is accepted
ALTER TABLE wf.runs DROP CONSTRAINT regress_not_three;
SELECT wf.complete_task(:t, :f, '{"n": 2}');

-- a partial unique index added now: its predicate is evaluated for the
-- rows written after it (a second task_completed of the run violates it;
-- since 0.3.0 a completed attempt's row is deleted, its event stays)
CREATE UNIQUE INDEX regress_one_completed_per_run ON wf.events (run_id)
    WHERE type = 'task_completed' AND step = 'three';
CREATE INDEX regress_events_by_type ON wf.events (type);
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('kept_q', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"n": 3}');
SELECT current_step FROM wf.runs WHERE run_id = :'run';
SELECT bt_index_check('wf.regress_one_completed_per_run'::regclass, true);
SELECT count(*) FROM wf.events WHERE run_id = :'run' AND type = 'task_completed' AND step = 'three';
-- replaced by one whose predicate the next completed attempt matches too
DROP INDEX wf.regress_one_completed_per_run;
CREATE UNIQUE INDEX regress_one_completed_per_run ON wf.events (run_id)
    WHERE type = 'task_completed' AND step IN ('three', 'four');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('kept_q', 'w') \gset
\set VERBOSITY terse
SELECT wf.complete_task(:t, :f, '{"n": 4}');
\set VERBOSITY default
SELECT status FROM wf.tasks WHERE task_id = :t;
DROP INDEX wf.regress_one_completed_per_run;
SELECT wf.complete_task(:t, :f, '{"n": 4}');
SELECT status, current_step FROM wf.runs WHERE run_id = :'run';

-- every btree index of the tables the writer writes holds every row
-- (amcheck); the BRIN index of completions by time (0.3.0) finds every
-- completion an index-free scan finds
SELECT c.relname, bt_index_check(c.oid, true) IS NOT NULL AS checked
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
WHERE t.relnamespace = 'wf'::regnamespace AND t.relname IN ('tasks', 'runs', 'events')
  AND c.relam = (SELECT oid FROM pg_am WHERE amname = 'btree')
ORDER BY c.relname;
SELECT c.relname, a.amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid = 'wf.events'::regclass AND a.amname <> 'btree';
SELECT count(*) FROM wf.events WHERE type = 'task_completed';
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_indexscan = off;
SELECT count(*) AS through_brin FROM wf.events
WHERE type = 'task_completed' AND created_at > now() - interval '1 hour';
ROLLBACK;
DROP INDEX wf.regress_events_by_type;
SELECT wf.verify_run(:'run');

-- scenario: a transition keeps the run's context compressed in its row once
-- it is 256 bytes or more and compression saves (WfRowCompress), with the
-- column's compression method (lz4 where the server has it, else
-- default_toast_compression); a column set to EXTERNAL is left alone.  The
-- inputs are the last columns of wf.runs and wf.tasks but for wf.tasks'
-- input_seq (0.3.0: four bytes, never updated), so that an update of a row
-- with a large input leaves it in the unchanged suffix.  (The context is made
-- large by a context update, whose input the context keeps: since 0.3.0 a
-- step output of 256 bytes or more is not copied into it, 403_large_outputs.)
SELECT wf.publish_definition('packed', '{"steps": [
  {"name": "one", "queue": "packed_q"}, {"name": "two", "queue": "packed_q"},
  {"name": "three", "queue": "packed_q"}]}');
SELECT wf.start_run('packed', '{"order": "A-1"}') AS prun \gset
SELECT pg_column_compression(context) AS started FROM wf.runs WHERE run_id = :'prun';
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('packed_q', 'w') \gset
SELECT wf.update_context(:'prun', jsonb_build_object('lines', (SELECT jsonb_agg(jsonb_build_object('sku', 'SKU-' || g, 'qty', 1)) FROM generate_series(1, 20) g)), 'order lines') IS NOT NULL AS updated;
SELECT wf.complete_task(:t, :f, '{"n": 1}');
SELECT pg_column_compression(context) = (
         SELECT CASE a.attcompression WHEN 'l' THEN 'lz4' WHEN 'p' THEN 'pglz'
                ELSE current_setting('default_toast_compression') END
         FROM pg_attribute a WHERE a.attrelid = 'wf.runs'::regclass AND a.attname = 'context') AS columns_method,
       pg_column_size(context) < octet_length(context::text) / 2 AS smaller,
       context->'input'->'lines'->19 AS last_line
FROM wf.runs WHERE run_id = :'prun';
SELECT attcompression AS saved_method FROM pg_attribute
WHERE attrelid = 'wf.runs'::regclass AND attname = 'context' \gset
ALTER TABLE wf.runs ALTER COLUMN context SET COMPRESSION pglz;
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('packed_q', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"n": 2}');
SELECT pg_column_compression(context) AS method FROM wf.runs WHERE run_id = :'prun';
ALTER TABLE wf.runs ALTER COLUMN context SET STORAGE EXTERNAL;
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('packed_q', 'w') \gset
SELECT wf.complete_task(:t, :f, '{"n": 3}');
SELECT pg_column_compression(context) AS method, status FROM wf.runs WHERE run_id = :'prun';
ALTER TABLE wf.runs ALTER COLUMN context SET STORAGE EXTENDED;
SELECT CASE :'saved_method' WHEN 'l' THEN 'lz4' WHEN 'p' THEN 'pglz' ELSE 'default' END AS saved \gset
ALTER TABLE wf.runs ALTER COLUMN context SET COMPRESSION :saved;
SELECT wf.verify_run(:'prun');
SELECT t.relname, (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attnum > 0
                   AND NOT a.attisdropped AND a.attname <> 'input_seq' ORDER BY a.attnum DESC LIMIT 1) AS last_column
FROM pg_class t WHERE t.oid IN ('wf.runs'::regclass, 'wf.tasks'::regclass) ORDER BY 1;

-- scenario: a completion takes its task row (deletes it as it reads it)
-- and reads its run row without a lock (issue 31, WfRowTake and
-- WfRowReadToUpdate).  A report that fails after it took the row (here a
-- CHECK constraint refuses the run's next step), its error caught by an
-- exception block, takes its delete with it: the attempt's row is there,
-- leased, and the next reports of the attempt in the same transaction
-- behave as ever (a failure updates the row, a completion after it is a
-- duplicate).
SELECT wf.publish_definition('taken', '{"steps": [
  {"name": "one", "queue": "taken_q"}, {"name": "two", "queue": "taken_q"}]}');
SELECT wf.start_run('taken', '{}') AS trun \gset
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('taken_q', 'w') \gset
ALTER TABLE wf.runs ADD CONSTRAINT regress_not_two
    CHECK (current_step IS DISTINCT FROM 'two');
BEGIN;
SELECT set_config('regress.t', :'t', true) IS NOT NULL AS t_set,
       set_config('regress.f', :'f', true) IS NOT NULL AS f_set;
DO $$
BEGIN
    PERFORM wf.complete_task(current_setting('regress.t')::bigint,
                             current_setting('regress.f')::bigint, '{"n": 1}');
EXCEPTION WHEN check_violation THEN
    RAISE NOTICE 'the report failed: %', SQLERRM;
END
$$;
SELECT count(*) AS rows_of_the_attempt, min(status) AS status FROM wf.tasks WHERE task_id = :t;
SELECT wf.fail_task(:t, :f, '{"code": "boom"}', false);
SELECT count(*) AS rows_of_the_attempt, min(status) AS status FROM wf.tasks WHERE task_id = :t;
SELECT wf.complete_task(:t, :f, '{"n": 2}');
COMMIT;
ALTER TABLE wf.runs DROP CONSTRAINT regress_not_two;
SELECT status, wf.verify_run(run_id) AS verified FROM wf.runs WHERE run_id = :'trun';

-- One backend compresses context after context with one kept LZ4 stream
-- (WfRowCompress): each value must read back alone, referring to no data
-- compressed before it.  Five runs, each given lines of its own by a context
-- update and completed, then each read and compared with what was given.
SELECT count(wf.start_run('packed', jsonb_build_object('order', 'B-' || g))) AS started_runs FROM generate_series(1, 5) g;
CREATE TEMP TABLE packed_sent (task_id bigint, output jsonb);
DO $$
DECLARE c record; o jsonb;
BEGIN
  FOR c IN SELECT * FROM wf.claim_tasks('packed_q', 'w', 10) LOOP
    o := jsonb_build_object('lines', (SELECT jsonb_agg(jsonb_build_object('sku', md5(c.task_id::text || g), 'qty', g))
                                      FROM generate_series(1, 15) g));
    INSERT INTO packed_sent VALUES (c.task_id, o);
    PERFORM wf.update_context(c.run_id, jsonb_build_object('lines', o), 'order lines');
    PERFORM wf.complete_task(c.task_id, c.fence, '{}');
  END LOOP;
END $$;
SELECT count(*) AS sent,
       count(*) FILTER (WHERE r.context->'input'->'lines' = s.output) AS read_back,
       count(*) FILTER (WHERE pg_column_compression(r.context) IS NOT NULL) AS compressed,
       bool_and(wf.verify_run(r.run_id)) AS verified
FROM packed_sent s JOIN wf.events e ON e.type = 'task_completed' AND (e.payload->>'task_id')::bigint = s.task_id
JOIN wf.runs r ON r.run_id = e.run_id;
