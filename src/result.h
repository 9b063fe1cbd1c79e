/*-------------------------------------------------------------------------
 *
 * result.h
 *	  Results of task attempts, as workers report them.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/result.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_RESULT_H
#define WF_RESULT_H

#include "spi_util.h"

#include "utils/jsonb.h"

#include "runstore.h"

extern Jsonb *WfReportArgs(FunctionCallInfo fcinfo, bool is_failure);
extern void WfFailDamagedTask(int64 task_id, int64 fence, const char *message);
extern const char *WfReportTaskResult(int64 task_id, int64 fence, bool is_failure,
									  Jsonb *payload, bool retryable, bool lenient,
									  const WfLeaseOffer *offer, WfScheduledTask *next);


/* the statements of result.c */
extern PGDLLIMPORT WfPlanTable WfResultPlans;

#endif							/* WF_RESULT_H */
