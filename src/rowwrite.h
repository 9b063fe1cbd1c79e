/*-------------------------------------------------------------------------
 *
 * rowwrite.h
 *	  Inserting rows of the engine's tables without a statement.
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
	int			tenant_column;	/* the value that is tenant_id, or -1 */
	struct WfRowTable *next;	/* the tables resolved so far */
} WfRowTable;

#define WF_ROW_TABLE(name, columns) \
	{ name, lengthof(columns), columns, InvalidOid, 0, NULL, -1, NULL }

/* one table opened for inserts, in the caller's transaction */
typedef struct WfRowWriter
{
	WfRowTable *table;
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	bool		after_triggers; /* AFTER ROW INSERT triggers: a query frame */
	bool		check_tenant;	/* row security applies: tenant_id checked */
} WfRowWriter;

extern void WfRowWriterOpen(WfRowWriter *w, WfRowTable *table);
extern void WfRowInsert(WfRowWriter *w, const Datum *values, const bool *nulls);
extern void WfRowWriterClose(WfRowWriter *w);
extern void WfRowWriteReset(void);

#endif							/* WF_ROWWRITE_H */
