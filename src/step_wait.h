/*-------------------------------------------------------------------------
 *
 * step_wait.h
 *	  The wait_event step kind, and signals delivered to runs.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_wait.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STEP_WAIT_H
#define WF_STEP_WAIT_H

#include "spi_util.h"

#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "stepkind.h"

extern PGDLLIMPORT const WfStepKindOps WfWaitStepKind;

extern const char *WfDeliverSignal(pg_uuid_t *run_id, const char *name, Jsonb *payload,
								   const char *event_id, const char *buffered_key,
								   TimestampTz buffered_at);


/* the statements of step_wait.c */
extern PGDLLIMPORT WfPlanTable WfStepWaitPlans;

#endif							/* WF_STEP_WAIT_H */
