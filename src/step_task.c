/*-------------------------------------------------------------------------
 *
 * step_task.c
 *	  The task step kind: an activity a worker runs.
 *
 * Entering a task step schedules its first attempt (a wf.tasks row on the
 * step's queue, task_scheduled) and, with a "total" timeout, the step's
 * timeout timer.  The attempts, their leases, fences, retries and
 * deadlines are the run core's (transition.c), shared with the other
 * kinds that run tasks (an approval's notification, a compensation); a
 * task step only says what its completion means: the run moves on.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_task.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "runstore.h"
#include "step_task.h"
#include "stepkind.h"
#include "transition.h"
#include "waits.h"

/*
 * task_enter schedules the first attempt of a new visit of the task step
 * at step_index.
 */
static void
task_enter(WfTransition *tr, int step_index)
{
	WfScheduleStep(tr, step_index, 1, tr->now, NULL);
}

const WfStepKindOps WfTaskStepKind = {
	.name = "task",
	.enter = task_enter,
	.resume = WfRescheduleWithdrawn,	/* its input mapped again */
	.explain = WfExplainAttempt,	/* its live attempt, or the backoff */
};
