/*-------------------------------------------------------------------------
 *
 * step_compensate.c
 *	  Compensation: the undoing of a cancelled (or, for a saga, failed)
 *	  run, and the kind of its "compensate:<step>" tasks.
 *
 * Cancelling a run is a saga's way back.  wf.cancel_run() records the
 * intent (cancel_requested; the run is "cancelling"), withdraws the
 * attempt no worker has claimed, and lets an attempt in flight settle: its
 * worker's heartbeats and its report answer "cancel_requested".  A
 * completion is applied (the step did its work, so it is undone too); a
 * failure is recorded as final; a lost lease or a timeout counts as done
 * (nobody knows, so it is undone).  Then compensation_started fixes the
 * list of compensations: one per completed visit of every step that names
 * a "compensate" activity, most recent first.  Each is a task (step
 * "compensate:<step>", the visit of the work it undoes, so a stable
 * idempotency key), retried by its own policy.  When the last one
 * completes the run ends "cancelled"; when one gives up it ends
 * "compensation_failed" for an operator, who may wf.retry_step() or
 * wf.skip_step() it (the run goes on cancelling) or wf.terminate_run().
 *
 * A failed run can be cancelled too: it has nothing in flight, so its
 * compensations start at once, and it ends "cancelled" like any other.
 *
 * A definition with "on_failure": "compensate" does the same by itself
 * when the run would fail (the core calls WfUndo()->compensate_failure): the
 * failure is recorded (compensation_requested, $.failure), the run is
 * "compensating" rather than "cancelling", and it ends "compensated"
 * (run_compensated), or "compensation_failed"; a retry or a skip of the
 * compensation that gave up goes back to "compensating" ($.compensation
 * .cause is "failure").  So a cancelled run was stopped by an operator,
 * and a compensated one failed and was undone.
 *
 * The pending and done compensations live in the run's context
 * ($.compensation), so replay rebuilds them like any other state.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_compensate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "notify.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "step_compensate.h"
#include "stepkind.h"
#include "transition.h"
#include "waits.h"

/* the statements of step_compensate.c (registered by _PG_init: WfStepCompensatePlans) */
enum
{
	PLAN_COMPLETED_STEPS = 0
};

static const WfPlanSpec step_compensate_plan_specs[] = {
	[PLAN_COMPLETED_STEPS] = {
		"completed_steps",
		"SELECT e.step, (e.payload OPERATOR(pg_catalog.->>) 'visit')::pg_catalog.int4 "
		"FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 AND e.type OPERATOR(pg_catalog.=) 'task_completed' "
		"ORDER BY e.seq DESC",
		1, {UUIDOID}
	},
};

WfPlanTable WfStepCompensatePlans = WF_PLAN_TABLE("step_compensate", step_compensate_plan_specs);


/* forward declarations */
static void start_compensation(WfTransition *tr, const char *settled_step,
								int32 settled_visit);
static void compensation_failed(WfTransition *tr, const char *reason, Jsonb *error);
static Jsonb *first_pending(WfRunState *run, int *count);
static Jsonb *step_output(Jsonb *context, const char *step);

/*
 * first_pending returns the first pending compensation of the run
 * ({"step", "visit"}), or NULL; *count is set to how many are pending.
 */
static Jsonb *
first_pending(WfRunState *run, int *count)
{
	Jsonb	   *comp = WfJsonbGetJsonb(run->context, "compensation");
	Jsonb	   *pending = comp ? WfJsonbGetJsonb(comp, "pending") : NULL;

	*count = 0;
	if (pending == NULL || !JB_ROOT_IS_ARRAY(pending) || JB_ROOT_COUNT(pending) == 0)
		return NULL;
	*count = JB_ROOT_COUNT(pending);
	return JsonbValueToJsonb(getIthJsonbValueFromContainer(&pending->root, 0));
}

/*
 * step_output returns $.steps.<step>.output of a context, or NULL.
 */
static Jsonb *
step_output(Jsonb *context, const char *step)
{
	Jsonb	   *steps = WfJsonbGetJsonb(context, "steps");
	Jsonb	   *s = steps ? WfJsonbGetJsonb(steps, step) : NULL;

	return s ? WfJsonbGetJsonb(s, "output") : NULL;
}

/*
 * WfScheduleCompensation schedules attempt of the first pending
 * compensation.  Its input is the compensation's "input" mapping over the
 * run context, or by default {"step", "visit", "output", "input"}: the
 * step undone, its visit, its output and the run's input.
 */
