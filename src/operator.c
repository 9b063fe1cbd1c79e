/*-------------------------------------------------------------------------
 *
 * operator.c
 *	  Operator commands that stop and restart a run's progress:
 *	  wf.pause_run, wf.resume_run, wf.retry_step and wf.skip_step.
 *
 * Each command is a run command (command.c): WfRunCommandBegin locks the
 * run (its live task first) and checks, by the command's WfRunCommandSpec,
 * that it applies to the run's state; the command appends an event that
 * records the actor, the reason and the state before, and
 * WfRunCommandFinish writes it in the same transaction as the snapshot.
 * Nothing here edits a snapshot directly: the reducer (state.c) applies
 * the events, and replay rebuilds the same state.
 *
 * Pausing: a paused run schedules nothing new.  Its unclaimed attempt is
 * withdrawn; an attempt a worker holds runs on, and its result is recorded
 * (result_held) and applied when the run resumes.  Timers that come due
 * while the run is paused are held (timer.c) and made due again by
 * wf.resume_run(); deadlines of the live attempt are suspended and looked
 * at again on resume.  The run timeout is not held: it bounds the run's
 * whole life, paused or not.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/operator.c
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

#include "api.h"
#include "argcheck.h"
#include "command.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "notify.h"
#include "operator.h"
#include "runstore.h"
#include "sensitive.h"
#include "spi_util.h"
#include "state.h"
#include "step_compensate.h"
#include "transition.h"

PG_FUNCTION_INFO_V1(wfengine_cancel_run);
PG_FUNCTION_INFO_V1(wfengine_pause_run);
PG_FUNCTION_INFO_V1(wfengine_resume_run);
PG_FUNCTION_INFO_V1(wfengine_retry_step);
PG_FUNCTION_INFO_V1(wfengine_skip_step);

/* the statements of operator.c (registered by _PG_init: WfOperatorPlans) */
enum
{
	PLAN_TIMERS_UNHOLD = 0
};

static const WfPlanSpec operator_plan_specs[] = {
	[PLAN_TIMERS_UNHOLD] = {
		"timers_unhold",
		"UPDATE wf.timers tm SET fire_at = $2, outcome = NULL "
		"WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		" AND tm.outcome OPERATOR(pg_catalog.=) 'held'",
		2, {UUIDOID, TIMESTAMPTZOID}
	},
};

WfPlanTable WfOperatorPlans = WF_PLAN_TABLE("operator", operator_plan_specs);


/* forward declarations */
static void status_change_begin(WfJsonBuilder *b, WfRunCommand *cmd,
								const char *old_status, const char *new_status);
static void append_step_event(WfRunCommand *cmd, WfEventType type, const char *step,
							  const char *old_status, const char *new_status,
							  int32 visit, int32 attempt, Jsonb *output);
static int32 pending_compensation_visit(WfRunState *run);
static void resume_live_task(WfTransition *tr, int idx);
static Datum retry_compensation(WfRunCommand *cmd);
static int64 retry_run_timeout(FunctionCallInfo fcinfo);

