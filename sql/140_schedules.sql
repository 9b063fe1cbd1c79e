-- scenario: schedules: the cron matcher, idempotent firing, pg_cron jobs
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SET timezone = 'UTC';
SELECT wf.publish_definition('sched', '{"steps": [{"name": "a", "queue": "sched_q"}]}');

-- scenario: the matcher: the latest instant at or before, the first after
-- (2026-11-30 is a Monday)
SELECT c AS cron, wf._cron_prev(c, '2026-11-30 12:34:56Z') AS prev,
       wf._cron_next(c, '2026-11-30 12:34:56Z') AS next
FROM (VALUES ('* * * * *'), ('0 3 * * *'), ('*/15 9-17 * * mon-fri'),
             ('5,35 */6 1 * *'), ('10-20/5 * * * *'), ('0 12 * * 7'),
             ('0 0 1,15 * 1'), ('0 0 13 * 5'), ('0 0 */10 * *'), ('0 0 * jan,JUL sun'),
             ('@hourly'), ('@daily'), ('@midnight'), ('@weekly'), ('@monthly'),
             ('@yearly'), ('@annually'), ('30 seconds'), ('7 Seconds'), ('1 second'),
             ('  0   3 * * *  ')) AS v(c);
-- an instant that matches is its own latest instant
SELECT wf._cron_prev('0 3 * * *', '2026-11-30 03:00:00Z') AS exact,
       wf._cron_prev('0 3 * * *', '2026-11-30 03:00:59.999Z') AS same_minute,
       wf._cron_next('0 3 * * *', '2026-11-30 03:00:00Z') AS next_day;
-- leap days: eight years apart around 2100
SELECT wf._cron_prev('0 0 29 2 *', '2103-01-01Z') AS prev, wf._cron_next('0 0 29 2 *', '2097-01-01Z') AS next;
-- fields read in another time zone, across daylight saving time (Europe/Berlin
-- skips 02:00-03:00 on 2026-03-29 and repeats 02:00-03:00 on 2026-10-25)
SELECT wf._cron_next('30 2 * * *', '2026-03-28 12:00Z', 'Europe/Berlin') AS skipped_day,
       wf._cron_prev('30 2 * * *', '2026-03-29 12:00Z', 'Europe/Berlin') AS before_skip,
       wf._cron_next('30 2 * * *', '2026-10-24 12:00Z', 'Europe/Berlin') AS first_of_two,
       wf._cron_next('30 2 * * *', '2026-10-25 00:30Z', 'Europe/Berlin') AS second_of_two,
       wf._cron_prev('0 9 * * mon', '2026-11-30 08:30Z', 'Asia/Tokyo') AS tokyo;
SELECT wf._cron_prev('* * * * *', 'infinity') AS infinite, wf._cron_prev('0 0 30 2 *', '2026-11-30Z') AS never;

-- scenario: invalid expressions are refused, naming the field
SELECT wf._cron_check('0 3 * * *');
SELECT wf._cron_check('');
SELECT wf._cron_check('* * * *');
SELECT wf._cron_check('* * * * * *');
SELECT wf._cron_check('60 * * * *');
SELECT wf._cron_check('* 24 * * *');
SELECT wf._cron_check('* * 0 * *');
SELECT wf._cron_check('* * * 13 *');
SELECT wf._cron_check('* * * * 8');
SELECT wf._cron_check('* * * foo *');
SELECT wf._cron_check('* * * * monday');
SELECT wf._cron_check('* 5-2 * * *');
SELECT wf._cron_check('5/15 * * * *');
SELECT wf._cron_check('*/0 * * * *');
SELECT wf._cron_check('*/x * * * *');
SELECT wf._cron_check('1,,2 * * * *');
SELECT wf._cron_check('0 0 31 2,4 *');
SELECT wf._cron_check('@reboot');
SELECT wf._cron_check('@fortnightly');
SELECT wf._cron_check('0 seconds');
SELECT wf._cron_check('60 seconds');
SELECT wf._cron_prev('* * * * *', now(), 'Mars/Olympus');
-- wf.cron_next: the next instant in pg_cron's time zone (cron.timezone, GMT
-- unless set), for any role that reads wf.schedule_list
SELECT wf.cron_next('0 3 * * *', '2026-11-30 12:34:56Z') AS next,
       wf.cron_next('0 0 30 2 *', '2026-11-30Z') AS never,
       wf.cron_next(NULL, now()) AS null_cron,
       wf.cron_next('0 3 * * *') > now() AS default_now;
