/*-------------------------------------------------------------------------
 *
 * result.c
 *	  Accepting results of task attempts: completion and failure.
 *
 * A result names a task attempt and the fence of the lease it was
 * produced under.  It is applied only when it is the first result of the
 * current lease.  The task row lock is the single arbiter: of two racing
 * reports, or a report racing a re-claim, one waits for the other to
 * commit and then sees its effect.  A result that does not win is
 * classified and recorded in the history:
 *
 *	 duplicate	the same fence already reported a result for this attempt;
 *	 stale		an older fence (the task was claimed again after the lease
 *				expired) or an attempt that is no longer current.
 *
 * Neither changes the snapshot beyond appending its event (once the run
 * has max_events_per_run events, not even that: the report is counted in
 * wf.suppressed_events, and the answer is the same).  A fence the
 * engine never issued is an error: it can only come from a bug or a
 * forgery, and answering it would leak nothing useful.
 *
 * One statement locks the task row and then its run row (FOR UPDATE OF
 * t, r, in that order: the lock order documented in runstore.c) and reads
 * both.  Under those locks the verdict is decided in C: the report wins
 * when the task is leased, carries this fence and the run is running.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/result.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "api.h"
#include "argcheck.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "metrics.h"
#include "notify.h"
#include "quota.h"
#include "result.h"
#include "runstore.h"
#include "sensitive.h"
#include "spi_util.h"
#include "state.h"
#include "tenant.h"
#include "transition.h"

PG_FUNCTION_INFO_V1(wfengine_complete_task);
PG_FUNCTION_INFO_V1(wfengine_fail_task);
PG_FUNCTION_INFO_V1(wfengine_heartbeat);

/* the statements of result.c (registered by _PG_init: WfResultPlans) */
enum
{
	PLAN_HEARTBEAT = 0,
	PLAN_TASK_PEEK
};

static const WfPlanSpec result_plan_specs[] = {
	[PLAN_HEARTBEAT] = {
		"heartbeat",
		"UPDATE wf.tasks t SET last_heartbeat_at = $4,"
		" heartbeat_details = COALESCE($5, t.heartbeat_details),"
		" lease_expires_at = $4 OPERATOR(pg_catalog.+) t.lease,"
		" deadline_at = LEAST($4 OPERATOR(pg_catalog.+) t.lease, t.timeout_at,"
		"  $4 OPERATOR(pg_catalog.+) t.heartbeat_timeout) "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.fence OPERATOR(pg_catalog.=) $2 "
		"AND t.tenant_id OPERATOR(pg_catalog.=) $3 AND t.status OPERATOR(pg_catalog.=) 'leased' "
		"RETURNING t.run_id, t.deadline_at, t.step,"
		" (SELECT r.status FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) t.run_id)",
		5, {INT8OID, INT8OID, TEXTOID, TIMESTAMPTZOID, JSONBOID}
	},
	[PLAN_TASK_PEEK] = {
		"task_peek",
		"SELECT t.status, t.fence, r.status FROM wf.tasks t JOIN wf.runs r"
		" ON r.run_id OPERATOR(pg_catalog.=) t.run_id "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1 AND t.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {INT8OID, TEXTOID}
	},
};

WfPlanTable WfResultPlans = WF_PLAN_TABLE("result", result_plan_specs);

/* the columns of task_peek */
enum
{
	TASK_PEEK_COL_STATUS = 1,
	TASK_PEEK_COL_FENCE,
	TASK_PEEK_COL_RUN_STATUS
};

/* the columns of heartbeat */
enum
{
	HEARTBEAT_COL_RUN_ID = 1,
	HEARTBEAT_COL_DEADLINE_AT,
	HEARTBEAT_COL_STEP,
	HEARTBEAT_COL_RUN_STATUS
};


/* what a worker reports */
typedef struct WfReport
{
	int64		task_id;
	int64		fence;
	bool		is_failure;
	Jsonb	   *output;			/* for a completion */
	Jsonb	   *error;			/* for a failure */
	bool		retryable;		/* for a failure */
} WfReport;

/* the hint of a fence the task never had, and of a NULL one */
#define WF_FENCE_HINT "Report a result with the fence that wf.claim_tasks() returned with the task."

/* forward declarations */
static const char *report_result(const WfReport *rep, bool lenient, const WfLeaseOffer *offer,
								 WfScheduledTask *next);

/*
 * refuse_fence reports a fence that was never issued for task_id, for a
 * result and for a heartbeat alike.
 */
