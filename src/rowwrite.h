/*-------------------------------------------------------------------------
 *
 * rowwrite.h
 *	  Inserting and updating rows of the engine's tables without a statement.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/rowwrite.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_ROWWRITE_H
#define WF_ROWWRITE_H

#include "access/genam.h"
#include "access/stratnum.h"
#include "executor/executor.h"

/*
 * A table the row writer inserts into: its name in schema wf and the
 * columns a row gives, in the order of the values of WfRowInsert.  The
 * attribute numbers are looked up once per installation of the extension.
 */
typedef struct WfRowTable
{
	const char *relname;
	int			ncolumns;
	const char *const *columns;
	/* filled in by rowwrite.c */
	Oid			relid;
	int			natts;
	AttrNumber *attnums;		/* ncolumns of them */
	Oid			key_eq;			/* the equality of the primary key (one
								 * column), for WfRowFind; InvalidOid: none */
	int			tenant_column;	/* the value that is tenant_id, or -1 */
	const char *missing;		/* a column with a default or NOT NULL that
								 * the columns leave out: no inserts */
	struct WfRowTable *next;	/* the tables resolved so far */
	/* kept across transactions until the table's relcache entry changes */
	MemoryContext kept;			/* NULL: nothing kept yet */
	bool		kept_stale;		/* kept, but no longer for this table */
	int			nchecks;		/* its CHECK constraints, prepared */
	ExprState **checks;
	int			nindexes;		/* its indexes: OIDs, IndexInfo with the */
	Oid		   *index_oids;		/* predicates and expressions prepared */
	IndexInfo **index_info;
	AttrNumber	key_attnum;		/* the primary key's column (0: none) */
	/* the row WfRowLock locked last, for WfRowFind (lxid 0: none) */
	ItemPointerData locked_tid;
	LocalTransactionId locked_lxid;
	/* that row was read by WfRowReadToUpdate, not locked; its key, and the
	 * subtransaction that read it */
	bool		read_unlocked;
	Datum		unlocked_key;
	SubTransactionId unlocked_subid;
} WfRowTable;

#define WF_ROW_TABLE(name, columns, key_eq) \
	WF_ROW_TABLE_FIRST(name, columns, lengthof(columns), key_eq)
/* the same with only the first ncolumns of columns */
#define WF_ROW_TABLE_FIRST(name, columns, ncolumns, key_eq) \
	{ name, ncolumns, columns, InvalidOid, 0, NULL, key_eq, -1, NULL, NULL }

/* one table opened for inserts, in the caller's transaction */
typedef struct WfRowWriter
{
	WfRowTable *table;
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;		/* the row to write */
	TupleTableSlot *found;		/* the row WfRowFind found */
	bool		after_triggers; /* AFTER ROW triggers: a query frame */
	bool		check_tenant;	/* row security applies: tenant_id checked */
	bool		indexes_open;	/* rri's indexes opened (open_indexes) */
	int			kept;			/* 1 + its place among the writers kept open
								 * (WfRowWritersKeep); 0: not kept */
} WfRowWriter;

extern void WfRowWriterOpen(WfRowWriter *w, WfRowTable *table);
extern void WfRowInsert(WfRowWriter *w, const Datum *values, const bool *nulls);
extern bool WfRowLock(WfRowTable *table, Datum key, const char *tenant,
					  Datum *values, bool *nulls);
extern bool WfRowReadToUpdate(WfRowTable *table, Datum key, const char *tenant,
							  Datum *values, bool *nulls);
extern bool WfRowFind(WfRowWriter *w, Datum key);

/* does WfRowTake delete the row of these columns? */
typedef bool (*WfRowAccept) (const Datum *values, const bool *nulls, void *arg);

/* what WfRowTake did */
typedef enum WfRowTaken
{
	WF_ROW_ABSENT,				/* no such row */
	WF_ROW_KEPT,				/* left as it was: lock it as usual */
	WF_ROW_TAKEN				/* deleted as read */
} WfRowTaken;

extern WfRowTaken WfRowTake(WfRowTable *table, Datum key, const char *tenant,
							WfRowAccept accept, void *arg, Datum *values, bool *nulls);
extern bool WfRowRead(WfRowTable *table, Datum key, int column, int ncolumns,
					  Datum *values, bool *isnull);

/*
 * A key of WfRowScanBegin: a column (an index into the table's columns)
 * of the index, compared with value by strategy (BTEqualStrategyNumber,
 * BTLessEqualStrategyNumber, ...).
 */
typedef struct WfRowScanKey
{
	int			column;
	StrategyNumber strategy;
	Datum		value;
} WfRowScanKey;

/*
 * A scan of one index of a writer's table that locks the rows it gives, as
 * SELECT ... FOR UPDATE SKIP LOCKED does (WfRowScanNext).
 */
typedef struct WfRowScan
{
	WfRowWriter *w;
	IndexScanDesc scan;
	Snapshot	snapshot;		/* the scan's, as a statement's */
	int64		entries;		/* index entries the scan has read */
	int64		index_blocks;	/* buffers it read to find them: the index's
								 * pages, with those it walked over */
} WfRowScan;

/* does the row in w->found qualify (WfRowGet reads it)? */
typedef bool (*WfRowFilter) (WfRowWriter *w, void *arg);

extern void WfRowScanBegin(WfRowScan *s, WfRowWriter *w, const char *index_name,
						   int nkeys, const WfRowScanKey *keys);
extern bool WfRowScanNext(WfRowScan *s, WfRowFilter filter, void *arg);
extern bool WfRowReadLast(WfRowTable *table, const char *index_name, int nkeys,
						  const WfRowScanKey *keys, const char *tenant,
						  Datum *values, bool *nulls);
extern void WfRowScanEnd(WfRowScan *s);
extern bool WfRowExists(WfRowWriter *w, int ncolumns, const int *columns,
						const Datum *keys);
extern Datum WfRowGet(WfRowWriter *w, int column, bool *isnull);
extern Datum WfRowCompress(WfRowWriter *w, int column, Datum value, int min_size);
extern void WfRowUpdate(WfRowWriter *w, const Datum *values, const bool *nulls,
						const bool *replace);
extern void WfRowDelete(WfRowWriter *w);
extern void WfRowWriterClose(WfRowWriter *w);
extern void WfRowWritersKeep(void);
extern void WfRowWritersRelease(void);
extern void WfRowWritersForget(void);
extern void WfRowWriteReset(void);

#endif							/* WF_ROWWRITE_H */
