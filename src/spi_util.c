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

#include "runstore.h"
#include "spi_util.h"
#include "wfengine.h"

#define WF_MAX_RESET_CALLBACKS 16

/* one statement of the plan table */

/* the statements not yet moved next to their code (an old-style table) */
typedef struct WfOldPlanSpec
{
	const char *sql;
	int			nargs;
	Oid			argtypes[WF_MAX_PLAN_ARGS];
	bool		generic;
} WfOldPlanSpec;

static const WfOldPlanSpec plan_specs[WF_PLAN_COUNT] = {
	[WF_PLAN_DEF_LATEST] = {
		"SELECT d.definition_id, d.version FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"ORDER BY d.version DESC LIMIT 1",
		2, {TEXTOID, TEXTOID}
	},
	[WF_PLAN_DEF_BY_DIGEST] = {
		"SELECT d.version, d.definition_id FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"AND d.digest OPERATOR(pg_catalog.=) $3",
		3, {TEXTOID, TEXTOID, BYTEAOID}
	},
	[WF_PLAN_RUN_BY_KEY] = {
		"SELECT r.run_id, r.definition_name, r.input, r.definition_version, r.definition_id,"
		" r.input_digest FROM wf.runs r "
		"WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 "
		"AND r.idempotency_key OPERATOR(pg_catalog.=) $2",
		2, {TEXTOID, TEXTOID}
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
	[WF_PLAN_TASK_PEEK] = {
		"SELECT t.status, t.fence, r.status FROM wf.tasks t JOIN wf.runs r"
		" ON r.run_id OPERATOR(pg_catalog.=) t.run_id "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {INT8OID, TEXTOID}
	},
	[WF_PLAN_TIMERS_UNHOLD] = {
		"UPDATE wf.timers tm SET fire_at = $2, outcome = NULL "
		"WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		" AND tm.outcome OPERATOR(pg_catalog.=) 'held'",
		2, {UUIDOID, TIMESTAMPTZOID}
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
	[WF_PLAN_EVENT_RUNS] = {
		"SELECT c.run_id FROM wf.correlations c JOIN wf.runs r"
		" ON r.run_id OPERATOR(pg_catalog.=) c.run_id"
		" WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.key OPERATOR(pg_catalog.=) $2"
		" AND r.tenant_id OPERATOR(pg_catalog.=) $1"
		" AND r.status OPERATOR(pg_catalog.=) ANY (ARRAY['running', 'paused'])"
		" ORDER BY c.run_id",
		2, {TEXTOID, TEXTOID}
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

/* the registered plan tables */
static WfPlanTable *plan_tables = NULL;

/* forward declarations */
static void reset_caches(void);

/*
 * WfRegisterPlanTable registers the statements of one subsystem with the
 * plan cache.  Called from _PG_init only.
 */
void
WfRegisterPlanTable(WfPlanTable *table)
{
	table->plans = MemoryContextAllocZero(TopMemoryContext,
										  sizeof(SPIPlanPtr) * table->nspecs);
	table->next = plan_tables;
	plan_tables = table;
}

/*
 * WfPlanTables returns the registered plan tables (a list through next),
 * for the check that every name in them is schema-qualified (sqlcheck.c).
 */
const WfPlanTable *
WfPlanTables(void)
{
	return plan_tables;
}

/*
 * prepare_statement returns the kept plan of statement id of table,
 * preparing and keeping it on first use.
 */
static SPIPlanPtr
prepare_statement(WfPlanTable *table, int id)
{
	const WfPlanSpec *spec;
	SPIPlanPtr	plan;

	Assert(id >= 0 && id < table->nspecs && table->plans != NULL);
	if (table->plans[id] != NULL)
		return table->plans[id];
	spec = &table->specs[id];
	if (spec->generic)
		plan = SPI_prepare_cursor(spec->sql, spec->nargs, (Oid *) spec->argtypes,
								  CURSOR_OPT_GENERIC_PLAN);
	else
		plan = SPI_prepare(spec->sql, spec->nargs, (Oid *) spec->argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for wfengine statement %s.%s: %s",
			 table->owner, spec->name, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed for wfengine statement %s.%s",
			 table->owner, spec->name);
	table->plans[id] = plan;
	return plan;
}

/*
 * WfPlanExec runs statement id of table, preparing and keeping it on
 * first use, and returns the number of rows processed.  Any result code
 * other than expected_rc is an internal error, naming the statement.
 */
uint64
WfPlanExec(WfPlanTable *table, int id, Datum *values, const char *nulls,
		   bool read_only, long tcount, int expected_rc)
{
	int			rc;

	rc = SPI_execute_plan(prepare_statement(table, id), values, nulls, read_only, tcount);
	if (rc != expected_rc)
		elog(ERROR, "wfengine statement %s.%s failed: %s",
			 table->owner, table->specs[id].name, SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * WfPlanExecFresh runs a read-only statement of table with the latest
 * snapshot (see WfExecPlanFresh).
 */
uint64
WfPlanExecFresh(WfPlanTable *table, int id, Datum *values, const char *nulls, long tcount)
{
	int			rc;

	rc = SPI_execute_snapshot(prepare_statement(table, id), values, nulls,
							  GetLatestSnapshot(), InvalidSnapshot, true, false, tcount);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "wfengine statement %s.%s failed: %s",
			 table->owner, table->specs[id].name, SPI_result_code_string(rc));
	return SPI_processed;
}

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
	WfPlanTable *t;

	for (t = plan_tables; t != NULL; t = t->next)
	{
		for (i = 0; i < t->nspecs; i++)
		{
			if (t->plans[i] != NULL)
			{
				SPI_freeplan(t->plans[i]);
				t->plans[i] = NULL;
			}
		}
	}

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
		const WfOldPlanSpec *spec = &plan_specs[id];
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
