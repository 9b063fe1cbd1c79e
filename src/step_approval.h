/*-------------------------------------------------------------------------
 *
 * step_approval.h
 *	  The approval step kind.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_approval.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STEP_APPROVAL_H
#define WF_STEP_APPROVAL_H

#include "spi_util.h"

#include "stepkind.h"
#include "transition.h"

/* an approval step has at most this many approvers */
#define WF_MAX_APPROVERS 100

extern PGDLLIMPORT const WfStepKindOps WfApprovalStepKind;

extern const char *WfEvaluateApprovalPolicy(WfTransition *tr, int step_index, int32 visit,
											const char *approver);


/* the statements of step_approval.c */
extern PGDLLIMPORT WfPlanTable WfStepApprovalPlans;

#endif							/* WF_STEP_APPROVAL_H */
