/*-------------------------------------------------------------------------
 *
 * rowwrite.c
 *	  Locking, inserting and updating rows of the engine's tables without
 *	  a statement: what a transition reads and writes on its hot path.
 *
 * Why.  A statement run through SPI, even from a kept plan, builds its
 * executor tree again on every execution: ModifyTable or LockRows nodes,
 * the scans below them, projections, the parameters (for the events, six
 * unnest() calls over arrays built only to be taken apart again) and the
 * statement's finish.  For the few rows a transition locks and writes,
 * found by primary key, that work was more than the reads and writes
 * themselves (docs/benchmarks.md: callgrind per step).  Here a row goes
 * from its values to the table the way logical replication applies a
 * change (ExecSimpleRelationInsert, ExecSimpleRelationUpdate): the
 * table's NOT NULL and CHECK constraints, AFTER ROW triggers (the foreign
 * key checks of wf.runs among them), every index with its uniqueness and
 * predicate, HOT updates and WAL are PostgreSQL's own, exactly as for the
 * statement.  WfRowLock locks as SELECT ... FOR UPDATE does (ExecLockRows:
 * the latest version under READ COMMITTED, a serialization failure under
 * REPEATABLE READ when the row changed since the snapshot); WfRowScanNext
 * locks the rows of an index scan as FOR UPDATE SKIP LOCKED does (the
 * claim, claim.c).
 *
 * What a statement would add and the writer does itself.  Row security:
 * the engine's tables have FORCE ROW LEVEL SECURITY and a policy
 * "tenant_id = wf.current_tenant()"; where row security applies to the
 * current role (check_enable_rls), a row of another tenant is not found
 * and a row written must be of the current tenant, with the error the
 * policy's WITH CHECK would raise.  Privileges: the writer runs inside an
 * API call, as the extension's owner (tenant.c), who owns the tables.
 * Visibility: each opening advances the command counter first, so a row
 * sees what the statements before wrote, and the statements after see it.
 * A row to update is found in its latest version (SnapshotSelf) while the
 * caller holds it locked: at the place where WfRowLock locked it, when
 * that is still the latest version, else through the primary key.
 *
 * A table is described by WfRowTable: its name in schema wf, the columns
 * a row gives or reads, and the equality of its primary key.  The
 * attribute numbers are looked up once per installation of the extension
 * (reset with the kept plans, spi_util.c); an insert into a table whose
 * description leaves out a column with a default or NOT NULL is an
 * error, not a silently different row.
 *
 * What a statement prepares again each time, the writer keeps: the
 * table's CHECK constraints read back from their node trees and prepared,
 * and the IndexInfo of each index with its predicate (and expressions)
 * prepared, in a memory context of the table's (keep_prepared).  They are
 * what ExecOpenIndices and ExecRelCheck would build, and the executor
 * uses them as its own (ri_IndexRelationInfo, ri_ConstraintExprs).  Any
 * invalidation of the table's relcache entry (an index or constraint
 * added or dropped, a VACUUM's new statistics, a reset of the whole
 * cache) or of a function (pg_proc) marks them stale, and the next opening
 * prepares them again; the stale ones are freed with the transaction that
 * replaced them, after every writer that may use them has closed.  The
 * indexes themselves are opened and locked as ExecOpenIndices does, but
 * only when the writer first needs them (an insert, an update that is not
 * HOT, a lookup or scan by index): a run's snapshot updated HOT at every
 * step writes no index entry, and its table's five indexes were opened
 * and closed for nothing (bench/callgrind.sh).  The table's lock, taken
 * first, keeps the list of indexes from changing under the writer: an
 * index added concurrently is not ready for inserts in this transaction,
 * one dropped concurrently stays until the transaction ends.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/rowwrite.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/toast_internals.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "executor/nodeModifyTable.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_relation.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/relcache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "rowwrite.h"
#include "tenant.h"

/* the tables whose attribute numbers are known */
static WfRowTable *resolved_tables = NULL;

/* the invalidation callbacks of the kept preparations are registered */
static bool kept_callbacks = false;

/*
 * kept_relcache_changed marks the preparations of a table stale when its
 * relcache entry is invalidated (relid), or every entry is (InvalidOid),
 * and forgets where its last locked row was.
 */
static void
kept_relcache_changed(Datum arg, Oid relid)
{
	WfRowTable *t;

	for (t = resolved_tables; t != NULL; t = t->next)
		if (!OidIsValid(relid) || relid == t->relid)
		{
			t->kept_stale = true;
			/* a new file (TRUNCATE) may not have the locked row's block */
			t->locked_lxid = InvalidLocalTransactionId;
		}
}

/*
 * kept_function_changed marks every table's preparations stale when a
 * function changes (a check or an index predicate may call it).
 */
static void
kept_function_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	WfRowTable *t;

	for (t = resolved_tables; t != NULL; t = t->next)
		t->kept_stale = true;
}

/*
 * resolve_table looks up the table and the attribute numbers of its
 * columns, and refuses a description that leaves out a column with a
 * default or NOT NULL.
 */
static void
resolve_table(WfRowTable *t)
{
	Oid			relid = get_relname_relid(t->relname, get_namespace_oid("wf", false));
	Relation	rel;
	TupleDesc	desc;
	AttrNumber *attnums;
	bool	   *given;
	int			i;

	if (!OidIsValid(relid))
		elog(ERROR, "relation wf.%s does not exist", t->relname);
	if (!kept_callbacks)
	{
		CacheRegisterRelcacheCallback(kept_relcache_changed, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, kept_function_changed, (Datum) 0);
		kept_callbacks = true;
	}
	rel = table_open(relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	attnums = palloc(sizeof(AttrNumber) * t->ncolumns);
	given = palloc0(sizeof(bool) * desc->natts);
	t->tenant_column = -1;
	for (i = 0; i < t->ncolumns; i++)
	{
		AttrNumber	a = attnameAttNum(rel, t->columns[i], false);

		if (a <= 0)
			elog(ERROR, "column \"%s\" of relation wf.%s does not exist",
				 t->columns[i], t->relname);
		attnums[i] = a;
		given[a - 1] = true;
		if (strcmp(t->columns[i], "tenant_id") == 0)
			t->tenant_column = i;
	}
	t->missing = NULL;
	for (i = 0; i < desc->natts && t->missing == NULL; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && !given[i] &&
			(att->attnotnull || att->atthasdef || att->attgenerated))
			t->missing = MemoryContextStrdup(TopMemoryContext, NameStr(att->attname));
	}
	pfree(given);
	/* kept for the session, once nothing can fail any more */
	t->natts = desc->natts;
	t->attnums = MemoryContextAlloc(TopMemoryContext, sizeof(AttrNumber) * t->ncolumns);
	memcpy(t->attnums, attnums, sizeof(AttrNumber) * t->ncolumns);
	pfree(attnums);
	t->relid = relid;
	t->next = resolved_tables;
	resolved_tables = t;
	table_close(rel, NoLock);
}

/*
 * WfRowWriteReset forgets the tables looked up (a reset callback: the
 * extension was installed again or updated).
 */