void
WfScheduleCompensation(WfTransition *tr, int32 attempt)
{
	int			count;
	Jsonb	   *first = first_pending(tr->run, &count);
	char	   *step;
	int32		visit;
	int			idx;
	const WfStepDef *sd;
	Jsonb	   *input;

	if (first == NULL)
		elog(ERROR, "no compensation is pending");
	step = WfJsonbGetText(first, "step");
	visit = (int32) WfJsonbGetInt(first, "visit", 1);
	idx = WfDefinitionStepIndex(tr->def, step);
	if (idx < 0 || tr->def->steps[idx].compensate == NULL)
		elog(ERROR, "step \"%s\" has no compensation", step);
	sd = tr->def->steps[idx].compensate;

	if (sd->has_input)
		input = WfRunEvaluateMapping(tr, sd->input, sd->n_input);
	else
	{
		WfJsonBuilder b;

		WfJbBegin(&b);
		WfJbText(&b, "step", step);
		WfJbInt(&b, "visit", visit);
		WfJbJsonb(&b, "output", step_output(WfRunContextForStep(tr, step), step));
		WfJbJsonb(&b, "input", WfJsonbGetJsonb(tr->run->context, "input"));
		input = WfJbEnd(&b);
	}
	WfScheduleTask(tr, sd, visit, attempt, tr->now, input);
}

/*
 * WfNextCompensation schedules the next pending compensation, or ends the
 * run when none is left: as cancelled after wf.cancel_run(), as
 * compensated after a failure of a saga (compensate_failed_run).
 */
void
WfNextCompensation(WfTransition *tr)
{
	int			count;

	if (first_pending(tr->run, &count) != NULL)
	{
		WfScheduleCompensation(tr, 1);
		return;
	}
	{
		Jsonb	   *comp = WfJsonbGetJsonb(tr->run->context, "compensation");
		Jsonb	   *done = comp ? WfJsonbGetJsonb(comp, "done") : NULL;
		Jsonb	   *failure = WfJsonbGetJsonb(tr->run->context, "failure");
		WfJsonBuilder b;

		WfJbBegin(&b);
		WfJbInt(&b, "compensated", done && JB_ROOT_IS_ARRAY(done) ? JB_ROOT_COUNT(done) : 0);
		if (tr->run->status == WF_RUN_COMPENSATING)
		{
			/* a saga: the failure it undid, for wf.explain() */
			WfJbText(&b, "step", failure ? WfJsonbGetText(failure, "step") : NULL);
			WfJbText(&b, "reason", failure ? WfJsonbGetText(failure, "reason") : NULL);
			WfAppendEvent(tr, WF_EV_RUN_COMPENSATED, NULL, 0, WfJbEnd(&b));
		}
		else
			WfAppendEvent(tr, WF_EV_RUN_CANCELLED, NULL, 0, WfJbEnd(&b));
	}
}

/*
 * start_compensation fixes the list of compensations and starts the
 * first.  settled_step/settled_visit name a step whose completion (or lost
 * attempt) is part of this transition; it is undone first.  Completions
 * appended earlier in this transition are not yet in wf.events either:
 * they come next, newest first, then those of wf.events.
 */
static void
start_compensation(WfTransition *tr, const char *settled_step, int32 settled_visit)
{
	JsonbParseState *state = NULL;
	JsonbValue *arr;
	Datum		values[1];
	uint64		n;
	uint64		i;
	int			npending = 0;
	int			nlocal = tr->nevents;
	char	  **steps;
	int32	   *visits;
	WfJsonBuilder b;

	values[0] = UUIDPGetDatum(&tr->run->run_id);
	n = WfPlanExec(&WfStepCompensatePlans, PLAN_COMPLETED_STEPS, values, NULL, false, 0, SPI_OK_SELECT);
	steps = palloc(sizeof(char *) * (n + 1 + nlocal));
	visits = palloc(sizeof(int32) * (n + 1 + nlocal));
	for (i = 0; i <= n + nlocal; i++)
	{
		char	   *step;
		int32		visit;
		int			idx;
		int			k;
		bool		seen = false;

		if (i == 0)
		{
			if (settled_step == NULL)
				continue;
			step = pstrdup(settled_step);
			visit = settled_visit;
		}
		else if (i <= (uint64) nlocal)
		{
			const WfEvent *ev = &tr->events[nlocal - i];

			if (ev->type != WF_EV_TASK_COMPLETED || ev->step == NULL)
				continue;
			step = pstrdup(ev->step);
			visit = (int32) WfJsonbGetInt(ev->payload, "visit", 1);
		}
		else
		{
			step = WfGetTextOrNull(i - 1 - nlocal, 1);
			visit = DatumGetInt32(WfGetDatumNotNull(i - 1 - nlocal, 2));
		}
		idx = WfDefinitionStepIndex(tr->def, step);
		if (idx < 0 || tr->def->steps[idx].compensate == NULL)
			continue;
		for (k = 0; k < npending; k++)
			if (strcmp(steps[k], step) == 0 && visits[k] == visit)
				seen = true;
		if (seen)
			continue;
		steps[npending] = step;
		visits[npending] = visit;
		npending++;
	}

	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = 0; i < (uint64) npending; i++)
	{
		Jsonb	   *item;

		WfJbBegin(&b);
		WfJbText(&b, "step", steps[i]);
		WfJbInt(&b, "visit", visits[i]);
		item = WfJbEnd(&b);
		(void) pushJsonbValue(&state, WJB_ELEM,
							  &(JsonbValue) {.type = jbvBinary,
											 .val.binary.data = &item->root,
											 .val.binary.len = VARSIZE(item) - VARHDRSZ});
	}
	arr = pushJsonbValue(&state, WJB_END_ARRAY, NULL);

	WfJbBegin(&b);
	WfJbJsonb(&b, "pending", JsonbValueToJsonb(arr));
	WfAppendEvent(tr, WF_EV_COMPENSATION_STARTED, NULL, 0, WfJbEnd(&b));
	WfNextCompensation(tr);
}

