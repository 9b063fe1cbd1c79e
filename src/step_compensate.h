/*-------------------------------------------------------------------------
 *
 * step_compensate.h
 *	  Compensation: the undoing of runs, and the kind of compensation tasks.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_compensate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STEP_COMPENSATE_H
#define WF_STEP_COMPENSATE_H

#include "spi_util.h"

#include "stepkind.h"

extern PGDLLIMPORT const WfStepKindOps WfCompensationStepKind;
extern PGDLLIMPORT const WfUndoOps WfCompensationUndo;

extern void WfRequestCancel(WfTransition *tr, const char *reason);
extern void WfNextCompensation(WfTransition *tr);
extern void WfScheduleCompensation(WfTransition *tr, int32 attempt);


/* the statements of step_compensate.c */
extern PGDLLIMPORT WfPlanTable WfStepCompensatePlans;

#endif							/* WF_STEP_COMPENSATE_H */