void
WfRowWriteReset(void)
{
	WfRowTable *t = resolved_tables;

	while (t != NULL)
	{
		WfRowTable *next = t->next;

		if (t->attnums != NULL)
			pfree(t->attnums);
		if (t->missing != NULL)
			pfree((char *) t->missing);
		t->attnums = NULL;
		t->missing = NULL;
		/* a writer of this transaction may still use them: freed with it */
		if (t->kept != NULL && IsTransactionState())
			MemoryContextSetParent(t->kept, TopTransactionContext);
		else if (t->kept != NULL)
			MemoryContextDelete(t->kept);
		t->kept = NULL;
		t->kept_stale = false;
		t->relid = InvalidOid;
		t->natts = 0;
		t->locked_lxid = InvalidLocalTransactionId;
		t->next = NULL;
		t = next;
	}
	resolved_tables = NULL;
}

/*
 * prepare_expr prepares an expression for evaluation outside any plan, as
 * ExecPrepareExpr does, in the current memory context.
 */
static ExprState *
prepare_expr(Expr *node)
{
	return ExecInitExpr(expression_planner(node), NULL);
}

/*
 * keep_prepared prepares the table's CHECK constraints and the IndexInfo
 * of its indexes, as ExecRelCheck and ExecOpenIndices would, and keeps
 * them in a memory context of the table's.  The ones they replace are
 * freed at the end of the transaction (a writer still open may use them).
 */
static void
keep_prepared(WfRowTable *t, Relation rel)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	MemoryContext cxt;
	MemoryContext old;
	List	   *indexes;
	ListCell   *lc;
	int			nchecks = constr != NULL ? constr->num_check : 0;
	ExprState **checks;
	Oid		   *index_oids;
	IndexInfo **index_info;
	AttrNumber	key_attnum = InvalidAttrNumber;
	int			i;

	/* under the transaction until it is complete, so that an error frees it */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "wfengine row writer",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	checks = palloc0(sizeof(ExprState *) * Max(nchecks, 1));
	for (i = 0; i < nchecks; i++)
		checks[i] = prepare_expr(stringToNode(constr->check[i].ccbin));

	indexes = RelationGetForm(rel)->relhasindex ? RelationGetIndexList(rel) : NIL;
	index_oids = palloc0(sizeof(Oid) * Max(list_length(indexes), 1));
	index_info = palloc0(sizeof(IndexInfo *) * Max(list_length(indexes), 1));
	i = 0;
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);
		IndexInfo  *ii = BuildIndexInfo(index);
		ListCell   *e;

		if (index->rd_index->indisprimary)
			key_attnum = index->rd_index->indkey.values[0];
		if (ii->ii_Predicate != NIL)
			ii->ii_PredicateState =
				ExecInitQual((List *) expression_planner((Expr *) ii->ii_Predicate), NULL);
		foreach(e, ii->ii_Expressions)
			ii->ii_ExpressionsState = lappend(ii->ii_ExpressionsState,
											  prepare_expr((Expr *) lfirst(e)));
		ii->ii_Context = cxt;
		index_close(index, RowExclusiveLock);
		index_oids[i] = lfirst_oid(lc);
		index_info[i] = ii;
		i++;
	}
	MemoryContextSwitchTo(old);

	if (t->kept != NULL)
		MemoryContextSetParent(t->kept, TopTransactionContext);
	MemoryContextSetParent(cxt, CacheMemoryContext);
	t->kept = cxt;
	t->kept_stale = false;
	t->nchecks = nchecks;
	t->checks = checks;
	t->nindexes = i;
	t->index_oids = index_oids;
	t->index_info = index_info;
	t->key_attnum = key_attnum;
}

/*
 * open_indexes opens and locks the table's indexes for the writer, with
 * the kept IndexInfo, as ExecOpenIndices does.
 */
static void
open_indexes(WfRowWriter *w)
{
	WfRowTable *t = w->table;
	ResultRelInfo *rri = w->rri;
	MemoryContext old;
	int			i;

	if (w->indexes_open)
		return;
	w->indexes_open = true;
	if (t->nindexes == 0)
		return;
	/* in the executor state's memory, as the rest of the writer */
	old = MemoryContextSwitchTo(w->estate->es_query_cxt);
	rri->ri_NumIndices = t->nindexes;
	rri->ri_IndexRelationDescs = palloc(sizeof(Relation) * t->nindexes);
	rri->ri_IndexRelationInfo = palloc(sizeof(IndexInfo *) * t->nindexes);
	for (i = 0; i < t->nindexes; i++)
	{
		rri->ri_IndexRelationDescs[i] = index_open(t->index_oids[i], RowExclusiveLock);
		rri->ri_IndexRelationInfo[i] = t->index_info[i];
	}
	MemoryContextSwitchTo(old);
}

/*
 * Writers kept open across the transitions of one call.  A batch of
 * reports (wf.complete_tasks_and_claim and its kin, batch.c) writes the
 * same three tables for each report; opening a table with its indexes and
 * an executor state, and closing them again, was about a sixth of each
 * report's instructions.  Between WfRowWritersKeep and WfRowWritersRelease
 * the first writer of each table stays open (in keep_cxt, its relations
 * held by the transaction's resource owner), and each WfRowWriterOpen of
 * that table takes it again: the command counter still advances at each
 * open and close, and each use is its own frame of AFTER triggers, so what
 * one transition writes the next sees, as with writers of their own.  An
 * error inside the scope must WfRowWritersForget them (the caller's
 * PG_CATCH): the abort releases what they hold.
 */
#define WF_KEPT_WRITERS 4

typedef struct KeptWriter
{
	WfRowTable *table;
	WfRowWriter w;
	bool		in_use;
} KeptWriter;

static KeptWriter kept_writers[WF_KEPT_WRITERS];
static int	nkept = 0;
static int	keep_depth = 0;
static LocalTransactionId keep_lxid = InvalidLocalTransactionId;
static MemoryContext keep_cxt = NULL;

static void close_writer(WfRowWriter *w);
static void update_row(WfRowWriter *w, TupleTableSlot *slot);
static bool row_of_tenant(WfRowTable *t, TupleTableSlot *slot, const char *tenant);
static void copy_row(WfRowTable *t, Relation rel, TupleTableSlot *slot, Datum *values,
					 bool *nulls);

/*
 * WfRowWritersKeep begins a scope in which writers stay open (nested
 * scopes count).
 */
void
WfRowWritersKeep(void)
{
	if (keep_depth > 0 && keep_lxid != MyProc->lxid)
		WfRowWritersForget();
	if (keep_depth++ > 0)
		return;
	keep_lxid = MyProc->lxid;
	nkept = 0;
	keep_cxt = AllocSetContextCreate(CurTransactionContext, "wfengine kept writers",
									 ALLOCSET_DEFAULT_SIZES);
}

/*
 * WfRowWritersRelease ends the scope: the outermost closes the writers
 * kept open.
 */
void
WfRowWritersRelease(void)
{
	int			i;

	if (keep_depth <= 0 || --keep_depth > 0)
		return;
	for (i = 0; i < nkept; i++)
	{
		if (kept_writers[i].in_use)
			elog(ERROR, "wfengine writer of wf.%s still in use at the end of its scope",
				 kept_writers[i].table->relname);
		close_writer(&kept_writers[i].w);
	}
	nkept = 0;
	MemoryContextDelete(keep_cxt);
	keep_cxt = NULL;
}

/*
 * WfRowWritersForget drops the scope without closing its writers: after
 * an error, whose abort releases their relations and memory.
 */
void
WfRowWritersForget(void)
{
	keep_depth = 0;
	nkept = 0;
	keep_cxt = NULL;
	keep_lxid = InvalidLocalTransactionId;
}

/*
 * found_slot makes the slot of the rows a writer finds, in the executor
 * state's memory: a writer kept open (WfRowWritersKeep) outlives the memory
 * of the call that first needed it.
 */