/* the commands of this file: the statuses each applies to, its refusals */
static const WfRunCommandSpec pause_spec = {
	.what = "pause",
	.applies_to = WF_ST(RUNNING),
	.hint = "Only running runs can be paused.",
	.hints = {{WF_RUN_PAUSED, "It is paused already; wf.resume_run() resumes it."}},
	.quota_hint = "The run takes no more pauses; wf.terminate_run() and wf.cancel_run() still stop it.",
};
static const WfRunCommandSpec resume_spec = {
	.what = "resume",
	.applies_to = WF_ST(PAUSED),
	.hint = "Only paused runs can be resumed.",
};
static const WfRunCommandSpec retry_spec = {
	.what = "retry a step of",
	.applies_to = WF_ST(FAILED) | WF_ST(COMPENSATION_FAILED),
	.hint = "Only a failed run can have its step retried; a paused run is resumed with wf.resume_run().",
	.quota_hint = "The run takes no more retries; wf.skip_step() still moves it on.",
};
static const WfRunCommandSpec skip_spec = {
	.what = "skip a step of",
	.applies_to = WF_ST(RUNNING) | WF_ST(FAILED) | WF_ST(COMPENSATION_FAILED),
	.hint = "Only running and failed runs have a step to skip.",
	.hints = {{WF_RUN_PAUSED, "Resume the run with wf.resume_run() first."}},
};
static const WfRunCommandSpec cancel_spec = {
	.what = "cancel",
	.applies_to = WF_ST(RUNNING) | WF_ST(PAUSED) | WF_ST(FAILED),
	.hint = "Only running, paused and failed runs can be cancelled.",
	.hints = {
		{WF_RUN_CANCELLING, "It is being cancelled already; wf.explain() shows its compensations."},
		{WF_RUN_COMPENSATING, "It is undoing its completed steps after a failure already; wf.explain() shows its compensations."},
	},
};

/*
 * status_change_begin begins the payload of an operator command's event
 * with what every one records: the reason and the run's status before and
 * after.
 */
static void
status_change_begin(WfJsonBuilder *b, WfRunCommand *cmd, const char *old_status,
					const char *new_status)
{
	WfJbBegin(b);
	WfJbText(b, "reason", cmd->reason);
	WfJbText(b, "old_status", old_status);
	WfJbText(b, "new_status", new_status);
}

/*
 * append_step_event appends step_retried (with the new attempt) or
 * step_skipped (with the output given) for step, of the visit it applies
 * to.
 */
static void
append_step_event(WfRunCommand *cmd, WfEventType type, const char *step,
				  const char *old_status, const char *new_status,
				  int32 visit, int32 attempt, Jsonb *output)
{
	WfJsonBuilder b;

	status_change_begin(&b, cmd, old_status, new_status);
	WfJbInt(&b, "visit", visit);
	if (type == WF_EV_STEP_RETRIED)
		WfJbInt(&b, "attempt", attempt);
	else
		WfJbJsonb(&b, "output", output);
	WfAppendEvent(&cmd->tr, type, step, 0, WfJbEnd(&b));
}

/*
 * pending_compensation_visit returns the visit of the compensation the
 * undone run is at: the first of its pending ones.
 */
static int32
pending_compensation_visit(WfRunState *run)
{
	Jsonb	   *comp = WfJsonbGetJsonb(run->context, "compensation");
	Jsonb	   *pending = comp ? WfJsonbGetJsonb(comp, "pending") : NULL;

	if (pending == NULL || !JB_ROOT_IS_ARRAY(pending) || JB_ROOT_COUNT(pending) == 0)
		elog(ERROR, "run %s has no pending compensation", WfRunIdText(&run->run_id));
	return (int32) WfJsonbGetInt(JsonbValueToJsonb(getIthJsonbValueFromContainer(&pending->root, 0)),
								 "visit", 1);
}

/*
 * wfengine_pause_run is wf.pause_run(run, reason): a running run stops
 * making progress until wf.resume_run().  Its attempt that no worker has
 * claimed yet is withdrawn (it is scheduled again on resume); an attempt
 * a worker holds goes on, and its result is held.  Returns "paused".
 */
Datum
wfengine_pause_run(PG_FUNCTION_ARGS)
{
	WfRunCommand cmd;
	WfLockedTask task;
	WfJsonBuilder b;
	int64		in_flight = 0;
	bool		withdrawn = false;

	WfRunCommandBeginCall(&cmd, fcinfo, 1, &pause_spec);
	if (cmd.run.current_task != 0)
	{
		if (!WfReadTask(cmd.run.current_task, &task))
			elog(ERROR, "the live task of run %s is missing", WfRunIdText(cmd.run_id));
		if (strcmp(task.status, "ready") == 0)
		{
			WfWithdrawCurrentTask(&cmd.tr, "paused");
			withdrawn = true;
		}
		else
			in_flight = cmd.run.current_task;
	}

	status_change_begin(&b, &cmd, "running", "paused");
	WfJbText(&b, "step", cmd.run.current_step);
	if (in_flight != 0)
		WfJbInt(&b, "in_flight_task", in_flight);
	WfJbBool(&b, "withdrawn", withdrawn);
	WfAppendEvent(&cmd.tr, WF_EV_RUN_PAUSED, NULL, 0, WfJbEnd(&b));
	PG_RETURN_DATUM(WfRunCommandFinish(&cmd, "paused"));
}

