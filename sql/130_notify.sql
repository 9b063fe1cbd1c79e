-- scenario: commits announce claimable queues and run changes (LISTEN/NOTIFY)
--
-- psql prints each notification it receives ("Asynchronous notification
-- ... received from server process with PID n").  To keep the output
-- stable, each scenario sends psql's output to a file (\o) and then shows
-- that file with the PID masked and each run id replaced by a label.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('note', '{"steps": [{"name": "a", "queue": "note_q"},
                                                 {"name": "b", "queue": "note_q2"}]}');
-- a queue name of 63 bytes does not fit "wfq." + name: its channel is cut and hashed
SELECT wf.publish_definition('note_long', jsonb_build_object('steps', jsonb_build_array(
    jsonb_build_object('name', 'a', 'queue', repeat('q', 63)))));

CREATE TEMP TABLE labels (run_id uuid PRIMARY KEY, label text NOT NULL);
-- channel names carry a tag computed from the tenant with a key of the install:
-- they are shown by what they are for
CREATE TEMP TABLE channels (channel text PRIMARY KEY, label text NOT NULL);
INSERT INTO channels VALUES (wf.channel('queue', 'note_q'), '<queue note_q>'),
                            (wf.channel('queue', 'note_q2'), '<queue note_q2>'),
                            (wf.channel('queue', repeat('q', 63)), '<queue qqq...>'),
                            (wf.channel('runs'), '<runs>');
CREATE FUNCTION pg_temp.shown(log text) RETURNS SETOF text
LANGUAGE sql AS $$
    SELECT coalesce(replace(coalesce(replace(l.line, c.channel, c.label), l.line),
                            lb.run_id::text, lb.label),
                    coalesce(replace(l.line, c.channel, c.label), l.line))
    FROM regexp_split_to_table(log, E'\n') WITH ORDINALITY AS l(line, n)
    LEFT JOIN labels lb ON strpos(l.line, lb.run_id::text) > 0
    LEFT JOIN channels c ON strpos(l.line, '"' || c.channel || '"') > 0
    WHERE l.line <> ''
    ORDER BY l.n
$$;
\getenv abs_builddir PG_ABS_BUILDDIR
\set notify_log :abs_builddir '/results/130_notify.notifications'

-- the channels: "wfq.<tag>.<queue>" and "wf_runs.<tag>"; the tag is 12 hex digits
SELECT channel ~ '^wfq\.[0-9a-f]{12}\.note_q2?$' OR channel ~ '^wf_runs\.[0-9a-f]{12}$' AS form_ok, label
FROM channels WHERE label <> '<queue qqq...>' ORDER BY label;
-- a long queue name: cut after 37 bytes, and 8 hex digits of md5(queue) appended
SELECT channel = 'wfq.' || split_part(channel, '.', 2) || '.' || left(repeat('q', 63), 37) || '.'
                 || left(md5(repeat('q', 63)), 8) AS long_form_ok, octet_length(channel) AS bytes
FROM channels WHERE label = '<queue qqq...>';
SELECT wf.channel('queue', 'note_q') = wf.channel('queue', 'note_q') AS stable;
SELECT wf.channel('nonsense');
SELECT wf.channel('queue');
SELECT wf.channel('queue', 'note_q') AS q1, wf.channel('queue', 'note_q2') AS q2,
       wf.channel('queue', repeat('q', 63)) AS long_channel, wf.channel('runs') AS runs \gset
LISTEN :"q1";
LISTEN :"q2";
LISTEN :"long_channel";
LISTEN :"runs";

-- scenario: a started run announces its queue and the run (ids only; the
-- input never appears in a payload)
\o :notify_log
INSERT INTO labels SELECT wf.start_run('note', '{"card": "4111-1111-1111-1111"}'), 'run 1';
\o
\set log `sed -e 's/PID [0-9]*/PID n/' :'notify_log'`
SELECT pg_temp.shown(:'log');

-- scenario: five runs in one transaction: one notification for the queue,
-- one per run; nothing before COMMIT
\o :notify_log
BEGIN;
INSERT INTO labels SELECT wf.start_run('note', jsonb_build_object('i', i)), 'batch ' || i
FROM generate_series(1, 5) AS i;
SELECT count(*) AS tasks FROM wf.tasks WHERE queue = 'note_q' AND status = 'ready';
COMMIT;
\o
\set log `sed -e 's/PID [0-9]*/PID n/' :'notify_log'`
SELECT pg_temp.shown(:'log');

-- scenario: completing a step announces the next step's queue and the run;
-- completing the last step announces the run only
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('note_q', 'w') \gset
\o :notify_log
SELECT wf.complete_task(:t, :f);
\o
\set log `sed -e 's/PID [0-9]*/PID n/' :'notify_log'`
SELECT pg_temp.shown(:'log');
SELECT task_id AS t, fence AS f FROM wf.claim_tasks('note_q2', 'w') \gset
\o :notify_log
SELECT wf.complete_task(:t, :f);
\o
\set log `sed -e 's/PID [0-9]*/PID n/' :'notify_log'`
SELECT pg_temp.shown(:'log');

-- scenario: a claim alone announces nothing
\o :notify_log
SELECT count(*) FROM wf.claim_tasks('note_q', 'w', 2);
\o
\set log `sed -e 's/PID [0-9]*/PID n/' :'notify_log'`
SELECT pg_temp.shown(:'log');

-- scenario: nothing for a transaction that aborts
\o :notify_log
BEGIN;
SELECT wf.start_run('note') IS NOT NULL AS started;
ROLLBACK;
\o
\set log `sed -e 's/PID [0-9]*/PID n/' :'notify_log'`
SELECT pg_temp.shown(:'log');

-- scenario: a subtransaction that rolls back does not take its notes back
-- (a spurious notification, documented; receivers must tolerate them)
\o :notify_log
BEGIN;
SAVEPOINT s;
SELECT wf.start_run('note') AS rolled_back \gset
ROLLBACK TO SAVEPOINT s;
INSERT INTO labels SELECT wf.start_run('note'), 'kept';
COMMIT;
\o
INSERT INTO labels VALUES (:'rolled_back', 'rolled back');
\set log `sed -e 's/PID [0-9]*/PID n/' :'notify_log'`
SELECT pg_temp.shown(:'log');

-- scenario: a long queue name gets a cut and hashed channel
\o :notify_log
INSERT INTO labels SELECT wf.start_run('note_long'), 'long';
\o
\set log `sed -e 's/PID [0-9]*/PID n/' :'notify_log'`
SELECT pg_temp.shown(:'log');

UNLISTEN *;
DROP EXTENSION wfengine;