static void
found_slot(WfRowWriter *w)
{
	MemoryContext old = MemoryContextSwitchTo(w->estate->es_query_cxt);

	w->found = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(w->rel),
									  table_slot_callbacks(w->rel));
	MemoryContextSwitchTo(old);
}

/*
 * WfRowWriterOpen opens the table for writes: the relation with its
 * indexes (RowExclusiveLock, kept to the end of the transaction, as a
 * statement keeps it), and an executor state for its constraints,
 * triggers and index predicates.
 */
void
WfRowWriterOpen(WfRowWriter *w, WfRowTable *table)
{
	RangeTblEntry *rte;
	MemoryContext old = NULL;
	int			i;

	/* see what the statements before wrote, and write after them */
	CommandCounterIncrement();
	if (keep_depth > 0 && keep_lxid != MyProc->lxid)
		WfRowWritersForget();	/* left by a transaction that failed */
	for (i = 0; i < nkept && keep_depth > 0; i++)
	{
		KeptWriter *k = &kept_writers[i];

		if (k->table != table || k->in_use)
			continue;
		*w = k->w;
		w->estate->es_output_cid = GetCurrentCommandId(true);
		w->estate->es_snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : InvalidSnapshot;
		if (w->after_triggers)
			AfterTriggerBeginQuery();
		k->in_use = true;
		return;
	}
	if (keep_depth > 0 && nkept < WF_KEPT_WRITERS)
		old = MemoryContextSwitchTo(keep_cxt);
	if (!OidIsValid(table->relid))
		resolve_table(table);
	w->table = table;
	w->rel = table_open(table->relid, RowExclusiveLock);
	if (RelationGetDescr(w->rel)->natts != table->natts)
		elog(ERROR, "relation wf.%s changed its columns; reconnect to use it",
			 table->relname);

	w->estate = CreateExecutorState();
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = table->relid;
	rte->relkind = RELKIND_RELATION;
	rte->rellockmode = RowExclusiveLock;
	ExecInitRangeTable(w->estate, list_make1(rte));
	w->estate->es_relations[0] = w->rel;
	w->estate->es_output_cid = GetCurrentCommandId(true);
	if (ActiveSnapshotSet())
		w->estate->es_snapshot = GetActiveSnapshot();

	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, w->rel, 1, NULL, 0);
	/* where the AFTER triggers look for it (ExecGetTriggerResultRel) */
	w->estate->es_opened_result_relations = list_make1(w->rri);
	/* the table is locked and its invalidations seen: is what we keep current? */
	if (table->kept == NULL || table->kept_stale)
	{
		MemoryContext old = MemoryContextSwitchTo(w->estate->es_query_cxt);

		keep_prepared(table, w->rel);
		MemoryContextSwitchTo(old);
	}
	if (table->nchecks > 0)
		w->rri->ri_ConstraintExprs = table->checks;
	w->indexes_open = false;	/* open_indexes, when they are needed */
	w->slot = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(w->rel), &TTSOpsVirtual);
	w->found = NULL;

	w->after_triggers = w->rri->ri_TrigDesc != NULL &&
		(w->rri->ri_TrigDesc->trig_insert_after_row ||
		 w->rri->ri_TrigDesc->trig_update_after_row ||
		 w->rri->ri_TrigDesc->trig_delete_after_row);
	if (w->after_triggers)
		AfterTriggerBeginQuery();
	w->check_tenant = table->tenant_column >= 0 &&
		check_enable_rls(table->relid, InvalidOid, false) == RLS_ENABLED;
	w->kept = 0;
	if (old != NULL)
	{
		/* kept open until WfRowWritersRelease, in keep_cxt */
		MemoryContextSwitchTo(old);
		kept_writers[nkept].table = table;
		kept_writers[nkept].in_use = true;
		w->kept = ++nkept;
	}
}

/*
 * check_tenant refuses a row of another tenant than the current one, as
 * the tables' policy tenant_isolation would.
 */
static void
check_tenant(WfRowWriter *w, Datum value, bool isnull)
{
	const char *tenant = WfCurrentTenant();

	if (isnull || tenant == NULL ||
		strcmp(TextDatumGetCString(value), tenant) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("new row violates row-level security policy for table \"%s\"",
						RelationGetRelationName(w->rel))));
}

/*
 * WfRowInsert inserts one row: values (and nulls, NULL for none) in the
 * order of the table's columns.
 */
void
WfRowInsert(WfRowWriter *w, const Datum *values, const bool *nulls)
{
	WfRowTable *t = w->table;
	TupleTableSlot *slot = w->slot;
	int			i;

	if (t->missing != NULL)
		elog(ERROR, "wfengine inserts rows of wf.%s without their column \"%s\"",
			 t->relname, t->missing);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * t->natts);
	for (i = 0; i < t->ncolumns; i++)
	{
		slot->tts_values[t->attnums[i] - 1] = values[i];
		slot->tts_isnull[t->attnums[i] - 1] = nulls != NULL && nulls[i];
	}
	ExecStoreVirtualTuple(slot);
	if (w->check_tenant)
		check_tenant(w, values[t->tenant_column], nulls != NULL && nulls[t->tenant_column]);
	open_indexes(w);
	ExecSimpleRelationInsert(w->rri, w->estate, slot);
	ResetPerTupleExprContext(w->estate);
}

/*
 * index_lookup finds, through index, the first row that matches skeys
 * (nkeys of them) under snapshot, into w->found; false when there is none
 * (and then w->found is empty).
 */
static bool
index_lookup(WfRowWriter *w, Relation index, Snapshot snapshot, ScanKey skeys, int nkeys)
{
	IndexScanDesc scan;
	bool		found;

	if (w->found == NULL)
		found_slot(w);
	scan = index_beginscan(w->rel, index, snapshot, nkeys, 0);
	index_rescan(scan, skeys, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, w->found);
	index_endscan(scan);
	if (!found)
		ExecClearTuple(w->found);
	return found;
}

/*
 * locked_row: is the row that WfRowLock locked last in this transaction
 * (its version then) still the latest, and is it the row whose primary key
 * is key?  Then it is in w->found, and no index is opened or read.  A row
 * changed since (by this transaction, or by another after a subtransaction
 * that held the lock rolled back) is not the latest version
 * (SnapshotSelf), and is looked up by key.
 */
static bool
locked_row(WfRowWriter *w, Datum key)
{
	ItemPointerData tid = w->table->locked_tid;
	bool		isnull;
	Datum		d;

	if (!ItemPointerIsValid(&tid))
		return false;
	if (w->found == NULL)
		found_slot(w);
	if (!table_tuple_fetch_row_version(w->rel, &tid, SnapshotSelf, w->found))
		return false;
	d = slot_getattr(w->found, w->table->key_attnum, &isnull);
	if (!isnull && DatumGetBool(OidFunctionCall2(w->table->key_eq, d, key)))
		return true;
	ExecClearTuple(w->found);
	return false;
}

/*
 * WfRowFind finds the row whose primary key is key, in its latest version
 * (SnapshotSelf: the transaction's own changes included), for WfRowGet and
 * WfRowUpdate; false when there is none.  The caller holds the row locked
 * (FOR UPDATE), so no other transaction changes it meanwhile.
 */
