-- scenario: wf.list_runs pages through the caller's runs by a filter, without payloads
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.create_tenant('lr_one'), wf.create_tenant('lr_two');
CREATE ROLE regress_lr_one LOGIN IN ROLE wfengine_admin, wfengine_worker, wf_tenant_lr_one;
CREATE ROLE regress_lr_two LOGIN IN ROLE wfengine_admin, wf_tenant_lr_two;
SET SESSION AUTHORIZATION regress_lr_two;
SELECT wf.publish_definition('lr', '{"steps": [{"name": "a", "queue": "lr_q"}]}') AS version;
SELECT count(*) AS started FROM (SELECT wf.start_run('lr', '{"secret": 1}') FROM generate_series(1, 2)) s;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_lr_one;
SELECT wf.publish_definition('lr', '{"steps": [{"name": "a", "queue": "lr_q"}]}') AS version;
SELECT count(*) AS started FROM (SELECT wf.start_run('lr', '{"secret": 1}') FROM generate_series(1, 5)) s;
SELECT wf.complete_task(c.task_id, c.fence, '{}') FROM wf.claim_tasks('lr_q', 'w', 2) c;
-- its own runs only, by status, in pages of two
SELECT status, count(*) FROM wf.list_runs() GROUP BY status ORDER BY status;
SELECT count(*) AS page_one FROM wf.list_runs('{"status": "running"}', 2);
SELECT count(*) AS page_two FROM wf.list_runs('{"status": "running"}', 2,
    (SELECT max(run_id::text)::uuid FROM wf.list_runs('{"status": "running"}', 2)));
SELECT count(*) AS the_rest FROM wf.list_runs('{"status": "running"}', 10,
    (SELECT max(run_id::text)::uuid FROM wf.list_runs('{"status": "running"}', 4)));
SELECT count(*) AS finished_now FROM wf.list_runs(jsonb_build_object('status', 'completed', 'finished_after', now() - interval '1 hour'));
SELECT definition_name, definition_version, current_step FROM wf.list_runs('{"definition": "lr", "version": 1, "status": "running"}', 1);
-- bad input
SELECT * FROM wf.list_runs('{"colour": "red"}');
SELECT * FROM wf.list_runs('[]');
SELECT * FROM wf.list_runs('{}', 0);
RESET SESSION AUTHORIZATION;
DROP OWNED BY regress_lr_one, regress_lr_two;
DROP ROLE regress_lr_one;
DROP ROLE regress_lr_two;
DROP ROLE wf_tenant_lr_one;
DROP ROLE wf_tenant_lr_two;
