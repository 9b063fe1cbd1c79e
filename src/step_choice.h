/*-------------------------------------------------------------------------
 *
 * step_choice.h
 *	  The choice step kind.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_choice.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STEP_CHOICE_H
#define WF_STEP_CHOICE_H

#include "stepkind.h"

extern PGDLLIMPORT const WfStepKindOps WfChoiceStepKind;

#endif							/* WF_STEP_CHOICE_H */