bool
WfRowFind(WfRowWriter *w, Datum key)
{
	Oid			pkey;
	Relation	index = NULL;
	ScanKeyData skey;
	int			i;

	if (!OidIsValid(w->table->key_eq))
		elog(ERROR, "wfengine finds no rows of wf.%s by key", w->table->relname);
	if (w->table->key_attnum == InvalidAttrNumber)
		elog(ERROR, "relation wf.%s has no primary key", w->table->relname);
	if (w->table->locked_lxid == MyProc->lxid && w->table->read_unlocked &&
		DatumGetBool(OidFunctionCall2(w->table->key_eq, w->table->unlocked_key, key)))
	{
		/* the row WfRowReadToUpdate read: that version, or a refusal */
		if (locked_row(w, key))
			return true;
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of a row of wf.%s",
						w->table->relname),
				 errdetail("Another transaction changed the row after this one read it."),
				 errhint("Run the call again.")));
	}
	if (w->table->locked_lxid == MyProc->lxid && locked_row(w, key))
		return true;
	open_indexes(w);
	pkey = RelationGetPrimaryKeyIndex(w->rel);
	for (i = 0; i < w->rri->ri_NumIndices; i++)
		if (RelationGetRelid(w->rri->ri_IndexRelationDescs[i]) == pkey)
			index = w->rri->ri_IndexRelationDescs[i];
	if (index == NULL)
		elog(ERROR, "relation wf.%s has no primary key", w->table->relname);
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, w->table->key_eq, key);
	return index_lookup(w, index, SnapshotSelf, &skey, 1);
}

/*
 * WfRowRead reads ncolumns columns (indexes into the table's columns, from
 * column on) of the row of table whose primary key is key, in its latest
 * version (SnapshotSelf, as WfRowFind reads it), without a writer: only the
 * table and its primary key, opened with AccessShareLock as a SELECT opens
 * them.  The values, detoasted, are copied into the current memory context
 * (isnull[i] for NULL); false when there is no such row.  Row security is
 * not checked: the caller reads a row it found through one of the tenant
 * (the claim: the run of a task attempt it holds).
 */
bool
WfRowRead(WfRowTable *table, Datum key, int column, int ncolumns,
		  Datum *values, bool *isnull)
{
	Relation	rel;
	Relation	index;
	TupleTableSlot *slot;
	IndexScanDesc scan;
	ScanKeyData skey;
	bool		found;

	if (!OidIsValid(table->relid))
		resolve_table(table);
	if (!OidIsValid(table->key_eq))
		elog(ERROR, "wfengine finds no rows of wf.%s by key", table->relname);
	rel = table_open(table->relid, AccessShareLock);
	index = index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
	slot = table_slot_create(rel, NULL);
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, table->key_eq, key);
	scan = index_beginscan(rel, index, SnapshotSelf, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	for (int i = 0; i < ncolumns; i++)
	{
		values[i] = (Datum) 0;
		isnull[i] = true;
		if (found)
		{
			int			attnum = table->attnums[column + i];
			Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
			Datum		d = slot_getattr(slot, attnum, &isnull[i]);

			if (!isnull[i])
				values[i] = att->attlen == -1 ? PointerGetDatum(PG_DETOAST_DATUM_COPY(d)) :
					datumCopy(d, att->attbyval, att->attlen);
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * holds_every_key: does the unique index r hold every row whose first
 * ncolumns key columns are all not null?  A whole index does; so does one
 * partial on nothing but some of those columns being NOT NULL.
 */
static bool
holds_every_key(Relation r, int ncolumns)
{
	List	   *pred;
	ListCell   *lc;

	if (heap_attisnull(r->rd_indextuple, Anum_pg_index_indpred, NULL))
		return true;
	pred = RelationGetIndexPredicate(r);
	foreach(lc, pred)
	{
		NullTest   *nt = (NullTest *) lfirst(lc);
		Var		   *var;
		int			k;

		if (!IsA(nt, NullTest) || nt->nulltesttype != IS_NOT_NULL ||
			nt->argisrow || !IsA(nt->arg, Var))
			return false;
		var = (Var *) nt->arg;
		for (k = 0; k < ncolumns; k++)
			if (r->rd_index->indkey.values[k] == var->varattno)
				break;
		if (k == ncolumns)
			return false;
	}
	return true;
}

/*
 * WfRowExists: is there a row whose columns (indexes into the table's
 * columns, ncolumns of them) equal keys, in its latest version
 * (SnapshotSelf: committed by anyone by now, or written by this
 * transaction)?  It looks through the unique index on exactly those
 * columns, which the table must have: a whole one, or one partial on some
 * of them being NOT NULL (the keys are never null, so such an index holds
 * every row they can match).
 */
bool
WfRowExists(WfRowWriter *w, int ncolumns, const int *columns, const Datum *keys)
{
	WfRowTable *t = w->table;
	Relation	index = NULL;
	ScanKeyData skeys[INDEX_MAX_KEYS];
	bool		found;
	int			i;
	int			k;

	Assert(ncolumns <= INDEX_MAX_KEYS);
	open_indexes(w);
	for (i = 0; i < w->rri->ri_NumIndices && index == NULL; i++)
	{
		Relation	r = w->rri->ri_IndexRelationDescs[i];
		Form_pg_index form = r->rd_index;

		if (!form->indisunique || !form->indimmediate || form->indnkeyatts != ncolumns ||
			r->rd_rel->relam != BTREE_AM_OID ||
			!holds_every_key(r, ncolumns))
			continue;
		for (k = 0; k < ncolumns; k++)
			if (form->indkey.values[k] != t->attnums[columns[k]])
				break;
		if (k == ncolumns)
			index = r;
	}
	if (index == NULL)
		elog(ERROR, "relation wf.%s has no unique index on the columns looked up",
			 t->relname);
	for (k = 0; k < ncolumns; k++)
	{
		Oid			opfamily = index->rd_opfamily[k];
		Oid			type = index->rd_opcintype[k];
		Oid			eq = get_opfamily_member(opfamily, type, type, BTEqualStrategyNumber);

		if (!OidIsValid(eq))
			elog(ERROR, "no equality operator in operator family %u", opfamily);
		ScanKeyEntryInitialize(&skeys[k], 0, k + 1, BTEqualStrategyNumber, type,
							   index->rd_indcollation[k], get_opcode(eq), keys[k]);
	}
	found = index_lookup(w, index, SnapshotSelf, skeys, ncolumns);
	ExecClearTuple(w->found);
	return found;
}

/*
 * refuse_if_serializable raises the serialization failure of a row that a
 * concurrent update or delete (what) changed since a REPEATABLE READ or
 * SERIALIZABLE transaction's snapshot, as ExecLockRows does.
 */
static void
refuse_if_serializable(const char *what)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent %s", what)));
}

/*
 * lock_taken tells from table_tuple_lock's result whether the row is now
 * locked, as ExecLockRows reads it: locked (TM_Ok), passed over (held by
 * another transaction under SKIP LOCKED, changed by the current command,
 * or deleted), or, under REPEATABLE READ or SERIALIZABLE, a serialization
 * failure when another transaction changed it since the snapshot.
 */
static bool
lock_taken(TM_Result res)
{
	switch (res)
	{
		case TM_Ok:
			return true;
		case TM_WouldBlock:
		case TM_SelfModified:
			return false;
		case TM_Updated:
			refuse_if_serializable("update");
			break;
		case TM_Deleted:
			refuse_if_serializable("delete");
			return false;
		default:
			break;
	}
	elog(ERROR, "unexpected table_tuple_lock status: %u", res);
	return false;				/* keep the compiler quiet */
}

/*
 * find_row finds, with snap, the row of t whose primary key is key into
 * slot, and applies the filter a statement applies before it locks: the
 * tenant (tenant when not NULL, and the one row security lets the current
 * role see).  False when there is no such row of the tenant.
 */
static bool
find_row(WfRowTable *t, Datum key, const char *tenant, Relation rel, TupleTableSlot *slot,
		 Snapshot snap)
{
	Relation	index;
	IndexScanDesc scan;
	ScanKeyData skey;
	bool		found;

	index = index_open(RelationGetPrimaryKeyIndex(rel), AccessShareLock);
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, t->key_eq, key);
	scan = index_beginscan(rel, index, snap, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	index_close(index, NoLock);

	if (found && t->tenant_column >= 0)
		found = row_of_tenant(t, slot, tenant);
	return found;
}

/*
 * row_of_tenant: does the row in slot (of table t, which has a tenant_id)
 * belong to tenant (when not NULL), and to the tenant that row security
 * lets the current role see (where it applies)?
 */
static bool
row_of_tenant(WfRowTable *t, TupleTableSlot *slot, const char *tenant)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, t->attnums[t->tenant_column], &isnull);
	char	   *owner = isnull ? NULL : TextDatumGetCString(d);

	if (owner == NULL || (tenant != NULL && strcmp(owner, tenant) != 0))
		return false;
	if (check_enable_rls(t->relid, InvalidOid, false) == RLS_ENABLED)
	{
		const char *current = WfCurrentTenant();

		return current != NULL && strcmp(owner, current) == 0;
	}
	return true;
}

