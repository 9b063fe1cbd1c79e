/*-------------------------------------------------------------------------
 *
 * spi_util.c
 *	  Every SQL statement wfengine runs, prepared once per backend and kept.
 *
 * All SQL that the C code issues lives in the table below.  Each entry is
 * prepared on first use with SPI_prepare, saved with SPI_keepplan and run
 * with SPI_execute_plan; user data only ever travels as parameters.
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
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "spi_util.h"

#define WF_MAX_PLAN_ARGS 32
#define WF_MAX_RESET_CALLBACKS 4

/* one statement of the plan table */
typedef struct WfPlanSpec
{
	const char *sql;
	int			nargs;
	Oid			argtypes[WF_MAX_PLAN_ARGS];
} WfPlanSpec;

/* the snapshot columns, in the order WfRunStateFromTuple reads them */
#define WF_RUN_COLUMNS \
	"r.run_id, r.tenant_id, r.definition_id, r.status, r.current_step, " \
	"r.seq, r.context, r.output, r.last_hash, r.updated_at, r.finished_at, " \
	"r.current_attempt, r.current_task "

/* the events of a transition, passed as parallel arrays */
#define WF_EVENTS_FROM_ARRAYS(seq, type, step, attempt, payload, hash) \
	"ROWS FROM (pg_catalog.unnest(" seq "), pg_catalog.unnest(" type "), " \
	"pg_catalog.unnest(" step "), pg_catalog.unnest(" attempt "), " \
	"pg_catalog.unnest(" payload "), pg_catalog.unnest(" hash ")) " \
	"AS u(seq, type, step, attempt, payload, hash) "

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
		"SELECT d.version FROM wf.definitions d "
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
		"  idempotency_key, last_hash, created_at, updated_at, current_attempt, current_task)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $30, $31)"
		" ON CONFLICT (tenant_id, idempotency_key) DO NOTHING"
		" RETURNING run_id),"
		" e AS ("
		" INSERT INTO wf.events (run_id, seq, tenant_id, type, step, attempt,"
		"  payload, actor, created_at, hash)"
		" SELECT r.run_id, u.seq, $2, u.type, u.step, u.attempt, u.payload, $20, $13, u.hash"
		" FROM r, " WF_EVENTS_FROM_ARRAYS("$14", "$15", "$16", "$17", "$18", "$19")
		"),"
		" t AS ("
		" INSERT INTO wf.tasks (task_id, tenant_id, run_id, step, visit, attempt,"
		"  queue, activity, status, available_at, idempotency_key, input, created_at)"
		" SELECT $21, $2, r.run_id, $22, $23, $24, $25, $26, 'ready', $27, $28, $29, $13"
		" FROM r)"
		" SELECT pg_catalog.count(*) FROM r",
		31, {UUIDOID, TEXTOID, INT8OID, TEXTOID, INT4OID, TEXTOID, TEXTOID, INT4OID,
			JSONBOID, JSONBOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID,
			INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID, JSONBARRAYOID,
			BYTEAARRAYOID, TEXTOID,
			INT8OID, TEXTOID, INT4OID, INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID,
		TEXTOID, JSONBOID, INT4OID, INT8OID}
	},
	[WF_PLAN_RUN_BY_KEY] = {
		"SELECT r.run_id, r.definition_name, r.input, r.definition_version FROM wf.runs r "
		"WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 "
		"AND r.idempotency_key OPERATOR(pg_catalog.=) $2",
		2, {TEXTOID, TEXTOID}
	},
	[WF_PLAN_LOCK_TASK_AND_RUN] = {
		"SELECT " WF_RUN_COLUMNS ","
		" t.status, t.fence, t.step, t.visit, t.attempt, t.worker, t.input "
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
		"UPDATE wf.tasks t SET status = $3, output = $4, error = $5, finished_at = $6 "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.fence OPERATOR(pg_catalog.=) $2 "
		"AND t.status OPERATOR(pg_catalog.=) 'leased'",
		6, {INT8OID, INT8OID, TEXTOID, JSONBOID, JSONBOID, TIMESTAMPTZOID}
	},
	[WF_PLAN_TASKS_OF_RUN] = {
		"SELECT t.task_id, t.step, t.attempt, t.status, t.fence, t.output, t.error "
		"FROM wf.tasks t WHERE t.run_id OPERATOR(pg_catalog.=) $1 ORDER BY t.task_id",
		1, {UUIDOID}
	},
	[WF_PLAN_RUN_IDENTITY] = {
		"SELECT r.definition_name, r.definition_version, r.input, r.idempotency_key, r.created_at "
		"FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		1, {UUIDOID}
	},
	[WF_PLAN_TRANSITION] = {
		"WITH e AS ("
		" INSERT INTO wf.events (run_id, seq, tenant_id, type, step, attempt,"
		"  payload, actor, created_at, hash)"
		" SELECT $1, u.seq, $2, u.type, u.step, u.attempt, u.payload, $3, $4, u.hash"
		" FROM " WF_EVENTS_FROM_ARRAYS("$5", "$6", "$7", "$8", "$9", "$10")
		"),"
		" t AS ("
		" INSERT INTO wf.tasks (task_id, tenant_id, run_id, step, visit, attempt,"
		"  queue, activity, status, available_at, idempotency_key, input, created_at)"
		" SELECT $11, $2, $1, $12, $13, $14, $15, $16, 'ready', $17, $18, $19, $4"
		" WHERE $11 IS NOT NULL)"
		" UPDATE wf.runs r SET status = $20, current_step = $21, seq = $22, context = $23,"
		"  output = $24, last_hash = $25, updated_at = $4, finished_at = $26,"
		"  current_attempt = $27, current_task = $28"
		" WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		28, {UUIDOID, TEXTOID, TEXTOID, TIMESTAMPTZOID,
			INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID, JSONBARRAYOID, BYTEAARRAYOID,
			INT8OID, TEXTOID, INT4OID, INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, JSONBOID,
		TEXTOID, TEXTOID, INT4OID, JSONBOID, JSONBOID, BYTEAOID, TIMESTAMPTZOID, INT4OID, INT8OID}
	},
	[WF_PLAN_CLAIM] = {
		"WITH c AS ("
		" SELECT t.task_id FROM wf.tasks t"
		" WHERE t.tenant_id OPERATOR(pg_catalog.=) $1 AND t.queue OPERATOR(pg_catalog.=) $2"
		"  AND t.status IN ('ready', 'leased')"
		"  AND t.available_at OPERATOR(pg_catalog.<=) $5"
		" ORDER BY t.available_at, t.task_id"
		" LIMIT $3"
		" FOR UPDATE SKIP LOCKED)"
		" UPDATE wf.tasks t SET status = 'leased',"
		"  fence = t.fence OPERATOR(pg_catalog.+) 1,"
		"  deliveries = t.deliveries OPERATOR(pg_catalog.+) 1,"
		"  worker = $4, claimed_at = $5,"
		"  lease_expires_at = $5 OPERATOR(pg_catalog.+) $6,"
		"  available_at = $5 OPERATOR(pg_catalog.+) $6"
		" FROM c WHERE t.task_id OPERATOR(pg_catalog.=) c.task_id"
		" RETURNING t.task_id, t.run_id, t.step, t.attempt, t.fence, t.idempotency_key,"
		"  t.input, t.lease_expires_at, t.queue, t.activity, t.deliveries",
		6, {TEXTOID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID, INTERVALOID}
	},
	[WF_PLAN_EVENTS_GET] = {
		"SELECT e.seq, e.type, e.step, e.attempt, e.payload, e.actor, e.created_at,"
		" e.hash, e.tenant_id FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 ORDER BY e.seq",
		1, {UUIDOID}
	},
};

/* shared state of this backend */
static SPIPlanPtr plans[WF_PLAN_COUNT];
static Oid	cached_tasks_relid = InvalidOid;
static Oid	cached_task_seq = InvalidOid;
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
	}

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
 * WfExecPlan runs one statement of the plan table, preparing and keeping
 * it on first use, and returns the number of rows processed.  Any result
 * code other than expected_rc is an internal error.
 */
uint64
WfExecPlan(WfPlanId id, Datum *values, const char *nulls,
		   bool read_only, long tcount, int expected_rc)
{
	int			rc;

	if (plans[id] == NULL)
	{
		const WfPlanSpec *spec = &plan_specs[id];
		SPIPlanPtr	plan;

		plan = SPI_prepare(spec->sql, spec->nargs, (Oid *) spec->argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for wfengine statement %d: %s",
				 (int) id, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		plans[id] = plan;
	}

	rc = SPI_execute_plan(plans[id], values, nulls, read_only, tcount);
	if (rc != expected_rc)
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
