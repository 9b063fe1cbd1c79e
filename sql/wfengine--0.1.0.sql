/* sql/wfengine--0.1.0.sql -- base install script of wfengine 0.1.0 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION wfengine" to load this file. \quit

/*
 * Every engine table carries tenant_id so that row-level security and
 * sharding by tenant fit without a redesign.  The tenant of the calling
 * session is learnt from exactly one function, wf.current_tenant().
 *
 * The state of a run lives in three places, all written in the same
 * transaction by the C state machine:
 *   wf.events  the append-only, hash-chained history (the source of truth);
 *   wf.runs    the snapshot, which replaying wf.events must reproduce;
 *   wf.tasks   one row per attempt of a task step: the work queue and the
 *              lease/fencing state of each delivery.
 *
 * There are deliberately no foreign keys from wf.tasks and wf.events to
 * wf.runs: they are written only by the engine, on the hot path, inside a
 * transaction that already holds the run row locked, and an RI trigger per
 * row would cost a second index probe and row lock for nothing.
 */

CREATE FUNCTION wf.current_tenant()
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_current_tenant'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION wf.current_tenant() IS
'The tenant of the calling session; every engine code path asks this one function.';

-- The size checks of the C entry points (argcheck.c), for the PL/pgSQL
-- ones: the same limits, SQLSTATEs and messages.
CREATE FUNCTION wf._check_arg(argname text, value text, kind text)
RETURNS void
AS 'MODULE_PATHNAME', 'wfengine_check_arg'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION wf._check_arg(text, text, text) IS
'Internal: refuses (54000) a text argument longer than the limit of its kind (name 200, key 255, reason 2000, signal 63 bytes); NULL passes.';

CREATE FUNCTION wf._check_payload(value jsonb, what text, owner text, run_input boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'wfengine_check_payload'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION wf._check_payload(jsonb, text, text, boolean) IS
'Internal: refuses (54000) a JSON argument larger than wfengine.max_payload_size and, with run_input, (22023) one that is not a JSON object; NULL passes.';

-- Definitions: immutable versions, identified by (tenant, name, version).
CREATE TABLE wf.definitions (
    definition_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text NOT NULL,
    name            text NOT NULL,
    version         integer NOT NULL CHECK (version > 0),
    digest          bytea NOT NULL,
    spec            jsonb NOT NULL,
    created_by      name NOT NULL DEFAULT current_user,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    UNIQUE (tenant_id, name, version),
    UNIQUE (tenant_id, name, digest)
);
COMMENT ON TABLE wf.definitions IS
'Published workflow definitions; a version never changes once written.';

-- Runs: the snapshot of each run's state.
CREATE TABLE wf.runs (
    run_id              uuid PRIMARY KEY,
    tenant_id           text NOT NULL,
    definition_id       bigint NOT NULL REFERENCES wf.definitions,
    definition_name     text NOT NULL,
    definition_version  integer NOT NULL,
    status              text NOT NULL
                        CHECK (status IN ('running', 'paused', 'completed', 'failed', 'terminated',
                                          'cancelling', 'cancelled', 'compensation_failed',
                                          'compensating', 'compensated')),
    current_step        text,
    current_attempt     integer,
    current_task        bigint,
    step_generation     integer NOT NULL DEFAULT 0,
    wait_generation     integer NOT NULL DEFAULT 0,
    seq                 integer NOT NULL CHECK (seq > 0),
    input               jsonb NOT NULL,
    context             jsonb NOT NULL,
    output              jsonb,
    idempotency_key     text,
    last_hash           bytea NOT NULL,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    parent_run_id       uuid,
    legal_hold          boolean NOT NULL DEFAULT false,
    input_digest        bytea,
    UNIQUE (tenant_id, idempotency_key)
);
-- the child runs of a run (subworkflow and parallel steps)
CREATE INDEX runs_parent_idx ON wf.runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE INDEX runs_status_idx ON wf.runs (tenant_id, status, created_at);
-- the purge: finished runs by the time they finished
CREATE INDEX runs_finished_idx ON wf.runs (finished_at) WHERE finished_at IS NOT NULL;
COMMENT ON TABLE wf.runs IS
'Snapshot of every run; wf.verify_run() checks it against the replayed history.';
COMMENT ON COLUMN wf.runs.input_digest IS
'A run started with an idempotency key: keyed BLAKE2b of its plain input (bound to the tenant and the run), which a repeated start compares instead of opening sealed values.';

-- Events: the append-only history.  (run_id, seq) is gap-free per run.
CREATE TABLE wf.events (
    run_id          uuid NOT NULL,
    seq             integer NOT NULL CHECK (seq > 0),
    tenant_id       text NOT NULL,
    type            text NOT NULL,
    step            text,
    attempt         integer,
    payload         jsonb NOT NULL,
    actor           text NOT NULL,
    created_at      timestamptz NOT NULL,
    hash            bytea NOT NULL,
    PRIMARY KEY (run_id, seq)
);
COMMENT ON TABLE wf.events IS
'Append-only, hash-chained history of every run; UPDATE, DELETE and TRUNCATE are refused.';

-- Events not appended because the run had max_events_per_run events and
-- they only recorded a refusal (quota.c): counted per run and type.  They
-- are outside the hash chain: wf.verify_run() does not look at them.
CREATE TABLE wf.suppressed_events (
    tenant_id       text NOT NULL,
    run_id          uuid NOT NULL,
    type            text NOT NULL,
    count           bigint NOT NULL CHECK (count > 0),
    first_at        timestamptz NOT NULL,
    last_at         timestamptz NOT NULL,
    PRIMARY KEY (run_id, type)
);
COMMENT ON TABLE wf.suppressed_events IS
'Refusals (result_duplicate, result_stale, decision_refused, duplicate signal_received) a run at its max_events_per_run counted instead of appending; outside the hash chain.';

-- Refuses changes to rows that must never change (history, definitions).
CREATE FUNCTION wf.refuse_change()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- wf.purge_runs() deletes the history of runs past their retention
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' AND TG_TABLE_NAME OPERATOR(pg_catalog.=) 'events'
       AND wf._purging() THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'wf.% is append-only', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('%s on wf.%s is not allowed.', TG_OP, TG_TABLE_NAME),
              HINT = CASE TG_TABLE_NAME
                     WHEN 'events' THEN 'History is changed only by appending events through the wf API.'
                     ELSE 'A published definition version never changes; publish a new version.'
                     END;
END
$$;

CREATE TRIGGER events_append_only
    BEFORE UPDATE OR DELETE ON wf.events
    FOR EACH ROW EXECUTE FUNCTION wf.refuse_change();
CREATE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON wf.events
    FOR EACH STATEMENT EXECUTE FUNCTION wf.refuse_change();
CREATE TRIGGER definitions_immutable
    BEFORE UPDATE OR DELETE ON wf.definitions
    FOR EACH ROW EXECUTE FUNCTION wf.refuse_change();
CREATE TRIGGER definitions_no_truncate
    BEFORE TRUNCATE ON wf.definitions
    FOR EACH STATEMENT EXECUTE FUNCTION wf.refuse_change();

-- Tasks: one row per attempt of a task step.
CREATE SEQUENCE wf.task_id_seq AS bigint;

CREATE TABLE wf.tasks (
    task_id             bigint PRIMARY KEY DEFAULT pg_catalog.nextval('wf.task_id_seq'),
    tenant_id           text NOT NULL,
    run_id              uuid NOT NULL,
    step                text NOT NULL,
    visit               integer NOT NULL CHECK (visit > 0),
    attempt             integer NOT NULL CHECK (attempt > 0),
    queue               text NOT NULL,
    activity            text,
    status              text NOT NULL
                        CHECK (status IN ('ready', 'leased', 'completed', 'failed', 'cancelled')),
    available_at        timestamptz NOT NULL,
    lease_expires_at    timestamptz,
    fence               bigint NOT NULL DEFAULT 0,
    deliveries          integer NOT NULL DEFAULT 0,
    idempotency_key     text NOT NULL,
    worker              text,
    input               jsonb NOT NULL,
    output              jsonb,
    error               jsonb,
    created_at          timestamptz NOT NULL,
    claimed_at          timestamptz,
    finished_at         timestamptz,
    -- timeouts of the step, copied when the attempt is scheduled
    schedule_to_start   interval,
    start_to_close      interval,
    heartbeat_timeout   interval,
    -- the current lease
    lease               interval,
    timeout_at          timestamptz,
    last_heartbeat_at   timestamptz,
    heartbeat_details   jsonb,
    lease_expirations   integer NOT NULL DEFAULT 0,
    -- the earliest moment the engine worker must look at a live attempt
    deadline_at         timestamptz,
    -- claimed before attempts of lower priority of its queue (-100 to 100)
    priority            integer NOT NULL DEFAULT 0
);
ALTER SEQUENCE wf.task_id_seq OWNED BY wf.tasks.task_id;
-- Fencing tokens: a claim (and the engine taking a lease over at a timeout)
-- draws the next value, on top of the server's timeline in the bits above
-- 2^44 (src/spi_util.c, WfFenceBase).  Not rolled back and never
-- repeated, so that a fence names one delivery.
CREATE SEQUENCE wf.fence_seq AS bigint MAXVALUE 17592186044415;
COMMENT ON SEQUENCE wf.fence_seq IS
'Fencing tokens: every lease of a task gets the next value (plus the timeline id - 1 times 2^44); unique per delivery across rolled-back claims, crashes and promotions.';
COMMENT ON TABLE wf.tasks IS
'One row per attempt of a task step: the queue, the lease and the fencing token.';
COMMENT ON COLUMN wf.tasks.available_at IS
'When a ready attempt can be claimed: when it was scheduled, or the end of its quarantine.';

-- The claim index: claimable rows of one queue in FIFO order.
CREATE INDEX tasks_claim_idx ON wf.tasks (tenant_id, queue, priority DESC, available_at, task_id)
    WHERE status = 'ready';
-- Leased attempts of one queue, counted against a tenant's max_tasks_in_flight.
CREATE INDEX tasks_leased_idx ON wf.tasks (tenant_id, queue) WHERE status = 'leased';
-- Every attempt of every visit of a step, once.
CREATE UNIQUE INDEX tasks_attempt_key ON wf.tasks (run_id, step, visit, attempt);
-- At most one live attempt per step of a run, enforced by the database.
CREATE UNIQUE INDEX tasks_one_live_attempt ON wf.tasks (run_id, step)
    WHERE status IN ('ready', 'leased');
-- Live attempts with a deadline (lease expiry, timeouts), for the worker.
CREATE INDEX tasks_deadline_idx ON wf.tasks (deadline_at)
    WHERE status IN ('ready', 'leased') AND deadline_at IS NOT NULL;
COMMENT ON COLUMN wf.tasks.deadline_at IS
'The earliest of the lease expiry and the timeouts of a live attempt; the engine worker acts on it.';

-- Timers: durable waits of runs (retry backoff, sleep steps, step and run
-- timeouts).  A timer applies only while its generation still matches the
-- run (see timer.c); otherwise its firing is recorded and ignored.
CREATE SEQUENCE wf.timer_id_seq AS bigint;

CREATE TABLE wf.timers (
    timer_id        bigint PRIMARY KEY DEFAULT pg_catalog.nextval('wf.timer_id_seq'),
    tenant_id       text NOT NULL,
    run_id          uuid NOT NULL,
    kind            text NOT NULL
                    CHECK (kind IN ('retry', 'sleep', 'step_timeout', 'run_timeout',
                                    'approval_expiry', 'child_done')),
    step            text,
    generation      integer NOT NULL,
    due_at          timestamptz NOT NULL,
    fire_at         timestamptz NOT NULL,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'fired', 'cancelled')),
    payload         jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL,
    fired_at        timestamptz,
    outcome         text,
    errors          integer NOT NULL DEFAULT 0,
    last_error      text
);
ALTER SEQUENCE wf.timer_id_seq OWNED BY wf.timers.timer_id;
CREATE INDEX timers_due_idx ON wf.timers (fire_at, timer_id) WHERE status = 'pending';
CREATE INDEX timers_run_idx ON wf.timers (run_id);
COMMENT ON TABLE wf.timers IS
'Durable timers of runs; the engine worker fires them (or wf.tick() without preload).';
COMMENT ON COLUMN wf.timers.due_at IS
'When the timer is due; fire_at starts equal and moves on only when firing failed and is retried.';

-- Approvals: one row per approver of a visit of an approval step.  Each
-- approver gets one token per decision kind; only their keyed hashes are
-- stored (never a token); a re-issue replaces them, a revoke clears them.
CREATE SEQUENCE wf.approval_id_seq AS bigint;

CREATE TABLE wf.approvals (
    approval_id     bigint PRIMARY KEY DEFAULT pg_catalog.nextval('wf.approval_id_seq'),
    tenant_id       text NOT NULL,
    run_id          uuid NOT NULL,
    step            text NOT NULL,
    visit           integer NOT NULL,
    approver        text NOT NULL,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'decided', 'closed', 'revoked')),
    approve_hash    bytea UNIQUE,   -- keyed hash of the token that approves
    reject_hash     bytea UNIQUE,   -- keyed hash of the token that rejects
    token_generation integer NOT NULL DEFAULT 0,
    expires_at      timestamptz,
    decision        text CHECK (decision IN ('approve', 'reject')),
    comment         text,
    data            jsonb,
    decided_at      timestamptz,
    decided_by      text,
    created_at      timestamptz NOT NULL,
    UNIQUE (run_id, step, visit, approver)
);
ALTER SEQUENCE wf.approval_id_seq OWNED BY wf.approvals.approval_id;
COMMENT ON TABLE wf.approvals IS
'Approvers of approval steps; only keyed hashes of their one-time tokens are stored.';

-- What waits for whom: one row per approver still to decide, with its age.
-- Views read with the caller's rights (security_invoker: row-level
-- security applies as the caller) and as barriers, so that a function in
-- the caller's WHERE clause never sees a row of another tenant.
CREATE VIEW wf.pending_approvals WITH (security_invoker = true, security_barrier = true) AS
SELECT a.tenant_id, a.run_id, r.definition_name, a.step, a.visit, a.approver,
       a.created_at AS requested_at,
       pg_catalog.now() OPERATOR(pg_catalog.-) a.created_at AS age,
       a.expires_at,
       a.approve_hash IS NOT NULL AS token_issued
FROM wf.approvals a
JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) a.run_id
WHERE a.status OPERATOR(pg_catalog.=) 'pending'
  AND r.status OPERATOR(pg_catalog.=) 'running'
  AND a.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant();
COMMENT ON VIEW wf.pending_approvals IS
'Approvers who still have to decide, per run and step, with the age and expiry of each request.';

