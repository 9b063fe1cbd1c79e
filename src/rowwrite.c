/*-------------------------------------------------------------------------
 *
 * rowwrite.c
 *	  Inserting rows of the engine's tables without a statement: the
 *	  events and the new task attempt of a transition.
 *
 * Why.  An INSERT run through SPI, even from a kept plan, builds its
 * executor tree again on every execution: the ModifyTable node, the scan
 * of the parameters (for the events, six unnest() calls over arrays built
 * only to be taken apart again), the projection, and the statement's
 * finish.  For the few fixed rows a transition appends that work was more
 * than the insertions themselves (docs/benchmarks.md: callgrind per
 * step).  Here a row goes from its values to the table the way logical
 * replication applies an insert (ExecSimpleRelationInsert): the table's
 * NOT NULL and CHECK constraints, BEFORE and AFTER ROW triggers, every
 * index with its uniqueness and predicate, and WAL are PostgreSQL's own,
 * exactly as for the statement.
 *
 * What a statement would add and the writer does itself.  Row security:
 * the engine's tables have FORCE ROW LEVEL SECURITY and a policy
 * "tenant_id = wf.current_tenant()"; where row security applies to the
 * current role (check_enable_rls), each row's tenant_id must be the
 * current tenant, with the error the policy's WITH CHECK would raise.
 * Privileges: the writer runs inside an API call, as the extension's
 * owner (tenant.c), who owns the tables.  Visibility: WfRowWriterClose
 * advances the command counter, so the statements that follow see the
 * rows.
 *
 * A table is described by WfRowTable: its name in schema wf and the
 * columns each row gives.  The attribute numbers are looked up once per
 * installation of the extension (reset with the kept plans, spi_util.c);
 * a column the table has with a default or NOT NULL that the description
 * leaves out is an error there, not a silently different row.
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
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/relcache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "rowwrite.h"
#include "wfengine.h"

/* the tables whose attribute numbers are known */
static WfRowTable *resolved_tables = NULL;

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
	rel = table_open(relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	attnums = MemoryContextAlloc(TopMemoryContext, sizeof(AttrNumber) * t->ncolumns);
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
	t->natts = desc->natts;
	t->attnums = attnums;
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
		t->relid = InvalidOid;
		t->natts = 0;
		t->next = NULL;
		t = next;
	}
	resolved_tables = NULL;
}

/*
 * WfRowWriterOpen opens the table for inserts: the relation with its
 * indexes (RowExclusiveLock, kept to the end of the transaction, as a
 * statement keeps it), and an executor state for its constraints,
 * triggers and index predicates.
 */
void
WfRowWriterOpen(WfRowWriter *w, WfRowTable *table)
{
	RangeTblEntry *rte;

	/* see what the statements before wrote, and write after them */
	CommandCounterIncrement();
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
	ExecOpenIndices(w->rri, false);
	w->slot = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(w->rel), &TTSOpsVirtual);
	w->found = NULL;

	w->after_triggers = w->rri->ri_TrigDesc != NULL &&
		(w->rri->ri_TrigDesc->trig_insert_after_row ||
		 w->rri->ri_TrigDesc->trig_update_after_row);
	if (w->after_triggers)
		AfterTriggerBeginQuery();
	w->check_tenant = table->tenant_column >= 0 &&
		check_enable_rls(table->relid, InvalidOid, false) == RLS_ENABLED;
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
	ExecSimpleRelationInsert(w->rri, w->estate, slot);
	ResetPerTupleExprContext(w->estate);
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
	Oid			pkey = RelationGetPrimaryKeyIndex(w->rel);
	Relation	index = NULL;
	IndexScanDesc scan;
	ScanKeyData skey;
	bool		found;
	int			i;

	if (!OidIsValid(w->table->key_eq))
		elog(ERROR, "wfengine finds no rows of wf.%s by key", w->table->relname);
	for (i = 0; i < w->rri->ri_NumIndices; i++)
		if (RelationGetRelid(w->rri->ri_IndexRelationDescs[i]) == pkey)
			index = w->rri->ri_IndexRelationDescs[i];
	if (index == NULL)
		elog(ERROR, "relation wf.%s has no primary key", w->table->relname);
	if (w->found == NULL)
		w->found = ExecInitExtraTupleSlot(w->estate, RelationGetDescr(w->rel),
										  table_slot_callbacks(w->rel));

	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, w->table->key_eq, key);
	scan = index_beginscan(w->rel, index, SnapshotSelf, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, w->found);
	index_endscan(scan);
	if (!found)
		ExecClearTuple(w->found);
	return found;
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
	ExecSimpleRelationUpdate(w->rri, w->estate, NULL, w->found, slot);
	ResetPerTupleExprContext(w->estate);
	ExecClearTuple(w->found);
}

/*
 * WfRowWriterClose ends the inserts: AFTER triggers fire, the indexes and
 * the executor state are released (the lock stays), and the command
 * counter advances so that what follows sees the rows.
 */
void
WfRowWriterClose(WfRowWriter *w)
{
	if (w->after_triggers)
		AfterTriggerEndQuery(w->estate);
	/* its indexes, and what the triggers opened */
	ExecCloseResultRelations(w->estate);
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
	table_close(w->rel, NoLock);
	w->estate = NULL;
	w->rel = NULL;
	CommandCounterIncrement();
}
