/*-------------------------------------------------------------------------
 *
 * stepkind.c
 *	  The step-kind table: how the run core finds the ops of a step's kind.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/stepkind.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "defcompile.h"
#include "stepkind.h"

/* the ops of each step type, filled at load time (WfRegisterStepKind) */
static const WfStepKindOps *step_kinds[WF_STEP_KIND_SLOTS];

/* the distinct ops, in registration order, for WfStepKindsWrite */
static const WfStepKindOps *writers[WF_STEP_KIND_SLOTS];
static int	nwriters = 0;

/* the undoing of runs (compensation) */
static const WfUndoOps *undo_ops = NULL;

/*
 * WfRegisterStepKind makes ops serve the steps of type.  Called from
 * _PG_init only, before any run is touched.
 */
void
WfRegisterStepKind(WfStepType type, const WfStepKindOps *ops)
{
	int			i;

	if ((int) type <= 0 || (int) type >= WF_STEP_KIND_SLOTS)
		elog(ERROR, "invalid wfengine step kind registration");
	step_kinds[type] = ops;
	for (i = 0; i < nwriters; i++)
		if (writers[i] == ops)
			return;
	writers[nwriters++] = ops;
}

/*
 * WfRegisterUndo installs the undoing of runs.  Called from _PG_init only.
 */
void
WfRegisterUndo(const WfUndoOps *ops)
{
	undo_ops = ops;
}

/*
 * WfStepKindFor returns the ops of the kind of step sd.
 */
const WfStepKindOps *
WfStepKindFor(const WfStepDef *sd)
{
	const WfStepKindOps *ops = NULL;

	if ((int) sd->type > 0 && (int) sd->type < WF_STEP_KIND_SLOTS)
		ops = step_kinds[sd->type];
	if (ops == NULL)
		elog(ERROR, "step \"%s\" has a type no wfengine step kind serves", sd->name);
	return ops;
}

/*
 * WfUndo returns the undoing of runs.
 */
const WfUndoOps *
WfUndo(void)
{
	if (undo_ops == NULL)
		elog(ERROR, "wfengine has no undoing of runs registered");
	return undo_ops;
}

/*
 * WfStepKindsWrite lets every step kind write its rows of a transition
 * just written.
 */
void
WfStepKindsWrite(struct WfTransition *tr)
{
	int			i;

	for (i = 0; i < nwriters; i++)
		if (writers[i]->write != NULL)
			writers[i]->write(tr);
}