-- Every use of wf.decide(), good or bad, including tokens that match nothing.
CREATE TABLE wf.approval_attempts (
    attempt_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text NOT NULL,
    attempted_at    timestamptz NOT NULL,
    actor           text NOT NULL,
    approver        text,
    decision        text,
    outcome         text NOT NULL,
    run_id          uuid,
    step            text
);
CREATE INDEX approval_attempts_run_idx ON wf.approval_attempts (run_id) WHERE run_id IS NOT NULL;
COMMENT ON TABLE wf.approval_attempts IS
'Audit of every call of wf.decide(): who, when, for whom, and the answer; never the token.';

-- Failed calls of wf.decide() per approver and per token (its keyed hash),
-- in windows of wfengine.decide_failure_window: beyond
-- wfengine.decide_failure_limit a failure is counted here (suppressed)
-- instead of being stored, and a locked-out approver's calls answer
-- "throttled" (counted in throttled).  A token's row belongs to its run.
CREATE TABLE wf.decide_failures (
    tenant_id       text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('approver', 'token')),
    subject         text NOT NULL,  -- the approver, or the hex of the token's keyed hash
    run_id          uuid,           -- the token's run (kind token)
    window_start    timestamptz NOT NULL,
    failures        integer NOT NULL CHECK (failures > 0),
    suppressed      bigint NOT NULL DEFAULT 0,
    throttled       bigint NOT NULL DEFAULT 0,
    last_at         timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, kind, subject)
);
CREATE INDEX decide_failures_run_idx ON wf.decide_failures (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX decide_failures_stale_idx ON wf.decide_failures (last_at) WHERE run_id IS NULL;
COMMENT ON TABLE wf.decide_failures IS
'Failed wf.decide() calls per approver and per token in the current window, with the failures counted instead of stored and the calls throttled.';

-- Signals sent to runs: kept until a wait_event step of the run consumes
-- them (a signal may arrive before the run reaches the step); the event id
-- makes a repeated delivery a duplicate.
CREATE SEQUENCE wf.signal_id_seq AS bigint;

CREATE TABLE wf.signals (
    signal_id       bigint PRIMARY KEY DEFAULT pg_catalog.nextval('wf.signal_id_seq'),
    tenant_id       text NOT NULL,
    run_id          uuid NOT NULL,
    name            text NOT NULL,
    event_id        text NOT NULL,
    payload         jsonb NOT NULL,
    received_at     timestamptz NOT NULL,
    consumed_at     timestamptz,
    consumed_by     text,
    UNIQUE (run_id, event_id)
);
ALTER SEQUENCE wf.signal_id_seq OWNED BY wf.signals.signal_id;
CREATE INDEX signals_waiting_idx ON wf.signals (run_id, name, signal_id) WHERE consumed_at IS NULL;
COMMENT ON TABLE wf.signals IS
'Signals sent to runs with wf.signal(); kept until a wait_event step consumes them.';

-- The C API.
CREATE FUNCTION wf.publish_definition(name text, spec jsonb)
RETURNS integer
AS 'MODULE_PATHNAME', 'wfengine_publish_definition'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION wf.start_run(definition text,
                             input jsonb DEFAULT '{}',
                             idempotency_key text DEFAULT NULL,
                             version integer DEFAULT NULL)
RETURNS uuid
AS 'MODULE_PATHNAME', 'wfengine_start_run'
LANGUAGE C VOLATILE;

CREATE FUNCTION wf.claim_tasks(queue text,
                               worker text,
                               max_tasks integer DEFAULT 1,
                               lease interval DEFAULT '30 seconds',
                               wait interval DEFAULT NULL)
RETURNS TABLE (task_id bigint,
               run_id uuid,
               step text,
               attempt integer,
               fence bigint,
               idempotency_key text,
               input jsonb,
               lease_expires_at timestamptz,
               queue text,
               activity text,
               deliveries integer)
AS 'MODULE_PATHNAME', 'wfengine_claim_tasks'
LANGUAGE C VOLATILE ROWS 1;
COMMENT ON FUNCTION wf.claim_tasks(text, text, integer, interval, interval) IS
'Leases up to max_tasks claimable tasks of a queue; with a wait (up to 5 minutes, READ COMMITTED only), sleeps until one can be claimed.';

CREATE FUNCTION wf.complete_task(task_id bigint,
                                 fence bigint,
                                 output jsonb DEFAULT '{}')
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_complete_task'
LANGUAGE C VOLATILE;

CREATE FUNCTION wf.fail_task(task_id bigint,
                             fence bigint,
                             error jsonb,
                             retryable boolean DEFAULT true)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_fail_task'
LANGUAGE C VOLATILE;

CREATE FUNCTION wf.heartbeat(task_id bigint,
                             fence bigint,
                             details jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_heartbeat'
LANGUAGE C VOLATILE;

CREATE FUNCTION wf.tick(max_fire integer DEFAULT 1000)
RETURNS integer
AS 'MODULE_PATHNAME', 'wfengine_tick'
LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION wf.tick(integer) FROM PUBLIC;
COMMENT ON FUNCTION wf.tick(integer) IS
'Fires due timers and task deadlines now, as the engine worker does; for tests and for servers without preload (schedule it with pg_cron).';

CREATE FUNCTION wf.issue_approval_tokens(task_id bigint, fence bigint)
RETURNS TABLE (approver text, decision text, token text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'wfengine_issue_approval_tokens'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.issue_approval_tokens(bigint, bigint) IS
'Mints one-time tokens for the approvers of the approval step whose notification task the caller holds; earlier tokens stop working.';

CREATE FUNCTION wf.decide(token text,
                          decision text,
                          approver text,
                          comment text DEFAULT NULL,
                          data jsonb DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_decide'
LANGUAGE C VOLATILE;

CREATE FUNCTION wf.revoke_approval_tokens(run uuid, step text, reason text)
RETURNS integer
AS 'MODULE_PATHNAME', 'wfengine_revoke_approval_tokens'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.revoke_approval_tokens(uuid, text, text) IS
'Makes every unused token of a waiting approval step invalid; audited with the reason.';

CREATE FUNCTION wf.reissue_approval_tokens(run uuid, step text, reason text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'wfengine_reissue_approval_tokens'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.reissue_approval_tokens(uuid, text, text) IS
'Revokes the unused tokens of a waiting approval step and schedules a new notification task; returns its task id.';

CREATE FUNCTION wf.set_approvers(run uuid, step text, approvers text[], reason text)
RETURNS void
AS 'MODULE_PATHNAME', 'wfengine_set_approvers'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.set_approvers(uuid, text, text[], text) IS
'Replaces the approvers of a waiting approval step; removed approvers'' tokens stop working at once.';

CREATE FUNCTION wf.terminate_run(run uuid, reason text)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_terminate_run'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.terminate_run(uuid, text) IS
'Ends a running or paused run at once, without compensation: its live task is withdrawn, its timers and tokens cancelled; returns the status it had.';

CREATE FUNCTION wf.cancel_run(run uuid, reason text)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_cancel_run'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.cancel_run(uuid, text) IS
'Cancels a running, paused or failed run with compensation: unstarted work is withdrawn, an attempt in flight settles, then the compensations of completed steps run newest first; the run ends cancelled, or compensation_failed for an operator.';

-- Batch forms of the operator commands: one command over the runs a
-- filter selects, at most max_runs of them per call, in run id order after
-- the run id "after" (the last one a previous call returned): so a batch is
-- bounded and a caller resumes it where it stopped.  Each run is changed in
-- a subtransaction of its own: a run that refuses the command is reported
-- and the batch goes on.
CREATE FUNCTION wf._batch(batch text, command text, statuses text[], reason text,
                          filter jsonb, max_runs integer, after uuid)
RETURNS TABLE (run_id uuid, outcome text, detail text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k        text;
    wanted   text[] := statuses;
    rid      uuid;
    tenant   text := wf.current_tenant();
BEGIN
    IF reason IS NULL OR reason OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'an operator command needs a reason'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The reason is recorded in the history of every run the command changes.';
    END IF;
    IF max_runs IS NULL OR max_runs OPERATOR(pg_catalog.<) 1 OR max_runs OPERATOR(pg_catalog.>) 10000 THEN
        RAISE EXCEPTION 'max_runs must be between 1 and 10000, not %', coalesce(max_runs::text, 'null')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Call again with "after" set to the last run id returned to go on.';
    END IF;
    filter := coalesce(filter, '{}');
    IF jsonb_typeof(filter) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'a run filter must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Valid keys: definition, version, status, failure_code, started_after, started_before, finished_after, finished_before.';
    END IF;
    FOR k IN SELECT jsonb_object_keys(filter) LOOP
        IF k NOT IN ('definition', 'version', 'status', 'failure_code', 'started_after',
                     'started_before', 'finished_after', 'finished_before') THEN
            RAISE EXCEPTION 'unknown run filter key "%"', k
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Valid keys: definition, version, status, failure_code, started_after, started_before, finished_after, finished_before.';
        END IF;
    END LOOP;
    IF filter ? 'status' THEN
        IF NOT ((filter->>'status') OPERATOR(pg_catalog.=) ANY (statuses)) THEN
            RAISE EXCEPTION 'wf.% does not apply to % runs', batch, filter->>'status'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = format('It applies to runs that are %s.', array_to_string(statuses, ' or '));
        END IF;
        wanted := ARRAY[filter->>'status'];
    END IF;
    PERFORM wf._check_arg('reason', reason, 'reason');

    FOR rid IN
        SELECT x.run_id FROM wf.runs x
        WHERE x.tenant_id OPERATOR(pg_catalog.=) tenant
          AND x.status OPERATOR(pg_catalog.=) ANY (wanted)
          AND (NOT filter ? 'definition' OR x.definition_name OPERATOR(pg_catalog.=) (filter->>'definition'))
          AND (NOT filter ? 'version' OR x.definition_version OPERATOR(pg_catalog.=) (filter->>'version')::integer)
          AND (NOT filter ? 'started_after' OR x.created_at OPERATOR(pg_catalog.>=) (filter->>'started_after')::timestamptz)
          AND (NOT filter ? 'started_before' OR x.created_at OPERATOR(pg_catalog.<) (filter->>'started_before')::timestamptz)
          AND (NOT filter ? 'finished_after' OR x.finished_at OPERATOR(pg_catalog.>=) (filter->>'finished_after')::timestamptz)
          AND (NOT filter ? 'finished_before' OR x.finished_at OPERATOR(pg_catalog.<) (filter->>'finished_before')::timestamptz)
          AND (NOT filter ? 'failure_code' OR (filter->>'failure_code') IN (
                SELECT coalesce(e.payload->'error'->>'code', '') FROM wf.events e
                WHERE e.run_id OPERATOR(pg_catalog.=) x.run_id AND e.type IN ('run_failed', 'compensation_failed')
                UNION ALL
                SELECT e.payload->>'reason' FROM wf.events e
                WHERE e.run_id OPERATOR(pg_catalog.=) x.run_id AND e.type IN ('run_failed', 'compensation_failed')))
          AND (after IS NULL OR x.run_id OPERATOR(pg_catalog.>) after)
        ORDER BY x.run_id
        LIMIT max_runs
    LOOP
        run_id := rid;
        BEGIN
            EXECUTE format('SELECT wf.%I($1, $2)', command) INTO detail USING rid, reason;
            outcome := 'done';
        EXCEPTION WHEN OTHERS THEN
            outcome := 'refused';
            detail := SQLERRM;
        END;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION wf._batch(text, text, text[], text, jsonb, integer, uuid) IS
'Internal: runs an operator command over the runs a filter selects, for wf.cancel_runs, wf.retry_runs and wf.resume_runs.';

CREATE FUNCTION wf.cancel_runs(reason text, filter jsonb DEFAULT '{}',
                               max_runs integer DEFAULT 100, after uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, outcome text, detail text)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM wf._batch('cancel_runs', 'cancel_run', ARRAY['running', 'paused'], reason, filter, max_runs, after) $$;
COMMENT ON FUNCTION wf.cancel_runs(text, jsonb, integer, uuid) IS
'wf.cancel_run over the running and paused runs a filter selects (definition, version, status, started_*/finished_*), at most max_runs after the run id "after"; one row per run: done with its new status, or refused with why.';

CREATE FUNCTION wf.retry_runs(reason text, filter jsonb DEFAULT '{}',
                              max_runs integer DEFAULT 100, after uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, outcome text, detail text)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM wf._batch('retry_runs', 'retry_step', ARRAY['failed', 'compensation_failed'], reason, filter, max_runs, after) $$;
COMMENT ON FUNCTION wf.retry_runs(text, jsonb, integer, uuid) IS
'wf.retry_step over the failed (and compensation_failed) runs a filter selects (definition, version, status, failure_code, started_*/finished_*), at most max_runs after the run id "after"; one row per run.';

CREATE FUNCTION wf.resume_runs(reason text, filter jsonb DEFAULT '{}',
                               max_runs integer DEFAULT 100, after uuid DEFAULT NULL)
RETURNS TABLE (run_id uuid, outcome text, detail text)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM wf._batch('resume_runs', 'resume_run', ARRAY['paused'], reason, filter, max_runs, after) $$;
COMMENT ON FUNCTION wf.resume_runs(text, jsonb, integer, uuid) IS
'wf.resume_run over the paused runs a filter selects (definition, version, started_*/finished_*), at most max_runs after the run id "after"; one row per run.';

-- The step graph of a definition spec, as the compiled definition has it
-- (src/defcompile.c, WfStepEdges): one row per edge, numbered in a fixed
-- order (step by step in definition order: a choice's conditions in order
-- and its default, or the step's next, then an approval's expiry or a
-- wait's timeout).  to_index is NULL when the edge leaves the graph;
-- to_step then says how: 'end' or 'fail'.  kind is next, choice, default,
-- expiry or timeout; choice numbers a choice's conditions from 0; label is
-- a condition as the spec writes it, 'default', 'approved', 'expired' or
-- 'timed out'.  wf._graph_render draws these edges and
-- wf._migration_problem follows them: neither derives them from the JSON.
-- An invalid spec is an error.
CREATE FUNCTION wf._step_edges(spec jsonb)
RETURNS TABLE (edge integer, from_index integer, from_step text, to_index integer,
               to_step text, kind text, choice integer, label text)
AS 'MODULE_PATHNAME', 'wfengine_step_edges'
LANGUAGE C IMMUTABLE STRICT;
COMMENT ON FUNCTION wf._step_edges(jsonb) IS
'Internal: the edges of the step graph of a definition spec, from its compiled form; used by wf._graph_render and wf._migration_problem.';

-- Why a run cannot move to another version of its definition, or NULL.
-- Used by wf.migrate_run() under the run's lock: the run's position must
-- exist in the target with the same type (and, for a wait, the same
-- event), and no mapping the run will still evaluate in the target may
-- read the output of a step the run has not produced and will not reach.
CREATE FUNCTION wf._migration_problem(run uuid, target bigint)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r         wf.runs;
    spec      jsonb;
    steps     jsonb;
    cur       jsonb;
    cur_type  text;
    reach     text[];
    ref       text;
    s         text;
    m         jsonb;
BEGIN
    SELECT * INTO r FROM wf.runs x WHERE x.run_id OPERATOR(pg_catalog.=) run;
    SELECT d.spec INTO spec FROM wf.definitions d WHERE d.definition_id OPERATOR(pg_catalog.=) target;
    steps := spec->'steps';
    IF r.current_step IS NULL THEN
        RETURN 'The run is at no step.';
    END IF;
    IF r.current_step LIKE 'compensate:%' THEN
        RETURN 'The run is compensating.';
    END IF;
    SELECT e INTO cur FROM jsonb_array_elements(steps) e
    WHERE e->>'name' OPERATOR(pg_catalog.=) r.current_step;
    IF cur IS NULL THEN
        RETURN format('The run is at step "%s", which the target version does not have.', r.current_step);
    END IF;
    SELECT coalesce(e->>'type', 'task') INTO cur_type FROM wf.definitions d, jsonb_array_elements(d.spec->'steps') e
    WHERE d.definition_id OPERATOR(pg_catalog.=) r.definition_id AND e->>'name' OPERATOR(pg_catalog.=) r.current_step;
    IF coalesce(cur->>'type', 'task') OPERATOR(pg_catalog.<>) cur_type THEN
        RETURN format('Step "%s" is a %s step in the target version, a %s step in the run''s.',
                      r.current_step, coalesce(cur->>'type', 'task'), cur_type);
    END IF;
    IF cur_type IN ('subworkflow', 'parallel') THEN
        RETURN format('The run waits for the child runs of step "%s"; migrate it before or after that step.',
                      r.current_step);
    END IF;
    IF cur_type OPERATOR(pg_catalog.=) 'wait_event' AND (cur->>'event') IS DISTINCT FROM (
        SELECT e->>'event' FROM wf.definitions d, jsonb_array_elements(d.spec->'steps') e
        WHERE d.definition_id OPERATOR(pg_catalog.=) r.definition_id
          AND e->>'name' OPERATOR(pg_catalog.=) r.current_step) THEN
        RETURN format('Step "%s" waits for another event in the target version.', r.current_step);
    END IF;

    -- the steps the run can still reach from where it is, in the target
    WITH RECURSIVE graph AS MATERIALIZED (
        SELECT x.from_step, x.to_step FROM wf._step_edges(spec) x
        WHERE x.to_index IS NOT NULL
    ), reached(step) AS (
        SELECT r.current_step
        UNION
        SELECT g.to_step FROM reached JOIN graph g ON g.from_step OPERATOR(pg_catalog.=) reached.step
    )
    SELECT pg_catalog.array_agg(reached.step) INTO reach FROM reached;

    -- every "$.steps.<name>" those steps (and the run's output) will map
    FOR s, m IN
        SELECT e->>'name', jsonb_build_array(e->'input', e->'compensate'->'input', e->'approvers',
                                             e->'until', e->'choices')
        FROM jsonb_array_elements(steps) e
        WHERE e->>'name' OPERATOR(pg_catalog.=) ANY (reach)
        UNION ALL SELECT '(output)', spec->'output'
    LOOP
        FOR ref IN
            SELECT DISTINCT (regexp_matches(m::text, '\$\.steps\.([A-Za-z_][A-Za-z0-9_]*)', 'g'))[1]
        LOOP
            IF NOT r.context->'steps' ? ref AND NOT ref OPERATOR(pg_catalog.=) ANY (reach) THEN
                RETURN format('%s of the target version reads $.steps.%s, which the run has not produced and would not reach.',
                              CASE WHEN s OPERATOR(pg_catalog.=) '(output)' THEN 'The output'
                                   ELSE format('Step "%s"', s) END, ref);
            END IF;
        END LOOP;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION wf._migration_problem(uuid, bigint) IS
'Internal: why wf.migrate_run() cannot move a run to a definition version, or NULL.';

CREATE FUNCTION wf.migrate_run(run uuid, to_version integer, reason text)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_migrate_run'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.migrate_run(uuid, integer, text) IS
'Moves a running or paused run to another version of its definition when its position exists there and the context fits; the attempt of the old version is withdrawn (its result is stale) and scheduled anew; returns the step the run is at.';

CREATE FUNCTION wf.pause_run(run uuid, reason text)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_pause_run'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.pause_run(uuid, text) IS
'Pauses a running run: nothing new is scheduled; an unclaimed attempt is withdrawn, a result of an attempt in flight is held, timers that come due are held; returns "paused".';

CREATE FUNCTION wf.resume_run(run uuid, reason text)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_resume_run'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.resume_run(uuid, text) IS
'Resumes a paused run: applies a held result, makes held timers due, schedules a withdrawn attempt again; returns the run''s status.';

CREATE FUNCTION wf.retry_step(run uuid, reason text, run_timeout interval DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_retry_step'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.retry_step(uuid, text, interval) IS
'Runs a failed run again from the task step it failed at: one new attempt of the same visit (same idempotency key), input mapped from the current context; the run''s time limit starts again from the retry (run_timeout, or the definition''s timeout when NULL); returns "running".';

CREATE FUNCTION wf.skip_step(run uuid, output jsonb, reason text, step text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_skip_step'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.skip_step(uuid, jsonb, text, text) IS
'Ends the current step of a running or failed run with the output given and moves the run on; refused for steps the definition does not allow to be skipped; returns the run''s status.';

CREATE FUNCTION wf.update_context(run uuid, patch jsonb, reason text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'wfengine_update_context'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.update_context(uuid, jsonb, text) IS
'Merges a patch into the input of a running or paused run (a null value removes a key); records the old and new values; returns the new input.';

CREATE FUNCTION wf.signal(run uuid, name text, payload jsonb DEFAULT '{}', event_id text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_signal'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.signal(uuid, text, jsonb, text) IS
'Sends a named signal to a run: consumed now by a wait_event step waiting for it, or kept for when the run gets there; a repeated event id is a duplicate.';

-- Correlation keys: "<name>:<value>" of a run, from the definition's
-- "correlation" paths over the run input at start; wf.send_event() routes
-- an outside event to the live runs that declared its key.
CREATE TABLE wf.correlations (
    tenant_id   text NOT NULL,
    key         text NOT NULL,
    run_id      uuid NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key, run_id)
);
CREATE INDEX correlations_run_idx ON wf.correlations (run_id);
SELECT pg_catalog.pg_extension_config_dump('wf.correlations', '');
COMMENT ON TABLE wf.correlations IS
'The correlation keys each run declared when it started; wf.send_event() finds runs here.';

-- Strings beginning with "wfenc:" are reserved for sealed values (sensitive.c).
CREATE FUNCTION wf._refuse_sealed_lookalikes(value jsonb, what text, owner text)
RETURNS void
AS 'MODULE_PATHNAME', 'wfengine_refuse_sealed_lookalikes'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION wf._refuse_sealed_lookalikes(jsonb, text, text) IS
'Internal: refuses (22023) a value holding a string that begins with "wfenc:", the prefix of sealed values; for wf.schedule and wf.send_event.';

-- Events sent to a correlation key that no live run had declared: kept
-- until their retention (given at send) passes, and delivered to the first
-- run that declares the key at wf.start_run and waits for the event's name
-- (events.c).  A delivered row stays until it expires, so that a repeated
-- event id is a duplicate for as long as the event was to be kept.
CREATE SEQUENCE wf.buffered_event_id_seq AS bigint;

CREATE TABLE wf.buffered_events (
    buffer_id       bigint PRIMARY KEY DEFAULT pg_catalog.nextval('wf.buffered_event_id_seq'),
    tenant_id       text NOT NULL,
    key             text NOT NULL,
    name            text NOT NULL,
    event_id        text NOT NULL,
    payload         jsonb NOT NULL,
    sent_by         text NOT NULL,
    received_at     timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    delivered_at    timestamptz,
    delivered_to    uuid,
    CHECK (expires_at OPERATOR(pg_catalog.>) received_at),
    CHECK ((delivered_at IS NULL) OPERATOR(pg_catalog.=) (delivered_to IS NULL)),
    UNIQUE (tenant_id, key, event_id)
);
ALTER SEQUENCE wf.buffered_event_id_seq OWNED BY wf.buffered_events.buffer_id;
CREATE INDEX buffered_events_waiting_idx ON wf.buffered_events (tenant_id, key, buffer_id)
    WHERE delivered_at IS NULL;
CREATE INDEX buffered_events_expiry_idx ON wf.buffered_events (expires_at);
SELECT pg_catalog.pg_extension_config_dump('wf.buffered_events', '');
SELECT pg_catalog.pg_extension_config_dump('wf.buffered_event_id_seq', '');
COMMENT ON TABLE wf.buffered_events IS
'Events wf.send_event() kept for a correlation key no live run had declared; delivered to the first run that declares the key and waits for the name, removed by wf.purge_runs() once expired.';

CREATE FUNCTION wf._event_runs(correlation_key text)
RETURNS uuid[]
AS 'MODULE_PATHNAME', 'wfengine_event_runs'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION wf._event_runs(text) IS
'Internal, for wf.send_event: takes the lock of the correlation key (which wf.start_run takes to declare it) and returns the live runs of the session''s tenant that declared it, in run id order.';

CREATE FUNCTION wf._buffer_event(correlation_key text, name text, payload jsonb,
                                 event_id text, keep interval)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_buffer_event'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf._buffer_event(text, text, jsonb, text, interval) IS
'Internal, for wf.send_event: keeps an event for a key no live run declared (buffered), or answers duplicate or dropped; within the tenant''s max_buffered_events.';

CREATE FUNCTION wf.send_event(correlation_key text, name text, payload jsonb DEFAULT '{}',
                              event_id text DEFAULT NULL, keep interval DEFAULT '1 day')
RETURNS TABLE (run_id uuid, outcome text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rid uuid;
    delivered boolean := false;
BEGIN
    IF correlation_key IS NULL OR correlation_key OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'a correlation key must not be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the key as "<name>:<value>", e.g. ''shipment:SH-1'', for a definition with {"correlation": {"shipment": "$.input.shipment_id"}}.';
    END IF;
    IF name IS NULL THEN
        RAISE EXCEPTION 'name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF keep IS NULL OR keep OPERATOR(pg_catalog.<=) interval '0'
       OR keep OPERATOR(pg_catalog.>) interval '30 days' THEN
        RAISE EXCEPTION 'keep must be between 1 microsecond and 30 days, not %', keep
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'keep is how long an event no run has declared the key for waits for one, e.g. ''1 day''.';
    END IF;
    PERFORM wf._check_arg('correlation key', correlation_key, 'key');
    PERFORM wf._check_arg('signal name', name, 'signal');
    PERFORM wf._check_arg('event id', event_id, 'key');
    PERFORM wf._check_payload(payload, 'signal payload', pg_catalog.format('signal "%s"', name), false);
    -- refused whether or not a run declared the key, as wf.signal refuses it
    PERFORM wf._refuse_sealed_lookalikes(payload, 'signal payload',
                                         pg_catalog.format('signal "%s"', name));
    -- under the key's lock, which a start declaring the key takes too; in
    -- run id order, so that two senders lock the runs in the same order
    FOREACH rid IN ARRAY wf._event_runs(correlation_key)
    LOOP
        run_id := rid;
        BEGIN
            outcome := wf.signal(rid, name, payload, event_id);
            delivered := true;
        EXCEPTION WHEN object_not_in_prerequisite_state THEN
            outcome := 'ended';     -- it ended meanwhile
        END;
        RETURN NEXT;
    END LOOP;
    -- no live run has the key (yet): kept for the first run that declares it
    IF NOT delivered THEN
        run_id := NULL;
        outcome := wf._buffer_event(correlation_key, name, payload, event_id, keep);
        RETURN NEXT;
    END IF;
END
$$;
COMMENT ON FUNCTION wf.send_event(text, text, jsonb, text, interval) IS
'Sends a signal to every running or paused run that declared the correlation key ("<name>:<value>"): one row per run with wf.signal''s outcome (consumed, stored, duplicate) or ended; when no live run has the key, one row with a null run id: buffered (kept for keep, for the first run that declares the key and waits for the name), duplicate or dropped.';

CREATE FUNCTION wf.run_status(run uuid)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_run_status'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION wf.verify_run(run uuid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wfengine_verify_run'
LANGUAGE C VOLATILE STRICT;

-- Anchors of the hash chains (replay.c): what an auditor exports on a
-- schedule, and later checks with wf.verify_run(run, anchor).
CREATE FUNCTION wf.verify_run(run uuid, anchor jsonb)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wfengine_verify_run_anchor'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION wf.verify_run(uuid, jsonb) IS
'wf.verify_run(run), and the history still extends the anchor (a row of wf.chain_heads() as JSON): the event at the anchor''s seq has its hash, and a signed anchor was signed with wfengine.anchor_key.';

CREATE FUNCTION wf.chain_heads()
RETURNS TABLE (tenant_id text, run_id uuid, seq integer, head_hash text, signature text)
AS 'MODULE_PATHNAME', 'wfengine_chain_heads'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.chain_heads() IS
'The head of the hash chain of every run of the session''s tenant (last seq and the hash of that event, hex), signed with wfengine.anchor_key (keyed BLAKE2b, hex) when it is set; export it to keep anchors outside the database.';

CREATE FUNCTION wf.history(run uuid)
RETURNS TABLE (seq integer,
               type text,
               step text,
               attempt integer,
               payload jsonb,
               actor text,
               created_at timestamptz,
               hash text)
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM wf.runs r
                   WHERE r.run_id OPERATOR(pg_catalog.=) run
                     AND r.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()) THEN
        RAISE EXCEPTION 'run % does not exist', run
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN QUERY
        SELECT e.seq, e.type, e.step, e.attempt, e.payload, e.actor, e.created_at,
               pg_catalog.encode(e.hash, 'hex')
        FROM wf.events e
        WHERE e.run_id OPERATOR(pg_catalog.=) run
          AND e.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
        ORDER BY e.seq;
END
$$;

-- Where a run is, and why it waits.
CREATE FUNCTION wf.explain(run uuid)
RETURNS jsonb
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r       wf.runs;
    t       wf.tasks;
    tm      wf.timers;
    ev      wf.events;
    waiting text;
    details jsonb := '{}';
    step_def jsonb;
    in_flight_limit integer;
    commands text[] := ARRAY['wf.history', 'wf.verify_run'];
BEGIN
    SELECT * INTO r FROM wf.runs x
    WHERE x.run_id OPERATOR(pg_catalog.=) run
      AND x.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', run USING ERRCODE = 'undefined_object';
    END IF;

    IF r.status IN ('completed', 'failed', 'terminated', 'cancelled', 'compensation_failed',
                    'compensated') THEN
        SELECT * INTO ev FROM wf.events e
        WHERE e.run_id OPERATOR(pg_catalog.=) run
          AND e.type IN ('run_completed', 'run_failed', 'run_terminated', 'run_cancelled',
                         'compensation_failed', 'run_compensated')
        ORDER BY e.seq DESC LIMIT 1;
        details := jsonb_build_object('finished_at', r.finished_at,
                                      'reason', ev.payload->'reason', 'at_step', ev.payload->'step');
    ELSIF r.status OPERATOR(pg_catalog.=) 'paused' THEN
        SELECT * INTO ev FROM wf.events e
        WHERE e.run_id OPERATOR(pg_catalog.=) run AND e.type OPERATOR(pg_catalog.=) 'run_paused'
        ORDER BY e.seq DESC LIMIT 1;
        waiting := 'operator';
        details := jsonb_build_object('paused_by', ev.actor, 'since', ev.created_at,
                                      'reason', ev.payload->'reason');
        IF r.current_task IS NOT NULL THEN
            SELECT * INTO t FROM wf.tasks k WHERE k.task_id OPERATOR(pg_catalog.=) r.current_task;
            details := details || jsonb_build_object('in_flight_task', t.task_id, 'worker', t.worker,
                                                     'result_held', t.status IN ('completed', 'failed'));
        END IF;
        details := details || jsonb_build_object('held_timers',
            (SELECT count(*) FROM wf.timers x
             WHERE x.run_id OPERATOR(pg_catalog.=) run AND x.status OPERATOR(pg_catalog.=) 'pending'
               AND x.outcome OPERATOR(pg_catalog.=) 'held'));
    ELSIF r.current_task IS NOT NULL THEN
        SELECT * INTO t FROM wf.tasks k WHERE k.task_id OPERATOR(pg_catalog.=) r.current_task;
        IF t.status OPERATOR(pg_catalog.=) 'leased' THEN
            waiting := 'worker_result';
            details := jsonb_build_object('queue', t.queue, 'task_id', t.task_id,
                                          'attempt', t.attempt, 'worker', t.worker,
                                          'since', t.claimed_at, 'lease_expires_at', t.lease_expires_at,
                                          'last_heartbeat_at', t.last_heartbeat_at);
        ELSIF t.available_at OPERATOR(pg_catalog.>) clock_timestamp() THEN
            waiting := 'quarantine';
            details := jsonb_build_object('queue', t.queue, 'task_id', t.task_id,
                                          'until', t.available_at,
                                          'lease_expirations', t.lease_expirations);
        ELSE
            waiting := 'worker';
            details := jsonb_build_object('queue', t.queue, 'task_id', t.task_id,
                                          'attempt', t.attempt, 'since', t.available_at,
                                          'ahead', (SELECT count(*) FROM wf.tasks a
                                                    WHERE a.tenant_id OPERATOR(pg_catalog.=) t.tenant_id
                                                      AND a.queue OPERATOR(pg_catalog.=) t.queue
                                                      AND a.status OPERATOR(pg_catalog.=) 'ready'
                                                      AND a.available_at OPERATOR(pg_catalog.<=) clock_timestamp()
                                                      AND (a.priority OPERATOR(pg_catalog.>) t.priority
                                                           OR (a.priority OPERATOR(pg_catalog.=) t.priority
                                                               AND (a.available_at, a.task_id) OPERATOR(pg_catalog.<) (t.available_at, t.task_id)))),
                                          'priority', t.priority);
            -- a tenant at its max_tasks_in_flight waits for one of them to end
            SELECT p.max_tasks_in_flight INTO in_flight_limit FROM wf.tenant_policies p
            WHERE p.tenant_id OPERATOR(pg_catalog.=) t.tenant_id;
            IF in_flight_limit IS NOT NULL THEN
                details := details || jsonb_build_object('max_tasks_in_flight', in_flight_limit,
                    'in_flight', (SELECT count(*) FROM wf.tasks a
                                  WHERE a.tenant_id OPERATOR(pg_catalog.=) t.tenant_id
                                    AND a.queue OPERATOR(pg_catalog.=) t.queue
                                    AND a.status OPERATOR(pg_catalog.=) 'leased'));
                IF (details->>'in_flight')::integer OPERATOR(pg_catalog.>=) in_flight_limit THEN
                    waiting := 'tenant_quota';
                    details := details || jsonb_build_object('reason',
                        pg_catalog.format('the tenant has %s tasks of queue "%s" in flight, its max_tasks_in_flight',
                                          in_flight_limit, t.queue));
                END IF;
            END IF;
        END IF;
    ELSIF r.wait_generation OPERATOR(pg_catalog.>) 0 THEN
        SELECT * INTO tm FROM wf.timers x
        WHERE x.run_id OPERATOR(pg_catalog.=) run AND x.status OPERATOR(pg_catalog.=) 'pending'
          AND x.generation OPERATOR(pg_catalog.=) r.wait_generation;
        IF FOUND THEN
            waiting := CASE tm.kind WHEN 'retry' THEN 'retry_backoff' ELSE tm.kind END;
            details := jsonb_build_object('until', tm.fire_at, 'timer_id', tm.timer_id,
                                          'next_attempt', tm.payload->'attempt');
        END IF;
    ELSIF r.current_step IS NOT NULL AND r.context->'children' ? r.current_step THEN
        -- a subworkflow or parallel step: its child runs
        waiting := 'children';
        details := jsonb_build_object(
            'runs', (SELECT jsonb_agg(jsonb_build_object('run_id', c.run_id, 'definition', c.definition_name,
                                                         'status', c.status, 'step', c.current_step)
                                      ORDER BY c.created_at, c.run_id)
                     FROM wf.runs c
                     WHERE c.run_id::text IN (SELECT jsonb_array_elements_text(r.context->'children'->r.current_step->'runs'))),
            'join', r.context->'children'->r.current_step->'join',
            'completed', r.context->'children'->r.current_step->'completed');
    ELSIF r.current_step IS NOT NULL THEN
        -- a wait_event step: its wait_started event is the step's generation
        SELECT * INTO ev FROM wf.events e
        WHERE e.run_id OPERATOR(pg_catalog.=) run
          AND e.seq OPERATOR(pg_catalog.=) r.step_generation
          AND e.type OPERATOR(pg_catalog.=) 'wait_started';
        IF FOUND THEN
            waiting := 'event';
            details := jsonb_build_object('event', ev.payload->'event', 'since', ev.created_at,
                'timeout_at', (SELECT x.fire_at FROM wf.timers x
                               WHERE x.run_id OPERATOR(pg_catalog.=) run
                                 AND x.kind OPERATOR(pg_catalog.=) 'step_timeout'
                                 AND x.status OPERATOR(pg_catalog.=) 'pending'
                                 AND x.generation OPERATOR(pg_catalog.=) r.step_generation));
        END IF;
    END IF;

    IF r.status OPERATOR(pg_catalog.=) 'running' AND r.current_step IS NOT NULL THEN
        SELECT s INTO step_def FROM wf.definitions d, jsonb_array_elements(d.spec->'steps') s
        WHERE d.definition_id OPERATOR(pg_catalog.=) r.definition_id
          AND s->>'name' OPERATOR(pg_catalog.=) r.current_step;
    END IF;
    IF r.status OPERATOR(pg_catalog.=) 'running' AND (step_def->>'type' OPERATOR(pg_catalog.=) 'approval' OR EXISTS (
        SELECT 1 FROM wf.approvals a WHERE a.run_id OPERATOR(pg_catalog.=) run
          AND a.step OPERATOR(pg_catalog.=) r.current_step AND a.status OPERATOR(pg_catalog.=) 'pending')) THEN
        -- a live task at an approval step is its notification task
        IF waiting IS NOT NULL THEN
            details := jsonb_build_object('notification', details || jsonb_build_object('waiting_for', waiting));
        END IF;
        waiting := 'approval';
        details := details || jsonb_build_object('approval', (
            SELECT jsonb_build_object('pending', coalesce(jsonb_agg(a.approver ORDER BY a.approver), '[]'),
                                      'since', min(a.created_at), 'expires_at', max(a.expires_at),
                                      'tokens_issued', coalesce(bool_or(a.approve_hash IS NOT NULL), false))
            FROM wf.approvals a WHERE a.run_id OPERATOR(pg_catalog.=) run
              AND a.step OPERATOR(pg_catalog.=) r.current_step AND a.status OPERATOR(pg_catalog.=) 'pending'));
        commands := commands || ARRAY['wf.decide', 'wf.revoke_approval_tokens',
                                      'wf.reissue_approval_tokens', 'wf.set_approvers'];
    END IF;

    -- a timer whose transition max_timers_per_run refused (timer.c): it stays pending,
    -- tried again every 10 seconds, and the run cannot move on until there is room
    IF r.status IN ('running', 'cancelling', 'compensating') THEN
        SELECT * INTO tm FROM wf.timers x
        WHERE x.run_id OPERATOR(pg_catalog.=) run AND x.status OPERATOR(pg_catalog.=) 'pending'
          AND x.outcome OPERATOR(pg_catalog.=) 'quota_refused'
        ORDER BY x.due_at, x.timer_id LIMIT 1;
        IF FOUND THEN
            SELECT p.max_timers_per_run INTO in_flight_limit FROM wf.tenant_policies p
            WHERE p.tenant_id OPERATOR(pg_catalog.=) r.tenant_id;
            IF waiting IS NOT NULL THEN
                details := jsonb_build_object('refused_wait', details || jsonb_build_object('waiting_for', waiting));
            END IF;
            waiting := 'tenant_quota';
            details := details || jsonb_build_object(
                'quota', 'max_timers_per_run',
                'max_timers_per_run', in_flight_limit,
                'pending_timers', (SELECT count(*) FROM wf.timers x
                                   WHERE x.run_id OPERATOR(pg_catalog.=) run
                                     AND x.status OPERATOR(pg_catalog.=) 'pending'
                                     AND x.kind OPERATOR(pg_catalog.<>) 'child_done'),
                'timer', jsonb_build_object('timer_id', tm.timer_id, 'kind', tm.kind, 'step', tm.step,
                                            'due_at', tm.due_at, 'next_try_at', tm.fire_at,
                                            'tries', tm.errors, 'error', tm.last_error),
                'reason', pg_catalog.format('the %s timer%s fired, but what it does would set a timer beyond the tenant''s max_timers_per_run of %s',
                                            tm.kind, coalesce(pg_catalog.format(' of step "%s"', tm.step), ''),
                                            coalesce(in_flight_limit::text, 'none (raised since: the next try applies it)')),
                'way_out', 'raise max_timers_per_run (wf.set_tenant_policy; the next try, within 10 seconds, applies it), or wf.migrate_run the run to a version published under the limit, or wf.terminate_run it');
            commands := commands || ARRAY['wf.set_tenant_policy', 'wf.migrate_run'];
        END IF;
    END IF;

    -- a live run always says what it waits for: one that waits for nothing the engine
    -- tracks (no live task, timer, approval, signal or child run) needs an operator
    IF waiting IS NULL AND r.status IN ('running', 'paused', 'cancelling', 'compensating') THEN
        waiting := 'operator';
        details := details || jsonb_build_object('stuck', true,
            'reason', 'the run has no live task, timer, approval, awaited signal or child run: nothing moves it on but an operator');
    END IF;

    IF r.context ? 'compensation' THEN
        details := details || jsonb_build_object('compensation', r.context->'compensation');
    END IF;
    -- on_failure "compensate": the failure its compensations undo
    IF r.context ? 'failure' THEN
        details := details || jsonb_build_object('failure', r.context->'failure');
    END IF;

    IF r.status IN ('running', 'paused') THEN
        commands := commands || ARRAY['wf.signal', 'wf.terminate_run', 'wf.update_context',
                                      'wf.cancel_run'];
    ELSIF r.status IN ('cancelling', 'compensating', 'compensation_failed') THEN
        commands := commands || ARRAY['wf.terminate_run'];
    ELSIF r.status OPERATOR(pg_catalog.=) 'failed' THEN
        commands := commands || ARRAY['wf.cancel_run'];
    END IF;
    IF r.status OPERATOR(pg_catalog.=) 'running' THEN
        commands := commands || ARRAY['wf.pause_run'];
    ELSIF r.status OPERATOR(pg_catalog.=) 'paused' THEN
        commands := commands || ARRAY['wf.resume_run'];
    ELSIF r.status OPERATOR(pg_catalog.=) 'compensation_failed' THEN
        commands := commands || ARRAY['wf.retry_step', 'wf.skip_step'];
    END IF;
    IF r.status IN ('running', 'failed') AND r.current_step IS NOT NULL THEN
        step_def := NULL;
        SELECT s INTO step_def FROM wf.definitions d, jsonb_array_elements(d.spec->'steps') s
        WHERE d.definition_id OPERATOR(pg_catalog.=) r.definition_id
          AND s->>'name' OPERATOR(pg_catalog.=) r.current_step;
        IF r.status OPERATOR(pg_catalog.=) 'failed'
           AND coalesce(step_def->>'type', 'task') OPERATOR(pg_catalog.=) 'task' THEN
            commands := commands || ARRAY['wf.retry_step'];
        END IF;
        IF coalesce((step_def->>'skippable')::boolean,
                    coalesce(step_def->>'type', 'task') NOT IN ('approval', 'choice')) THEN
            commands := commands || ARRAY['wf.skip_step'];
        END IF;
    END IF;

    RETURN jsonb_build_object('run_id', r.run_id, 'definition', r.definition_name,
                              'version', r.definition_version, 'status', r.status,
                              'step', r.current_step, 'waiting_for', waiting,
                              'details', details, 'commands', to_jsonb(commands));
END
$$;
COMMENT ON FUNCTION wf.explain(uuid) IS
'Where a run is, what it waits for (a worker on a queue and how many are ahead, a worker''s result, a retry backoff, a sleep, a quarantine, approvers, a signal, child runs, a tenant quota, an operator; never nothing while the run is live) and which commands apply now.';

-- Graphs of definitions and runs: Mermaid flowcharts and Graphviz DOT.
--
-- wf._graph_render does all the drawing, for wf.definition_graph and
-- wf.run_graph.  It reads a definition's spec and lays out
--   nodes: start, one per step in definition order (ids s0, s1, ...;
--          the label is the step's name and type, the shape its type),
--          end, and a "fail" node when an approval's expiry fails the run;
--   edges, in this fixed order: start -> first step; then the step graph
--          of the compiled definition as wf._step_edges gives it: step by
--          step in definition order, a choice's branches in order and its
--          default, or the step's next (its "next", else the end with
--          "end": true, else the following step, else the end), then an
--          approval's expiry route or a wait's timeout route (a step, or
--          fail).
-- Given what a run did (built by wf.run_graph from wf.events), it also
-- marks the steps visited, the edges taken, the current step and where
-- the run ended.  The same input always gives the same text, so that
-- regression tests can compare it.
CREATE FUNCTION wf._graph_render(title text, spec jsonb, format text, run jsonb DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    steps    jsonb := spec->'steps';
    n        integer := pg_catalog.jsonb_array_length(spec->'steps');
    st       jsonb;
    names    text[] := '{}';
    types    text[] := '{}';
    -- nodes: start, s0 .. s<n-1>, finish, and fail when needed
    n_id     text[];
    n_name   text[];
    n_sub    text[];
    n_kind   text[];
    n_class  text[];
    -- edges, in output order
    e_from   text[];
    e_to     text[];
    e_label  text[];
    e_kind   text[];
    e_taken  boolean[];
    has_fail boolean := false;
    i        integer;
    j        integer;
    k        integer;
    c        integer;
    tgt      text;
    from_id  text;
    to_id    text;
    want     text;
    item     jsonb;
    path     jsonb;
    plen     integer;
    exit_to  text;
    styles   text[];
    attrs    text[];
    nl       text := E'\n';
    out      text;
BEGIN
    IF format IS NULL OR format NOT IN ('mermaid', 'dot') THEN
        RAISE EXCEPTION 'unsupported graph format "%"', format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use format => ''mermaid'' or format => ''dot''.';
    END IF;

    FOR i IN 0 .. n - 1 LOOP
        st := steps->i;
        names := names || (st->>'name');
        types := types || COALESCE(st->>'type', 'task');
    END LOOP;

    -- nodes
    n_id := ARRAY['start'];
    n_name := ARRAY['start'];
    n_sub := ARRAY[NULL::text];
    n_kind := ARRAY['start'];
    FOR i IN 1 .. n LOOP
        st := steps->(i - 1);
        n_id := n_id || ('s' || (i - 1));
        n_name := n_name || names[i];
        -- child runs: which definition, or how many branches and the join
        n_sub := n_sub || CASE types[i]
            WHEN 'subworkflow' THEN 'subworkflow ' || (st->>'definition') || ' v' || (st->>'version')
            WHEN 'parallel' THEN 'parallel, ' || pg_catalog.jsonb_array_length(st->'branches')
                                 || ' branches, join ' || COALESCE('first ' || (st->'join'->>'first'), 'all')
            ELSE types[i] END;
        n_kind := n_kind || types[i];
    END LOOP;
    n_id := n_id || 'finish'::text;
    n_name := n_name || 'end'::text;
    n_sub := n_sub || NULL::text;
    n_kind := n_kind || 'end'::text;

    -- edges: start -> first step, then the step graph of the compiled
    -- definition (wf._step_edges), in its order
    SELECT ARRAY['start'] || pg_catalog.array_agg('s' || e.from_index ORDER BY e.edge),
           ARRAY['s0'] || pg_catalog.array_agg(CASE WHEN e.to_index IS NOT NULL THEN 's' || e.to_index
                                                    WHEN e.to_step OPERATOR(pg_catalog.=) 'end' THEN 'finish'
                                                    ELSE 'fail' END ORDER BY e.edge),
           ARRAY[NULL::text] || pg_catalog.array_agg(e.label ORDER BY e.edge),
           ARRAY['start'] || pg_catalog.array_agg(CASE e.kind WHEN 'choice' THEN 'choice:' || e.choice
                                                              WHEN 'expiry' THEN 'expired'
                                                              WHEN 'timeout' THEN 'expired'
                                                              ELSE e.kind END ORDER BY e.edge),
           COALESCE(pg_catalog.bool_or(e.to_index IS NULL AND e.to_step OPERATOR(pg_catalog.=) 'fail'), false)
    INTO e_from, e_to, e_label, e_kind, has_fail
    FROM wf._step_edges(spec) e;
    IF has_fail THEN
        n_id := n_id || 'fail'::text;
        n_name := n_name || 'fail'::text;
        n_sub := n_sub || NULL::text;
        n_kind := n_kind || 'fail'::text;
    END IF;

    -- what the run did: the steps visited, the edges taken, where it is or ended
    n_class := pg_catalog.array_fill(NULL::text, ARRAY[pg_catalog.cardinality(n_id)]);
    e_taken := pg_catalog.array_fill(false, ARRAY[pg_catalog.cardinality(e_from)]);
    IF run IS NOT NULL THEN
        path := COALESCE(run->'path', '[]'::jsonb);
        plen := pg_catalog.jsonb_array_length(path);
        exit_to := run->>'exit';
        n_class[1] := 'visited';
        FOR k IN 0 .. plen - 1 LOOP
            item := path->k;
            i := pg_catalog.array_position(names, item->>'step');
            CONTINUE WHEN i IS NULL;
            from_id := 's' || (i - 1);
            n_class[i + 1] := 'visited';
            IF k OPERATOR(pg_catalog.=) 0 AND from_id OPERATOR(pg_catalog.=) 's0' THEN
                e_taken[1] := true;
            END IF;
            IF k OPERATOR(pg_catalog.<) plen - 1 THEN
                j := pg_catalog.array_position(names, path->(k + 1)->>'step');
                CONTINUE WHEN j IS NULL;
                to_id := 's' || (j - 1);
            ELSIF exit_to OPERATOR(pg_catalog.=) 'end' THEN
                to_id := 'finish';
            ELSIF exit_to OPERATOR(pg_catalog.=) 'fail' THEN
                to_id := 'fail';
            ELSE
                CONTINUE;
            END IF;
            -- the edge taken: the branch chosen, the expiry route, or next;
            -- any edge between the two nodes if that does not lead there
            want := CASE WHEN types[i] OPERATOR(pg_catalog.=) 'choice' THEN
                              CASE WHEN item->>'choice' OPERATOR(pg_catalog.=) 'default' THEN 'default'
                                   ELSE 'choice:' || (item->>'choice') END
                         WHEN item->'expired' OPERATOR(pg_catalog.=) 'true'::jsonb THEN 'expired'
                         ELSE 'next' END;
            c := NULL;
            FOR j IN 1 .. pg_catalog.cardinality(e_from) LOOP
                IF e_from[j] OPERATOR(pg_catalog.=) from_id AND e_to[j] OPERATOR(pg_catalog.=) to_id
                   AND e_kind[j] OPERATOR(pg_catalog.=) want THEN
                    c := j;
                    EXIT;
                END IF;
            END LOOP;
            IF c IS NULL THEN
                FOR j IN 1 .. pg_catalog.cardinality(e_from) LOOP
                    IF e_from[j] OPERATOR(pg_catalog.=) from_id AND e_to[j] OPERATOR(pg_catalog.=) to_id THEN
                        c := j;
                        EXIT;
                    END IF;
                END LOOP;
            END IF;
            IF c IS NOT NULL THEN
                e_taken[c] := true;
            END IF;
        END LOOP;
        IF exit_to OPERATOR(pg_catalog.=) 'end' THEN
            n_class[pg_catalog.array_position(n_id, 'finish')] := 'done';
        ELSIF exit_to OPERATOR(pg_catalog.=) 'fail' AND has_fail THEN
            n_class[pg_catalog.array_position(n_id, 'fail')] := 'stopped';
        END IF;
        i := pg_catalog.array_position(names, run->>'stopped');
        IF i IS NOT NULL THEN
            n_class[i + 1] := 'stopped';
        END IF;
        i := pg_catalog.array_position(names, run->>'current');
        IF i IS NOT NULL THEN
            n_class[i + 1] := 'current';
        END IF;
    END IF;

    IF format OPERATOR(pg_catalog.=) 'mermaid' THEN
        -- Labels are double-quoted strings.  Mermaid turns #name; and #nnn;
        -- into HTML entities and renders labels as HTML, so escape # first,
        -- then " < > & | ` as entities; two dollar signs in a row would
        -- start KaTeX math, "direction TB" anywhere on a line is taken as a
        -- statement, and a line with "style", ":", "#" and ";" loses its
        -- last ";" (to Mermaid, a style), so : is escaped too.
        SELECT pg_catalog.array_agg(
                   pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                   pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                   pg_catalog.regexp_replace(pg_catalog.regexp_replace(
                   pg_catalog.replace(pg_catalog.regexp_replace(u.x, '[[:cntrl:]]', ' ', 'g'), '#', '#35;'),
                   '\$(?=\$)|(?<=\$)\$', '#36;', 'g'),
                   'direction(\s)', 'directio#110;\1', 'g'),
                   '"', '#quot;'), '<', '#lt;'), '>', '#gt;'), '&', '#amp;'), '|', '#124;'), '`', '#96;'),
                   ':', '#58;')
                   ORDER BY u.o)
        INTO e_label
        FROM pg_catalog.unnest(e_label || n_name || n_sub) WITH ORDINALITY AS u(x, o);
        n_name := e_label[pg_catalog.cardinality(e_from) + 1 : pg_catalog.cardinality(e_from) + pg_catalog.cardinality(n_id)];
        n_sub := e_label[pg_catalog.cardinality(e_from) + pg_catalog.cardinality(n_id) + 1 :];
        e_label := e_label[1 : pg_catalog.cardinality(e_from)];

        out := 'flowchart TD' || nl || '    %% ' || title || nl;
        FOR i IN 1 .. pg_catalog.cardinality(n_id) LOOP
            out := out || '    ' || n_id[i]
                || CASE n_kind[i] WHEN 'start' THEN '((' WHEN 'end' THEN '(((' WHEN 'fail' THEN '((('
                                  WHEN 'task' THEN '[' WHEN 'sleep' THEN '([' WHEN 'approval' THEN '{{'
                                  WHEN 'choice' THEN '{' WHEN 'wait_event' THEN '[/'
                                  WHEN 'subworkflow' THEN '[[' WHEN 'parallel' THEN '[/' ELSE '(' END
                || '"' || n_name[i] || COALESCE('<br/>' || n_sub[i], '') || '"'
                || CASE n_kind[i] WHEN 'start' THEN '))' WHEN 'end' THEN ')))' WHEN 'fail' THEN ')))'
                                  WHEN 'task' THEN ']' WHEN 'sleep' THEN '])' WHEN 'approval' THEN '}}'
                                  WHEN 'choice' THEN '}' WHEN 'wait_event' THEN '/]'
                                  WHEN 'subworkflow' THEN ']]' WHEN 'parallel' THEN '\]' ELSE ')' END
                || nl;
        END LOOP;
        FOR j IN 1 .. pg_catalog.cardinality(e_from) LOOP
            out := out || '    ' || e_from[j]
                || CASE WHEN e_kind[j] OPERATOR(pg_catalog.=) 'expired' THEN ' -.->' ELSE ' -->' END
                || COALESCE('|"' || e_label[j] || '"|', '')
                || ' ' || e_to[j] || nl;
        END LOOP;
        IF run IS NOT NULL THEN
            out := out
                || '    classDef visited fill:#dbeafe,stroke:#1d4ed8,stroke-width:2px' || nl
                || '    classDef current fill:#fef3c7,stroke:#b45309,stroke-width:3px' || nl
                || '    classDef stopped fill:#fee2e2,stroke:#b91c1c,stroke-width:3px' || nl
                || '    classDef done fill:#dcfce7,stroke:#15803d,stroke-width:3px' || nl;
            FOR want IN SELECT x FROM pg_catalog.unnest(ARRAY['visited', 'current', 'stopped', 'done']) AS u(x) LOOP
                SELECT pg_catalog.string_agg(n_id[s], ',' ORDER BY s) INTO tgt
                FROM pg_catalog.generate_series(1, pg_catalog.cardinality(n_id)) AS s
                WHERE n_class[s] OPERATOR(pg_catalog.=) want;
                IF tgt IS NOT NULL THEN
                    out := out || '    class ' || tgt || ' ' || want || nl;
                END IF;
            END LOOP;
            -- Mermaid numbers the edges from 0 in the order they are written
            SELECT pg_catalog.string_agg((s - 1)::text, ',' ORDER BY s) INTO tgt
            FROM pg_catalog.generate_series(1, pg_catalog.cardinality(e_from)) AS s
            WHERE e_taken[s];
            IF tgt IS NOT NULL THEN
                out := out || '    linkStyle ' || tgt || ' stroke:#1d4ed8,stroke-width:3px' || nl;
            END IF;
        END IF;
        RETURN out;
    END IF;

    -- DOT: labels are double-quoted strings; escape \ and ", drop control
    -- characters (the only escapes a DOT string has are \" and \<newline>,
    -- and labels give \n, \l, \N ... their own meaning)
    SELECT pg_catalog.array_agg(
               pg_catalog.replace(pg_catalog.replace(
               pg_catalog.regexp_replace(u.x, '[[:cntrl:]]', ' ', 'g'), '\', '\\'), '"', '\"')
               ORDER BY u.o)
    INTO e_label
    FROM pg_catalog.unnest(e_label || n_name || n_sub || title) WITH ORDINALITY AS u(x, o);
    n_name := e_label[pg_catalog.cardinality(e_from) + 1 : pg_catalog.cardinality(e_from) + pg_catalog.cardinality(n_id)];
    n_sub := e_label[pg_catalog.cardinality(e_from) + pg_catalog.cardinality(n_id) + 1 :
                     pg_catalog.cardinality(e_from) + 2 * pg_catalog.cardinality(n_id)];
    title := e_label[pg_catalog.cardinality(e_label)];
    e_label := e_label[1 : pg_catalog.cardinality(e_from)];

    out := 'digraph "' || title || '" {' || nl
        || '    node [fontname="Helvetica", fontsize=11];' || nl
        || '    edge [fontname="Helvetica", fontsize=10];' || nl;
    FOR i IN 1 .. pg_catalog.cardinality(n_id) LOOP
        attrs := ARRAY['label="' || n_name[i] || COALESCE('\n' || n_sub[i], '') || '"',
                       'shape=' || CASE n_kind[i] WHEN 'start' THEN 'circle' WHEN 'end' THEN 'doublecircle'
                                                  WHEN 'fail' THEN 'doubleoctagon' WHEN 'task' THEN 'box'
                                                  WHEN 'sleep' THEN 'box' WHEN 'approval' THEN 'hexagon'
                                                  WHEN 'choice' THEN 'diamond' WHEN 'wait_event' THEN 'parallelogram'
                                                  WHEN 'subworkflow' THEN 'box3d' WHEN 'parallel' THEN 'trapezium'
                                                  ELSE 'ellipse' END];
        styles := CASE n_kind[i] WHEN 'sleep' THEN ARRAY['rounded']
                                 WHEN 'start' THEN ARRAY[]::text[] WHEN 'end' THEN ARRAY[]::text[]
                                 WHEN 'fail' THEN ARRAY[]::text[] WHEN 'task' THEN ARRAY[]::text[]
                                 WHEN 'approval' THEN ARRAY[]::text[] WHEN 'choice' THEN ARRAY[]::text[]
                                 WHEN 'wait_event' THEN ARRAY[]::text[]
                                 WHEN 'subworkflow' THEN ARRAY[]::text[] WHEN 'parallel' THEN ARRAY[]::text[]
                                 ELSE ARRAY['dashed'] END;
        IF n_class[i] IS NOT NULL THEN
            styles := styles || 'filled'::text;
        END IF;
        IF pg_catalog.cardinality(styles) OPERATOR(pg_catalog.>) 0 THEN
            attrs := attrs || ('style="' || pg_catalog.array_to_string(styles, ',') || '"');
        END IF;
        IF n_class[i] IS NOT NULL THEN
            attrs := attrs || CASE n_class[i]
                WHEN 'visited' THEN ARRAY['fillcolor="#dbeafe"', 'color="#1d4ed8"', 'penwidth=2']
                WHEN 'current' THEN ARRAY['fillcolor="#fef3c7"', 'color="#b45309"', 'penwidth=3']
                WHEN 'stopped' THEN ARRAY['fillcolor="#fee2e2"', 'color="#b91c1c"', 'penwidth=3']
                ELSE ARRAY['fillcolor="#dcfce7"', 'color="#15803d"', 'penwidth=3'] END;
        END IF;
        out := out || '    ' || n_id[i] || ' [' || pg_catalog.array_to_string(attrs, ', ') || '];' || nl;
    END LOOP;
    FOR j IN 1 .. pg_catalog.cardinality(e_from) LOOP
        attrs := ARRAY[]::text[];
        IF e_label[j] IS NOT NULL THEN
            attrs := attrs || ('label="' || e_label[j] || '"');
        END IF;
        IF e_kind[j] OPERATOR(pg_catalog.=) 'expired' THEN
            attrs := attrs || 'style=dashed'::text;
        END IF;
        IF e_taken[j] THEN
            attrs := attrs || ARRAY['color="#1d4ed8"', 'penwidth=2.5'];
        END IF;
        out := out || '    ' || e_from[j] || ' -> ' || e_to[j]
            || CASE WHEN pg_catalog.cardinality(attrs) OPERATOR(pg_catalog.>) 0
                    THEN ' [' || pg_catalog.array_to_string(attrs, ', ') || ']' ELSE '' END
            || ';' || nl;
    END LOOP;
    RETURN out || '}' || nl;
END
$$;
COMMENT ON FUNCTION wf._graph_render(text, jsonb, text, jsonb) IS
'Internal: draws a definition spec, and optionally the path of a run, as Mermaid or DOT; used by wf.definition_graph and wf.run_graph.';

-- The graph of a published definition.
CREATE FUNCTION wf.definition_graph(definition text, version integer DEFAULT NULL,
                                    format text DEFAULT 'mermaid')
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d wf.definitions;
BEGIN
    IF format IS NULL OR format NOT IN ('mermaid', 'dot') THEN
        RAISE EXCEPTION 'unsupported graph format "%"', format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use format => ''mermaid'' or format => ''dot''.';
    END IF;
    IF version IS NULL THEN
        SELECT * INTO d FROM wf.definitions x
        WHERE x.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
          AND x.name OPERATOR(pg_catalog.=) definition
        ORDER BY x.version DESC LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'definition "%" does not exist', definition
                USING ERRCODE = 'undefined_object',
                      HINT = 'Publish it first with wf.publish_definition().';
        END IF;
    ELSE
        SELECT * INTO d FROM wf.definitions x
        WHERE x.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
          AND x.name OPERATOR(pg_catalog.=) definition
          AND x.version OPERATOR(pg_catalog.=) definition_graph.version;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'version % of definition "%" does not exist', version, definition
                USING ERRCODE = 'undefined_object';
        END IF;
    END IF;
    RETURN wf._graph_render(d.name || ' v' || d.version, d.spec, format);
END
$$;
COMMENT ON FUNCTION wf.definition_graph(text, integer, text) IS
'The steps of a published definition (the latest version unless one is given) as a Mermaid flowchart (format => ''mermaid'') or a Graphviz DOT digraph (format => ''dot'').';

-- The graph of a run's definition version, with the path the run took.
CREATE FUNCTION wf.run_graph(run uuid, format text DEFAULT 'mermaid')
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r        wf.runs;
    spec     jsonb;
    path     jsonb;
    ev       wf.events;
    exit_to  text;
    current  text;
    stopped  text;
BEGIN
    IF format IS NULL OR format NOT IN ('mermaid', 'dot') THEN
        RAISE EXCEPTION 'unsupported graph format "%"', format
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use format => ''mermaid'' or format => ''dot''.';
    END IF;
    SELECT * INTO r FROM wf.runs x
    WHERE x.run_id OPERATOR(pg_catalog.=) run
      AND x.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', run USING ERRCODE = 'undefined_object';
    END IF;
    SELECT d.spec INTO spec FROM wf.definitions d
    WHERE d.definition_id OPERATOR(pg_catalog.=) r.definition_id
      AND d.tenant_id OPERATOR(pg_catalog.=) r.tenant_id;

    -- Each visit of a step, in the order the run entered them: the first
    -- of its entering events (task_scheduled of attempt 1, sleep_started,
    -- approval_requested, choice_made, wait_started) per step and visit
    -- (an approval step also schedules its notification task).  With the
    -- branch a choice took, and whether an approval expired.
    SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
               'step', v.step,
               'choice', v.payload->'output'->'choice',
               'expired', EXISTS (SELECT 1 FROM wf.events a
                                  WHERE a.run_id OPERATOR(pg_catalog.=) run
                                    AND a.step OPERATOR(pg_catalog.=) v.step
                                    AND (a.payload->'visit') OPERATOR(pg_catalog.=) (v.payload->'visit')
                                    AND ((a.type OPERATOR(pg_catalog.=) 'approval_completed'
                                          AND a.payload->'output'->>'outcome' OPERATOR(pg_catalog.=) 'expired')
                                         OR a.type OPERATOR(pg_catalog.=) 'wait_timed_out')))
               ORDER BY v.seq)
    INTO path
    FROM (SELECT DISTINCT ON (e.step, COALESCE(e.payload->'visit', pg_catalog.to_jsonb(-e.seq)))
                 e.seq, e.step, e.payload
          FROM wf.events e
          WHERE e.run_id OPERATOR(pg_catalog.=) run
            AND e.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
            AND e.step IS NOT NULL
            AND e.step NOT LIKE 'compensate:%'
            AND (e.type IN ('sleep_started', 'approval_requested', 'choice_made', 'wait_started',
                            'children_started')
                 OR (e.type OPERATOR(pg_catalog.=) 'task_scheduled' AND e.attempt OPERATOR(pg_catalog.=) 1))
          ORDER BY e.step, COALESCE(e.payload->'visit', pg_catalog.to_jsonb(-e.seq)), e.seq) v;

    IF r.status IN ('running', 'paused') THEN
        current := r.current_step;
    ELSIF r.status OPERATOR(pg_catalog.=) 'completed' THEN
        exit_to := 'end';
    ELSE
        SELECT * INTO ev FROM wf.events e
        WHERE e.run_id OPERATOR(pg_catalog.=) run
          AND e.type IN ('run_failed', 'run_terminated', 'cancel_requested',
                         'compensation_requested')
        ORDER BY e.seq DESC LIMIT 1;
        -- a cancelled run stopped where wf.cancel_run found it
        stopped := COALESCE(ev.payload->>'step', r.current_step);
        IF stopped LIKE 'compensate:%' THEN
            stopped := NULL;
        END IF;
        IF ev.payload->>'reason' OPERATOR(pg_catalog.=) 'approval_expired'
           OR (ev.payload->>'reason' OPERATOR(pg_catalog.=) 'step_timeout'
               AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(spec->'steps') st
                           WHERE st->>'name' OPERATOR(pg_catalog.=) (ev.payload->>'step')
                             AND st->>'type' OPERATOR(pg_catalog.=) 'wait_event')) THEN
            exit_to := 'fail';
        END IF;
        -- a run can fail while it enters a step (an approval step that
        -- finds no approvers): the run still went there
        IF stopped IS NOT NULL AND (path IS NULL OR (path->-1->>'step') IS DISTINCT FROM stopped) THEN
            path := COALESCE(path, '[]'::jsonb)
                 || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('step', stopped));
        END IF;
    END IF;

    RETURN wf._graph_render(
        r.definition_name || ' v' || r.definition_version || ' run ' || r.run_id,
        spec, format,
        pg_catalog.jsonb_build_object('path', COALESCE(path, '[]'::jsonb), 'exit', exit_to,
                                      'current', current, 'stopped', stopped));
END
$$;
COMMENT ON FUNCTION wf.run_graph(uuid, text) IS
'The graph of a run''s definition version, as wf.definition_graph draws it, with the steps the run visited, the edges it took, its current step and where it ended marked.';

-- Operator commands change runs on an operator's say-so: they are not for
-- PUBLIC.  Until the roles of tenancy exist, they are for the extension
-- owner and superusers (a role granted EXECUTE still needs the tables).
REVOKE ALL ON FUNCTION wf.terminate_run(uuid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.update_context(uuid, jsonb, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.pause_run(uuid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.resume_run(uuid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.retry_step(uuid, text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.skip_step(uuid, jsonb, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.cancel_run(uuid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.migrate_run(uuid, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.cancel_runs(text, jsonb, integer, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.retry_runs(text, jsonb, integer, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.resume_runs(text, jsonb, integer, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf._batch(text, text, text[], text, jsonb, integer, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.revoke_approval_tokens(uuid, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.reissue_approval_tokens(uuid, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION wf.set_approvers(uuid, text, text[], text) FROM PUBLIC;

-- Every name in the engine's statements is schema-qualified (sqlcheck.c);
-- this lists those that are not (nothing), or those of the statement given.
CREATE FUNCTION wf._unqualified_names(sql text DEFAULT NULL)
RETURNS TABLE (statement integer, kind text, name text)
AS 'MODULE_PATHNAME', 'wfengine_unqualified_names'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION wf._unqualified_names(text) FROM PUBLIC;

CREATE FUNCTION wf.preloaded()
RETURNS boolean
AS 'MODULE_PATHNAME', 'wfengine_preloaded'
LANGUAGE C STABLE;
COMMENT ON FUNCTION wf.preloaded() IS
'True when wfengine was loaded through shared_preload_libraries (background workers available).';

-- background workers (launcher.c)
CREATE FUNCTION wf.worker_status()
RETURNS TABLE (role text,
               database text,
               pid integer,
               started_at timestamptz,
               next_due timestamptz,
               ticks bigint,
               fired bigint)
AS 'MODULE_PATHNAME', 'wfengine_worker_status'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.worker_status() IS
'The wfengine launcher and engine workers of the whole server, from shared memory; no rows without preload.';

-- Internal: wakes the launcher when the calling transaction commits, so
-- that CREATE EXTENSION gets its database a worker at once.
CREATE FUNCTION wf._wake_launcher()
RETURNS void
AS 'MODULE_PATHNAME', 'wfengine_wake_launcher'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION wf._wake_launcher() FROM PUBLIC;
COMMENT ON FUNCTION wf._wake_launcher() IS
'Internal, called by the install script: wakes the wfengine launcher at commit.';
SELECT wf._wake_launcher();

-- pg_dump dumps the contents of extension tables only when told to.
SELECT pg_catalog.pg_extension_config_dump('wf.definitions', '');
SELECT pg_catalog.pg_extension_config_dump('wf.definitions_definition_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.runs', '');
SELECT pg_catalog.pg_extension_config_dump('wf.events', '');
SELECT pg_catalog.pg_extension_config_dump('wf.tasks', '');
SELECT pg_catalog.pg_extension_config_dump('wf.task_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.fence_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.timers', '');
SELECT pg_catalog.pg_extension_config_dump('wf.approvals', '');
SELECT pg_catalog.pg_extension_config_dump('wf.approval_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.approval_attempts', '');
SELECT pg_catalog.pg_extension_config_dump('wf.signals', '');
SELECT pg_catalog.pg_extension_config_dump('wf.signal_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.approval_attempts_attempt_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.timer_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('wf.suppressed_events', '');
SELECT pg_catalog.pg_extension_config_dump('wf.decide_failures', '');

-- CREATE EXTENSION runs with client_min_messages at WARNING or above.
DO $$
BEGIN
    IF NOT wf.preloaded() THEN
        RAISE WARNING 'wfengine is not loaded through shared_preload_libraries'
            USING DETAIL = 'The SQL API works; anything that needs a background worker does not run.',
                  HINT = 'Add wfengine to shared_preload_libraries and restart the server.';
    END IF;
END
$$;

-- schedules (schedule.c)
/*
 * Recurring runs started by pg_cron.  A schedule is a row here plus a
 * pg_cron job whose command is SELECT wf._fire_schedule('<schedule_id>').
 * pg_cron runs its jobs in the database named by cron.database_name, so
 * schedules live in that database (pg_cron's schema exists only there).
 * Each firing computes the scheduled instant it belongs to and starts the
 * run with the idempotency key 'schedule:<name>:<instant>', so a late or
 * repeated cron tick never starts a second run for one instant.  See
 * docs/schedules.md.
 */
CREATE TABLE wf.schedules (
    schedule_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text NOT NULL,
    name            text NOT NULL,
    cron            text NOT NULL,
    definition      text NOT NULL,
    version         integer CHECK (version > 0),
    input           jsonb NOT NULL DEFAULT '{}',
    jobid           bigint,
    created_by      name NOT NULL DEFAULT current_user,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    last_instant    timestamptz,
    last_run_id     uuid,
    UNIQUE (tenant_id, name)
);
COMMENT ON TABLE wf.schedules IS
'Schedules made with wf.schedule(): a definition started by a pg_cron job (jobid) at every instant matching cron.';
COMMENT ON COLUMN wf.schedules.last_instant IS
'The scheduled instant of the latest firing, whose run is last_run_id.';

CREATE FUNCTION wf._cron_check(cron text)
RETURNS void
AS 'MODULE_PATHNAME', 'wfengine_cron_check'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION wf._cron_check(text) IS
'Reports an error naming the field when cron is not a valid pg_cron expression or never matches.';

CREATE FUNCTION wf._cron_prev(cron text, at timestamptz, timezone text DEFAULT 'GMT')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'wfengine_cron_prev'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION wf._cron_prev(text, timestamptz, text) IS
'The latest instant at or before at that matches cron, with its fields read in timezone (NULL if none within 8 years).';

CREATE FUNCTION wf._cron_next(cron text, after timestamptz, timezone text DEFAULT 'GMT')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'wfengine_cron_next'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION wf._cron_next(text, timestamptz, text) IS
'The earliest instant after "after" that matches cron, with its fields read in timezone (NULL if none within 8 years).';

-- The time zone pg_cron reads expressions in: GMT unless it has cron.timezone.
CREATE FUNCTION wf._cron_timezone()
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT COALESCE(NULLIF(pg_catalog.current_setting('cron.timezone', true), ''), 'GMT')
$$;

-- Starts the run of one scheduled instant; the command of the pg_cron job.
CREATE FUNCTION wf._fire_schedule(schedule_id bigint)
RETURNS uuid
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_sched     wf.schedules;
    v_instant   timestamptz;
    v_key       text;
    v_run       uuid;
BEGIN
    -- the row lock serialises firings of one schedule (and a replacement)
    SELECT * INTO v_sched FROM wf.schedules s
    WHERE s.schedule_id OPERATOR(pg_catalog.=) _fire_schedule.schedule_id
      AND s.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;            -- unscheduled meanwhile: nothing to start
    END IF;

    v_instant := wf._cron_prev(v_sched.cron, pg_catalog.now(), wf._cron_timezone());
    IF v_instant IS NULL THEN
        RETURN NULL;
    END IF;
    v_key := 'schedule:' OPERATOR(pg_catalog.||) v_sched.name OPERATOR(pg_catalog.||) ':'
             OPERATOR(pg_catalog.||)
             pg_catalog.to_char(v_instant AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"');

    -- a run started for this instant before a replacement of the schedule
    -- carries the old input: return it rather than fail the key check
    SELECT r.run_id INTO v_run FROM wf.runs r
    WHERE r.tenant_id OPERATOR(pg_catalog.=) v_sched.tenant_id
      AND r.idempotency_key OPERATOR(pg_catalog.=) v_key;
    IF NOT FOUND THEN
        v_run := wf.start_run(v_sched.definition, v_sched.input, v_key, v_sched.version);
    END IF;

    UPDATE wf.schedules s SET last_instant = v_instant, last_run_id = v_run
    WHERE s.schedule_id OPERATOR(pg_catalog.=) v_sched.schedule_id
      AND (s.last_instant IS NULL OR s.last_instant OPERATOR(pg_catalog.<=) v_instant);
    RETURN v_run;
END
$$;
COMMENT ON FUNCTION wf._fire_schedule(bigint) IS
'Starts the run of the scheduled instant now belongs to, at most once per instant; called by the pg_cron job of a schedule.';

CREATE FUNCTION wf.schedule(name text,
                            cron text,
                            definition text,
                            input jsonb DEFAULT '{}',
                            version integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant    text := wf.current_tenant();
    v_id        bigint;
    v_owner     name;
    v_old_job   bigint;
    v_job       bigint;
BEGIN
    IF name IS NULL OR cron IS NULL OR definition IS NULL OR input IS NULL THEN
        RAISE EXCEPTION '% must not be null',
            CASE WHEN name IS NULL THEN 'schedule name' WHEN cron IS NULL THEN 'cron expression'
                 WHEN definition IS NULL THEN 'definition name' ELSE 'input' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM wf._check_arg('schedule name', name, 'name');
    PERFORM wf._check_arg('cron expression', cron, 'name');
    PERFORM wf._check_arg('definition name', definition, 'name');
    PERFORM wf._check_payload(input, 'input', pg_catalog.format('schedule "%s"', name), true);
    IF name !~ '^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$' THEN
        RAISE EXCEPTION 'invalid schedule name "%"', name
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A schedule name has 1 to 128 letters, digits, ''_'', ''-'', ''.'' or '':'' and starts with a letter or ''_''.';
    END IF;
    PERFORM wf._cron_check(cron);
    PERFORM wf._refuse_sealed_lookalikes(input, 'input',
                                         pg_catalog.format('schedule "%s"', name));
    IF NOT EXISTS (SELECT 1 FROM wf.definitions d
                   WHERE d.tenant_id OPERATOR(pg_catalog.=) v_tenant
                     AND d.name OPERATOR(pg_catalog.=) schedule.definition
                     AND (schedule.version IS NULL
                          OR d.version OPERATOR(pg_catalog.=) schedule.version)) THEN
        IF version IS NULL THEN
            RAISE EXCEPTION 'definition "%" does not exist', definition
                USING ERRCODE = 'undefined_object',
                      HINT = 'Publish it first with wf.publish_definition().';
        END IF;
        RAISE EXCEPTION 'version % of definition "%" does not exist', version, definition
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e
                   WHERE e.extname OPERATOR(pg_catalog.=) 'pg_cron') THEN
        RAISE EXCEPTION 'extension "pg_cron" is not installed in database "%"', pg_catalog.current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN pg_catalog.current_setting('cron.database_name', true) IS NULL
                           THEN 'pg_cron is not loaded.'
                           ELSE pg_catalog.format('pg_cron runs its jobs in database "%s" (cron.database_name).',
                                                  pg_catalog.current_setting('cron.database_name', true))
                           END,
                  HINT = 'Add pg_cron to shared_preload_libraries, then run CREATE EXTENSION pg_cron and create schedules in the database named by cron.database_name.';
    END IF;

    SELECT s.schedule_id, s.created_by, s.jobid INTO v_id, v_owner, v_old_job
    FROM wf.schedules s
    WHERE s.tenant_id OPERATOR(pg_catalog.=) v_tenant AND s.name OPERATOR(pg_catalog.=) schedule.name
    FOR UPDATE;
    IF FOUND THEN
        -- pg_cron jobs belong to roles: replacing another role's job would
        -- leave it running under that role
        IF v_owner OPERATOR(pg_catalog.<>) current_user
           AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                    WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
            RAISE EXCEPTION 'schedule "%" belongs to role "%"', name, v_owner
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'Replace or unschedule it as that role.';
        END IF;
        UPDATE wf.schedules s
        SET cron = schedule.cron, definition = schedule.definition, version = schedule.version,
            input = schedule.input, updated_at = pg_catalog.clock_timestamp()
        WHERE s.schedule_id OPERATOR(pg_catalog.=) v_id;
    ELSE
        INSERT INTO wf.schedules (tenant_id, name, cron, definition, version, input)
        VALUES (v_tenant, name, cron, definition, version, input)
        RETURNING schedule_id INTO v_id;
    END IF;

    -- same job name and role: pg_cron updates the job in place
    v_job := cron.schedule(pg_catalog.format('wfengine:%s:%s', v_tenant, name), cron,
                           pg_catalog.format('SELECT wf._fire_schedule(%L)', v_id));
    IF v_old_job IS NOT NULL AND v_old_job OPERATOR(pg_catalog.<>) v_job
       AND EXISTS (SELECT 1 FROM cron.job j WHERE j.jobid OPERATOR(pg_catalog.=) v_old_job) THEN
        PERFORM cron.unschedule(v_old_job);
    END IF;
    UPDATE wf.schedules s SET jobid = v_job WHERE s.schedule_id OPERATOR(pg_catalog.=) v_id;
    RETURN v_job;
END
$$;
COMMENT ON FUNCTION wf.schedule(text, text, text, jsonb, integer) IS
'Creates or replaces a schedule: a pg_cron job that starts a run of definition at every instant matching cron; returns the pg_cron job id.';

CREATE FUNCTION wf.unschedule(name text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_owner     name;
    v_job       bigint;
BEGIN
    SELECT s.created_by, s.jobid INTO v_owner, v_job
    FROM wf.schedules s
    WHERE s.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
      AND s.name OPERATOR(pg_catalog.=) unschedule.name
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_owner OPERATOR(pg_catalog.<>) current_user
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
        RAISE EXCEPTION 'schedule "%" belongs to role "%"', name, v_owner
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Unschedule it as that role.';
    END IF;
    DELETE FROM wf.schedules s
    WHERE s.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()
      AND s.name OPERATOR(pg_catalog.=) unschedule.name;
    -- without pg_cron (dropped since) there is no job left to remove
    IF v_job IS NOT NULL
       AND EXISTS (SELECT 1 FROM pg_catalog.pg_extension e
                   WHERE e.extname OPERATOR(pg_catalog.=) 'pg_cron') THEN
        IF EXISTS (SELECT 1 FROM cron.job j WHERE j.jobid OPERATOR(pg_catalog.=) v_job) THEN
            PERFORM cron.unschedule(v_job);
        END IF;
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION wf.unschedule(text) IS
'Removes a schedule and its pg_cron job; false when there is no schedule of that name.';

CREATE VIEW wf.schedule_list WITH (security_invoker = true, security_barrier = true) AS
SELECT s.name,
       s.cron,
       s.definition,
       s.version,
       s.input,
       s.jobid,
       wf._cron_next(s.cron, pg_catalog.now(), wf._cron_timezone()) AS next_fire_at,
       s.last_instant,
       s.last_run_id,
       s.created_by,
       s.created_at,
       s.updated_at
FROM wf.schedules s
WHERE s.tenant_id OPERATOR(pg_catalog.=) wf.current_tenant();
COMMENT ON VIEW wf.schedule_list IS
'The schedules of the current tenant, with the next instant pg_cron will fire each (in its time zone, GMT by default).';

SELECT pg_catalog.pg_extension_config_dump('wf.schedules', '');
SELECT pg_catalog.pg_extension_config_dump('wf.schedules_schedule_id_seq', '');

-- ---------------------------------------------------------------------
-- Tenancy: tenants, roles, privileges and row-level security
-- ---------------------------------------------------------------------
-- A tenant is a role named wf_tenant_<tenant>; a login belongs to the
-- tenant of the tenant role it is a member of (tenant.c).  The API
-- functions check the caller and run as the extension's owner; the roles
-- below get EXECUTE on the functions of their job and SELECT on the tables,
-- never INSERT, UPDATE or DELETE (wfengine_admin: on wf.schedules, which
-- wf.schedule writes as the role whose pg_cron job will start the runs).
-- Row-level security, enabled and forced on every table, shows a role the
-- rows of its own tenant only.

CREATE FUNCTION wf.create_tenant(tenant text)
RETURNS name
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF tenant !~ '^[a-z][a-z0-9_]{0,39}$' OR tenant OPERATOR(pg_catalog.=) 'default' THEN
        RAISE EXCEPTION 'invalid tenant name "%"', tenant
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A tenant name has 1 to 40 lower-case letters, digits or ''_'', starts with a letter, and is not "default".';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
               WHERE r.rolname OPERATOR(pg_catalog.=) ('wf_tenant_' OPERATOR(pg_catalog.||) tenant)) THEN
        RAISE EXCEPTION 'tenant "%" exists already', tenant USING ERRCODE = 'duplicate_object';
    END IF;
    EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', 'wf_tenant_' OPERATOR(pg_catalog.||) tenant);
    RETURN ('wf_tenant_' OPERATOR(pg_catalog.||) tenant)::name;
END
$$;
COMMENT ON FUNCTION wf.create_tenant(text) IS
'Creates a tenant: the role wf_tenant_<tenant>, whose members act for the tenant.';

CREATE FUNCTION wf._require_tenant(tenant text)
RETURNS void
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                   WHERE r.rolname OPERATOR(pg_catalog.=) ('wf_tenant_' OPERATOR(pg_catalog.||) tenant)) THEN
        RAISE EXCEPTION 'tenant "%" does not exist', tenant
            USING ERRCODE = 'undefined_object', HINT = 'Create it with wf.create_tenant().';
    END IF;
END
$$;
COMMENT ON FUNCTION wf._require_tenant(text) IS
'Internal: refuses a tenant that wf.create_tenant() has not made.';

CREATE FUNCTION wf.add_tenant_member(tenant text, member regrole)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM wf._require_tenant(tenant);
    EXECUTE pg_catalog.format('GRANT %I TO %I', 'wf_tenant_' OPERATOR(pg_catalog.||) tenant,
                              member::text);
END
$$;
COMMENT ON FUNCTION wf.add_tenant_member(text, regrole) IS
'Makes a role act for a tenant (a role acts for one tenant at most).';

CREATE FUNCTION wf.remove_tenant_member(tenant text, member regrole)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM wf._require_tenant(tenant);
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.roleid
                   WHERE r.rolname OPERATOR(pg_catalog.=) ('wf_tenant_' OPERATOR(pg_catalog.||) tenant)
                     AND m.member OPERATOR(pg_catalog.=) remove_tenant_member.member::pg_catalog.oid) THEN
        RAISE EXCEPTION 'role "%" is not a member of tenant "%"', member, tenant
            USING ERRCODE = 'undefined_object',
                  HINT = 'wf.current_tenant() of a session of the role tells its tenant.';
    END IF;
    EXECUTE pg_catalog.format('REVOKE %I FROM %I', 'wf_tenant_' OPERATOR(pg_catalog.||) tenant,
                              member::text);
END
$$;
COMMENT ON FUNCTION wf.remove_tenant_member(text, regrole) IS
'Stops a role from acting for a tenant.';

-- Secrets of the engine, for the extension's owner only (no role has any
-- privilege on the table, and its row belongs to no tenant).
CREATE FUNCTION wf._random_bytes(n integer)
RETURNS bytea
AS 'MODULE_PATHNAME', 'wfengine_random_bytes'
LANGUAGE C VOLATILE STRICT;
CREATE TABLE wf.secrets (
    tenant_id   text NOT NULL DEFAULT '*',
    name        text PRIMARY KEY,
    value       bytea NOT NULL
);
COMMENT ON TABLE wf.secrets IS
'Keys of the engine: channel_key makes the LISTEN channel names of a tenant unguessable to the others.';
-- (channel_key is made at first use, so that a restore can bring back the old one)
SELECT pg_catalog.pg_extension_config_dump('wf.secrets', '');

CREATE FUNCTION wf.channel(kind text DEFAULT 'runs', queue text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'wfengine_channel'
LANGUAGE C STABLE;
COMMENT ON FUNCTION wf.channel(text, text) IS
'The LISTEN channel of the session''s tenant: wf.channel(''runs'') for run changes, wf.channel(''queue'', q) for queue q.';

-- Per-tenant policies: retention of finished runs and quotas.  Set by a
-- superuser with wf.set_tenant_policy(); read by the engine as its owner.
CREATE TABLE wf.tenant_policies (
    tenant_id               text PRIMARY KEY,
    retention               interval CHECK (retention > interval '0'),
    max_live_runs           integer CHECK (max_live_runs > 0),
    max_starts_per_second   double precision CHECK (max_starts_per_second > 0),
    start_burst             integer CHECK (start_burst > 0),
    max_definition_steps    integer CHECK (max_definition_steps > 0),
    max_definition_bytes    integer CHECK (max_definition_bytes > 0),
    max_events_per_run      integer CHECK (max_events_per_run > 0),
    max_tasks_in_flight     integer CHECK (max_tasks_in_flight > 0),
    max_timers_per_run      integer CHECK (max_timers_per_run > 0),
    max_definition_depth    integer CHECK (max_definition_depth > 0),
    -- null: the default of 10000 (0: events for an undeclared key are dropped)
    max_buffered_events     integer CHECK (max_buffered_events >= 0),
    updated_at              timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
SELECT pg_catalog.pg_extension_config_dump('wf.tenant_policies', '');
COMMENT ON TABLE wf.tenant_policies IS
'Retention and quotas of each tenant; no row, or a null column, means no limit beyond the settings.';

CREATE FUNCTION wf.set_tenant_policy(tenant text, policy jsonb)
RETURNS wf.tenant_policies
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k       text;
    result  wf.tenant_policies;
BEGIN
    IF tenant OPERATOR(pg_catalog.<>) 'default' THEN
        PERFORM wf._require_tenant(tenant);
    END IF;
    IF jsonb_typeof(policy) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'a tenant policy must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR k IN SELECT jsonb_object_keys(policy) LOOP
        IF k NOT IN ('retention', 'max_live_runs', 'max_starts_per_second', 'start_burst',
                     'max_definition_steps', 'max_definition_bytes', 'max_definition_depth',
                     'max_events_per_run', 'max_timers_per_run', 'max_tasks_in_flight',
                     'max_buffered_events') THEN
            RAISE EXCEPTION 'unknown tenant policy key "%"', k
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Valid keys: retention, max_live_runs, max_starts_per_second, start_burst, max_definition_steps, max_definition_bytes, max_definition_depth, max_events_per_run, max_timers_per_run, max_tasks_in_flight, max_buffered_events; null removes a limit (max_buffered_events: back to the default of 10000).';
        END IF;
    END LOOP;
    FOR k IN SELECT jsonb_object_keys(policy) LOOP
        CONTINUE WHEN jsonb_typeof(policy->k) OPERATOR(pg_catalog.=) 'null';
        IF k OPERATOR(pg_catalog.=) 'retention' THEN
            IF jsonb_typeof(policy->k) OPERATOR(pg_catalog.<>) 'string'
               OR (policy->>k)::interval OPERATOR(pg_catalog.<=) interval '0' THEN
                RAISE EXCEPTION 'tenant policy "retention" must be a positive interval, not %', policy->k
                    USING ERRCODE = 'invalid_parameter_value', HINT = 'For example "90 days".';
            END IF;
        ELSIF k OPERATOR(pg_catalog.=) 'max_buffered_events' THEN
            IF jsonb_typeof(policy->k) OPERATOR(pg_catalog.<>) 'number'
               OR (policy->>k)::numeric OPERATOR(pg_catalog.<) 0
               OR (policy->>k)::numeric OPERATOR(pg_catalog.>) 2147483647
               OR (policy->>k)::numeric OPERATOR(pg_catalog.<>) pg_catalog.trunc((policy->>k)::numeric) THEN
                RAISE EXCEPTION 'tenant policy "max_buffered_events" must be an integer of 0 or more, not %', policy->k
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = '0 drops events sent to a key no live run has declared; null restores the default of 10000.';
            END IF;
        ELSIF jsonb_typeof(policy->k) OPERATOR(pg_catalog.<>) 'number'
              OR (policy->>k)::numeric OPERATOR(pg_catalog.<=) 0
              OR (k OPERATOR(pg_catalog.<>) 'max_starts_per_second'
                  AND (policy->>k)::numeric OPERATOR(pg_catalog.<>) pg_catalog.trunc((policy->>k)::numeric)) THEN
            RAISE EXCEPTION 'tenant policy "%" must be a positive %, not %', k,
                CASE WHEN k OPERATOR(pg_catalog.=) 'max_starts_per_second' THEN 'number' ELSE 'integer' END,
                policy->k
                USING ERRCODE = 'invalid_parameter_value', HINT = 'null removes the limit.';
        END IF;
    END LOOP;
    INSERT INTO wf.tenant_policies AS p (tenant_id) VALUES (tenant)
    ON CONFLICT (tenant_id) DO NOTHING;
    UPDATE wf.tenant_policies p SET
        retention = CASE WHEN policy ? 'retention' THEN (policy->>'retention')::interval ELSE p.retention END,
        max_live_runs = CASE WHEN policy ? 'max_live_runs' THEN (policy->>'max_live_runs')::integer ELSE p.max_live_runs END,
        max_starts_per_second = CASE WHEN policy ? 'max_starts_per_second'
                                     THEN (policy->>'max_starts_per_second')::double precision
                                     ELSE p.max_starts_per_second END,
        start_burst = CASE WHEN policy ? 'start_burst' THEN (policy->>'start_burst')::integer ELSE p.start_burst END,
        max_definition_steps = CASE WHEN policy ? 'max_definition_steps'
                                    THEN (policy->>'max_definition_steps')::integer ELSE p.max_definition_steps END,
        max_definition_bytes = CASE WHEN policy ? 'max_definition_bytes'
                                    THEN (policy->>'max_definition_bytes')::integer ELSE p.max_definition_bytes END,
        max_events_per_run = CASE WHEN policy ? 'max_events_per_run'
                                  THEN (policy->>'max_events_per_run')::integer ELSE p.max_events_per_run END,
        max_tasks_in_flight = CASE WHEN policy ? 'max_tasks_in_flight'
                                   THEN (policy->>'max_tasks_in_flight')::integer ELSE p.max_tasks_in_flight END,
        max_timers_per_run = CASE WHEN policy ? 'max_timers_per_run'
                                  THEN (policy->>'max_timers_per_run')::integer ELSE p.max_timers_per_run END,
        max_definition_depth = CASE WHEN policy ? 'max_definition_depth'
                                    THEN (policy->>'max_definition_depth')::integer ELSE p.max_definition_depth END,
        max_buffered_events = CASE WHEN policy ? 'max_buffered_events'
                                   THEN (policy->>'max_buffered_events')::integer ELSE p.max_buffered_events END,
        updated_at = pg_catalog.clock_timestamp()
    WHERE p.tenant_id OPERATOR(pg_catalog.=) tenant
    RETURNING * INTO result;
    PERFORM wf._policy_changed();
    RETURN result;
END
$$;
COMMENT ON FUNCTION wf.set_tenant_policy(text, jsonb) IS
'Sets keys of a tenant''s policy (retention, max_live_runs, max_starts_per_second, start_burst, max_definition_steps, max_definition_bytes, max_definition_depth, max_events_per_run, max_timers_per_run, max_tasks_in_flight); a null value removes a limit.';

CREATE FUNCTION wf._policy_changed()
RETURNS void
AS 'MODULE_PATHNAME', 'wfengine_policy_changed'
LANGUAGE C VOLATILE;

-- Legal hold and purging.
CREATE FUNCTION wf.set_legal_hold(run uuid, hold boolean, reason text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wfengine_set_legal_hold'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.set_legal_hold(uuid, boolean, text) IS
'Puts a run under legal hold (true) or releases it (false): a run under hold is never purged; returns the hold it had.';

CREATE FUNCTION wf._purging()
RETURNS boolean
AS 'MODULE_PATHNAME', 'wfengine_purging'
LANGUAGE C STABLE;

CREATE FUNCTION wf.purge_runs(max_runs integer DEFAULT 1000)
RETURNS integer
AS 'MODULE_PATHNAME', 'wfengine_purge_runs'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.purge_runs(integer) IS
'Deletes up to max_runs finished runs (completed, failed, terminated or cancelled) older than their tenant''s retention and not under legal hold, with their history, tasks, timers, approvals, signals and keys; returns how many.';

CREATE FUNCTION wf.schedule_purge(cron text DEFAULT '*/10 * * * *', max_runs integer DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'pg_cron') THEN
        RAISE EXCEPTION 'extension "pg_cron" is not installed in database "%"', pg_catalog.current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run CREATE EXTENSION pg_cron in the database named by cron.database_name.';
    END IF;
    IF max_runs OPERATOR(pg_catalog.<) 1 OR max_runs OPERATOR(pg_catalog.>) 100000 THEN
        RAISE EXCEPTION 'max_runs must be between 1 and 100000, not %', max_runs
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM wf._cron_check(cron);
    RETURN cron.schedule('wfengine:purge', cron,
                         pg_catalog.format('SELECT wf.purge_runs(%s)', max_runs));
END
$$;
COMMENT ON FUNCTION wf.schedule_purge(text, integer) IS
'Installs (or replaces) the pg_cron job "wfengine:purge" that runs wf.purge_runs(max_runs) on the cron schedule; returns the job id.';

-- Sensitive fields (sensitive.c): each tenant's data keys, stored only
-- wrapped under a master key of wfengine.master_keys; a destroyed key
-- keeps its row with wrapped = NULL.
CREATE TABLE wf.tenant_keys (
    tenant_id       text NOT NULL,
    key_id          integer NOT NULL CHECK (key_id > 0),
    master_key_id   text NOT NULL,
    wrapped         bytea,
    created_at      timestamptz NOT NULL,
    destroyed_at    timestamptz,
    PRIMARY KEY (tenant_id, key_id)
);
COMMENT ON TABLE wf.tenant_keys IS
'Data keys of the tenants, wrapped (XChaCha20-Poly1305) under a master key; wrapped is NULL once destroyed.';
SELECT pg_catalog.pg_extension_config_dump('wf.tenant_keys', '');

CREATE FUNCTION wf.decrypt(value jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'wfengine_decrypt'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION wf.decrypt(jsonb) IS
'Opens the sealed sensitive values of the session''s tenant in a JSON value; for members of wfengine_sensitive.';

CREATE FUNCTION wf.rotate_tenant_key(tenant text)
RETURNS integer
AS 'MODULE_PATHNAME', 'wfengine_rotate_tenant_key'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION wf.rotate_tenant_key(text) IS
'Makes a new data key for a tenant: values sealed from now on use it; older keys still open older values. Returns its id.';

CREATE FUNCTION wf.rewrap_tenant_keys()
RETURNS integer
AS 'MODULE_PATHNAME', 'wfengine_rewrap_tenant_keys'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION wf.rewrap_tenant_keys() IS
'Wraps every live data key again under the current (first) master key, so that older master keys can be retired; returns how many.';

CREATE FUNCTION wf.destroy_tenant_keys(tenant text)
RETURNS integer
AS 'MODULE_PATHNAME', 'wfengine_destroy_tenant_keys'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION wf.destroy_tenant_keys(text) IS
'Crypto-shredding: erases the wrapped data keys of a tenant, so that none of its sealed values can be read again; returns how many keys.';

-- The roles of the jobs; they survive DROP EXTENSION, like every role.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['wfengine_app', 'wfengine_worker', 'wfengine_approver',
                             'wfengine_operator', 'wfengine_admin', 'wfengine_sensitive'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles x WHERE x.rolname OPERATOR(pg_catalog.=) r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$$;
-- an operator reads what an application reads; an administrator operates
DO $$
BEGIN
    IF NOT pg_catalog.pg_has_role('wfengine_operator', 'wfengine_app', 'MEMBER') THEN
        GRANT wfengine_app TO wfengine_operator;
    END IF;
    IF NOT pg_catalog.pg_has_role('wfengine_admin', 'wfengine_operator', 'MEMBER') THEN
        GRANT wfengine_operator TO wfengine_admin;
    END IF;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA wf FROM PUBLIC;
GRANT USAGE ON SCHEMA wf TO wfengine_app, wfengine_worker, wfengine_approver,
    wfengine_operator, wfengine_admin;
GRANT EXECUTE ON FUNCTION wf.current_tenant(), wf.preloaded(), wf.channel(text, text)
    TO wfengine_app, wfengine_worker, wfengine_approver;
-- the size checks of wf.send_event, the batch commands and wf.schedule
GRANT EXECUTE ON FUNCTION wf._check_arg(text, text, text), wf._check_payload(jsonb, text, text, boolean)
    TO wfengine_app, wfengine_operator, wfengine_admin;
GRANT EXECUTE ON FUNCTION
    wf.start_run(text, jsonb, text, integer), wf.run_status(uuid), wf.history(uuid),
    wf.explain(uuid), wf.verify_run(uuid), wf.signal(uuid, text, jsonb, text),
    wf.send_event(text, text, jsonb, text, interval), wf.definition_graph(text, integer, text),
    wf.run_graph(uuid, text), wf._graph_render(text, jsonb, text, jsonb),
    wf._step_edges(jsonb),
    wf._refuse_sealed_lookalikes(jsonb, text, text),
    wf._event_runs(text), wf._buffer_event(text, text, jsonb, text, interval),
    wf.verify_run(uuid, jsonb), wf.chain_heads()
    TO wfengine_app;
GRANT EXECUTE ON FUNCTION
    wf.claim_tasks(text, text, integer, interval, interval),
    wf.complete_task(bigint, bigint, jsonb), wf.fail_task(bigint, bigint, jsonb, boolean),
    wf.heartbeat(bigint, bigint, jsonb), wf.issue_approval_tokens(bigint, bigint)
    TO wfengine_worker;
GRANT EXECUTE ON FUNCTION wf.decide(text, text, text, text, jsonb) TO wfengine_approver;
GRANT EXECUTE ON FUNCTION
    wf.terminate_run(uuid, text), wf.update_context(uuid, jsonb, text),
    wf.pause_run(uuid, text), wf.resume_run(uuid, text), wf.retry_step(uuid, text, interval),
    wf.skip_step(uuid, jsonb, text, text), wf.cancel_run(uuid, text),
    wf.migrate_run(uuid, integer, text),
    wf.cancel_runs(text, jsonb, integer, uuid), wf.retry_runs(text, jsonb, integer, uuid),
    wf.resume_runs(text, jsonb, integer, uuid),
    wf._batch(text, text, text[], text, jsonb, integer, uuid),
    wf.revoke_approval_tokens(uuid, text, text), wf.reissue_approval_tokens(uuid, text, text),
    wf.set_approvers(uuid, text, text[], text), wf.set_legal_hold(uuid, boolean, text)
    TO wfengine_operator;
GRANT EXECUTE ON FUNCTION
    wf.publish_definition(text, jsonb), wf.worker_status(),
    wf.schedule(text, text, text, jsonb, integer), wf.unschedule(text),
    wf._fire_schedule(bigint), wf._cron_check(text),
    wf._cron_next(text, timestamptz, text), wf._cron_prev(text, timestamptz, text),
    wf._cron_timezone(), wf._refuse_sealed_lookalikes(jsonb, text, text)
    TO wfengine_admin;

GRANT SELECT ON ALL TABLES IN SCHEMA wf TO wfengine_app, wfengine_worker,
    wfengine_approver, wfengine_operator, wfengine_admin;
REVOKE ALL ON wf.secrets, wf.tenant_keys FROM wfengine_app, wfengine_worker, wfengine_approver,
    wfengine_operator, wfengine_admin;
-- wf.schedule_list reads as its caller and computes the next instant.
GRANT EXECUTE ON FUNCTION wf._cron_next(text, timestamptz, text), wf._cron_timezone()
    TO wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator;
GRANT USAGE ON SCHEMA wf TO wfengine_sensitive;
GRANT EXECUTE ON FUNCTION wf.decrypt(jsonb) TO wfengine_sensitive;
GRANT INSERT, UPDATE, DELETE ON wf.schedules TO wfengine_admin;
GRANT USAGE ON SEQUENCE wf.schedules_schedule_id_seq TO wfengine_admin;

DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_catalog.pg_class c
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
             WHERE n.nspname OPERATOR(pg_catalog.=) 'wf' AND c.relkind OPERATOR(pg_catalog.=) 'r'
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE wf.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE pg_catalog.format('ALTER TABLE wf.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE pg_catalog.format(
            'CREATE POLICY tenant_isolation ON wf.%I '
            'USING (tenant_id OPERATOR(pg_catalog.=) wf.current_tenant()) '
            'WITH CHECK (tenant_id OPERATOR(pg_catalog.=) wf.current_tenant())', t);
    END LOOP;
END
$$;