/*
 * compensation_failed ends a run whose compensation gave up (its retry
 * policy is exhausted, or it kept losing its workers) as
 * "compensation_failed", for an operator.
 */
static void
compensation_failed(WfTransition *tr, const char *reason, Jsonb *error)
{
	WfJsonBuilder b;
	int			count;
	Jsonb	   *first = first_pending(tr->run, &count);

	WfJbBegin(&b);
	WfJbText(&b, "reason", reason);
	WfJbInt(&b, "visit", first ? WfJsonbGetInt(first, "visit", 1) : 0);
	WfJbInt(&b, "pending", count);
	WfJbJsonb(&b, "error", error);
	WfAppendEvent(tr, WF_EV_COMPENSATION_FAILED, tr->run->current_step, 0, WfJbEnd(&b));
}

/*
 * compensate_failed_run is WfFailRun for a definition with "on_failure":
 * "compensate" (a saga): the run does not end failed.  attempt is the one
 * the step failed at (as WfFailRun finds it).  The live task, if
 * any, is withdrawn, compensation_requested records the failure (step,
 * attempt, reason, error; the reducer keeps it in $.failure) and the run
 * is "compensating": the compensations of its completed steps run newest
 * first, as after wf.cancel_run(), and it ends "compensated", or
 * "compensation_failed" for an operator.  The failing step is undone too
 * when nobody knows whether it did its work: its attempt timed out after
 * a worker had claimed it (start_to_close, heartbeat; for a step's total
 * or the run's timeout, the attempt live then was leased, or its
 * completion was held by a pause), as a lost attempt of a cancelled run
 * is.  Live child runs are cancelled (they
 * undo their own work).
 */
static void
compensate_failed_run(WfTransition *tr, const char *step, int32 attempt,
					const char *reason, Jsonb *error)
{
	WfRunState *run = tr->run;
	const char *old_status = WfRunStatusName(run->status);
	int			idx = step != NULL ? WfDefinitionStepIndex(tr->def, step) : -1;
	const WfStepDef *sd = idx >= 0 ? &tr->def->steps[idx] : NULL;
	char	   *code = error != NULL ? WfJsonbGetText(error, "code") : NULL;
	char	   *timeout = error != NULL ? WfJsonbGetText(error, "timeout") : NULL;
	bool		undo_step;
	int32		visit = 0;
	WfJsonBuilder b;

	undo_step = sd != NULL && sd->type == WF_STEP_TASK && sd->compensate != NULL &&
		code != NULL && strcmp(code, "timed_out") == 0 &&
		(timeout == NULL || strcmp(timeout, "schedule_to_start") != 0);
	if (undo_step && timeout != NULL &&
		(strcmp(timeout, "run") == 0 || strcmp(timeout, "total") == 0))
	{
		/* a step or run timeout: only an attempt a worker held may have worked */
		undo_step = false;
		if (run->current_task != 0)
		{
			Datum		values[1];
			char	   *task_status;

			values[0] = Int64GetDatum(run->current_task);
			if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_TASK_ROW, values, NULL, false, 1, SPI_OK_SELECT) != 1)
				elog(ERROR, "the live task of a run is missing");
			task_status = WfGetTextOrNull(0, 1);
			/* leased, or a completion held while the run was paused */
			undo_step = strcmp(task_status, "leased") == 0 ||
				strcmp(task_status, "completed") == 0;
		}
	}
	if (undo_step)
		visit = WfNextVisit(run, step);

	WfWithdrawCurrentTask(tr, reason);
	if (tr->def->has_children && tr->stop_children == WF_STOP_NONE)
		tr->stop_children = WF_STOP_CANCEL;	/* they undo their own work */
	WfJbBegin(&b);
	WfJbText(&b, "step", step);
	WfJbInt(&b, "attempt", attempt);
	WfJbText(&b, "reason", reason);
	WfJbJsonb(&b, "error", error);
	WfJbText(&b, "old_status", old_status);
	WfJbText(&b, "new_status", "compensating");
	if (undo_step)
		WfJbInt(&b, "undo_visit", visit);
	WfAppendEvent(tr, WF_EV_COMPENSATION_REQUESTED, NULL, 0, WfJbEnd(&b));
	start_compensation(tr, undo_step ? step : NULL, visit);
}

