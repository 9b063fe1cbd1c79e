-- bench/peers: copied from ../shared/perf/ceiling (the hand-written floor of issue 13)
-- Minimal hand-written model of one workflow step transition (the physical ceiling)
SET client_min_messages = warning;
DROP TABLE IF EXISTS wf_events, wf_runs, wf_tasks, bare_insert;
CREATE TABLE wf_runs (
  run_id      bigint PRIMARY KEY,
  state       text NOT NULL DEFAULT 'running',
  current_seq int  NOT NULL DEFAULT 0,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  snapshot    jsonb
);
CREATE TABLE wf_events (            -- append-only event log
  run_id     bigint NOT NULL,
  seq        int    NOT NULL,
  type       text   NOT NULL,
  payload    jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, seq)
);
CREATE TABLE wf_tasks (             -- ready queue
  task_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id       bigint NOT NULL,
  seq          int    NOT NULL,
  state        text   NOT NULL DEFAULT 'pending',
  available_at timestamptz NOT NULL DEFAULT now(),
  locked_by    text,
  locked_until timestamptz
);
CREATE INDEX wf_tasks_ready ON wf_tasks (available_at, task_id) WHERE state = 'pending';
CREATE INDEX wf_tasks_run   ON wf_tasks (run_id);
CREATE TABLE bare_insert (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v int, created_at timestamptz DEFAULT now());
\ir fn.sql
