/*-------------------------------------------------------------------------
 *
 * step_task.h
 *	  The task step kind.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_task.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STEP_TASK_H
#define WF_STEP_TASK_H

#include "stepkind.h"

extern PGDLLIMPORT const WfStepKindOps WfTaskStepKind;

#endif							/* WF_STEP_TASK_H */