/*
 * WfRequestCancel records wf.cancel_run() on a running, paused or failed
 * run (see the header comment) and, unless an attempt is in flight,
 * starts the compensations.  A failed run has no live task: the
 * compensations of its completed steps start at once.
 */
void
WfRequestCancel(WfTransition *tr, const char *reason)
{
	WfRunState *run = tr->run;
	const char *old_status = WfRunStatusName(run->status);
	const WfStepDef *sd = NULL;
	int			idx = -1;
	int64		in_flight = 0;
	char	   *task_status = NULL;
	WfJsonBuilder b;

	if (run->current_step != NULL)
		sd = WfTaskStepDef(tr->def, run->current_step, &idx);
	/* the step's kind lets go of what the visit holds (an approval's tokens) */
	if (sd != NULL && !WfStepKindFor(sd)->undoes && run->status != WF_RUN_FAILED)
		WfLeaveStep(tr, idx, "cancelled");
	if (run->current_task != 0)
	{
		WfLockedTask task;

		if (!WfReadTask(run->current_task, &task))
			elog(ERROR, "the live task of a run is missing");
		task_status = task.status;
		/* nothing to undo for work not begun */
		if (strcmp(task_status, "ready") == 0)
			WfWithdrawCurrentTask(tr, "cancelled");
		else
			in_flight = run->current_task;
	}

	if (tr->def->has_children)
		tr->stop_children = WF_STOP_CANCEL;	/* they undo their own work */
	WfJbBegin(&b);
	WfJbText(&b, "reason", reason);
	WfJbText(&b, "old_status", old_status);
	WfJbText(&b, "new_status", "cancelling");
	WfJbText(&b, "step", run->current_step);
	if (in_flight != 0)
		WfJbInt(&b, "in_flight_task", in_flight);
	WfAppendEvent(tr, WF_EV_CANCEL_REQUESTED, NULL, 0, WfJbEnd(&b));

	if (in_flight == 0)
	{
		start_compensation(tr, NULL, 0);
		return;
	}
	if (strcmp(task_status, "completed") == 0 || strcmp(task_status, "failed") == 0)
	{
		/* a result held while the run was paused settles the attempt now */
		WfApplyHeldResult(tr, idx, task_status);
		return;
	}
	/* with its worker: deadlines suspended by a pause are looked at again */
	{
		Datum		values[2];

		values[0] = Int64GetDatum(in_flight);
		values[1] = TimestampTzGetDatum(tr->now);
		if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_TASK_RESUME, values, NULL, false, 0, SPI_OK_UPDATE) == 1)
			WfNoteTimer(tr->now);
	}
}

/*
 * compensation_task_completed: a compensation did its work; the next one
 * is scheduled, or the run ends undone.
 */
static void
compensation_task_completed(WfTransition *tr, int step_index, const WfTaskResult *res)
{
	const WfStepDef *sd = WfTaskStepDef(tr->def, tr->run->current_step, &step_index);

	WfTaskCompleted(tr, sd, res);
	WfNextCompensation(tr);
}

/*
 * compensation_gave_up: a compensation's attempts gave up; the run waits
 * for an operator as compensation_failed.
 */
static void
compensation_gave_up(WfTransition *tr, int step_index, const char *reason,
					 Jsonb *error, int32 attempt)
{
	compensation_failed(tr, reason, error);
}

const WfStepKindOps WfCompensationStepKind = {
	.name = "compensation",
	.undoes = true,
	.explain = WfExplainAttempt,	/* like a task */
	.task_completed = compensation_task_completed,
	.task_gave_up = compensation_gave_up,
};

const WfUndoOps WfCompensationUndo = {
	.settle = start_compensation,
	.compensate_failure = compensate_failed_run,
};
