/*-------------------------------------------------------------------------
 *
 * spi_util.c
 *	  Every SQL statement wfengine runs, prepared once per backend and kept.
 *
 * All SQL that the C code issues lives in the table below.  Each entry is
 * prepared on first use with SPI_prepare, saved with SPI_keepplan and run
 * with SPI_execute_plan; user data only ever travels as parameters.  The
 * plan cache chooses between a custom and the generic plan by their
 * estimated costs; an entry marked generic is prepared with
 * CURSOR_OPT_GENERIC_PLAN, for a statement whose custom plans would win on
 * estimates (a LIMIT parameter) and so be planned again on every call,
 * although the generic plan is as good.
 * Every identifier and operator is schema-qualified, so a hostile
 * search_path cannot redirect the engine's statements.
 *
 * The plans, the definition cache and the OID of the task id sequence all
 * belong to one installation of the extension.  WfApiBegin, called at the
 * top of every SQL-callable function, compares the OID of wf.tasks with
 * the one the caches were built for; after DROP EXTENSION and CREATE
 * EXTENSION it differs, and everything is thrown away and rebuilt.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/spi_util.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "spi_util.h"
#include "wfengine.h"

#define WF_MAX_PLAN_ARGS 40
#define WF_MAX_RESET_CALLBACKS 16

/* one statement of the plan table */
typedef struct WfPlanSpec
{
	const char *sql;
	int			nargs;
	Oid			argtypes[WF_MAX_PLAN_ARGS];
	bool		generic;		/* always use the generic plan */
} WfPlanSpec;

/* the snapshot columns, in the order WfRunStateFromTuple reads them */
#define WF_RUN_COLUMNS \
	"r.run_id, r.tenant_id, r.definition_id, r.status, r.current_step, " \
	"r.seq, r.context, r.output, r.last_hash, r.updated_at, r.finished_at, " \
	"r.current_attempt, r.current_task, r.step_generation, r.wait_generation "

/*
 * The statements that write a transition share their parameters:
 * $1 run_id, $2 tenant, $3 actor, $4 now, $5-$10 the events as parallel
 * arrays (seq, type, step, attempt, payload, hash), $11-$22 the new task
 * (see WfTaskValues), $23-$33 the snapshot (see WfRunValues) and $34 the
 * new task's priority.
 */
#define WF_EVENTS_INSERT(run_expr, from) \
	"INSERT INTO wf.events (run_id, seq, tenant_id, type, step, attempt," \
	" payload, actor, created_at, hash)" \
	" SELECT " run_expr ", u.seq, $2, u.type, u.step, u.attempt, u.payload, $3, $4, u.hash" \
	" FROM " from "ROWS FROM (pg_catalog.unnest($5), pg_catalog.unnest($6)," \
	" pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9)," \
	" pg_catalog.unnest($10)) AS u(seq, type, step, attempt, payload, hash)"

#define WF_TASK_INSERT(run_expr, from, where) \
	"INSERT INTO wf.tasks (task_id, tenant_id, run_id, step, visit, attempt," \
	" queue, activity, status, available_at, idempotency_key, input, created_at," \
	" schedule_to_start, start_to_close, heartbeat_timeout, deadline_at, priority)" \
	" SELECT $11, $2, " run_expr ", $12, $13, $14, $15, $16, 'ready', $17, $18, $19, $4," \
	" $20, $21, $22, $17 OPERATOR(pg_catalog.+) $20, $34" \
	" " from " WHERE $11 IS NOT NULL " where

#define WF_TRANSITION_TYPES \
	UUIDOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, \
	INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID, JSONBARRAYOID, BYTEAARRAYOID, \
	INT8OID, TEXTOID, INT4OID, INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, JSONBOID, \
	INTERVALOID, INTERVALOID, INTERVALOID, \
	TEXTOID, TEXTOID, INT4OID, JSONBOID, JSONBOID, BYTEAOID, TIMESTAMPTZOID, INT4OID, INT8OID, \
	INT4OID, INT4OID, INT4OID

/*
 * A new fence of the task row t: the next value of wf.fence_seq on top of
 * the timeline bits base (a parameter, from WfFenceBase()), and never
 * below the task's last fence plus one.  See WfFenceBase.
 */
#define WF_NEW_FENCE(base) \
	"GREATEST(" base " OPERATOR(pg_catalog.+)" \
	" pg_catalog.nextval('wf.fence_seq'::pg_catalog.regclass)," \
	" t.fence OPERATOR(pg_catalog.+) 1)"

/* the columns of a live task that the deadline handler reads */
#define WF_TASK_DEADLINE_COLUMNS \
	"t.status, t.fence, t.step, t.visit, t.attempt, t.worker, t.input, " \
	"t.deadline_at, t.lease_expires_at, t.timeout_at, " \
	"COALESCE(t.last_heartbeat_at, t.claimed_at) OPERATOR(pg_catalog.+) t.heartbeat_timeout, " \
	"t.created_at OPERATOR(pg_catalog.+) t.schedule_to_start, t.lease_expirations "

