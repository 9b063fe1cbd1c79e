/*-------------------------------------------------------------------------
 *
 * waits.h
 *	  What a live run waits for: the shared parts of wf.explain.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/waits.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_WAITS_H
#define WF_WAITS_H

#include "spi_util.h"
#include "state.h"
#include "stepkind.h"

extern bool WfExplainLiveTask(const WfRunState *run, WfExplanation *ex);
extern bool WfExplainWaitTimer(const WfRunState *run, WfExplanation *ex);
extern void WfExplainAttempt(const WfRunState *run, const WfStepDef *sd,
							 WfExplanation *ex);
extern bool WfExplainRow(WfPlanTable *table, int id, Datum *values, const char *waiting,
						 WfExplanation *ex);

extern PGDLLIMPORT WfPlanTable WfWaitsPlans;

#endif							/* WF_WAITS_H */
