/*-------------------------------------------------------------------------
 *
 * step_choice.c
 *	  The choice step kind: the first branch whose condition holds.
 *
 * A choice step runs no task and waits for nothing: entering it
 * evaluates its conditions (PostgreSQL jsonpath predicates) against the
 * run's context in order, records choice_made (its output: the branch
 * taken and the step it leads to) and enters that step, in the same
 * transition.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_choice.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "runstore.h"
#include "state.h"
#include "step_choice.h"
#include "stepkind.h"
#include "transition.h"

/*
 * choice_enter takes the first branch of a choice step whose condition
 * holds in the run context (or the default), records it, and goes on.
 * A condition that cannot be evaluated does not hold.
 */
static void
choice_enter(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder ob;
	int			chosen = -1;
	int			next = sd->next;
	int			c;

	for (c = 0; c < sd->n_choices && chosen < 0; c++)
	{
		if (WfPathMatches(sd->choice_when[c], WfRunContextForPath(tr, sd->choice_when[c])))
		{
			chosen = c;
			next = sd->choice_next[c];
		}
	}

	WfJbBegin(&ob);
	if (chosen >= 0)
		WfJbInt(&ob, "choice", chosen);
	else
		WfJbText(&ob, "choice", "default");
	WfJbText(&ob, "next", next == WF_STEP_END ? NULL : tr->def->steps[next].name);
	WfFinishVisit(tr, step_index, WF_EV_CHOICE_MADE, WfNextVisit(tr->run, sd->name),
				  WfJbEnd(&ob), next, false);
}

const WfStepKindOps WfChoiceStepKind = {
	.name = "choice",
	.enter = choice_enter,
};
