-- scenario: batch forms of the operator commands: wf.retry_runs, wf.cancel_runs,
-- wf.resume_runs over a filter, bounded (max_runs) and resumable (after)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.publish_definition('redrive', '{"steps": [
  {"name": "call", "queue": "rd_q", "retry": {"max_attempts": 1}}, {"name": "done", "queue": "rd_q2"}]}');
SELECT wf.publish_definition('other', '{"steps": [{"name": "call", "queue": "rd_other", "retry": {"max_attempts": 1}}]}');
-- an outage: five runs fail with gateway_down, two with card_declined, one of another definition
SELECT count(wf.start_run('redrive', jsonb_build_object('n', i))) FROM generate_series(1, 7) i;
SELECT count(wf.start_run('other')) FROM generate_series(1, 1);
SELECT count(wf.fail_task(t.task_id, t.fence,
             jsonb_build_object('code', CASE WHEN t.input->>'n' IN ('3', '6') THEN 'card_declined' ELSE 'gateway_down' END),
             true))
FROM wf.claim_tasks('rd_q', 'w', 10) t;
SELECT count(wf.fail_task(t.task_id, t.fence, '{"code": "gateway_down"}', true)) FROM wf.claim_tasks('rd_other', 'w', 10) t;
SELECT definition_name, count(*) FROM wf.runs WHERE status = 'failed' GROUP BY 1 ORDER BY 1;

-- at most two per call; the last run id returned is where the next call goes on
SELECT max(run_id::text) AS last, count(*), string_agg(DISTINCT outcome || ' ' || detail, ', ') AS results
FROM wf.retry_runs('gateway is back', '{"definition": "redrive", "failure_code": "gateway_down"}', 2) \gset
SELECT :count AS count, :'results' AS results;
SELECT count(*), string_agg(DISTINCT outcome || ' ' || detail, ', ') AS results
FROM wf.retry_runs('gateway is back', '{"definition": "redrive", "failure_code": "gateway_down"}', 100, :'last');
-- nothing left that matches; the declined cards and the other definition were left alone
SELECT count(*) FROM wf.retry_runs('again', '{"definition": "redrive", "failure_code": "gateway_down"}');
SELECT definition_name, status, count(*) FROM wf.runs GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS retried, bool_and(wf.verify_run(r.run_id)) AS verified
FROM wf.runs r WHERE EXISTS (SELECT 1 FROM wf.events e WHERE e.run_id = r.run_id AND e.type = 'step_retried');
-- the failure reason selects too
SELECT count(*) FROM wf.retry_runs('retry the rest', '{"failure_code": "attempts_exhausted", "version": 1}');
SELECT definition_name, status, count(*) FROM wf.runs GROUP BY 1, 2 ORDER BY 1, 2;

-- a run the command does not apply to is reported and the batch goes on
SELECT wf.publish_definition('rd_sleep', '{"steps": [{"name": "wait", "type": "sleep", "until": "$.input.at"}]}');
SELECT wf.start_run('rd_sleep') IS NOT NULL AS started;
SELECT outcome, regexp_replace(detail, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>') AS detail
FROM wf.retry_runs('redrive everything', '{"definition": "rd_sleep"}');

-- pause, resume and cancel in bulk
SELECT count(wf.pause_run(run_id, 'maintenance')) FROM wf.runs WHERE definition_name = 'redrive' AND status = 'running';
SELECT outcome, detail, count(*) FROM wf.resume_runs('maintenance over', '{"definition": "redrive"}') GROUP BY 1, 2;
SELECT outcome, detail, count(*) FROM wf.cancel_runs('product withdrawn', '{"definition": "redrive", "status": "running"}') GROUP BY 1, 2;
SELECT definition_name, status, count(*) FROM wf.runs GROUP BY 1, 2 ORDER BY 1, 2;

-- refusals
SELECT * FROM wf.retry_runs('x', '{"definiton": "redrive"}');
SELECT * FROM wf.retry_runs('x', '{"status": "running"}');
SELECT * FROM wf.cancel_runs('x', '[]');
SELECT * FROM wf.resume_runs('x', '{}', 0);
SELECT * FROM wf.cancel_runs('', '{}');
