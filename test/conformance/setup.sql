-- test/conformance/setup.sql: the scenario's definition, its three runs and
-- the poll the drivers call (run by run.sh with psql, :'definition' set to
-- definition.json).
SELECT wf.publish_definition('conformance', :'definition') IS NOT NULL AS published;

-- the runs, by case: "happy" completes, "permanent" and "unknown" fail
-- non-retryably and are compensated
CREATE TABLE wf_conformance_runs (run_case text PRIMARY KEY, run uuid NOT NULL);
INSERT INTO wf_conformance_runs
SELECT c, wf.start_run('conformance', jsonb_build_object('case', c), 'conformance-' || c)
FROM unnest(ARRAY['happy', 'permanent', 'unknown']) AS c;

-- one tick (the engine worker's part: the retry timers), and whether every
-- run has ended; a driver calls it until it answers true, then stops its worker
CREATE FUNCTION wf_conformance_poll() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM wf.tick();
	RETURN NOT EXISTS (SELECT FROM wf_conformance_runs
		WHERE wf.run_status(run) NOT IN ('completed', 'failed', 'compensated',
			'compensation_failed', 'cancelled', 'terminated'));
END
$$;
