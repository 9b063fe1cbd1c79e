/*-------------------------------------------------------------------------
 *
 * spi_util.h
 *	  The plan cache: every statement wfengine sends through SPI.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/spi_util.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_SPI_UTIL_H
#define WF_SPI_UTIL_H

#include "executor/spi.h"



/*
 * The statements of one subsystem, next to the code that reads them: a
 * table of WfPlanSpec, indexed by the subsystem's own enum, registered
 * with the one plan cache at load time (WfRegisterPlanTable, from
 * _PG_init), and run with WfPlanExec.  Each statement has a name, used in
 * error messages ("<owner>.<name>"); the columns a caller reads by
 * position get an enum beside the statement.
 */
#define WF_MAX_PLAN_ARGS 49

typedef struct WfPlanSpec
{
	const char *name;			/* in error messages */
	const char *sql;
	int			nargs;
	Oid			argtypes[WF_MAX_PLAN_ARGS];
	bool		generic;		/* always use the generic plan */
	bool		lookup;			/* planned with enable_seqscan off (a lookup
								 * by key: see lookup_begin) */
} WfPlanSpec;

typedef struct WfPlanTable
{
	const char *owner;			/* the subsystem, in error messages */
	const WfPlanSpec *specs;
	int			nspecs;
	SPIPlanPtr *plans;			/* the kept plans, prepared on first use */
	struct WfPlanTable *next;	/* the registered tables */
} WfPlanTable;

#define WF_PLAN_TABLE(owner, specs) {(owner), (specs), lengthof(specs), NULL, NULL}

extern void WfRegisterPlanTable(WfPlanTable *table);
extern const WfPlanTable *WfPlanTables(void);
extern uint64 WfPlanExec(WfPlanTable *table, int id, Datum *values, const char *nulls,
						 bool read_only, long tcount, int expected_rc);
extern uint64 WfPlanExecFresh(WfPlanTable *table, int id, Datum *values,
							  const char *nulls, long tcount);
extern void WfApiBegin(void);
extern void WfApiEnd(void);
extern Oid	WfTaskIdSequence(void);
extern Oid	WfTimerIdSequence(void);
extern Oid	WfFenceSequence(void);
extern bool WfParseTimestamp(const char *text, TimestampTz *result);

/* the low bits of a fence: a value of wf.fence_seq (see WfFenceBase) */
#define WF_FENCE_SEQ_BITS 44
extern int64 WfFenceBase(void);
extern Datum WfGetDatum(int row, int col, bool *isnull);
extern Datum WfGetDatumNotNull(int row, int col);
extern char *WfGetTextOrNull(int row, int col);
extern void WfSetTextOrNull(Datum *values, char *nulls, int i, const char *s);
extern void WfRegisterResetCallback(void (*callback) (void));
extern bool WfTryInSubxact(void (*fn) (void *arg), void *arg, char **failure);
extern bool WfTryInSubxactCatching(void (*fn) (void *arg), void *arg, int sqlerrcode);
extern bool WfTryInSubxactCode(void (*fn) (void *arg), void *arg, char **failure,
							   int *sqlerrcode);

#endif							/* WF_SPI_UTIL_H */