static void
pg_attribute_noreturn()
refuse_fence(int64 task_id, int64 fence)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("fence %lld was never issued for task %lld",
					(long long) fence, (long long) task_id),
			 errhint(WF_FENCE_HINT)));
}

/*
 * finish_task_row records the winning report in its task row: the
 * transition's write records it (WfTransition.finish_task), before the
 * run's new attempt.
 */
static void
finish_task_row(WfTransition *tr, const WfReport *rep)
{
	tr->finish_task = rep->task_id;
	tr->finish_status = rep->is_failure ? "failed" : "completed";
	tr->finish_output = rep->output;
	tr->finish_error = rep->error;
}

/*
 * append_report_event appends the event that records a report: type is
 * result_held (the winning report of a paused run's attempt, kept in the
 * task row and the history until wf.resume_run applies it), or
 * result_duplicate or result_stale (a report that did not win).
 */
static void
append_report_event(WfTransition *tr, WfEventType type, const WfReport *rep,
					const WfLockedTask *task)
{
	WfJsonBuilder b;
	bool		held = type == WF_EV_RESULT_HELD;

	WfJbBegin(&b);
	WfJbInt(&b, "task_id", rep->task_id);
	WfJbInt(&b, "fence", rep->fence);
	if (held)
	{
		WfJbText(&b, "worker", task->worker);
		WfJbInt(&b, "visit", task->visit);
	}
	else
	{
		WfJbInt(&b, "current_fence", task->fence);
		WfJbText(&b, "task_status", task->status);
	}
	WfJbText(&b, "report", rep->is_failure ? "failure" : "completion");
	if (!rep->is_failure)
		WfJbJsonb(&b, "output", rep->output);
	else
	{
		WfJbJsonb(&b, "error", rep->error);
		if (held)
			WfJbBool(&b, "retryable", rep->retryable);
	}
	WfAppendEvent(tr, type, task->step, task->attempt, WfJbEnd(&b));
}

/*
 * accept_report applies the report that won (the first of the current
 * lease of the run's live attempt) and returns the verdict: "accepted",
 * or "cancel_requested" when the run is being cancelled and no work
 * follows from it.
 */
static const char *
accept_report(WfTransition *tr, const WfReport *rep, const WfLockedTask *task)
{
	WfRunState *run = tr->run;
	int			idx = -1;
	bool		was_cancelling = run->status == WF_RUN_CANCELLING;

	if (WfTaskStepDef(tr->def, task->step, &idx) == NULL || run->current_task != rep->task_id ||
		run->current_attempt != task->attempt)
		elog(ERROR, "task %lld (step \"%s\", attempt %d) is not the current task of its run",
			 (long long) rep->task_id, task->step, task->attempt);
	finish_task_row(tr, rep);
	if (run->status == WF_RUN_PAUSED)
		append_report_event(tr, WF_EV_RESULT_HELD, rep, task);
	else
	{
		WfTaskResult res;

		res.task_id = rep->task_id;
		res.fence = rep->fence;
		res.visit = task->visit;
		res.worker = task->worker;
		res.is_failure = rep->is_failure;
		res.output = rep->output;
		res.error = rep->error;
		res.retryable = rep->retryable;
		/* a completion does not need it: a large one stays unread */
		res.input = task->input;
		res.input_seq = task->input_seq;
		WfApplyResult(tr, idx, &res);
	}
	/* recorded, but the run is being cancelled: no work follows from it */
	return (was_cancelling && !WfIsCompensation(task->step)) ?
		"cancel_requested" : "accepted";
}

/*
 * record_lost_report records a report that did not win in the run's
 * history (result_duplicate or result_stale) and returns the verdict:
 * "duplicate" or "stale".  *suppressed tells that the run is at
 * max_events_per_run and the report was only counted (quota.c).
 */
static const char *
record_lost_report(WfTransition *tr, const WfReport *rep, const WfLockedTask *task,
				   bool *suppressed)
{
	WfEventType type;
	const char *verdict;

	if (rep->fence == task->fence &&
		(strcmp(task->status, "completed") == 0 || strcmp(task->status, "failed") == 0))
		verdict = "duplicate";
	else
		verdict = "stale";
	type = strcmp(verdict, "duplicate") == 0 ? WF_EV_RESULT_DUPLICATE : WF_EV_RESULT_STALE;

	/* a run at max_events_per_run only counts it (quota.c) */
	*suppressed = WfSuppressAuditEvent(tr->run, type, tr->now);
	if (!*suppressed)
		append_report_event(tr, type, rep, task);
	return verdict;
}