SELECT wf.cron_next('61 * * * *', now());
SELECT wf.cron_next(repeat('*', 201), now());

-- scenario: firing is idempotent per scheduled instant
INSERT INTO wf.schedules (tenant_id, name, cron, definition, input)
VALUES ('default', 'yearly', '0 0 1 1 *', 'sched', '{"k": 1}')
RETURNING schedule_id AS sid \gset
SELECT wf.fire_schedule(:sid) AS r1 \gset
SELECT wf.fire_schedule(:sid) = :'r1' AS same_run;
SELECT count(*) AS runs FROM wf.runs WHERE idempotency_key LIKE 'schedule:yearly:%';
SELECT idempotency_key = 'schedule:yearly:' || extract(year FROM now()) || '-01-01T00:00:00Z' AS key_names_the_instant,
       input, definition_name
FROM wf.runs WHERE run_id = :'r1';
-- a schedule changed since keeps the run it started for that instant
UPDATE wf.schedules SET input = '{"k": 2}' WHERE schedule_id = :sid;
SELECT wf.fire_schedule(:sid) = :'r1' AS same_run_after_change;
-- the list shows the latest firing and the next instant
SELECT name, cron, input, last_instant = date_trunc('year', now()) AS last_instant_ok,
       last_run_id = :'r1' AS last_run_ok,
       next_fire_at = date_trunc('year', now()) + interval '1 year' AS next_ok
FROM wf.schedule_list;
-- an unknown (e.g. just unscheduled) schedule starts nothing
SELECT wf.fire_schedule(-1) AS nothing, wf.fire_schedule(NULL) AS null_id;

-- scenario: wf.schedule checks its arguments, then needs pg_cron in this database
SELECT wf.schedule('bad name', '0 3 * * *', 'sched');
SELECT wf.schedule('nightly', '0 3 * *', 'sched');
SELECT wf.schedule('nightly', '0 3 * * *', 'nope');
SELECT wf.schedule('nightly', '0 3 * * *', 'sched', '{}', 9);
SELECT wf.schedule('nightly', '0 3 * * *', NULL);
SELECT wf.schedule('nightly', '0 3 * * *', 'sched');
-- wf.unschedule removes the row; there is no job without pg_cron
SELECT wf.unschedule('yearly') AS removed, wf.unschedule('yearly') AS again;
DROP EXTENSION wfengine;

-- scenario: with pg_cron, in the database where pg_cron runs its jobs
-- (cron.database_name; the test harness sets it to "postgres")
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
SELECT wf.publish_definition('sched', '{"steps": [{"name": "a", "queue": "sched_q"}]}') > 0 AS published;
-- (instants that do not come up while the test runs)
SELECT wf.schedule('nightly', '0 3 1 1 *', 'sched', '{"x": 1}') AS job \gset
SELECT jobname, schedule, command ~ '^SELECT wf\.fire_schedule\(''\d+''\)$' AS command_ok,
       command = format('SELECT wf.fire_schedule(%L)', (SELECT schedule_id FROM wf.schedules WHERE name = 'nightly')) AS command_names_it,
       database = current_database() AS here, username = current_user AS mine, active
FROM cron.job WHERE jobid = :job;
-- replacing keeps the job and changes it
SELECT wf.schedule('nightly', '30 4 1 1 *', 'sched', '{"x": 2}') = :job AS same_job;
SELECT jobname, schedule FROM cron.job WHERE jobid = :job;
SELECT name, cron, definition, version, input, jobid = :job AS job_ok,
       next_fire_at = wf.cron_next('30 4 1 1 *') AS next_ok
FROM wf.schedule_list WHERE name = 'nightly';
-- a job that was removed behind our back is made again
SELECT cron.unschedule(:job) AS removed_by_hand;
SELECT wf.schedule('nightly', '30 4 1 1 *', 'sched', '{"x": 2}') AS job2 \gset
SELECT :job2 <> :job AS new_job, count(*) AS jobs FROM cron.job WHERE jobname = 'wfengine:default:nightly';
-- unscheduling removes the job too
SELECT wf.unschedule('nightly') AS removed;
SELECT count(*) AS jobs_left FROM cron.job WHERE jobname LIKE 'wfengine:default:%';
SELECT count(*) AS schedules_left FROM wf.schedules;
SET client_min_messages = warning;
\if :own_wf
DROP EXTENSION wfengine;
\endif
\if :own_cron
DROP EXTENSION pg_cron;
\endif