/*
 * copy_row copies the table's columns of the row in slot to values/nulls,
 * into the current memory context.
 */
static void
copy_row(WfRowTable *t, Relation rel, TupleTableSlot *slot, Datum *values, bool *nulls)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	slot_getallattrs(slot);
	for (i = 0; i < t->ncolumns; i++)
	{
		int			a = t->attnums[i] - 1;
		Form_pg_attribute att = TupleDescAttr(desc, a);

		nulls[i] = slot->tts_isnull[a];
		values[i] = nulls[i] ? (Datum) 0 :
			datumCopy(slot->tts_values[a], att->attbyval, att->attlen);
	}
}

/*
 * open_for_row opens t for a row of WfRowLock or WfRowTake (lockmode) and
 * pushes the snapshot a statement would take.
 */
static Relation
open_for_row(WfRowTable *t, LOCKMODE lockmode)
{
	CommandCounterIncrement();
	if (!OidIsValid(t->relid))
		resolve_table(t);
	if (!OidIsValid(t->key_eq))
		elog(ERROR, "wfengine finds no rows of wf.%s by key", t->relname);
	PushActiveSnapshot(GetTransactionSnapshot());
	return table_open(t->relid, lockmode);
}

/*
 * close_for_row ends what open_for_row (or WfRowReadLast) began: the
 * snapshot pushed, the slot of the row read, the table (its lock stays).
 */
static void
close_for_row(Relation rel, TupleTableSlot *slot)
{
	PopActiveSnapshot();
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);
}

/*
 * WfRowLock finds the row whose primary key is key and locks it as SELECT
 * ... FOR UPDATE does (ExecLockRows): read with the snapshot a statement
 * would take, locked in its latest version under READ COMMITTED (waiting
 * for a transaction that holds it; or, while lock waits are forbidden
 * (WfSetLockWait), failing at once as FOR UPDATE NOWAIT does), and a serialization failure under
 * REPEATABLE READ or SERIALIZABLE when another transaction changed it
 * since the snapshot.  The table's columns go to values/nulls, copied
 * into the current memory context.  False when there is no such row, or
 * it belongs to another tenant than tenant (when not NULL) or than the one
 * row security lets the current role see: such a row is not locked.
 */
bool
WfRowLock(WfRowTable *t, Datum key, const char *tenant, Datum *values, bool *nulls)
{
	Relation	rel = open_for_row(t, RowShareLock);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	Snapshot	snap = GetActiveSnapshot();
	bool		found;

	found = find_row(t, key, tenant, rel, slot, snap);
	if (found)
	{
		TM_FailureData tmfd;
		TM_Result	res;

		res = table_tuple_lock(rel, &slot->tts_tid, snap, slot, GetCurrentCommandId(false),
							   LockTupleExclusive,
							   WfLockWaitAllowed() ? LockWaitBlock : LockWaitError,
							   IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
							   &tmfd);
		found = lock_taken(res);
	}
	if (found)
	{
		/* where the row is, for WfRowFind in this transaction */
		t->locked_tid = slot->tts_tid;
		t->locked_lxid = MyProc->lxid;
		t->read_unlocked = false;
		copy_row(t, rel, slot, values, nulls);
	}

	close_for_row(rel, slot);
	return found;
}

/* the subtransaction callback of WfRowReadToUpdate is registered */
static bool unlocked_callback = false;

/*
 * unlocked_subxact follows the subtransaction that read a row with
 * WfRowReadToUpdate: when it rolls back (an error caught by a savepoint or
 * an exception block), the read no longer stands for anything, and a
 * later WfRowFind of the row must not take it for the version to update;
 * when it commits, the read belongs to its parent.
 */
static void
unlocked_subxact(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	WfRowTable *t;

	for (t = resolved_tables; t != NULL; t = t->next)
	{
		if (!t->read_unlocked || t->unlocked_subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			t->read_unlocked = false;
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			t->unlocked_subid = parentSubid;
	}
}

/*
 * WfRowReadToUpdate reads the row whose primary key is key as WfRowLock
 * does (the same snapshot and tenant filter, values/nulls alike), but does
 * not lock it: for a caller whose other lock keeps every other writer of
 * the row waiting (a report that took its run's live task: every writer of
 * a run with a live attempt takes that attempt's row first), where the
 * lock would only be one more WAL record (issue 31).  It is still checked:
 * WfRowFind then finds exactly the version read, and when another
 * transaction has changed the row since, refuses with a serialization
 * failure instead of writing over that change.  A row that another
 * transaction is changing when it is read, or changed after the snapshot,
 * is locked with WfRowLock instead.  (Should a writer that ignores the
 * lock order change the row between the read and the update, the update
 * waits for it and fails with ExecSimpleRelationUpdate's "tuple
 * concurrently updated".)  False when there is no such row of the tenant.
 */
bool
WfRowReadToUpdate(WfRowTable *t, Datum key, const char *tenant, Datum *values, bool *nulls)
{
	Relation	rel = open_for_row(t, AccessShareLock);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	SnapshotData dirty;
	bool		found;

	found = find_row(t, key, tenant, rel, slot, GetActiveSnapshot());

	/*
	 * A version that another transaction is changing, or has changed since
	 * the snapshot, is locked after all, as WfRowLock does: that waits for
	 * the other transaction and reads the latest version (or, under
	 * REPEATABLE READ, fails).
	 */
	InitDirtySnapshot(dirty);
	if (found && (!table_tuple_satisfies_snapshot(rel, slot, &dirty) ||
				  TransactionIdIsValid(dirty.xmax)))
	{
		close_for_row(rel, slot);
		return WfRowLock(t, key, tenant, values, nulls);
	}
	if (found)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), t->attnums[0] - 1);
		MemoryContext old = MemoryContextSwitchTo(CurTransactionContext);

		if (!unlocked_callback)
		{
			RegisterSubXactCallback(unlocked_subxact, NULL);
			unlocked_callback = true;
		}
		t->locked_tid = slot->tts_tid;
		t->locked_lxid = MyProc->lxid;
		t->read_unlocked = true;
		t->unlocked_subid = GetCurrentSubTransactionId();
		t->unlocked_key = datumCopy(key, att->attbyval, att->attlen);
		MemoryContextSwitchTo(old);
		copy_row(t, rel, slot, values, nulls);
	}
	close_for_row(rel, slot);
	return found;
}

