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

-- The supply of work: one wf.start_run() per run, as a client would start it.
SELECT count(wf.start_run('bench_one', jsonb_build_object('n', i)))
FROM generate_series(1, :runs1) AS i \gset
SELECT count(wf.start_run('bench_twenty', jsonb_build_object('n', i)))
FROM generate_series(1, :runs20) AS i \gset

-- The hand-written equivalent: same columns, defaults, CHECK constraints
-- and indexes (LIKE ... INCLUDING ALL), the same foreign keys and triggers
-- (copied from the catalog, so they follow the extension's script), and
-- its own task id sequence.
CREATE SCHEMA bench_raw;
CREATE TABLE bench_raw.runs (LIKE wf.runs INCLUDING ALL);
CREATE TABLE bench_raw.events (LIKE wf.events INCLUDING ALL);
CREATE TABLE bench_raw.tasks (LIKE wf.tasks INCLUDING ALL);
CREATE TABLE bench_raw.timers (LIKE wf.timers INCLUDING ALL);
CREATE SEQUENCE bench_raw.task_id_seq AS bigint OWNED BY bench_raw.tasks.task_id;
ALTER TABLE bench_raw.tasks ALTER COLUMN task_id SET DEFAULT nextval('bench_raw.task_id_seq');
DO $$
DECLARE
    c record;
    def text;
BEGIN
    SET LOCAL search_path = pg_catalog;     -- fully qualified names below
    FOR c IN
        SELECT rel.relname, con.conname, pg_get_constraintdef(con.oid) AS def
        FROM pg_constraint con JOIN pg_class rel ON rel.oid = con.conrelid
        WHERE con.contype = 'f' AND rel.relnamespace = 'wf'::regnamespace
          AND rel.relname IN ('runs', 'events', 'tasks', 'timers')
    LOOP
        def := regexp_replace(c.def, 'REFERENCES wf\.(runs|events|tasks|timers)\(',
                              'REFERENCES bench_raw.\1(');
        EXECUTE format('ALTER TABLE bench_raw.%I ADD CONSTRAINT %I %s',
                       c.relname, c.conname, def);
    END LOOP;
    FOR c IN
        SELECT rel.relname, pg_get_triggerdef(tg.oid) AS def
        FROM pg_trigger tg JOIN pg_class rel ON rel.oid = tg.tgrelid
        WHERE NOT tg.tgisinternal AND rel.relnamespace = 'wf'::regnamespace
          AND rel.relname IN ('runs', 'events', 'tasks', 'timers')
    LOOP
        EXECUTE replace(c.def, ' ON wf.' || c.relname || ' ',
                        ' ON bench_raw.' || c.relname || ' ');
    END LOOP;
END
$$;

INSERT INTO bench_raw.runs SELECT * FROM wf.runs;
INSERT INTO bench_raw.events SELECT * FROM wf.events;
INSERT INTO bench_raw.tasks SELECT * FROM wf.tasks;
INSERT INTO bench_raw.timers SELECT * FROM wf.timers;
SELECT setval('bench_raw.task_id_seq', (SELECT max(task_id) FROM bench_raw.tasks));

-- Autovacuum stays off on the eight tables during a case, so that it
-- cannot land in one case and not in the other on a 2-core machine.
ALTER TABLE wf.runs SET (autovacuum_enabled = off);
ALTER TABLE wf.events SET (autovacuum_enabled = off);
ALTER TABLE wf.tasks SET (autovacuum_enabled = off);
ALTER TABLE bench_raw.runs SET (autovacuum_enabled = off);
ALTER TABLE bench_raw.events SET (autovacuum_enabled = off);
ALTER TABLE bench_raw.tasks SET (autovacuum_enabled = off);
ALTER TABLE wf.timers SET (autovacuum_enabled = off);
ALTER TABLE bench_raw.timers SET (autovacuum_enabled = off);
