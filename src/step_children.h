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

#include "stepkind.h"

extern PGDLLIMPORT const WfStepKindOps WfChildrenStepKind;

#endif							/* WF_STEP_CHILDREN_H */