/*
 * WfRowTake is WfRowLock for a row its caller will delete if it accepts it:
 * the row is read as WfRowLock reads it and, when accept (with arg)
 * accepts its columns, deleted at once, its deletion taking the place of
 * the lock, so that no lock record is written before the delete (a lock
 * and a delete were two WAL records of every step, issue 31).  The row
 * deleted is the version read, so the columns accepted are the ones
 * deleted.  WF_ROW_TAKEN: deleted, its columns in values/nulls (the caller
 * puts it back with WfRowInsert if it keeps it after all);
 * WF_ROW_ABSENT: no such row of the tenant; WF_ROW_KEPT: nothing done,
 * because accept refused the row, or it could not be deleted as read (a
 * transaction changed or holds it: waited for when lock waits are
 * allowed, else not; or the table has DELETE triggers, which this does
 * not fire), and the caller locks it with WfRowLock as usual (which then
 * waits, fails or reads the latest version, as for any row).
 */
WfRowTaken
WfRowTake(WfRowTable *t, Datum key, const char *tenant, WfRowAccept accept, void *arg,
		  Datum *values, bool *nulls)
{
	Relation	rel = open_for_row(t, RowExclusiveLock);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	Snapshot	snap = GetActiveSnapshot();
	WfRowTaken	taken = WF_ROW_KEPT;

	if (!find_row(t, key, tenant, rel, slot, snap))
		taken = WF_ROW_ABSENT;
	else if (rel->trigdesc == NULL ||
			 (!rel->trigdesc->trig_delete_before_row && !rel->trigdesc->trig_delete_after_row &&
			  !rel->trigdesc->trig_delete_after_statement))
	{
		copy_row(t, rel, slot, values, nulls);
		if (accept(values, nulls, arg))
		{
			TM_FailureData tmfd;
			TM_Result	res;

			CheckCmdReplicaIdentity(rel, CMD_DELETE);
			res = table_tuple_delete(rel, &slot->tts_tid, GetCurrentCommandId(true), snap,
									 InvalidSnapshot, WfLockWaitAllowed(), &tmfd, false);
			if (res == TM_Ok)
				taken = WF_ROW_TAKEN;
		}
	}

	close_for_row(rel, slot);
	return taken;
}

/*
 * scan_keys makes the scan keys of keys (nkeys of them, each on a key
 * column of the btree index of table t) in skeys, in the order of the
 * index's columns, as btree wants them.
 */
static void
scan_keys(WfRowTable *t, Relation index, int nkeys, const WfRowScanKey *keys,
		  ScanKey skeys)
{
	Form_pg_index form = index->rd_index;
	int			positions[INDEX_MAX_KEYS];
	int			i;

	if (nkeys > INDEX_MAX_KEYS)
		elog(ERROR, "wfengine scans with at most %d keys", INDEX_MAX_KEYS);
	for (i = 0; i < nkeys; i++)
	{
		const WfRowScanKey *key = &keys[i];
		int			k;
		int			j;
		Oid			op;

		for (k = 0; k < form->indnkeyatts; k++)
			if (form->indkey.values[k] == t->attnums[key->column])
				break;
		if (k == form->indnkeyatts)
			elog(ERROR, "index \"%s\" has no key column \"%s\"",
				 RelationGetRelationName(index), t->columns[key->column]);
		op = get_opfamily_member(index->rd_opfamily[k], index->rd_opcintype[k],
								 index->rd_opcintype[k], key->strategy);
		if (!OidIsValid(op))
			elog(ERROR, "no operator of strategy %d in operator family %u",
				 key->strategy, index->rd_opfamily[k]);
		for (j = i; j > 0 && positions[j - 1] > k; j--)
		{
			positions[j] = positions[j - 1];
			skeys[j] = skeys[j - 1];
		}
		positions[j] = k;
		ScanKeyEntryInitialize(&skeys[j], 0, k + 1, key->strategy, index->rd_opcintype[k],
							   index->rd_indcollation[k], get_opcode(op), key->value);
	}
}

/*
 * WfRowReadLast reads the last row, in the order of table's btree index
 * index_name, of those that match keys (nkeys of them), as a query "...
 * ORDER BY <the index's columns> DESC LIMIT 1" reads it: under the
 * snapshot a statement would take, after what the statements before
 * wrote; without a writer, the table and the index opened with
 * AccessShareLock.  The columns t describes go to values/nulls,
 * copied into the current memory context.  False when there is no such
 * row, or (as find_row) when the row belongs to another tenant than
 * tenant or than the one row security lets the current role see.  For a
 * lookup that a kept SPI plan made with about four times the
 * instructions (the latest version of a definition, run.c).
 */
bool
WfRowReadLast(WfRowTable *t, const char *index_name, int nkeys, const WfRowScanKey *keys,
			  const char *tenant, Datum *values, bool *nulls)
{
	Relation	rel;
	Relation	index;
	Oid			index_oid;
	ScanKeyData skeys[INDEX_MAX_KEYS];
	TupleTableSlot *slot;
	IndexScanDesc scan;
	bool		found;

	CommandCounterIncrement();
	if (!OidIsValid(t->relid))
		resolve_table(t);
	rel = table_open(t->relid, AccessShareLock);
	index_oid = get_relname_relid(index_name, RelationGetNamespace(rel));
	if (!OidIsValid(index_oid))
		elog(ERROR, "relation wf.%s has no btree index \"%s\"", t->relname, index_name);
	index = index_open(index_oid, AccessShareLock);
	if (index->rd_rel->relam != BTREE_AM_OID || index->rd_index->indrelid != t->relid)
		elog(ERROR, "relation wf.%s has no btree index \"%s\"", t->relname, index_name);
	scan_keys(t, index, nkeys, keys, skeys);

	PushActiveSnapshot(GetTransactionSnapshot());
	slot = table_slot_create(rel, NULL);
	scan = index_beginscan(rel, index, GetActiveSnapshot(), nkeys, 0);
	index_rescan(scan, skeys, nkeys, NULL, 0);
	found = index_getnext_slot(scan, BackwardScanDirection, slot);
	index_endscan(scan);
	index_close(index, NoLock);
	if (found && t->tenant_column >= 0)
		found = row_of_tenant(t, slot, tenant);
	if (found)
		copy_row(t, rel, slot, values, nulls);
	close_for_row(rel, slot);
	return found;
}

/*
 * WfRowScanBegin starts a scan of the writer's index index_name (a btree
 * index of its table) for the rows that match keys (nkeys of them, each
 * on a key column of the index), in the index's order, under a new
 * snapshot taken as a statement takes it: a new one under READ COMMITTED,
 * the transaction's under REPEATABLE READ, either seeing what the
 * statements before wrote (the writer's opening advanced the command
 * counter).  WfRowScanNext returns the rows; WfRowScanEnd ends the scan.
 */