/*
 * resume_live_task: the paused run still has its live attempt.  A result
 * that came while it was paused is applied now; an attempt still with its
 * worker gets its deadlines looked at again.
 */
static void
resume_live_task(WfTransition *tr, int idx)
{
	WfRunState *run = tr->run;
	WfLockedTask task;
	Datum		values[2];

	if (!WfReadTask(run->current_task, &task))
		elog(ERROR, "the live task of a paused run is missing");
	if (strcmp(task.status, "completed") == 0 || strcmp(task.status, "failed") == 0)
	{
		WfApplyHeldResult(tr, idx, task.status);
		return;
	}
	/* still with its worker: the deadlines were suspended */
	values[0] = Int64GetDatum(run->current_task);
	values[1] = TimestampTzGetDatum(tr->now);
	if (WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_TASK_RESUME, values, NULL, false, 0, SPI_OK_UPDATE) == 1)
		WfNoteTimer(tr->now);
}

/*
 * wfengine_resume_run is wf.resume_run(run, reason): a paused run goes on
 * where it stopped.  Returns the run's status afterwards ("running", or
 * how it ended when a held result ended it).
 */
Datum
wfengine_resume_run(PG_FUNCTION_ARGS)
{
	WfRunCommand cmd;
	WfJsonBuilder b;
	Datum		values[2];
	int			idx = -1;

	WfRunCommandBeginCall(&cmd, fcinfo, 1, &resume_spec);
	if (cmd.run.current_step != NULL)
		idx = WfDefinitionStepIndex(cmd.def, cmd.run.current_step);

	status_change_begin(&b, &cmd, "paused", "running");
	WfJbText(&b, "step", cmd.run.current_step);
	WfAppendEvent(&cmd.tr, WF_EV_RUN_RESUMED, NULL, 0, WfJbEnd(&b));

	/* timers held while paused come due now, whatever else waits */
	values[0] = UUIDPGetDatum(cmd.run_id);
	values[1] = TimestampTzGetDatum(cmd.tr.now);
	if (WfPlanExec(&WfOperatorPlans, PLAN_TIMERS_UNHOLD, values, NULL, false, 0, SPI_OK_UPDATE) > 0)
		WfNoteTimer(cmd.tr.now);
	if (idx >= 0 && cmd.run.current_task != 0)
		resume_live_task(&cmd.tr, idx);
	else if (idx >= 0)
		WfResumeStep(&cmd.tr, idx);	/* the step's kind takes up what the pause stopped */
	PG_RETURN_DATUM(WfRunCommandFinish(&cmd, "resumed"));
}

/*
 * retry_compensation is wf.retry_step() for a run whose compensation gave
 * up: the compensation runs again (next attempt, same visit and
 * idempotency key) and the run goes on cancelling (or compensating, when
 * its compensations undo a failure).
 */
static Datum
retry_compensation(WfRunCommand *cmd)
{
	WfRunState *run = &cmd->run;
	int32		visit = pending_compensation_visit(run);
	int32		attempt = WfNextAttempt(&run->run_id, run->current_step, visit);

	append_step_event(cmd, WF_EV_STEP_RETRIED, run->current_step, "compensation_failed",
					  WfRunStatusName(WfUndoingStatus(run)), visit, attempt, NULL);
	WfScheduleCompensation(&cmd->tr, attempt);
	return WfRunCommandFinish(cmd, "retried");
}

