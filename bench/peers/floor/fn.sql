-- bench/peers: copied from ../shared/perf/ceiling (the hand-written floor of issue 13)
-- Same step transition packaged as server-side functions = the call shape of the planned extension API
-- (one round trip per call). plpgsql, so a C implementation should be at least as fast.
CREATE OR REPLACE FUNCTION wf_step(p_run bigint, p_payload jsonb) RETURNS int LANGUAGE plpgsql AS $$
DECLARE v_seq int;
BEGIN
  DELETE FROM wf_tasks WHERE run_id = p_run;
  UPDATE wf_runs SET current_seq = current_seq + 1, updated_at = now(),
         snapshot = jsonb_set(snapshot, '{step}', to_jsonb(current_seq + 1))
   WHERE run_id = p_run RETURNING current_seq INTO v_seq;
  INSERT INTO wf_events (run_id, seq, type, payload) VALUES (p_run, v_seq, 'step_completed', p_payload);
  INSERT INTO wf_tasks (run_id, seq) VALUES (p_run, v_seq);
  RETURN v_seq;
END $$;
CREATE OR REPLACE FUNCTION wf_claim(p_worker text, OUT o_task_id bigint, OUT o_run_id bigint) LANGUAGE plpgsql AS $$
BEGIN
  WITH c AS (SELECT t.task_id FROM wf_tasks t
              WHERE t.state = 'pending' AND t.available_at <= now()
              ORDER BY t.available_at, t.task_id LIMIT 1 FOR UPDATE SKIP LOCKED)
  UPDATE wf_tasks t SET state = 'running', locked_by = p_worker, locked_until = now() + interval '30 s'
    FROM c WHERE t.task_id = c.task_id RETURNING t.task_id, t.run_id INTO o_task_id, o_run_id;
END $$;
CREATE OR REPLACE FUNCTION wf_complete(p_task bigint, p_payload jsonb) RETURNS int LANGUAGE plpgsql AS $$
DECLARE v_run bigint; v_seq int;
BEGIN
  DELETE FROM wf_tasks WHERE task_id = p_task AND state = 'running' RETURNING run_id INTO v_run;
  IF v_run IS NULL THEN RAISE EXCEPTION 'task % not running', p_task; END IF;
  UPDATE wf_runs SET current_seq = current_seq + 1, updated_at = now(),
         snapshot = jsonb_set(snapshot, '{step}', to_jsonb(current_seq + 1))
   WHERE run_id = v_run RETURNING current_seq INTO v_seq;
  INSERT INTO wf_events (run_id, seq, type, payload) VALUES (v_run, v_seq, 'step_completed', p_payload);
  INSERT INTO wf_tasks (run_id, seq) VALUES (v_run, v_seq);
  RETURN v_seq;
END $$;