void
WfRowScanBegin(WfRowScan *s, WfRowWriter *w, const char *index_name, int nkeys,
			   const WfRowScanKey *keys)
{
	WfRowTable *t = w->table;
	Relation	index = NULL;
	ScanKeyData skeys[INDEX_MAX_KEYS];
	int			i;

	open_indexes(w);
	for (i = 0; i < w->rri->ri_NumIndices && index == NULL; i++)
		if (strcmp(RelationGetRelationName(w->rri->ri_IndexRelationDescs[i]), index_name) == 0)
			index = w->rri->ri_IndexRelationDescs[i];
	if (index == NULL || index->rd_rel->relam != BTREE_AM_OID)
		elog(ERROR, "relation wf.%s has no btree index \"%s\"", t->relname, index_name);
	scan_keys(t, index, nkeys, keys, skeys);

	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();
	s->w = w;
	s->snapshot = GetActiveSnapshot();
	s->entries = 0;
	s->index_blocks = 0;
	if (w->found == NULL)
		found_slot(w);
	s->scan = index_beginscan(w->rel, index, s->snapshot, nkeys, 0);
	index_rescan(s->scan, skeys, nkeys, NULL, 0);
}

/*
 * row_of_current_tenant: may the current role see the row in w->found
 * where row security applies to it (the policy's USING clause)?
 */
static bool
row_of_current_tenant(WfRowWriter *w)
{
	const char *tenant = WfCurrentTenant();
	bool		isnull;
	Datum		d = WfRowGet(w, w->table->tenant_column, &isnull);

	return !isnull && tenant != NULL && strcmp(TextDatumGetCString(d), tenant) == 0;
}

/*
 * WfRowScanNext locks the next row of the scan that filter (with arg)
 * accepts, as SELECT ... FOR UPDATE SKIP LOCKED does (ExecLockRows): a row
 * another transaction holds locked is passed over; under READ COMMITTED a
 * row changed since the snapshot is locked in its latest version, which
 * filter then looks at again (as the statement's recheck does: a row it
 * no longer accepts stays locked, and is passed over); under REPEATABLE
 * READ such a row is a serialization failure.  The row is left in
 * w->found for WfRowGet and WfRowUpdate.  False at the end of the scan.
 */
bool
WfRowScanNext(WfRowScan *s, WfRowFilter filter, void *arg)
{
	WfRowWriter *w = s->w;

	for (;;)
	{
		ItemPointerData tid;
		TM_FailureData tmfd;
		TM_Result	res;

		if (!s->scan->xs_heap_continue)
		{
			/*
			 * The buffers the index gives an entry from: its pages, and the
			 * pages of entries it skips without returning them (those a scan
			 * killed, LP_DEAD), which the entry count does not see.
			 */
			int64		before = pgBufferUsage.shared_blks_hit + pgBufferUsage.shared_blks_read;
			ItemPointer next = index_getnext_tid(s->scan, ForwardScanDirection);

			s->index_blocks += pgBufferUsage.shared_blks_hit + pgBufferUsage.shared_blks_read - before;
			if (next == NULL)
			{
				ExecClearTuple(w->found);
				return false;
			}
			s->entries++;
		}
		if (!index_fetch_heap(s->scan, w->found))
			continue;
		if (w->check_tenant && !row_of_current_tenant(w))
			continue;
		if (!filter(w, arg))
			continue;

		tid = w->found->tts_tid;
		res = table_tuple_lock(w->rel, &tid, s->snapshot, w->found,
							   w->estate->es_output_cid, LockTupleExclusive, LockWaitSkip,
							   IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
							   &tmfd);
		if (!lock_taken(res) || (tmfd.traversed && !filter(w, arg)))
			continue;
		return true;
	}
}

/*
 * WfRowScanEnd ends the scan of WfRowScanBegin (its snapshot with it).
 */
void
WfRowScanEnd(WfRowScan *s)
{
	index_endscan(s->scan);
	PopActiveSnapshot();
	s->scan = NULL;
}

/*
 * WfRowGet returns a column (an index into the table's columns) of the
 * row WfRowFind found.
 */
Datum
WfRowGet(WfRowWriter *w, int column, bool *isnull)
{
	if (w->found == NULL || TupIsNull(w->found))
		elog(ERROR, "wfengine reads a row of wf.%s it did not find", w->table->relname);
	return slot_getattr(w->found, w->table->attnums[column], isnull);
}

/*
 * LZ4 with a kept stream.  PostgreSQL's lz4 compression of a value
 * (toast_compress_datum) calls LZ4_compress_default, which clears a 16 kB
 * hash table on every call: about 16,000 instructions, a run's context
 * being a few hundred bytes (2.6 % of an eager step's instructions,
 * bench/callgrind.sh).  A stream kept for the backend is made ready for
 * each value by LZ4_resetStream_fast instead, which clears nothing; the
 * first block after it refers to no earlier data, so it is the very block
 * format LZ4_compress_default writes, and readers decompress it as they
 * would any value TOAST compressed with lz4.  The functions are those of
 * the liblz4 the server is linked with (a server built with lz4,
 * USE_LZ4), declared here since its header is not part of the server's;
 * declared weak, so that a liblz4 older than 1.9 (without
 * LZ4_resetStream_fast) leaves toast_compress_datum in charge.
 */
#if defined(USE_LZ4) && defined(__GNUC__)
typedef union LZ4_stream_u LZ4_stream_t;
extern LZ4_stream_t *LZ4_createStream(void) __attribute__((weak));
extern void LZ4_resetStream_fast(LZ4_stream_t *stream) __attribute__((weak));
extern int	LZ4_compress_fast_continue(LZ4_stream_t *stream, const char *src, char *dst,
									   int srcSize, int dstCapacity, int acceleration) __attribute__((weak));

static LZ4_stream_t *lz4_stream = NULL;

/* the kept stream, made on first use; false where it cannot be */
static bool
lz4_kept_stream(void)
{
	if (lz4_stream == NULL && LZ4_createStream != NULL &&
		LZ4_resetStream_fast != NULL && LZ4_compress_fast_continue != NULL)
		lz4_stream = LZ4_createStream();
	return lz4_stream != NULL;
}

/*
 * compress_lz4 compresses v (not extended) as toast_compress_datum does
 * with lz4: a compressed inline varlena, or (Datum) 0 where that would not
 * save at least 2 bytes.
 */
static Datum
compress_lz4(struct varlena *v)
{
	int32		valsize = VARSIZE_ANY_EXHDR(v);
	int32		bound = valsize + valsize / 255 + 16;	/* LZ4_COMPRESSBOUND */
	struct varlena *tmp;
	int			len;

	tmp = (struct varlena *) palloc(bound + VARHDRSZ_COMPRESSED);
	LZ4_resetStream_fast(lz4_stream);
	len = LZ4_compress_fast_continue(lz4_stream, VARDATA_ANY(v),
									 (char *) tmp + VARHDRSZ_COMPRESSED,
									 valsize, bound, 1);
	if (len <= 0)
		elog(ERROR, "lz4 compression failed");
	if (len + VARHDRSZ_COMPRESSED >= valsize - 2)
	{
		pfree(tmp);
		return (Datum) 0;
	}
	SET_VARSIZE_COMPRESSED(tmp, len + VARHDRSZ_COMPRESSED);
	TOAST_COMPRESS_SET_SIZE_AND_COMPRESS_METHOD(tmp, valsize, TOAST_LZ4_COMPRESSION_ID);
	return PointerGetDatum(tmp);
}
#else
static bool
lz4_kept_stream(void)
{
	return false;
}

static Datum
compress_lz4(struct varlena *v)
{
	pg_unreachable();
}
#endif