/*
 * report_result applies or records one report and returns the verdict:
 * "accepted", "cancel_requested", "duplicate" or "stale".  An unknown
 * task or a fence never issued for it is an error, or, when lenient (the
 * batch entry points, batch.c), the verdict "unknown_task" or
 * "unknown_fence", which changed nothing.  When next is not NULL it is
 * set to the attempt that the report's transition scheduled (task_id 0:
 * none), written leased when it takes the lease offer (eager dispatch,
 * see WfLeaseOffer; NULL: none).
 */
static const char *
report_result(const WfReport *rep, bool lenient, const WfLeaseOffer *offer,
			  WfScheduledTask *next)
{
	const char *tenant = WfCurrentTenant();
	TimestampTz now = GetCurrentTimestamp();
	const char *verdict;
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	WfLockedTask task;
	bool		suppressed;

	if (next != NULL)
		memset(next, 0, sizeof(WfScheduledTask));
	WfApiBegin();

	/*
	 * Lock the task row, then its run row (the lock order of runstore.c), and
	 * read both under the locks: from here on nothing can change either (a
	 * run row read without a lock, below, is refused at its update if it
	 * changed after all).  An
	 * attempt that completed has no row any more (since 0.3.0): its run is
	 * found through the history's task_completed, which says what the row
	 * said (completed, under which fence), and locked.  A completion of
	 * a leased attempt under its fence takes the row instead of locking it
	 * (deleted as read, WfTakeTaskAndLockRun): its transition almost always
	 * completes the attempt, and the row is put back (end_attempt,
	 * WfPutBackTask) when it does not.
	 */
	if (!(rep->is_failure ?
		  WfLockTaskAndRun(rep->task_id, tenant, &run, &task, NULL) :
		  WfTakeTaskAndLockRun(rep->task_id, rep->fence, tenant, &run, &task)) &&
		!WfLockCompletedTask(rep->task_id, tenant, &run, &task))
	{
		if (lenient)
		{
			WfApiEnd();
			return "unknown_task";
		}
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("task %lld does not exist", (long long) rep->task_id)));
	}

	if ((rep->fence <= 0 || rep->fence > task.fence) && lenient)
	{
		WfApiEnd();
		return "unknown_fence";
	}
	if (rep->fence <= 0 || rep->fence > task.fence)
		refuse_fence(rep->task_id, rep->fence);

	def = WfDefinitionGet(run.definition_id);
	WfTransitionInit(&tr, &run, def, now);
	tr.offer = offer;

	/* sensitive keys of the output are sealed before anything stores them */
	if (rep->output != NULL)
	{
		int			sidx;
		const WfStepDef *ssd = WfTaskStepDef(def, task.step, &sidx);

		if (ssd != NULL && ssd->n_sensitive_output > 0)
			((WfReport *) rep)->output = WfSealKeys(run.tenant_id, rep->output,
													ssd->sensitive_output,
													ssd->n_sensitive_output);
	}

	if ((run.status == WF_RUN_RUNNING || run.status == WF_RUN_PAUSED ||
		 WF_RUN_UNDOING(run.status)) &&
		strcmp(task.status, "leased") == 0 && rep->fence == task.fence)
	{
		verdict = accept_report(&tr, rep, &task);
		WfTransitionWrite(&tr);
		if (next != NULL)
			WfScheduledTaskOf(&tr, next);
		/* a paused run's result is held: nothing changed that subscribers see */
		if (run.status != WF_RUN_PAUSED)
			WfNoteRunChange(run.tenant_id, &run.run_id, run.status == WF_RUN_RUNNING ?
							"step_done" : WfRunStatusName(run.status));
	}
	else
	{
		verdict = record_lost_report(&tr, rep, &task, &suppressed);
		if (!suppressed)
			WfTransitionWrite(&tr);
	}
	WfPutBackTask();
	WfCount(verdict[0] == 'a' ? WF_CNT_RESULTS_ACCEPTED :
			verdict[0] == 'c' ? WF_CNT_RESULTS_CANCEL_REQUESTED :
			verdict[0] == 'd' ? WF_CNT_RESULTS_DUPLICATE : WF_CNT_RESULTS_STALE, 1);
	WfApiEnd();
	return verdict;
}

/*
 * WfFailDamagedTask fails the attempt task_id that wf.claim_tasks has just
 * leased under fence, because its input holds a sealed value that does
 * not open (message says why): the engine reports the failure for the
 * worker, as wf.fail_task would, with the error code
 * "sealed_value_damaged", not retryable (the input would not open on the
 * next attempt either).  Called inside the claim's API call; it is an API
 * call of its own (result.c's report path, so the run follows its failure
 * rules: a catch, compensations, or failing).
 */