/* the longest run_timeout wf.retry_step takes: a definition's longest timeout */
#define WF_MAX_RETRY_RUN_TIMEOUT ((double) 366 * USECS_PER_DAY)

/*
 * retry_run_timeout validates the run_timeout argument of wf.retry_step
 * (the third; NULL when not given) and returns it in microseconds, or 0
 * when it is not given.
 */
static int64
retry_run_timeout(FunctionCallInfo fcinfo)
{
	return (int64) WfIntervalArg(fcinfo, 2, false, WF_MAX_RETRY_RUN_TIMEOUT,
								 "run_timeout must be positive and at most 366 days",
								 "Leave run_timeout out (NULL) to count the definition's \"timeout\", if it has one, from the retry.");
}

/*
 * wfengine_retry_step is wf.retry_step(run, reason, run_timeout): a run
 * that failed at a task step runs again from that step.  The new attempt
 * keeps the visit (and so the idempotency key) of the failed one and
 * takes the next attempt number; its input is mapped from the context as
 * it is now, so that a wf.update_context() made to repair the run takes
 * effect.  It is one attempt: if it fails, the run fails again, unless the
 * step's retry policy has attempts left.  The retried run has a time
 * limit again (a failed run's timers are gone, its run timeout with
 * them): run_timeout from now when given, else the definition's
 * "timeout" from now, else none.  Returns "running".
 */
Datum
wfengine_retry_step(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = WfRunArgument(fcinfo);
	char	   *reason = WfRequireReason(fcinfo, 1);
	int64		run_timeout = retry_run_timeout(fcinfo);
	WfRunCommand cmd;
	const WfStepDef *sd;
	int32		visit;
	int32		attempt;
	int			idx;

	WfRunCommandBegin(&cmd, run_id, reason, &retry_spec);
	if (cmd.run.status == WF_RUN_COMPENSATION_FAILED && run_timeout > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("run_timeout does not apply to run %s", WfRunIdText(run_id)),
				 errdetail("Its compensation is retried, and a cancelling run has no run timeout."),
				 errhint("Call wf.retry_step() without run_timeout.")));
	if (cmd.run.status == WF_RUN_COMPENSATION_FAILED)
		PG_RETURN_DATUM(retry_compensation(&cmd));
	idx = cmd.run.current_step ? WfDefinitionStepIndex(cmd.def, cmd.run.current_step) : -1;
	if (idx < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot retry a step of run %s", WfRunIdText(run_id)),
				 errdetail("The run failed as a whole, not at a step.")));
	sd = &cmd.def->steps[idx];
	if (sd->type != WF_STEP_TASK)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot retry step \"%s\" of run %s", sd->name, WfRunIdText(run_id)),
				 errdetail("Only task steps are retried; step \"%s\" is not a task step.", sd->name),
				 errhint("wf.skip_step() moves the run past the step with an output you give.")));

	visit = WfNextVisit(&cmd.run, sd->name);
	attempt = WfNextAttempt(run_id, sd->name, visit);
	append_step_event(&cmd, WF_EV_STEP_RETRIED, sd->name, "failed", "running",
					  visit, attempt, NULL);
	/* the run's time limit, counted afresh from the retry */
	if (run_timeout == 0)
		run_timeout = cmd.def->run_timeout;
	if (run_timeout > 0)
		WfSetTimer(&cmd.tr, WF_TIMER_RUN_TIMEOUT, NULL, 1, cmd.tr.now + run_timeout, NULL);
	WfScheduleStep(&cmd.tr, idx, attempt, cmd.tr.now, NULL);
	PG_RETURN_DATUM(WfRunCommandFinish(&cmd, "retried"));
}
/*
 * wfengine_skip_step is wf.skip_step(run, output, reason, step): the
 * current step of a running or failed run ends with the output given, as
 * if it had produced it, and the run moves on.  The live attempt, if any,
 * is withdrawn (its worker's result is stale).  Refused for a step the
 * definition does not allow to be skipped (approval steps unless marked
 * "skippable": true, any step marked "skippable": false), and, when step
 * is given, unless the run is at that step.  Returns the run's status
 * afterwards.
 */
