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
 * EXTENSION it differs, and everything is thrown away and rebuilt.  The
 * same happens when the installed version changes (ALTER EXTENSION
 * wfengine UPDATE), and before anything else WfApiBegin refuses a schema
 * older than this library needs (version.c).
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
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "spi_util.h"
#include "tenant.h"
#include "version.h"

#define WF_MAX_RESET_CALLBACKS 16

/* one statement of the plan table */


/* shared state of this backend */
static Oid	cached_tasks_relid = InvalidOid;
static Oid	cached_task_seq = InvalidOid;
static Oid	cached_timer_seq = InvalidOid;
static Oid	cached_fence_seq = InvalidOid;
static Oid	cached_owner = InvalidOid;	/* of extension wfengine */
static char *cached_version = NULL; /* the installed version the caches
									 * were built for, in TopMemoryContext */
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
 * lookup_begin: for a statement marked lookup, enable_seqscan off until
 * lookup_end (a GUC nest level of its own, as a function's SET clause;
 * an error pops it with the (sub)transaction), so that every plan of it,
 * made on first use or again after an invalidation, reads by index.  A
 * kept plan is made once and reused: made while a table was tiny (a new
 * shard, wf.tasks between vacuums: completed attempts are deleted, so it
 * holds few live rows) it may scan the whole table, and go on doing so
 * per call once the table has grown.  The online verification of a
 * partition move (wf.verify_partition, a million runs) read wf.tasks whole
 * for every run that way, 4 ms a run where the index takes 0.05 ms.
 * Returns the nest level to pop, or -1.
 */
static int
lookup_begin(const WfPlanSpec *spec)
{
	int			nest;

	if (!spec->lookup)
		return -1;
	nest = NewGUCNestLevel();
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

static void
lookup_end(int nest)
{
	if (nest >= 0)
		AtEOXact_GUC(true, nest);
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
	int			nest = lookup_begin(&table->specs[id]);

	rc = SPI_execute_plan(prepare_statement(table, id), values, nulls, read_only, tcount);
	lookup_end(nest);
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
	int			nest = lookup_begin(&table->specs[id]);

	rc = SPI_execute_snapshot(prepare_statement(table, id), values, nulls,
							  GetLatestSnapshot(), InvalidSnapshot, true, false, tcount);
	lookup_end(nest);
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

	cached_task_seq = InvalidOid;
	cached_timer_seq = InvalidOid;
	cached_fence_seq = InvalidOid;
	for (i = 0; i < n_reset_callbacks; i++)
		reset_callbacks[i] ();
}

/*
 * WfApiBegin is called first by every SQL-callable function that touches
 * engine tables.  It refuses a schema older than WF_MIN_SCHEMA_VERSION,
 * connects to SPI and makes sure that the caches belong to the installed
 * extension and version.  A call inside another of the same transaction
 * (wf.complete_and_claim's report and claim) skips the checks, which the
 * outer one made: the extension cannot be dropped or updated under it.
 */
void
WfApiBegin(void)
{
	Oid			nsp;
	Oid			relid = InvalidOid;
	const char *version;

	if (WfInApiCall() && cached_version != NULL)
	{
		WfApiSwitchIn(cached_owner);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		return;
	}
	nsp = get_namespace_oid("wf", true);
	if (OidIsValid(nsp))
		relid = get_relname_relid("tasks", nsp);
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"wfengine\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION wfengine.")));

	/* a database not updated since the library was installed (version.c) */
	version = WfRequireSchemaVersion(WF_MIN_SCHEMA_VERSION);

	if (relid != cached_tasks_relid || cached_version == NULL ||
		strcmp(version, cached_version) != 0)
	{
		if (cached_version != NULL)
			pfree(cached_version);
		cached_version = MemoryContextStrdup(TopMemoryContext, version);
		reset_caches();
		cached_tasks_relid = relid;
		cached_task_seq = get_relname_relid("task_id_seq", nsp);
		cached_timer_seq = get_relname_relid("timer_id_seq", nsp);
		cached_fence_seq = get_relname_relid("fence_seq", nsp);
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
 * WfFenceSequence returns the OID of wf.fence_seq.
 */
Oid
WfFenceSequence(void)
{
	if (!OidIsValid(cached_fence_seq))
		elog(ERROR, "sequence wf.fence_seq does not exist");
	return cached_fence_seq;
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
try_in_subxact(void (*fn) (void *arg), void *arg, char **failure, int catch_code,
			   int *sqlerrcode)
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
		if (sqlerrcode != NULL)
			*sqlerrcode = edata->sqlerrcode;
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
	return try_in_subxact(fn, arg, failure, 0, NULL);
}

/*
 * WfTryInSubxactCode is WfTryInSubxact that also returns the SQLSTATE of
 * the error in *sqlerrcode when it failed.
 */
bool
WfTryInSubxactCode(void (*fn) (void *arg), void *arg, char **failure, int *sqlerrcode)
{
	return try_in_subxact(fn, arg, failure, 0, sqlerrcode);
}

/*
 * WfTryInSubxactCatching runs fn(arg) in a subtransaction of its own, and
 * returns false when it failed with the error sqlerrcode, which changed
 * nothing; any other error is thrown on.
 */
bool
WfTryInSubxactCatching(void (*fn) (void *arg), void *arg, int sqlerrcode)
{
	return try_in_subxact(fn, arg, NULL, sqlerrcode, NULL);
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

/*
 * WfSetTextOrNull sets parameter i of a statement (values, nulls) to the
 * text s, or to NULL when s is NULL: WfGetTextOrNull's counterpart.
 */
void
WfSetTextOrNull(Datum *values, char *nulls, int i, const char *s)
{
	if (s != NULL)
		values[i] = CStringGetTextDatum(s);
	else
		nulls[i] = 'n';
}