void
WfFailDamagedTask(int64 task_id, int64 fence, const char *message)
{
	WfReport	rep;
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbText(&b, "code", "sealed_value_damaged");
	WfJbText(&b, "message", message);
	WfJbText(&b, "detail", "The task input holds a sealed value that does not open; the engine failed the attempt instead of handing it out.");
	memset(&rep, 0, sizeof(rep));
	rep.task_id = task_id;
	rep.fence = fence;
	rep.is_failure = true;
	rep.error = WfJbEnd(&b);
	rep.retryable = false;
	(void) report_result(&rep, false, NULL, NULL);
}

/*
 * check_ids refuses NULL task ids and fences.
 */
static void
check_ids(FunctionCallInfo fcinfo)
{
	WfRequireArg(fcinfo, 0, "task_id", NULL);
	WfRequireArg(fcinfo, 1, "fence", WF_FENCE_HINT);
}

/*
 * WfReportArgs checks the arguments of one report, those of
 * wf.complete_task(task_id, fence, output) or wf.fail_task(task_id, fence,
 * error, retryable), which the _and_claim forms of batch.c begin with:
 * the task id and fence must not be NULL, nor the error and retryable of
 * a failure.  It returns the output or error (argument 2), JSON null for
 * a NULL output.
 */
Jsonb *
WfReportArgs(FunctionCallInfo fcinfo, bool is_failure)
{
	check_ids(fcinfo);
	if (!is_failure)
		return PG_ARGISNULL(2) ?
			DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("null"))) :
			PG_GETARG_JSONB_P(2);
	WfRequireArg(fcinfo, 2, "error",
				 "Describe the failure, for example '{\"code\": \"card_declined\", \"message\": \"...\"}'.");
	WfRequireArg(fcinfo, 3, "retryable", NULL);
	return PG_GETARG_JSONB_P(2);
}

/*
 * report_init fills in the report of task_id under fence: a completion
 * with output payload, or a failure with error payload (not NULL),
 * checked (size, sealed look-alikes).
 */
static void
report_init(WfReport *rep, int64 task_id, int64 fence, bool is_failure, Jsonb *payload)
{
	const char *what = is_failure ? "error" : "output";
	const char *owner;

	memset(rep, 0, sizeof(WfReport));
	rep->task_id = task_id;
	rep->fence = fence;
	rep->is_failure = is_failure;
	if (is_failure)
		rep->error = payload;
	else
		rep->output = payload;
	owner = psprintf("task %lld", (long long) rep->task_id);
	WfCheckPayloadSize(payload, what, owner);
	WfRefuseSealedLookalikes(payload, what, owner);
}

/*
 * report_of reads the report of wf.complete_task or wf.fail_task: the task
 * id and fence, and the output or error (payload, argument 2), checked.
 */
static void
report_of(FunctionCallInfo fcinfo, WfReport *rep, bool is_failure, Jsonb *payload)
{
	report_init(rep, PG_GETARG_INT64(0), PG_GETARG_INT64(1), is_failure, payload);
}

/*
 * wfengine_complete_task is wf.complete_task(task_id, fence, output).
 */
Datum
wfengine_complete_task(PG_FUNCTION_ARGS)
{
	WfReport	rep;

	report_of(fcinfo, &rep, false, WfReportArgs(fcinfo, false));
	PG_RETURN_TEXT_P(cstring_to_text(report_result(&rep, false, NULL, NULL)));
}

/*
 * wfengine_fail_task is wf.fail_task(task_id, fence, error, retryable).
 */
Datum
wfengine_fail_task(PG_FUNCTION_ARGS)
{
	WfReport	rep;

	report_of(fcinfo, &rep, true, WfReportArgs(fcinfo, true));
	rep.retryable = PG_GETARG_BOOL(3);
	PG_RETURN_TEXT_P(cstring_to_text(report_result(&rep, false, NULL, NULL)));
}

/*
 * wfengine_heartbeat is wf.heartbeat(task_id, fence, details): it extends
 * the lease of the current attempt by the lease it was claimed with,
 * pushes its heartbeat deadline, records the details as progress, and
 * answers "ok".  When the engine has withdrawn the attempt under this
 * lease (its step or run timed out, an operator skipped the step or ended
 * the run), it answers "cancel_requested": the worker should stop, and its
 * result would be stale.  While the run is being cancelled, the lease is
 * extended but the answer is "cancel_requested" too: the worker should
 * stop and report, and a completion is compensated.  For a lease that is no longer current it answers "stale".  The
 * last two change nothing.  Heartbeats are not run events: they change the
 * task row only, in one statement, and the details are kept there.
 */