Datum
wfengine_skip_step(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = WfRunArgument(fcinfo);
	Jsonb	   *output;
	char	   *reason;
	char	   *expected = WfTextArg(fcinfo, 3, "step", WF_ARG_NAME);
	WfRunCommand cmd;
	const WfStepDef *sd;
	int32		visit;
	int			idx;

	WfRequireArg(fcinfo, 1, "output",
				 "Give the output the following steps should see as the skipped step's, e.g. '{}'.");
	output = PG_GETARG_JSONB_P(1);
	reason = WfRequireReason(fcinfo, 2);
	WfCheckPayloadSize(output, "output", "a skipped step");
	WfRefuseSealedLookalikes(output, "output", "a skipped step");

	WfRunCommandBegin(&cmd, run_id, reason, &skip_spec);
	sd = cmd.run.current_step ? WfTaskStepDef(cmd.def, cmd.run.current_step, &idx) : NULL;
	if (sd == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot skip a step of run %s", WfRunIdText(run_id)),
				 errdetail("The run is not at a step.")));
	if (expected != NULL && strcmp(expected, sd->name) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot skip step \"%s\" of run %s", expected, WfRunIdText(run_id)),
				 errdetail("The run is at step \"%s\".", sd->name)));
	if (!sd->skippable)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("step \"%s\" of run %s cannot be skipped", sd->name, WfRunIdText(run_id)),
				 sd->type == WF_STEP_APPROVAL ?
				 errdetail("An approval step is skipped only when its definition marks it \"skippable\": true.") :
				 errdetail("Its definition marks it \"skippable\": false."),
				 errhint("wf.terminate_run() ends the run instead.")));

	if (WfIsCompensation(sd->name))
	{
		/* an operator stands in for a compensation that gave up */
		append_step_event(&cmd, WF_EV_STEP_SKIPPED, sd->name, cmd.old_status,
						  WfRunStatusName(WfUndoingStatus(&cmd.run)),
						  pending_compensation_visit(&cmd.run), 0, output);
		WfNextCompensation(&cmd.tr);
		PG_RETURN_DATUM(WfRunCommandFinish(&cmd, "step_done"));
	}
	/* the output stands in for the worker's: sealed like it */
	if (sd->n_sensitive_output > 0)
		output = WfSealKeys(cmd.run.tenant_id, output, sd->sensitive_output,
							sd->n_sensitive_output);
	visit = WfNextVisit(&cmd.run, sd->name);
	WfWithdrawCurrentTask(&cmd.tr, "skipped");
	WfLeaveStep(&cmd.tr, idx, "skipped");	/* its tokens, its child runs */
	append_step_event(&cmd, WF_EV_STEP_SKIPPED, sd->name, cmd.old_status, "running",
					  visit, 0, output);
	WfAdvance(&cmd.tr, idx);
	PG_RETURN_DATUM(WfRunCommandFinish(&cmd, "step_done"));
}

/*
 * wfengine_cancel_run is wf.cancel_run(run, reason): it cancels a running,
 * paused or failed run with compensation.  Returns the run's status
 * afterwards: "cancelling" while an attempt in flight settles or
 * compensations run, "cancelled" when there was nothing to undo.
 */
Datum
wfengine_cancel_run(PG_FUNCTION_ARGS)
{
	WfRunCommand cmd;

	WfRunCommandBeginCall(&cmd, fcinfo, 1, &cancel_spec);
	WfRequestCancel(&cmd.tr, cmd.reason);
	/* subscribers hear the status: "cancelling", or how the cancel ended it */
	PG_RETURN_DATUM(WfRunCommandFinish(&cmd, NULL));
}
