/*-------------------------------------------------------------------------
 *
 * step_sleep.h
 *	  The sleep step kind.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_sleep.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STEP_SLEEP_H
#define WF_STEP_SLEEP_H

#include "stepkind.h"

extern PGDLLIMPORT const WfStepKindOps WfSleepStepKind;

#endif							/* WF_STEP_SLEEP_H */
