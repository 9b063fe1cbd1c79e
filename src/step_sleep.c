/*-------------------------------------------------------------------------
 *
 * step_sleep.c
 *	  The sleep step kind: a timer row, for a duration or until a time in
 *	  the context.

 *
 * Entering the step records sleep_started and sets a timer of kind
 * "sleep" (its generation is the seq of its timer_set event, so the run
 * waits for exactly this timer); the run then costs only that row.  When
 * it fires, sleep_finished records when the sleep ended and the run moves
 * on.  A fixed "duration" or an "until" JSONPath to a timestamp in the
 * context; an "until" that finds none fails the run.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_sleep.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "step_sleep.h"
#include "stepkind.h"
#include "transition.h"
#include "waits.h"

/*
 * sleep_enter starts a visit of the sleep step at step_index: its timer.
 */
static void
sleep_enter(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder b;
	TimestampTz until;
	int32		visit;

	visit = WfNextVisit(tr->run, sd->name);
	if (sd->sleep_duration > 0)
		until = tr->now + sd->sleep_duration;
	else
	{
		Jsonb	   *found = WfEvaluatePath(sd->sleep_until, WfRunContextForPath(tr, sd->sleep_until));
		char	   *text = NULL;

		if (found != NULL && JB_ROOT_IS_SCALAR(found))
		{
			JsonbValue	v;

			if (JsonbExtractScalar(&found->root, &v) && v.type == jbvString)
				text = pnstrdup(v.val.string.val, v.val.string.len);
		}
		if (text == NULL || !WfParseTimestamp(text, &until))
		{
			/* the context holds no timestamp there: the run cannot go on */
			WfJbBegin(&b);
			WfJbText(&b, "code", "invalid_sleep_until");
			WfJbText(&b, "message", "the \"until\" path of the sleep step found no timestamp");
			WfJbJsonb(&b, "found", found);
			WfFailRun(tr, sd->name, "invalid_sleep_until", WfJbEnd(&b));
			return;
		}
	}

	WfJbBegin(&b);
	WfJbInt(&b, "visit", visit);
	WfJbTimestamp(&b, "until", until);
	WfAppendEvent(tr, WF_EV_SLEEP_STARTED, sd->name, 0, WfJbEnd(&b));

	WfJbBegin(&b);
	WfJbInt(&b, "visit", visit);
	WfSetTimer(tr, WF_TIMER_SLEEP, sd->name, 0, until, WfJbEnd(&b));
}

/*
 * sleep_timer_fired ends the sleep whose timer fired: sleep_finished, and
 * the run moves on.
 */
static bool
sleep_timer_fired(WfTransition *tr, int step_index, WfTimerKind kind,
				  Jsonb *payload, TimestampTz due_at)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder ob;

	if (kind != WF_TIMER_SLEEP)
		return false;
	WfJbBegin(&ob);
	WfJbTimestamp(&ob, "until", due_at);
	WfFinishVisit(tr, step_index, WF_EV_SLEEP_FINISHED,
				  (int32) WfJsonbGetInt(payload, "visit", 1), WfJbEnd(&ob), sd->next, false);
	return true;
}

/*
 * sleep_explain: the step waits on its sleep timer.
 */
static void
sleep_explain(const WfRunState *run, const WfStepDef *sd, WfExplanation *ex)
{
	(void) WfExplainWaitTimer(run, ex);
}

const WfStepKindOps WfSleepStepKind = {
	.name = "sleep",
	.enter = sleep_enter,
	.timer_fired = sleep_timer_fired,
	.explain = sleep_explain,
};
