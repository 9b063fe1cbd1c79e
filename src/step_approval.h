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

#include "stepkind.h"

/* an approval step has at most this many approvers */
#define WF_MAX_APPROVERS 100

extern PGDLLIMPORT const WfStepKindOps WfApprovalStepKind;

extern const char *WfEvaluateApprovalPolicy(WfTransition *tr, int step_index, int32 visit,
											const char *approver);

#endif							/* WF_STEP_APPROVAL_H */
