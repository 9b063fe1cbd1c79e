-- test/conformance/history.sql: the runs' history, normalised to what is
-- deterministic (no ids, fences, times, worker names or messages): one line
-- per event, in the order of the runs' cases and of each run's events.
SELECT concat_ws(' ', r.run_case, coalesce(h.step, '-'), h.type,
		'attempt=' || h.attempt,
		'error=' || (h.payload -> 'error' ->> 'code'),
		'retryable=' || (h.payload ->> 'retryable'),
		'final=' || (h.payload ->> 'final'),
		'reason=' || (h.payload ->> 'reason'),
		'output=' || (h.payload -> 'output')::text)
FROM wf_conformance_runs r, LATERAL wf.history(r.run) h
ORDER BY r.run_case, h.seq;
SELECT concat_ws(' ', run_case, 'status', wf.run_status(run)) FROM wf_conformance_runs ORDER BY run_case;
