-- bench/peers: copied from ../shared/perf/ceiling (the hand-written floor of issue 13)
-- :nruns runs, each with exactly one pending task
TRUNCATE wf_events, wf_runs, wf_tasks, bare_insert RESTART IDENTITY;
INSERT INTO wf_runs (run_id, snapshot) SELECT g, '{"step":0}' FROM generate_series(1, :nruns) g;
INSERT INTO wf_tasks (run_id, seq, available_at) SELECT g, 0, now() - interval '1 hour' + g * interval '1 ms' FROM generate_series(1, :nruns) g;
VACUUM ANALYZE wf_runs; VACUUM ANALYZE wf_tasks; VACUUM ANALYZE wf_events; VACUUM ANALYZE bare_insert;
CHECKPOINT;
