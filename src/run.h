/*-------------------------------------------------------------------------
 *
 * run.h
 *	  Starting runs, their status, terminate, context updates and signals.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/run.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_RUN_H
#define WF_RUN_H

#include "runstore.h"
#include "spi_util.h"

#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"

/* wf.start_run, also called per element by wf.start_runs (batch.c) */
extern PGDLLEXPORT Datum wfengine_start_run(PG_FUNCTION_ARGS);

/* the start of wf.start_and_claim (batch.c) */
extern pg_uuid_t *WfStartRunEager(char *defname, Jsonb *input, char *key,
								  const WfLeaseOffer *offer, WfScheduledTask *first);

/* the statements of run.c */
extern PGDLLIMPORT WfPlanTable WfRunPlans;

#endif							/* WF_RUN_H */
