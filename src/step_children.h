/*-------------------------------------------------------------------------
 *
 * step_children.h
 *	  The subworkflow and parallel step kinds: child runs.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_children.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STEP_CHILDREN_H
#define WF_STEP_CHILDREN_H

#include "spi_util.h"

#include "stepkind.h"

extern PGDLLIMPORT const WfStepKindOps WfChildrenStepKind;


/* the statements of step_children.c */
extern PGDLLIMPORT WfPlanTable WfStepChildrenPlans;

#endif							/* WF_STEP_CHILDREN_H */