Datum
wfengine_heartbeat(PG_FUNCTION_ARGS)
{
	int64		task_id;
	int64		fence;
	Jsonb	   *details = PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2);
	const char *tenant = WfCurrentTenant();
	const char *verdict;
	Datum		values[5];
	char		nulls[5];

	check_ids(fcinfo);
	task_id = PG_GETARG_INT64(0);
	fence = PG_GETARG_INT64(1);
	WfCheckPayloadSize(details, "heartbeat details",
					   psprintf("task %lld", (long long) task_id));
	WfRefuseSealedLookalikes(details, "heartbeat details",
							 psprintf("task %lld", (long long) task_id));

	WfApiBegin();
	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int64GetDatum(task_id);
	values[1] = Int64GetDatum(fence);
	values[2] = CStringGetTextDatum(tenant);
	values[3] = TimestampTzGetDatum(GetCurrentTimestamp());
	if (details != NULL)
		values[4] = JsonbPGetDatum(details);
	else
		nulls[4] = 'n';
	if (WfPlanExec(&WfResultPlans, PLAN_HEARTBEAT, values, nulls, false, 0,
				   SPI_OK_UPDATE_RETURNING) == 1)
	{
		bool		isnull;
		Datum		d = WfGetDatum(0, HEARTBEAT_COL_DEADLINE_AT, &isnull);

		if (!isnull)
			WfNoteTimer(DatumGetTimestampTz(d));
		/* wf.cancel_run() came while this attempt was in flight */
		if (strcmp(WfGetTextOrNull(0, HEARTBEAT_COL_RUN_STATUS), "cancelling") == 0 &&
			!WfIsCompensation(WfGetTextOrNull(0, HEARTBEAT_COL_STEP)))
			verdict = "cancel_requested";
		else
			verdict = "ok";
	}
	else
	{
		int64		current_fence;
		WfLockedTask done;
		pg_uuid_t	run_id;
		const char *status;

		values[1] = CStringGetTextDatum(tenant);

		if (WfPlanExec(&WfResultPlans, PLAN_TASK_PEEK, values, NULL, false, 1, SPI_OK_SELECT) == 1)
		{
			current_fence = DatumGetInt64(WfGetDatumNotNull(0, TASK_PEEK_COL_FENCE));
			status = WfGetTextOrNull(0, TASK_PEEK_COL_STATUS);
		}
		else if (WfFindCompletedTask(task_id, tenant, &done, &run_id))
		{
			/* completed, its row deleted: the history's task_completed */
			current_fence = done.fence;
			status = done.status;
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("task %lld does not exist", (long long) task_id)));
		if (fence <= 0 || fence > current_fence)
			refuse_fence(task_id, fence);

		/*
		 * The current lease of an attempt that the engine withdrew (its step
		 * or run timed out, its run was paused): the worker should stop.
		 */
		if (fence == current_fence && strcmp(status, "cancelled") == 0)
			verdict = "cancel_requested";
		else
			verdict = "stale";
	}
	WfApiEnd();
	PG_RETURN_TEXT_P(cstring_to_text(verdict));
}

/* ---- batches and eager dispatch (issue 13) ---- */

/*
 * WfReportTaskResult reports one result for the entry points of batch.c,
 * exactly as wf.complete_task (is_failure false, payload the output) or
 * wf.fail_task (payload the error, retryable) would, and returns the
 * verdict.  With lenient, an unknown task or a fence never issued for it
 * is the verdict "unknown_task" or "unknown_fence" instead of an error.
 * *next (when not NULL) is set to the attempt the report's transition
 * scheduled (task_id 0: none), written leased to the worker of offer when
 * it goes to its queue and can be claimed now (eager dispatch; see
 * WfLeaseOffer).  Payload errors (size, sealed look-alikes) are errors,
 * as in the single calls.  Called outside an API frame (it opens its own).
 */
const char *
WfReportTaskResult(int64 task_id, int64 fence, bool is_failure, Jsonb *payload,
				   bool retryable, bool lenient, const WfLeaseOffer *offer,
				   WfScheduledTask *next)
{
	WfReport	rep;

	report_init(&rep, task_id, fence, is_failure, payload);
	rep.retryable = retryable;
	return report_result(&rep, lenient, offer, next);
}
