-- bench/setup.sql -- builds the template database for bench/run.sh.
--
-- psql variables: runs1 (1-step runs to pre-start), runs20 (20-step runs).
-- Both workloads are started through the engine's API (wf.start_run), then
-- bench_raw is created with the same table shapes and indexes (LIKE ...
-- INCLUDING ALL) and filled with a copy of exactly the same rows, so the
-- engine and the hand-written SQL start every case from identical data.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE EXTENSION IF NOT EXISTS wfengine;

-- 1-step definition on queue q1, 20-step definition on queue q20.
SELECT wf.publish_definition('bench_one',
    '{"steps": [{"name": "s01", "queue": "q1", "activity": "work"}]}');
SELECT wf.publish_definition('bench_twenty',
    jsonb_build_object('steps',
        (SELECT jsonb_agg(jsonb_build_object('name', format('s%s', lpad(i::text, 2, '0')),
                                             'queue', 'q20', 'activity', 'work')
                          ORDER BY i)
         FROM generate_series(1, 20) AS i)));

-- The supply of work, started in batches of 10000 so no transaction is huge.
SELECT count(wf.start_run('bench_one', jsonb_build_object('n', i)))
FROM generate_series(1, :runs1) AS i \gset
SELECT count(wf.start_run('bench_twenty', jsonb_build_object('n', i)))
FROM generate_series(1, :runs20) AS i \gset

-- The hand-written equivalent: same columns, constraints, indexes and
-- triggers; own task id sequence.
CREATE SCHEMA bench_raw;
CREATE TABLE bench_raw.runs (LIKE wf.runs INCLUDING ALL);
ALTER TABLE bench_raw.runs ADD FOREIGN KEY (definition_id) REFERENCES wf.definitions;
CREATE TABLE bench_raw.events (LIKE wf.events INCLUDING ALL);
CREATE TRIGGER events_append_only
    BEFORE UPDATE OR DELETE ON bench_raw.events
    FOR EACH ROW EXECUTE FUNCTION wf.refuse_event_change();
CREATE TABLE bench_raw.tasks (LIKE wf.tasks INCLUDING ALL);
CREATE SEQUENCE bench_raw.task_id_seq AS bigint OWNED BY bench_raw.tasks.task_id;
ALTER TABLE bench_raw.tasks ALTER COLUMN task_id SET DEFAULT nextval('bench_raw.task_id_seq');

INSERT INTO bench_raw.runs SELECT * FROM wf.runs;
INSERT INTO bench_raw.events SELECT * FROM wf.events;
INSERT INTO bench_raw.tasks SELECT * FROM wf.tasks;
SELECT setval('bench_raw.task_id_seq', (SELECT max(task_id) FROM bench_raw.tasks));

-- Autovacuum stays off on the six tables during a case, so that it
-- cannot land in one case and not in the other on a 2-core machine.
ALTER TABLE wf.runs SET (autovacuum_enabled = off);
ALTER TABLE wf.events SET (autovacuum_enabled = off);
ALTER TABLE wf.tasks SET (autovacuum_enabled = off);
ALTER TABLE bench_raw.runs SET (autovacuum_enabled = off);
ALTER TABLE bench_raw.events SET (autovacuum_enabled = off);
ALTER TABLE bench_raw.tasks SET (autovacuum_enabled = off);