/*
 * WfRowCompress returns value, a varlena datum for a column (an index into
 * the table's columns) of the writer's table, compressed inline as TOAST
 * would compress it, when that saves more than a few bytes; otherwise
 * value itself.  PostgreSQL compresses a value only when its row is past
 * TOAST_TUPLE_THRESHOLD (about 2 kB), so a row below that is written,
 * and WAL-logged, whole on every update; a value that grows and is
 * rewritten often (a run's context) is worth compressing sooner.  The
 * column's compression method (ALTER TABLE ... SET COMPRESSION, else
 * default_toast_compression) is used; a column whose storage is PLAIN or
 * EXTERNAL, which asks for no compression, is left alone, and so are
 * values under min_size bytes.  Readers detoast as they would any
 * compressed value.
 */
Datum
WfRowCompress(WfRowWriter *w, int column, Datum value, int min_size)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(w->rel),
										  w->table->attnums[column] - 1);
	struct varlena *v = (struct varlena *) DatumGetPointer(value);
	char		method = att->attcompression;
	Datum		compressed;

	if (att->attlen != -1 || (att->attstorage != TYPSTORAGE_EXTENDED &&
							  att->attstorage != TYPSTORAGE_MAIN))
		return value;
	if (VARATT_IS_EXTENDED(v) || VARSIZE(v) < min_size)
		return value;
	if (!CompressionMethodIsValid(method))
		method = default_toast_compression;
	if (method == TOAST_LZ4_COMPRESSION && lz4_kept_stream())
		compressed = compress_lz4(v);
	else
		compressed = toast_compress_datum(value, method);
	return compressed != (Datum) 0 ? compressed : value;
}

/*
 * WfRowUpdate writes a new version of the row WfRowFind found: the columns
 * with replace[i] set take values[i] (NULL where nulls[i]), the others
 * keep theirs.  Constraints, indexes (none touched by a HOT update) and
 * AFTER ROW triggers are PostgreSQL's, as for an UPDATE statement.
 */
void
WfRowUpdate(WfRowWriter *w, const Datum *values, const bool *nulls, const bool *replace)
{
	WfRowTable *t = w->table;
	TupleTableSlot *slot = w->slot;
	int			i;

	if (w->found == NULL || TupIsNull(w->found))
		elog(ERROR, "wfengine updates a row of wf.%s it did not find", t->relname);
	if (w->rri->ri_TrigDesc != NULL && w->rri->ri_TrigDesc->trig_update_before_row)
		elog(ERROR, "wfengine does not update rows of wf.%s, which has BEFORE UPDATE triggers",
			 t->relname);
	slot_getallattrs(w->found);
	ExecClearTuple(slot);
	memcpy(slot->tts_values, w->found->tts_values, sizeof(Datum) * t->natts);
	memcpy(slot->tts_isnull, w->found->tts_isnull, sizeof(bool) * t->natts);
	for (i = 0; i < t->ncolumns; i++)
	{
		if (!replace[i])
			continue;
		slot->tts_values[t->attnums[i] - 1] = values[i];
		slot->tts_isnull[t->attnums[i] - 1] = nulls != NULL && nulls[i];
	}
	ExecStoreVirtualTuple(slot);
	if (w->check_tenant)
		check_tenant(w, slot->tts_values[t->attnums[t->tenant_column] - 1],
					 slot->tts_isnull[t->attnums[t->tenant_column] - 1]);
	update_row(w, slot);
	/* updated by this transaction: from now on as locked */
	if (t->read_unlocked && ItemPointerEquals(&t->locked_tid, &w->found->tts_tid))
		t->read_unlocked = false;
	ResetPerTupleExprContext(w->estate);
	ExecClearTuple(w->found);
}

/*
 * update_row replaces the row in w->found with slot as
 * ExecSimpleRelationUpdate does (the replica identity check, stored
 * generated columns, constraints, the partition constraint, the new
 * version, its index entries, AFTER ROW triggers), opening the indexes
 * only when the new version is not HOT and needs entries.  WfRowUpdate
 * refuses tables with BEFORE UPDATE row triggers, which that function
 * would fire here.
 */
static void
update_row(WfRowWriter *w, TupleTableSlot *slot)
{
	Relation	rel = w->rel;
	ResultRelInfo *rri = w->rri;
	EState	   *estate = w->estate;
	ItemPointer tid = &w->found->tts_tid;
	List	   *recheck = NIL;
	bool		update_indexes;

	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(rri, estate, slot, CMD_UPDATE);
	if (rel->rd_att->constr)
		ExecConstraints(rri, slot, estate);
	if (rel->rd_rel->relispartition)
		ExecPartitionCheck(rri, slot, estate, true);
	simple_table_tuple_update(rel, tid, slot, estate->es_snapshot, &update_indexes);
	if (update_indexes)
	{
		open_indexes(w);
		if (rri->ri_NumIndices > 0)
			recheck = ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL);
	}
	ExecARUpdateTriggers(estate, rri, NULL, NULL, tid, NULL, slot, recheck, NULL, false);
	list_free(recheck);
}

/*
 * WfRowDelete deletes the row WfRowFind found, as a DELETE statement
 * would (ExecSimpleRelationDelete: the replica identity check, and AFTER
 * ROW triggers).  The caller holds the row locked.
 */
void
WfRowDelete(WfRowWriter *w)
{
	WfRowTable *t = w->table;

	if (w->found == NULL || TupIsNull(w->found))
		elog(ERROR, "wfengine deletes a row of wf.%s it did not find", t->relname);
	if (w->rri->ri_TrigDesc != NULL && w->rri->ri_TrigDesc->trig_delete_before_row)
		elog(ERROR, "wfengine does not delete rows of wf.%s, which has BEFORE DELETE triggers",
			 t->relname);
	if (w->check_tenant)
	{
		bool		isnull;
		Datum		d = WfRowGet(w, t->tenant_column, &isnull);

		check_tenant(w, d, isnull);
	}
	ExecSimpleRelationDelete(w->rri, w->estate, NULL, w->found);
	if (t->read_unlocked && ItemPointerEquals(&t->locked_tid, &w->found->tts_tid))
		t->read_unlocked = false;
	ResetPerTupleExprContext(w->estate);
	ExecClearTuple(w->found);
}

/*
 * WfRowWriterClose ends the writes: AFTER triggers fire, the indexes and
 * the executor state are released (the lock stays), and the command
 * counter advances so that what follows sees the rows.
 */
void
WfRowWriterClose(WfRowWriter *w)
{
	if (w->after_triggers)
		AfterTriggerEndQuery(w->estate);
	if (w->kept > 0 && keep_depth > 0 && keep_lxid == MyProc->lxid)
	{
		/* kept open for the next transition of the call */
		KeptWriter *k = &kept_writers[w->kept - 1];

		ResetPerTupleExprContext(w->estate);
		k->w = *w;
		k->in_use = false;
		w->estate = NULL;
		w->rel = NULL;
		CommandCounterIncrement();
		return;
	}
	close_writer(w);
}

/*
 * close_writer releases a writer's indexes, executor state and table (the
 * table's lock stays), and advances the command counter.
 */
static void
close_writer(WfRowWriter *w)
{
	/*
	 * Its indexes, their locks released (ExecCloseIndices), and what the
	 * triggers opened.  Keeping the index locks to the end of the
	 * transaction saved about 2,400 instructions an eager step, but a
	 * transition that also updates its run's indexes (the run's end) then
	 * holds more than the 16 relation locks a backend keeps on its fast
	 * path, and the rest go through the shared lock table.
	 */
	ExecCloseResultRelations(w->estate);
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
	table_close(w->rel, NoLock);
	w->estate = NULL;
	w->rel = NULL;
	CommandCounterIncrement();
}