static const WfPlanSpec plan_specs[WF_PLAN_COUNT] = {
	[WF_PLAN_DEF_LATEST] = {
		"SELECT d.definition_id, d.version FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"ORDER BY d.version DESC LIMIT 1",
		2, {TEXTOID, TEXTOID}
	},
	[WF_PLAN_DEF_VERSION] = {
		"SELECT d.definition_id, d.version FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"AND d.version OPERATOR(pg_catalog.=) $3",
		3, {TEXTOID, TEXTOID, INT4OID}
	},
	[WF_PLAN_DEF_BY_ID] = {
		"SELECT d.tenant_id, d.name, d.version, d.spec FROM wf.definitions d "
		"WHERE d.definition_id OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
	[WF_PLAN_DEF_BY_DIGEST] = {
		"SELECT d.version, d.definition_id FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"AND d.digest OPERATOR(pg_catalog.=) $3",
		3, {TEXTOID, TEXTOID, BYTEAOID}
	},
	[WF_PLAN_DEF_INSERT] = {
		"INSERT INTO wf.definitions (tenant_id, name, version, digest, spec) "
		"SELECT $1, $2, COALESCE(pg_catalog.max(d.version), 0) OPERATOR(pg_catalog.+) 1, $3, $4 "
		"FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"ON CONFLICT DO NOTHING RETURNING definition_id, version",
		4, {TEXTOID, TEXTOID, BYTEAOID, JSONBOID}
	},
	[WF_PLAN_RUN_INSERT] = {
		"WITH r AS ("
		" INSERT INTO wf.runs (run_id, tenant_id, definition_id, definition_name,"
		"  definition_version, status, current_step, seq, input, context,"
		"  idempotency_key, last_hash, created_at, updated_at, current_attempt,"
		"  current_task, step_generation, wait_generation, output, finished_at,"
		"  input_digest)"
		" VALUES ($1, $2, $35, $36, $37, $23, $24, $25, $38, $26, $39, $28, $4, $4,"
		"  $30, $31, $32, $33, $27, $29, $40)"
		" ON CONFLICT (tenant_id, idempotency_key) DO NOTHING"
		" RETURNING run_id),"
		" e AS (" WF_EVENTS_INSERT("r.run_id", "r, ") "),"
		" t AS (" WF_TASK_INSERT("r.run_id", "FROM r", "") ")"
		" SELECT pg_catalog.count(*) FROM r",
		40, {WF_TRANSITION_TYPES, INT8OID, TEXTOID, INT4OID, JSONBOID, TEXTOID, BYTEAOID}
	},
	[WF_PLAN_RUN_BY_KEY] = {
		"SELECT r.run_id, r.definition_name, r.input, r.definition_version, r.definition_id,"
		" r.input_digest FROM wf.runs r "
		"WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 "
		"AND r.idempotency_key OPERATOR(pg_catalog.=) $2",
		2, {TEXTOID, TEXTOID}
	},
	[WF_PLAN_LOCK_TASK_AND_RUN] = {
		"SELECT " WF_RUN_COLUMNS ", " WF_TASK_DEADLINE_COLUMNS
		"FROM wf.tasks t JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) t.run_id "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.tenant_id OPERATOR(pg_catalog.=) $2 "
		"AND r.tenant_id OPERATOR(pg_catalog.=) $2 "
		"FOR UPDATE OF t, r",
		2, {INT8OID, TEXTOID}
	},
	[WF_PLAN_RUN_GET] = {
		"SELECT " WF_RUN_COLUMNS "FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {UUIDOID, TEXTOID}
	},
	[WF_PLAN_RUN_STATUS] = {
		"SELECT r.status FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {UUIDOID, TEXTOID}
	},
	[WF_PLAN_TASK_FINISH] = {
		"UPDATE wf.tasks t SET status = $3, output = $4, error = $5, finished_at = $6,"
		" deadline_at = NULL "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.fence OPERATOR(pg_catalog.=) $2 "
		"AND t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased'])",
		6, {INT8OID, INT8OID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_TASKS_OF_RUN] = {
		"SELECT t.task_id, t.step, t.attempt, t.status, t.fence, t.output, t.error "
		"FROM wf.tasks t WHERE t.run_id OPERATOR(pg_catalog.=) $1 ORDER BY t.task_id",
		1, {UUIDOID}
	},
	[WF_PLAN_RUN_IDENTITY] = {
		"SELECT r.definition_name, r.definition_version, r.input, r.idempotency_key, r.created_at,"
		" pg_catalog.encode(r.input_digest, 'hex') "
		"FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		1, {UUIDOID}
	},
	[WF_PLAN_TRANSITION] = {
		"WITH e AS (" WF_EVENTS_INSERT("$1", "") "),"
		" t AS (" WF_TASK_INSERT("$1", "", "") ")"
		" UPDATE wf.runs r SET status = $23, current_step = $24, seq = $25, context = $26,"
		"  output = $27, last_hash = $28, updated_at = $4, finished_at = $29,"
		"  current_attempt = $30, current_task = $31, step_generation = $32,"
		"  wait_generation = $33"
		" WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		34, {WF_TRANSITION_TYPES}
	},
	[WF_PLAN_CLAIM] = {
		/*
		 * The ids are picked by a sub-select (claim index order, SKIP
		 * LOCKED) and updated through the primary key.  This shape has a
		 * good generic plan for any batch size, and the statement is
		 * prepared to use it: with the limit as a parameter the plan cache
		 * would otherwise plan it again on every call (see WfPlanSpec).
		 */
		"UPDATE wf.tasks t SET status = 'leased',"
		"  fence = " WF_NEW_FENCE("$7") ","
		"  deliveries = t.deliveries OPERATOR(pg_catalog.+) 1,"
		"  worker = $4, claimed_at = $5, lease = $6, last_heartbeat_at = NULL,"
		"  lease_expires_at = $5 OPERATOR(pg_catalog.+) $6,"
		"  timeout_at = $5 OPERATOR(pg_catalog.+) t.start_to_close,"
		"  deadline_at = LEAST($5 OPERATOR(pg_catalog.+) $6,"
		"   $5 OPERATOR(pg_catalog.+) t.start_to_close,"
		"   $5 OPERATOR(pg_catalog.+) t.heartbeat_timeout)"
		" WHERE t.task_id OPERATOR(pg_catalog.=) ANY (ARRAY("
		"  SELECT c.task_id FROM wf.tasks c"
		"  WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.queue OPERATOR(pg_catalog.=) $2"
		"   AND c.status OPERATOR(pg_catalog.=) 'ready'"
		"   AND c.available_at OPERATOR(pg_catalog.<=) $5"
		"  ORDER BY c.priority DESC, c.available_at, c.task_id"
		"  LIMIT $3"
		"  FOR UPDATE SKIP LOCKED))"
		" RETURNING t.task_id, t.run_id, t.step, t.attempt, t.fence, t.idempotency_key,"
		"  t.input, t.lease_expires_at, t.queue, t.activity, t.deliveries, t.deadline_at",
		7, {TEXTOID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID, INTERVALOID, INT8OID},
		true
	},
	[WF_PLAN_EVENTS_GET] = {
		"SELECT e.seq, e.type, e.step, e.attempt, e.payload, e.actor, e.created_at,"
		" e.hash, e.tenant_id FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 ORDER BY e.seq",
		1, {UUIDOID}
	},
	[WF_PLAN_TIMER_INSERT] = {
		"INSERT INTO wf.timers (timer_id, tenant_id, run_id, kind, step, generation,"
		" due_at, fire_at, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9)",
		9, {INT8OID, TEXTOID, UUIDOID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID,
		JSONBOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_TASK_WITHDRAW] = {
		"UPDATE wf.tasks t SET status = 'cancelled', finished_at = $2, deadline_at = NULL,"
		" lease_expirations = GREATEST(t.lease_expirations, $3) "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased'])",
		3, {INT8OID, TIMESTAMPTZOID, INT4OID}
	},
	[WF_PLAN_TIMERS_CANCEL] = {
		"UPDATE wf.timers tm SET status = 'cancelled', fired_at = $2, outcome = 'run_finished' "
		"WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'",
		2, {UUIDOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_TIMERS_DUE] = {
		"SELECT tm.timer_id, tm.tenant_id FROM wf.timers tm "
		"WHERE tm.status OPERATOR(pg_catalog.=) 'pending' AND tm.fire_at OPERATOR(pg_catalog.<=) $1 "
		"ORDER BY tm.fire_at, tm.timer_id LIMIT $2",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	[WF_PLAN_DEADLINES_DUE] = {
		"SELECT t.task_id, t.tenant_id FROM wf.tasks t "
		"WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL "
		"AND t.deadline_at OPERATOR(pg_catalog.<=) $1 "
		"ORDER BY t.deadline_at LIMIT $2",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	[WF_PLAN_NEXT_DUE] = {
		"SELECT LEAST("
		" (SELECT pg_catalog.min(tm.fire_at) FROM wf.timers tm"
		"  WHERE tm.status OPERATOR(pg_catalog.=) 'pending'),"
		" (SELECT pg_catalog.min(t.deadline_at) FROM wf.tasks t"
		"  WHERE t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) AND t.deadline_at IS NOT NULL))",
		0, {InvalidOid}
	},
	[WF_PLAN_TIMER_PEEK] = {
		"SELECT r.current_task FROM wf.timers tm JOIN wf.runs r"
		" ON r.run_id OPERATOR(pg_catalog.=) tm.run_id "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
	[WF_PLAN_TASK_LOCK] = {
		"SELECT t.status FROM wf.tasks t WHERE t.task_id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
		1, {INT8OID}
	},
	[WF_PLAN_LOCK_TIMER_AND_RUN] = {
		"SELECT " WF_RUN_COLUMNS ", tm.kind, tm.step, tm.generation, tm.payload, tm.status,"
		" tm.due_at "
		"FROM wf.timers tm JOIN wf.runs r ON r.run_id OPERATOR(pg_catalog.=) tm.run_id "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1 FOR UPDATE OF tm, r",
		1, {INT8OID}
	},
	[WF_PLAN_TIMER_DONE] = {
		"UPDATE wf.timers tm SET status = 'fired', fired_at = $2, outcome = $3 "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1",
		3, {INT8OID, TIMESTAMPTZOID, TEXTOID}
	},
	[WF_PLAN_TIMER_ERROR] = {
		/* $4: 'quota_refused' when max_timers_per_run refused it, else NULL */
		"UPDATE wf.timers tm SET errors = tm.errors OPERATOR(pg_catalog.+) 1, last_error = $3,"
		" fire_at = $2, outcome = $4 "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'",
		4, {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID}
	},
	[WF_PLAN_TASK_SET_DEADLINE] = {
		"UPDATE wf.tasks t SET deadline_at = $2 "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased'])",
		2, {INT8OID, TIMESTAMPTZOID}
	},
	[WF_PLAN_TASK_REQUEUE] = {
		"UPDATE wf.tasks t SET status = 'ready', available_at = $2, deadline_at = NULL,"
		" lease_expirations = $3, lease_expires_at = NULL, timeout_at = NULL "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1",
		3, {INT8OID, TIMESTAMPTZOID, INT4OID}
	},
	[WF_PLAN_HEARTBEAT] = {
		"UPDATE wf.tasks t SET last_heartbeat_at = $4,"
		" heartbeat_details = COALESCE($5, t.heartbeat_details),"
		" lease_expires_at = $4 OPERATOR(pg_catalog.+) t.lease,"
		" deadline_at = LEAST($4 OPERATOR(pg_catalog.+) t.lease, t.timeout_at,"
		"  $4 OPERATOR(pg_catalog.+) t.heartbeat_timeout) "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.fence OPERATOR(pg_catalog.=) $2 "
		"AND t.tenant_id OPERATOR(pg_catalog.=) $3 AND t.status OPERATOR(pg_catalog.=) 'leased' "
		"RETURNING t.run_id, t.deadline_at, t.step,"
		" (SELECT r.status FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) t.run_id)",
		5, {INT8OID, INT8OID, TEXTOID, TIMESTAMPTZOID, JSONBOID}
	},
	[WF_PLAN_TASK_TIME_OUT] = {
		"UPDATE wf.tasks t SET status = 'failed', error = $2, finished_at = $3,"
		" deadline_at = NULL, fence = " WF_NEW_FENCE("$4") " "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased']) "
		"RETURNING t.fence",
		4, {INT8OID, JSONBOID, TIMESTAMPTZOID, INT8OID}
	},
	[WF_PLAN_APPROVALS_INSERT] = {
		"INSERT INTO wf.approvals (tenant_id, run_id, step, visit, approver, expires_at, created_at) "
		"SELECT $1, $2, $3, $4, a, $6, $7 FROM pg_catalog.unnest($5) AS a",
		7, {TEXTOID, UUIDOID, TEXTOID, INT4OID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_APPROVALS_CLOSE] = {
		"UPDATE wf.approvals ap SET status = 'closed' "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3 AND ap.status OPERATOR(pg_catalog.=) 'pending'",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[WF_PLAN_APPROVALS_PENDING] = {
		"SELECT ap.approval_id, ap.approver, ap.expires_at, ap.approve_hash IS NOT NULL FROM wf.approvals ap "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3 AND ap.status OPERATOR(pg_catalog.=) 'pending' "
		"ORDER BY ap.approver",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[WF_PLAN_APPROVAL_SET_TOKEN] = {
		"UPDATE wf.approvals ap SET approve_hash = $2, reject_hash = $3,"
		" token_generation = ap.token_generation OPERATOR(pg_catalog.+) 1 "
		"WHERE ap.approval_id OPERATOR(pg_catalog.=) $1 RETURNING ap.token_generation",
		3, {INT8OID, BYTEAOID, BYTEAOID}
	},
	[WF_PLAN_APPROVAL_BY_HASH] = {
		"SELECT ap.approval_id, ap.tenant_id, ap.run_id, ap.step, ap.visit, ap.approver,"
		" ap.status, ap.expires_at, ap.approve_hash, ap.reject_hash FROM wf.approvals ap "
		"WHERE ap.approve_hash OPERATOR(pg_catalog.=) $1 OR ap.reject_hash OPERATOR(pg_catalog.=) $1",
		1, {BYTEAOID}
	},
	[WF_PLAN_APPROVAL_CONSUME] = {
		"UPDATE wf.approvals ap SET status = 'decided', decision = $2, comment = $3, data = $4,"
		" decided_at = $5, decided_by = $6 "
		"WHERE ap.approval_id OPERATOR(pg_catalog.=) $1 AND ap.status OPERATOR(pg_catalog.=) 'pending'",
		6, {INT8OID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID}
	},
	[WF_PLAN_APPROVAL_TALLY] = {
		"SELECT pg_catalog.count(*) FILTER (WHERE ap.status OPERATOR(pg_catalog.<>) 'revoked'),"
		" pg_catalog.count(*) FILTER (WHERE ap.decision OPERATOR(pg_catalog.=) 'approve'),"
		" pg_catalog.count(*) FILTER (WHERE ap.decision OPERATOR(pg_catalog.=) 'reject'),"
		" COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('approver', ap.approver,"
		"  'decision', ap.decision, 'comment', ap.comment, 'data', ap.data)"
		"  ORDER BY ap.decided_at, ap.approval_id) FILTER (WHERE ap.status OPERATOR(pg_catalog.=) 'decided'),"
		"  '[]'::pg_catalog.jsonb) "
		"FROM wf.approvals ap WHERE ap.run_id OPERATOR(pg_catalog.=) $1 "
		"AND ap.step OPERATOR(pg_catalog.=) $2 AND ap.visit OPERATOR(pg_catalog.=) $3",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[WF_PLAN_RUN_LOCK] = {
		"SELECT " WF_RUN_COLUMNS "FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2 "
		"FOR UPDATE",
		2, {UUIDOID, TEXTOID}
	},
	[WF_PLAN_ATTEMPT_INSERT] = {
		"INSERT INTO wf.approval_attempts (tenant_id, attempted_at, actor, approver, decision,"
		" outcome, run_id, step) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		8, {TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, UUIDOID, TEXTOID}
	},
	/* is the approver locked out in the current window (one index probe)? */
	[WF_PLAN_DECIDE_LOCKED] = {
		"SELECT 1 FROM wf.decide_failures f "
		"WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.kind OPERATOR(pg_catalog.=) 'approver' "
		"AND f.subject OPERATOR(pg_catalog.=) $2 AND f.window_start OPERATOR(pg_catalog.>) $3 "
		"AND f.failures OPERATOR(pg_catalog.>=) $4",
		4, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID}
	},
	/* ... it is: count the call */
	[WF_PLAN_DECIDE_THROTTLE] = {
		"UPDATE wf.decide_failures f SET throttled = f.throttled OPERATOR(pg_catalog.+) 1, last_at = $3 "
		"WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.kind OPERATOR(pg_catalog.=) 'approver' "
		"AND f.subject OPERATOR(pg_catalog.=) $2",
		3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}
	},
	/*
	 * One failure of (tenant, kind, subject): a window older than $6 starts
	 * again; true when this failure is beyond the limit $7 of its window
	 * (then it is counted in suppressed, and not stored otherwise).
	 */
	[WF_PLAN_DECIDE_FAILURE] = {
		"INSERT INTO wf.decide_failures AS f (tenant_id, kind, subject, run_id, window_start,"
		" failures, suppressed, throttled, last_at) VALUES ($1, $2, $3, $4, $5, 1, 0, 0, $5) "
		"ON CONFLICT (tenant_id, kind, subject) DO UPDATE SET"
		" window_start = CASE WHEN f.window_start OPERATOR(pg_catalog.<=) $6 THEN $5 ELSE f.window_start END,"
		" failures = CASE WHEN f.window_start OPERATOR(pg_catalog.<=) $6 THEN 1"
		"  ELSE f.failures OPERATOR(pg_catalog.+) 1 END,"
		" suppressed = f.suppressed OPERATOR(pg_catalog.+) CASE WHEN f.window_start OPERATOR(pg_catalog.>) $6"
		"  AND f.failures OPERATOR(pg_catalog.>=) $7 THEN 1 ELSE 0 END,"
		" last_at = $5 "
		"RETURNING f.failures OPERATOR(pg_catalog.>) $7",
		7, {TEXTOID, TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID}
	},
	[WF_PLAN_APPROVALS_REVOKE_TOKENS] = {
		"UPDATE wf.approvals ap SET approve_hash = NULL, reject_hash = NULL "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3 AND ap.status OPERATOR(pg_catalog.=) 'pending' "
		"AND ap.approve_hash IS NOT NULL",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[WF_PLAN_APPROVALS_REMOVE] = {
		"UPDATE wf.approvals ap SET status = 'revoked' "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3 AND ap.status OPERATOR(pg_catalog.=) 'pending' "
		"AND ap.approver OPERATOR(pg_catalog.<>) ALL ($4) RETURNING ap.approver",
		4, {UUIDOID, TEXTOID, INT4OID, TEXTARRAYOID}
	},
	[WF_PLAN_APPROVALS_ADD] = {
		"INSERT INTO wf.approvals AS ap (tenant_id, run_id, step, visit, approver, expires_at,"
		" created_at) "
		"SELECT $1, $2, $3, $4, a, $6, $7 FROM pg_catalog.unnest($5) AS a "
		"ON CONFLICT (run_id, step, visit, approver) DO UPDATE SET status = 'pending',"
		" approve_hash = NULL, reject_hash = NULL"
		" WHERE ap.status OPERATOR(pg_catalog.=) 'revoked' "
		"RETURNING ap.approver",
		7, {TEXTOID, UUIDOID, TEXTOID, INT4OID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_APPROVAL_EXPIRES] = {
		"SELECT pg_catalog.max(ap.expires_at), COALESCE(pg_catalog.max(t.attempt), 0) "
		"FROM wf.approvals ap LEFT JOIN wf.tasks t ON t.run_id OPERATOR(pg_catalog.=) ap.run_id"
		" AND t.step OPERATOR(pg_catalog.=) ap.step AND t.visit OPERATOR(pg_catalog.=) ap.visit "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[WF_PLAN_RUN_CURRENT_TASK] = {
		"SELECT r.current_task FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {UUIDOID, TEXTOID}
	},
	[WF_PLAN_APPROVALS_CLOSE_RUN] = {
		"UPDATE wf.approvals ap SET status = 'closed' "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.status OPERATOR(pg_catalog.=) 'pending'",
		1, {UUIDOID}
	},
	[WF_PLAN_SIGNAL_INSERT] = {
		"INSERT INTO wf.signals (tenant_id, run_id, name, event_id, payload, received_at) "
		"VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, event_id) DO NOTHING "
		"RETURNING signal_id",
		6, {TEXTOID, UUIDOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_SIGNAL_TAKE] = {
		"UPDATE wf.signals sg SET consumed_at = $3, consumed_by = $4 "
		"WHERE sg.signal_id OPERATOR(pg_catalog.=) (SELECT s.signal_id FROM wf.signals s"
		" WHERE s.run_id OPERATOR(pg_catalog.=) $1 AND s.name OPERATOR(pg_catalog.=) $2"
		" AND s.consumed_at IS NULL ORDER BY s.signal_id LIMIT 1) "
		"RETURNING sg.signal_id, sg.event_id, sg.payload",
		4, {UUIDOID, TEXTOID, TIMESTAMPTZOID, TEXTOID}
	},
	[WF_PLAN_TASK_PEEK] = {
		"SELECT t.status, t.fence, r.status FROM wf.tasks t JOIN wf.runs r"
		" ON r.run_id OPERATOR(pg_catalog.=) t.run_id "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {INT8OID, TEXTOID}
	},
	[WF_PLAN_TIMER_HOLD] = {
		"UPDATE wf.timers tm SET fire_at = 'infinity', outcome = 'held' "
		"WHERE tm.timer_id OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
	[WF_PLAN_TIMERS_UNHOLD] = {
		"UPDATE wf.timers tm SET fire_at = $2, outcome = NULL "
		"WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		" AND tm.outcome OPERATOR(pg_catalog.=) 'held'",
		2, {UUIDOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_TASK_ROW] = {
		"SELECT t.status, t.fence, t.visit, t.worker, t.input, t.output, t.error, t.queue "
		"FROM wf.tasks t WHERE t.task_id OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
	[WF_PLAN_LAST_TASK_OF_STEP] = {
		"SELECT t.status, t.visit, t.attempt, t.input FROM wf.tasks t "
		"WHERE t.run_id OPERATOR(pg_catalog.=) $1 AND t.step OPERATOR(pg_catalog.=) $2 "
		"ORDER BY t.task_id DESC LIMIT 1",
		2, {UUIDOID, TEXTOID}
	},
	[WF_PLAN_LAST_HELD_RESULT] = {
		"SELECT e.payload FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 AND e.type OPERATOR(pg_catalog.=) 'result_held' "
		"ORDER BY e.seq DESC LIMIT 1",
		1, {UUIDOID}
	},
	[WF_PLAN_COMPLETED_STEPS] = {
		"SELECT e.step, (e.payload OPERATOR(pg_catalog.->>) 'visit')::pg_catalog.int4 "
		"FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 AND e.type OPERATOR(pg_catalog.=) 'task_completed' "
		"ORDER BY e.seq DESC",
		1, {UUIDOID}
	},
	[WF_PLAN_CORRELATION_INSERT] = {
		"INSERT INTO wf.correlations (tenant_id, key, run_id, created_at) "
		"VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
		4, {TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_MIGRATION_PROBLEM] = {
		"SELECT wf._migration_problem($1, $2)",
		2, {UUIDOID, INT8OID}
	},
	[WF_PLAN_RUN_SET_VERSION] = {
		"UPDATE wf.runs r SET definition_id = $2, definition_version = $3 "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		3, {UUIDOID, INT8OID, INT4OID}
	},
	[WF_PLAN_RUN_SET_PARENT] = {
		"UPDATE wf.runs r SET parent_run_id = $2 WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		2, {UUIDOID, UUIDOID}
	},
	[WF_PLAN_STOP_CHILDREN] = {
		"SELECT c.run_id FROM wf.runs c WHERE c.parent_run_id OPERATOR(pg_catalog.=) $1"
		" AND c.status OPERATOR(pg_catalog.=) ANY ('{running,paused}'::pg_catalog.text[])"
		" ORDER BY c.run_id",
		1, {UUIDOID}
	},
	[WF_PLAN_CHANNEL_KEY] = {
		"SELECT s.value FROM wf.secrets s WHERE s.name OPERATOR(pg_catalog.=) 'channel_key'",
		0, {InvalidOid}
	},
	[WF_PLAN_PURGE] = {
		"WITH victims AS ("
		" SELECT r.run_id FROM wf.runs r JOIN wf.tenant_policies p"
		" ON p.tenant_id OPERATOR(pg_catalog.=) r.tenant_id"
		" WHERE r.finished_at IS NOT NULL AND p.retention IS NOT NULL"
		" AND r.finished_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) p.retention)"
		" AND r.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'terminated', 'cancelled', 'compensated'])"
		" AND NOT r.legal_hold"
		" ORDER BY r.finished_at LIMIT $2 FOR UPDATE OF r SKIP LOCKED),"
		" e AS (DELETE FROM wf.events x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" t AS (DELETE FROM wf.tasks x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" tm AS (DELETE FROM wf.timers x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" a AS (DELETE FROM wf.approvals x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" aa AS (DELETE FROM wf.approval_attempts x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" s AS (DELETE FROM wf.signals x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" c AS (DELETE FROM wf.correlations x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		/* buffered events past their retention, of every tenant (events.c) */
		" be AS (DELETE FROM wf.buffered_events x WHERE x.expires_at OPERATOR(pg_catalog.<=) $1),"
		" se AS (DELETE FROM wf.suppressed_events x"
		"  WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" df AS (DELETE FROM wf.decide_failures x"
		"  WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		/* approver counters of a past window that kept nothing from the audit */
		" dfa AS (DELETE FROM wf.decide_failures x WHERE x.run_id IS NULL"
		"  AND x.last_at OPERATOR(pg_catalog.<=) $3 AND x.suppressed OPERATOR(pg_catalog.=) 0"
		"  AND x.throttled OPERATOR(pg_catalog.=) 0) "
		"DELETE FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v) RETURNING r.run_id",
		3, {TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID}
	},
	[WF_PLAN_RUN_SET_HOLD] = {
		"UPDATE wf.runs r SET legal_hold = $2 FROM wf.runs o "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND o.run_id OPERATOR(pg_catalog.=) r.run_id "
		"RETURNING o.legal_hold",
		2, {UUIDOID, BOOLOID}
	},
	[WF_PLAN_TENANT_POLICY] = {
		"SELECT p.max_live_runs, p.max_starts_per_second, p.start_burst,"
		" p.max_definition_steps, p.max_definition_bytes, p.max_events_per_run,"
		" p.max_tasks_in_flight, p.max_timers_per_run, p.max_definition_depth,"
		" p.max_buffered_events "
		"FROM wf.tenant_policies p WHERE p.tenant_id OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[WF_PLAN_LIVE_RUNS] = {
		"SELECT pg_catalog.count(*) FROM (SELECT 1 FROM wf.runs r"
		" WHERE r.tenant_id OPERATOR(pg_catalog.=) $1"
		" AND r.status OPERATOR(pg_catalog.=) ANY (ARRAY['running', 'paused', 'cancelling', 'compensating']) LIMIT $2) x",
		2, {TEXTOID, INT4OID}
	},
	[WF_PLAN_TASKS_IN_FLIGHT] = {
		"SELECT pg_catalog.count(*) FROM (SELECT 1 FROM wf.tasks t"
		" WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.queue OPERATOR(pg_catalog.=) $2"
		" AND t.status OPERATOR(pg_catalog.=) 'leased' LIMIT $3) x",
		3, {TEXTOID, TEXTOID, INT4OID}
	},
	[WF_PLAN_TIMERS_PENDING] = {
		"SELECT pg_catalog.count(*) FROM wf.timers tm"
		" WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		" AND tm.kind OPERATOR(pg_catalog.<>) 'child_done'",
		1, {UUIDOID}
	},
	[WF_PLAN_TIMERS_SUPERSEDE] = {
		/* earlier timers of the same kind and step: stale once a new one is set */
		"UPDATE wf.timers tm SET status = 'cancelled', fired_at = $5, outcome = 'superseded' "
		"WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		" AND tm.kind OPERATOR(pg_catalog.=) $2 AND (tm.step OPERATOR(pg_catalog.=) $3 OR (tm.step IS NULL AND $3 IS NULL))"
		" AND tm.generation OPERATOR(pg_catalog.<) $4",
		5, {UUIDOID, TEXTOID, TEXTOID, INT4OID, TIMESTAMPTZOID}
	},
	[WF_PLAN_SUPPRESSED_EVENT] = {
		"INSERT INTO wf.suppressed_events AS s (tenant_id, run_id, type, count, first_at, last_at) "
		"VALUES ($1, $2, $3, 1, $4, $4) ON CONFLICT (run_id, type) DO UPDATE SET"
		" count = s.count OPERATOR(pg_catalog.+) 1, last_at = $4",
		4, {TEXTOID, UUIDOID, TEXTOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_TENANT_KEY] = {
		"SELECT k.master_key_id, k.wrapped FROM wf.tenant_keys k "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.key_id OPERATOR(pg_catalog.=) $2",
		2, {TEXTOID, INT4OID}
	},
	[WF_PLAN_TENANT_KEY_INSERT] = {
		"INSERT INTO wf.tenant_keys (tenant_id, key_id, master_key_id, wrapped, created_at) "
		"VALUES ($1, $2, $3, $4, pg_catalog.clock_timestamp())",
		4, {TEXTOID, INT4OID, TEXTOID, BYTEAOID}
	},
	[WF_PLAN_TENANT_KEY_REWRAP] = {
		"UPDATE wf.tenant_keys k SET master_key_id = $3, wrapped = $4 "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.key_id OPERATOR(pg_catalog.=) $2",
		4, {TEXTOID, INT4OID, TEXTOID, BYTEAOID}
	},
	[WF_PLAN_TENANT_KEY_MAX] = {
		"SELECT pg_catalog.max(k.key_id) FROM wf.tenant_keys k "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[WF_PLAN_TENANT_KEY_CURRENT] = {
		"SELECT k.key_id FROM wf.tenant_keys k "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.wrapped IS NOT NULL "
		"ORDER BY k.key_id DESC LIMIT 1",
		1, {TEXTOID}
	},
	[WF_PLAN_TENANT_KEYS_LIVE] = {
		"SELECT k.tenant_id, k.key_id FROM wf.tenant_keys k WHERE k.wrapped IS NOT NULL "
		"ORDER BY 1, 2 FOR UPDATE",
		0, {InvalidOid}
	},
	[WF_PLAN_TENANT_KEYS_DESTROY] = {
		"UPDATE wf.tenant_keys k SET wrapped = NULL, destroyed_at = pg_catalog.clock_timestamp() "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.wrapped IS NOT NULL",
		1, {TEXTOID}
	},
	[WF_PLAN_CHANNEL_KEY_INSERT] = {
		"INSERT INTO wf.secrets (name, value) VALUES ('channel_key', $1) "
		"ON CONFLICT (name) DO NOTHING",
		1, {BYTEAOID}
	},
	[WF_PLAN_TASK_RESUME] = {
		"UPDATE wf.tasks t SET deadline_at = $2 "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.status OPERATOR(pg_catalog.=) 'leased'",
		2, {INT8OID, TIMESTAMPTZOID}
	},
	/*
	 * The earliest available_at of a ready task of a queue: how long a
	 * waiting claim may sleep.  Runs on the wait path only.
	 */
	[WF_PLAN_NEXT_AVAILABLE] = {
		"SELECT pg_catalog.min(t.available_at) FROM wf.tasks t"
		" WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.queue OPERATOR(pg_catalog.=) $2"
		" AND t.status OPERATOR(pg_catalog.=) 'ready'",
		2, {TEXTOID, TEXTOID}
	},
	/*
	 * The attempts of a visit of a step that count against max_attempts:
	 * all but those withdrawn before any worker claimed them (a pause, a
	 * migration).
	 */
	[WF_PLAN_COUNTED_ATTEMPTS] = {
		"SELECT pg_catalog.count(*)::pg_catalog.int4 FROM wf.tasks t"
		" WHERE t.run_id OPERATOR(pg_catalog.=) $1 AND t.step OPERATOR(pg_catalog.=) $2"
		" AND t.visit OPERATOR(pg_catalog.=) $3"
		" AND (t.deliveries OPERATOR(pg_catalog.>) 0"
		"  OR t.status OPERATOR(pg_catalog.<>) 'cancelled')",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[WF_PLAN_EVENT_RUNS] = {
		"SELECT c.run_id FROM wf.correlations c JOIN wf.runs r"
		" ON r.run_id OPERATOR(pg_catalog.=) c.run_id"
		" WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.key OPERATOR(pg_catalog.=) $2"
		" AND r.tenant_id OPERATOR(pg_catalog.=) $1"
		" AND r.status OPERATOR(pg_catalog.=) ANY (ARRAY['running', 'paused'])"
		" ORDER BY c.run_id",
		2, {TEXTOID, TEXTOID}
	},
	[WF_PLAN_BUFFERED_COUNT] = {
		"SELECT pg_catalog.count(*) FROM wf.buffered_events b"
		" WHERE b.tenant_id OPERATOR(pg_catalog.=) $1 AND b.delivered_at IS NULL"
		" AND b.expires_at OPERATOR(pg_catalog.>) $2",
		2, {TEXTOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_BUFFERED_EXISTS] = {
		"SELECT 1 FROM wf.buffered_events b"
		" WHERE b.tenant_id OPERATOR(pg_catalog.=) $1 AND b.key OPERATOR(pg_catalog.=) $2"
		" AND b.event_id OPERATOR(pg_catalog.=) $3 AND b.expires_at OPERATOR(pg_catalog.>) $4",
		4, {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_BUFFERED_INSERT] = {
		/* an expired row of the same event id is as good as none */
		"INSERT INTO wf.buffered_events AS x (tenant_id, key, name, event_id, payload,"
		" sent_by, received_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
		"ON CONFLICT (tenant_id, key, event_id) DO UPDATE SET name = excluded.name,"
		" payload = excluded.payload, sent_by = excluded.sent_by,"
		" received_at = excluded.received_at, expires_at = excluded.expires_at,"
		" delivered_at = NULL, delivered_to = NULL"
		" WHERE x.expires_at OPERATOR(pg_catalog.<=) excluded.received_at "
		"RETURNING x.buffer_id",
		8, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_BUFFERED_FOR_KEY] = {
		"SELECT b.buffer_id, b.name, b.event_id, b.payload, b.received_at"
		" FROM wf.buffered_events b"
		" WHERE b.tenant_id OPERATOR(pg_catalog.=) $1 AND b.key OPERATOR(pg_catalog.=) $2"
		" AND b.delivered_at IS NULL AND b.expires_at OPERATOR(pg_catalog.>) $3"
		" AND b.name OPERATOR(pg_catalog.=) ANY ($4) ORDER BY b.buffer_id",
		4, {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTARRAYOID}
	},
	[WF_PLAN_BUFFERED_DELIVER] = {
		"UPDATE wf.buffered_events b SET delivered_at = $2, delivered_to = $3"
		" WHERE b.buffer_id OPERATOR(pg_catalog.=) $1 AND b.delivered_at IS NULL",
		3, {INT8OID, TIMESTAMPTZOID, UUIDOID}
	},
	[WF_PLAN_CHAIN_HEADS] = {
		"SELECT r.run_id, e.seq, e.hash FROM wf.runs r JOIN wf.events e"
		" ON e.run_id OPERATOR(pg_catalog.=) r.run_id AND e.seq OPERATOR(pg_catalog.=) r.seq"
		" WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 ORDER BY r.run_id",
		1, {TEXTOID}
	},
};

/* shared state of this backend */
static SPIPlanPtr plans[WF_PLAN_COUNT];
static Oid	cached_tasks_relid = InvalidOid;
static Oid	cached_task_seq = InvalidOid;
static Oid	cached_timer_seq = InvalidOid;
static Oid	cached_owner = InvalidOid;	/* of extension wfengine */
static int	n_reset_callbacks = 0;
static void (*reset_callbacks[WF_MAX_RESET_CALLBACKS]) (void);

/* forward declarations */
static void reset_caches(void);

/*
 * WfRegisterResetCallback asks to be called whenever the caches tied to
 * one installation of the extension are thrown away.
 */
void
WfRegisterResetCallback(void (*callback) (void))
{
	if (n_reset_callbacks >= WF_MAX_RESET_CALLBACKS)
		elog(ERROR, "too many wfengine reset callbacks");
	reset_callbacks[n_reset_callbacks++] = callback;
}

/*
 * reset_caches frees every kept plan and calls the reset callbacks.
 */
static void
reset_caches(void)
{
	int			i;

	for (i = 0; i < WF_PLAN_COUNT; i++)
	{
		if (plans[i] != NULL)
		{
			SPI_freeplan(plans[i]);
			plans[i] = NULL;
		}
	}
	cached_task_seq = InvalidOid;
	cached_timer_seq = InvalidOid;
	for (i = 0; i < n_reset_callbacks; i++)
		reset_callbacks[i] ();
}

/*
 * WfApiBegin is called first by every SQL-callable function that touches
 * engine tables.  It connects to SPI and makes sure that the caches
 * belong to the installed extension.
 */
void
WfApiBegin(void)
{
	Oid			nsp;
	Oid			relid = InvalidOid;

	nsp = get_namespace_oid("wf", true);
	if (OidIsValid(nsp))
		relid = get_relname_relid("tasks", nsp);
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"wfengine\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION wfengine.")));

	if (relid != cached_tasks_relid)
	{
		reset_caches();
		cached_tasks_relid = relid;
		cached_task_seq = get_relname_relid("task_id_seq", nsp);
		cached_timer_seq = get_relname_relid("timer_id_seq", nsp);
		cached_owner = WfExtensionOwner();
	}

	/* from here on, the call runs as the extension's owner (tenant.c) */
	WfApiSwitchIn(cached_owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

/*
 * WfApiEnd disconnects from SPI.  Memory allocated while connected is
 * gone afterwards; results must be copied out before.
 */
void
WfApiEnd(void)
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	WfApiSwitchOut();
}

/*
 * WfTaskIdSequence returns the OID of wf.task_id_seq.
 */
Oid
WfTaskIdSequence(void)
{
	if (!OidIsValid(cached_task_seq))
		elog(ERROR, "sequence wf.task_id_seq does not exist");
	return cached_task_seq;
}

/*
 * WfTimerIdSequence returns the OID of wf.timer_id_seq.
 */
Oid
WfTimerIdSequence(void)
{
	if (!OidIsValid(cached_timer_seq))
		elog(ERROR, "sequence wf.timer_id_seq does not exist");
	return cached_timer_seq;
}

/*
 * WfFenceBase returns the high bits of every fence this server hands out
 * now: its timeline id minus one, shifted above the WF_FENCE_SEQ_BITS of
 * wf.fence_seq.  A fence is that base plus the next value of the sequence
 * (WF_NEW_FENCE), so fences are unique and increasing per server history:
 *
 *	- nextval is not rolled back, so a claim that rolls back leaves its
 *	  fence behind, and the next claim of the task gets a higher one;
 *	- a crash restarts the sequence past every value a committed
 *	  transaction drew (its WAL was flushed at that commit);
 *	- a promoted standby is on a new, higher timeline, so its fences are
 *	  above every fence the old primary handed out, even those after the
 *	  last WAL the standby replayed (claims it never saw).
 *
 * On a fresh cluster (timeline 1) the base is 0 and fences are the
 * sequence's values.  In recovery nothing can be claimed (the statement
 * is refused as read-only); the base is 0 then.
 */
int64
WfFenceBase(void)
{
	TimeLineID	tli;

	if (RecoveryInProgress())
		return 0;
	tli = GetWALInsertionTimeLine();
	if (tli < 1 || (uint64) (tli - 1) >= (UINT64CONST(1) << (63 - WF_FENCE_SEQ_BITS)))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("timeline %u is beyond the timelines wfengine fences can name", tli),
				 errdetail("Fences name timelines 1 to %llu in their high bits.",
						   (unsigned long long) (UINT64CONST(1) << (63 - WF_FENCE_SEQ_BITS))),
				 errhint("Restore the database with pg_dump into a fresh cluster, whose timeline starts at 1.")));
	return (int64) (tli - 1) << WF_FENCE_SEQ_BITS;
}

/*
 * try_in_subxact runs fn(arg) inside an internal subtransaction.  On an
 * error the subtransaction is rolled back; an error whose SQLSTATE is
 * not catch_code (0: any) is thrown again, any other is swallowed: its
 * message is returned in *failure (when failure is not NULL) and false is
 * returned, and the caller's transaction goes on.  Resource owner and
 * memory context are restored either way.
 */
static bool
try_in_subxact(void (*fn) (void *arg), void *arg, char **failure, int catch_code)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		if (catch_code != 0 && edata->sqlerrcode != catch_code)
			ReThrowError(edata);
		if (failure != NULL)
			*failure = edata->message;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/*
 * WfTryInSubxact runs fn(arg) in a subtransaction of its own: false (and
 * the message in *failure) when it failed, which changed nothing.
 */
bool
WfTryInSubxact(void (*fn) (void *arg), void *arg, char **failure)
{
	return try_in_subxact(fn, arg, failure, 0);
}

/*
 * WfTryInSubxactCatching runs fn(arg) in a subtransaction of its own, and
 * returns false when it failed with the error sqlerrcode, which changed
 * nothing; any other error is thrown on.
 */
bool
WfTryInSubxactCatching(void (*fn) (void *arg), void *arg, int sqlerrcode)
{
	return try_in_subxact(fn, arg, NULL, sqlerrcode);
}

/* argument of parse_timestamp */
typedef struct ParseTimestampArg
{
	const char *text;
	TimestampTz result;
} ParseTimestampArg;

static void
parse_timestamp(void *arg)
{
	ParseTimestampArg *a = (ParseTimestampArg *) arg;

	a->result = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
														CStringGetDatum(a->text),
														ObjectIdGetDatum(InvalidOid),
														Int32GetDatum(-1)));
}

/*
 * WfParseTimestamp parses text as a finite timestamptz; text that is not
 * one gives false instead of an error.
 */
bool
WfParseTimestamp(const char *text, TimestampTz *result)
{
	ParseTimestampArg a = {text, 0};

	if (!WfTryInSubxact(parse_timestamp, &a, NULL) || TIMESTAMP_NOT_FINITE(a.result))
		return false;
	*result = a.result;
	return true;
}

/*
 * WfPlanSql returns the text of one statement of the plan table (for the
 * check that every name in it is schema-qualified, sqlcheck.c).
 */
const char *
WfPlanSql(WfPlanId id)
{
	Assert(id >= 0 && id < WF_PLAN_COUNT);
	return plan_specs[id].sql;
}

/*
 * WfPreparePlan returns the kept plan of one statement of the plan table,
 * preparing and keeping it on first use.
 */
static SPIPlanPtr
WfPreparePlan(WfPlanId id)
{
	if (plans[id] == NULL)
	{
		const WfPlanSpec *spec = &plan_specs[id];
		SPIPlanPtr	plan;

		if (spec->generic)
			plan = SPI_prepare_cursor(spec->sql, spec->nargs, (Oid *) spec->argtypes,
									  CURSOR_OPT_GENERIC_PLAN);
		else
			plan = SPI_prepare(spec->sql, spec->nargs, (Oid *) spec->argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for wfengine statement %d: %s",
				 (int) id, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		plans[id] = plan;
	}
	return plans[id];
}

/*
 * WfExecPlan runs one statement of the plan table, preparing and keeping
 * it on first use, and returns the number of rows processed.  Any result
 * code other than expected_rc is an internal error.
 */
uint64
WfExecPlan(WfPlanId id, Datum *values, const char *nulls,
		   bool read_only, long tcount, int expected_rc)
{
	int			rc;

	rc = SPI_execute_plan(WfPreparePlan(id), values, nulls, read_only, tcount);
	if (rc != expected_rc)
		elog(ERROR, "wfengine statement %d failed: %s",
			 (int) id, SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * WfExecPlanFresh runs a read-only statement of the plan table with the
 * latest snapshot, also under REPEATABLE READ and SERIALIZABLE, whose
 * transaction snapshot would not show what transactions committed after
 * it began: for counts that a quota compares with its limit after taking
 * the quota's lock (quota.c), as the RI triggers check for new rows.
 */
uint64
WfExecPlanFresh(WfPlanId id, Datum *values, const char *nulls, long tcount)
{
	int			rc;

	(void) WfPreparePlan(id);
	rc = SPI_execute_snapshot(plans[id], values, nulls, GetLatestSnapshot(),
							  InvalidSnapshot, true, false, tcount);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "wfengine statement %d failed: %s",
			 (int) id, SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * WfGetDatum returns column col (1-based) of result row row.
 */
Datum
WfGetDatum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 col, isnull);
}

/*
 * WfGetDatumNotNull returns a column that cannot be NULL.
 */
Datum
WfGetDatumNotNull(int row, int col)
{
	bool		isnull;
	Datum		d = WfGetDatum(row, col, &isnull);

	if (isnull)
		elog(ERROR, "unexpected NULL in column %d of a wfengine statement", col);
	return d;
}

/*
 * WfGetTextOrNull returns a text column as a C string, or NULL.
 */
char *
WfGetTextOrNull(int row, int col)
{
	bool		isnull;
	Datum		d = WfGetDatum(row, col, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}
