/*-------------------------------------------------------------------------
 *
 * state.c
 *	  The run state machine: the reducer that applies one event to a run
 *	  snapshot, and the transition writer that appends events and
 *	  rewrites the snapshot in one statement.
 *
 * Event sourcing discipline.  A live transition never changes the
 * snapshot directly.  It builds each event's payload, hashes the event
 * onto the chain and hands it to WfApplyEvent, the one function that
 * changes a WfRunState.  wf.verify_run replays the stored events through
 * the same function, so a snapshot that the live path wrote and the one
 * that replay rebuilds can differ only if the history or the snapshot was
 * changed behind the engine's back.
 *
 * Transaction boundaries.  Every transition runs inside the caller's
 * transaction while it holds the run row locked (FOR UPDATE), so
 * transitions of one run are serialised and seq is gap-free.  The events,
 * the next task attempt (if any) and the new snapshot go to the database
 * in a single statement (WF_PLAN_TRANSITION); either all of it commits or
 * none of it.
 *
 * Lock order: task rows before their run row.  A claim locks task rows
 * only (and never waits: SKIP LOCKED); a result report locks its task
 * row and then the run row.  A worker may therefore claim and report in
 * one transaction while a late report for the same task waits: the late
 * report waits for the task row without holding the run row, so the two
 * never wait on each other in opposite orders.  Commands that touch
 * several tasks of a run must lock those task rows before the run row.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

#include "crypto.h"
#include "notify.h"
#include "spi_util.h"
#include "sensitive.h"
#include "state.h"

/* names of the run states, indexed by WfRunStatus */
static const char *const run_status_names[] = {
	[WF_RUN_NONE] = "none",
	[WF_RUN_RUNNING] = "running",
	[WF_RUN_COMPLETED] = "completed",
	[WF_RUN_FAILED] = "failed",
	[WF_RUN_PAUSED] = "paused",
	[WF_RUN_TERMINATED] = "terminated",
	[WF_RUN_CANCELLING] = "cancelling",
	[WF_RUN_CANCELLED] = "cancelled",
	[WF_RUN_COMPENSATION_FAILED] = "compensation_failed",
	[WF_RUN_COMPENSATING] = "compensating",
	[WF_RUN_COMPENSATED] = "compensated",
};

/* names of the event types, indexed by WfEventType */
static const char *const event_type_names[] = {
	[WF_EV_RUN_STARTED] = "run_started",
	[WF_EV_TASK_SCHEDULED] = "task_scheduled",
	[WF_EV_TASK_COMPLETED] = "task_completed",
	[WF_EV_TASK_FAILED] = "task_failed",
	[WF_EV_RESULT_DUPLICATE] = "result_duplicate",
	[WF_EV_RESULT_STALE] = "result_stale",
	[WF_EV_RUN_COMPLETED] = "run_completed",
	[WF_EV_RUN_FAILED] = "run_failed",
	[WF_EV_TIMER_SET] = "timer_set",
	[WF_EV_TIMER_FIRED] = "timer_fired",
	[WF_EV_SLEEP_STARTED] = "sleep_started",
	[WF_EV_SLEEP_FINISHED] = "sleep_finished",
	[WF_EV_LEASE_EXPIRED] = "lease_expired",
	[WF_EV_TASK_CANCELLED] = "task_cancelled",
	[WF_EV_RUN_PAUSED] = "run_paused",
	[WF_EV_APPROVAL_REQUESTED] = "approval_requested",
	[WF_EV_APPROVAL_NOTIFIED] = "approval_notified",
	[WF_EV_APPROVAL_TOKENS_ISSUED] = "approval_tokens_issued",
	[WF_EV_APPROVAL_DECIDED] = "approval_decided",
	[WF_EV_DECISION_REFUSED] = "decision_refused",
	[WF_EV_APPROVAL_COMPLETED] = "approval_completed",
	[WF_EV_APPROVAL_TOKENS_REVOKED] = "approval_tokens_revoked",
	[WF_EV_APPROVERS_CHANGED] = "approvers_changed",
	[WF_EV_CHOICE_MADE] = "choice_made",
	[WF_EV_RUN_TERMINATED] = "run_terminated",
	[WF_EV_CONTEXT_UPDATED] = "context_updated",
	[WF_EV_WAIT_STARTED] = "wait_started",
	[WF_EV_SIGNAL_RECEIVED] = "signal_received",
	[WF_EV_EVENT_RECEIVED] = "event_received",
	[WF_EV_RUN_RESUMED] = "run_resumed",
	[WF_EV_RESULT_HELD] = "result_held",
	[WF_EV_STEP_RETRIED] = "step_retried",
	[WF_EV_STEP_SKIPPED] = "step_skipped",
	[WF_EV_CANCEL_REQUESTED] = "cancel_requested",
	[WF_EV_COMPENSATION_STARTED] = "compensation_started",
	[WF_EV_RUN_CANCELLED] = "run_cancelled",
	[WF_EV_COMPENSATION_FAILED] = "compensation_failed",
	[WF_EV_WAIT_TIMED_OUT] = "wait_timed_out",
	[WF_EV_RUN_MIGRATED] = "run_migrated",
	[WF_EV_CHILDREN_STARTED] = "children_started",
	[WF_EV_CHILD_FINISHED] = "child_finished",
	[WF_EV_CHILDREN_JOINED] = "children_joined",
	[WF_EV_LEGAL_HOLD_SET] = "legal_hold_set",
	[WF_EV_COMPENSATION_REQUESTED] = "compensation_requested",
	[WF_EV_RUN_COMPENSATED] = "run_compensated",
};

/* names of the timer kinds, indexed by WfTimerKind */
static const char *const timer_kind_names[] = {
	[WF_TIMER_RETRY] = "retry",
	[WF_TIMER_SLEEP] = "sleep",
	[WF_TIMER_STEP_TIMEOUT] = "step_timeout",
	[WF_TIMER_RUN_TIMEOUT] = "run_timeout",
	[WF_TIMER_APPROVAL_EXPIRY] = "approval_expiry",
	[WF_TIMER_CHILD_DONE] = "child_done",
};

/* forward declarations */
static void note_new_task(WfTransition *tr);
static int32 task_priority(const WfStepDef *sd, Jsonb *context);
static void enter_choice(WfTransition *tr, int step_index);
static void withdraw_task(WfTransition *tr);
static void fail_run(WfTransition *tr, const char *step, const char *reason,
					 Jsonb *error, int32 attempt);
static Jsonb *context_set_step(Jsonb *context, const char *step, Jsonb *value);
static Jsonb *context_set_key(Jsonb *context, const char *key, Jsonb *value);
static Jsonb *context_set_path(Jsonb *context, const char *a, const char *b,
							   const char *c, int index, Jsonb *value);
static Jsonb *empty_object(void);
static Jsonb *null_array(int n);
static Jsonb *int_jsonb(int64 value);
static const char *compensation_done(WfRunState *run, const WfEvent *ev);
static Datum make_array(Datum *elems, bool *nulls, int n, Oid elemtype);

/*
 * name_of returns names[value], refusing a value outside [first, last].
 */
static const char *
name_of(const char *const *names, int first, int last, int value, const char *what)
{
	if (value < first || value > last)
		elog(ERROR, "invalid %s %d", what, value);
	return names[value];
}

/*
 * value_of returns the index in [first, last] of name in names, or 0.
 */
static int
value_of(const char *const *names, int first, int last, const char *name)
{
	int			i;

	for (i = first; i <= last; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return 0;
}

/*
 * WfRunStatusName returns the stored name of a run status.
 */
const char *
WfRunStatusName(WfRunStatus status)
{
	return name_of(run_status_names, WF_RUN_NONE, WF_RUN_LAST, status, "run status");
}

/*
 * WfRunStatusFromName maps a stored status name back, or WF_RUN_NONE.
 */
WfRunStatus
WfRunStatusFromName(const char *name)
{
	return (WfRunStatus) value_of(run_status_names, WF_RUN_RUNNING, WF_RUN_LAST, name);
}

/*
 * WfEventTypeName returns the stored name of an event type.
 */
const char *
WfEventTypeName(WfEventType type)
{
	return name_of(event_type_names, WF_EV_RUN_STARTED, WF_EV_LAST, type, "event type");
}

/*
 * WfEventTypeFromName maps a stored event type name back, or 0.
 */
WfEventType
WfEventTypeFromName(const char *name)
{
	return (WfEventType) value_of(event_type_names, WF_EV_RUN_STARTED, WF_EV_LAST, name);
}

/*
 * WfTimerKindName returns the stored name of a timer kind.
 */
const char *
WfTimerKindName(WfTimerKind kind)
{
	return name_of(timer_kind_names, WF_TIMER_RETRY, WF_TIMER_CHILD_DONE, kind, "timer kind");
}

/*
 * WfTimerKindFromName maps a stored timer kind back, or 0.
 */
WfTimerKind
WfTimerKindFromName(const char *name)
{
	return (WfTimerKind) value_of(timer_kind_names, WF_TIMER_RETRY, WF_TIMER_CHILD_DONE, name);
}

/*
 * WfMergeInput returns context with the patch merged into $.input: each
 * key of the patch replaces the input's, and a key whose value is null is
 * removed.  An input that is not an object is replaced by the patch.
 */
Jsonb *
WfMergeInput(Jsonb *context, Jsonb *patch)
{
	Jsonb	   *input = WfJsonbGetJsonb(context, "input");
	JsonbIterator *it = JsonbIteratorInit(&patch->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	Datum		path[1];

	if (input == NULL || !JB_ROOT_IS_OBJECT(input))
		input = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
		{
			input = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(input),
													   CStringGetTextDatum(key)));
			if (v.type != jbvNull)
			{
				WfJsonBuilder b;

				WfJbBegin(&b);
				WfJbJsonb(&b, key, JsonbValueToJsonb(&v));
				input = DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(input),
														   JsonbPGetDatum(WfJbEnd(&b))));
			}
		}
	}
	path[0] = CStringGetTextDatum("input");
	return DatumGetJsonbP(DirectFunctionCall4(jsonb_set, JsonbPGetDatum(context),
											  PointerGetDatum(construct_array(path, 1, TEXTOID, -1,
																			  false, TYPALIGN_INT)),
											  JsonbPGetDatum(input), BoolGetDatum(true)));
}

/*
 * context_set_path returns context with $.<a>.<b> (and .<c>, and [index]
 * when index >= 0) set to value; every level but the last must exist,
 * except $.<a>, which is created as an object when missing.
 */
static Jsonb *
context_set_path(Jsonb *context, const char *a, const char *b, const char *c,
				 int index, Jsonb *value)
{
	Datum		path[4];
	int			n = 0;

	if (WfJsonbGet(context, a) == NULL)
		context = context_set_key(context, a, empty_object());
	path[n++] = CStringGetTextDatum(a);
	path[n++] = CStringGetTextDatum(b);
	if (c != NULL)
		path[n++] = CStringGetTextDatum(c);
	if (index >= 0)
		path[n++] = CStringGetTextDatum(psprintf("%d", index));
	return DatumGetJsonbP(DirectFunctionCall4(jsonb_set,
											  JsonbPGetDatum(context),
											  PointerGetDatum(construct_array(path, n, TEXTOID, -1,
																			  false, TYPALIGN_INT)),
											  JsonbPGetDatum(value),
											  BoolGetDatum(true)));
}

/*
 * empty_object, null_array and int_jsonb build small JSON values.
 */
static Jsonb *
empty_object(void)
{
	WfJsonBuilder b;

	WfJbBegin(&b);
	return WfJbEnd(&b);
}

static Jsonb *
null_array(int n)
{
	JsonbParseState *state = NULL;
	JsonbValue	v;
	int			i;

	v.type = jbvNull;
	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = 0; i < n; i++)
		(void) pushJsonbValue(&state, WJB_ELEM, &v);
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_ARRAY, NULL));
}

static Jsonb *
int_jsonb(int64 value)
{
	JsonbValue	v;

	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(value);
	return JsonbValueToJsonb(&v);
}

/*
 * context_set_key returns context with $.<key> set to value.
 */
static Jsonb *
context_set_key(Jsonb *context, const char *key, Jsonb *value)
{
	Datum		path[1];

	path[0] = CStringGetTextDatum(key);
	return DatumGetJsonbP(DirectFunctionCall4(jsonb_set,
											  JsonbPGetDatum(context),
											  PointerGetDatum(construct_array(path, 1, TEXTOID, -1,
																			  false, TYPALIGN_INT)),
											  JsonbPGetDatum(value),
											  BoolGetDatum(true)));
}

/*
 * compensation_done moves the first pending compensation of the run's
 * context ($.compensation.pending[0]) to $.compensation.done, with the
 * output of ev (a compensation's task_completed or step_skipped).
 * Returns NULL, or why ev is not the compensation that was pending.
 */
static const char *
compensation_done(WfRunState *run, const WfEvent *ev)
{
	Jsonb	   *comp = WfJsonbGetJsonb(run->context, "compensation");
	Jsonb	   *pending = comp ? WfJsonbGetJsonb(comp, "pending") : NULL;
	Jsonb	   *done = comp ? WfJsonbGetJsonb(comp, "done") : NULL;
	JsonbValue *first;
	Jsonb	   *firstj;
	WfJsonBuilder b;
	JsonbParseState *state = NULL;
	JsonbValue *arr;

	if (pending == NULL || done == NULL || !JB_ROOT_IS_ARRAY(pending) ||
		JB_ROOT_COUNT(pending) == 0)
		return "a compensation ended while none was pending";
	first = getIthJsonbValueFromContainer(&pending->root, 0);
	firstj = JsonbValueToJsonb(first);
	if (strcmp(WfJsonbGetText(firstj, "step"), ev->step + strlen(WF_COMPENSATE_PREFIX)) != 0 ||
		WfJsonbGetInt(firstj, "visit", 0) != WfJsonbGetInt(ev->payload, "visit", -1))
		return "a compensation ended that was not the first pending one";

	WfJbBegin(&b);
	WfJbText(&b, "step", WfJsonbGetText(firstj, "step"));
	WfJbInt(&b, "visit", WfJsonbGetInt(firstj, "visit", 0));
	WfJbJsonb(&b, "output", WfJsonbGetJsonb(ev->payload, "output"));
	if (ev->type == WF_EV_STEP_SKIPPED)
		WfJbBool(&b, "skipped", true);
	(void) pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	(void) pushJsonbValue(&state, WJB_ELEM,
						  &(JsonbValue) {.type = jbvBinary,
										 .val.binary.data = &WfJbEnd(&b)->root,
										 .val.binary.len = 0});
	arr = pushJsonbValue(&state, WJB_END_ARRAY, NULL);

	WfJbBegin(&b);
	WfJbJsonb(&b, "pending",
			  DatumGetJsonbP(DirectFunctionCall2(jsonb_delete_idx, JsonbPGetDatum(pending),
												 Int32GetDatum(0))));
	WfJbJsonb(&b, "done",
			  DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(done),
												 JsonbPGetDatum(JsonbValueToJsonb(arr)))));
	if (WfJsonbGetText(comp, "cause") != NULL)
		WfJbText(&b, "cause", WfJsonbGetText(comp, "cause"));
	run->context = context_set_key(run->context, "compensation", WfJbEnd(&b));
	return NULL;
}

/*
 * WfUndoingStatus returns the status a run whose compensations go on again
 * (after a retry or a skip of the one that gave up) takes: "compensating"
 * when they undo a failure ($.compensation.cause), else "cancelling".
 */
WfRunStatus
WfUndoingStatus(const WfRunState *run)
{
	Jsonb	   *comp = WfJsonbGetJsonb(run->context, "compensation");
	char	   *cause = comp ? WfJsonbGetText(comp, "cause") : NULL;

	return (cause != NULL && strcmp(cause, "failure") == 0) ?
		WF_RUN_COMPENSATING : WF_RUN_CANCELLING;
}

/*
 * context_set_step returns context with $.steps.<step> set to value.
 */
static Jsonb *
context_set_step(Jsonb *context, const char *step, Jsonb *value)
{
	Datum		path[2];
	ArrayType  *patharr;

	path[0] = CStringGetTextDatum("steps");
	path[1] = CStringGetTextDatum(step);
	patharr = construct_array(path, 2, TEXTOID, -1, false, TYPALIGN_INT);
	return DatumGetJsonbP(DirectFunctionCall4(jsonb_set,
											  JsonbPGetDatum(context),
											  PointerGetDatum(patharr),
											  JsonbPGetDatum(value),
											  BoolGetDatum(true)));
}

/* ----------------------------------------------------------------
 *		the reducer
 * ----------------------------------------------------------------
 */

/*
 * WfApplyEvent applies one event to a run snapshot.  It is the only code
 * that changes a WfRunState, for live transitions and replay alike.  It
 * returns NULL, or a description of why the event cannot follow the
 * current state (which only a tampered or corrupt history can cause).
 */
const char *
WfApplyEvent(WfRunState *run, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;

	if (ev->seq != run->seq + 1)
		return psprintf("event %d follows event %d", ev->seq, run->seq);
	if (run->status == WF_RUN_NONE && ev->type != WF_EV_RUN_STARTED)
		return psprintf("the first event is \"%s\", not \"run_started\"",
						WfEventTypeName(ev->type));

	switch (ev->type)
	{
		case WF_EV_RUN_STARTED:
			{
				WfJsonBuilder b;
				Jsonb	   *input = WfJsonbGetJsonb(p, "input");
				Jsonb	   *steps;

				if (run->status != WF_RUN_NONE)
					return "\"run_started\" after the run had started";
				if (input == NULL)
					return "\"run_started\" without input";
				WfJbBegin(&b);
				steps = WfJbEnd(&b);
				WfJbBegin(&b);
				WfJbJsonb(&b, "input", input);
				WfJbJsonb(&b, "steps", steps);
				/* a child run: who started it ($.parent) */
				if (WfJsonbGetJsonb(p, "parent") != NULL)
					WfJbJsonb(&b, "parent", WfJsonbGetJsonb(p, "parent"));
				run->context = WfJbEnd(&b);
				run->definition_id = WfJsonbGetInt(p, "definition_id", 0);
				run->status = WF_RUN_RUNNING;
				run->output = NULL;
				break;
			}

		case WF_EV_TASK_SCHEDULED:
			if (!(run->status == WF_RUN_RUNNING ||
				  (WF_RUN_UNDOING(run->status) && WfIsCompensation(ev->step))) ||
				ev->step == NULL || ev->attempt <= 0 || run->current_task != 0)
				return "\"task_scheduled\" while the run is not running or has a live task";
			run->current_step = pstrdup(ev->step);
			run->current_attempt = ev->attempt;
			run->current_task = WfJsonbGetInt(p, "task_id", 0);
			if (ev->attempt == 1)
				run->step_generation = ev->seq;
			run->wait_generation = 0;
			break;

		case WF_EV_SLEEP_STARTED:
			if (run->status != WF_RUN_RUNNING || ev->step == NULL || run->current_task != 0)
				return "\"sleep_started\" while the run is not running or has a live task";
			run->current_step = pstrdup(ev->step);
			run->current_attempt = 0;
			run->step_generation = ev->seq;
			break;

		case WF_EV_CHOICE_MADE:
			{
				WfJsonBuilder b;

				if (run->status != WF_RUN_RUNNING || ev->step == NULL || run->current_task != 0)
					return "\"choice_made\" while the run is not running or has a live task";
				WfJbBegin(&b);
				WfJbJsonb(&b, "output", WfJsonbGetJsonb(p, "output"));
				WfJbInt(&b, "attempt", 1);
				WfJbInt(&b, "visit", WfJsonbGetInt(p, "visit", 1));
				run->context = context_set_step(run->context, ev->step, WfJbEnd(&b));
				run->current_step = NULL;
				run->step_generation = ev->seq;
				break;
			}

		case WF_EV_SLEEP_FINISHED:
			{
				WfJsonBuilder b;

				if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
					ev->step == NULL || strcmp(run->current_step, ev->step) != 0)
					return "\"sleep_finished\" for a step that is not the current one";
				WfJbBegin(&b);
				WfJbJsonb(&b, "output", WfJsonbGetJsonb(p, "output"));
				WfJbInt(&b, "attempt", 1);
				WfJbInt(&b, "visit", WfJsonbGetInt(p, "visit", 1));
				run->context = context_set_step(run->context, ev->step, WfJbEnd(&b));
				run->current_step = NULL;
				run->wait_generation = 0;
				break;
			}

		case WF_EV_TIMER_SET:
			{
				char	   *kind = WfJsonbGetText(p, "kind");

				if ((run->status != WF_RUN_RUNNING && !WF_RUN_UNDOING(run->status)) ||
					kind == NULL)
					return "\"timer_set\" while the run is not running";
				/* a retry backoff or a sleep is what the run now waits for */
				if (strcmp(kind, "retry") == 0 || strcmp(kind, "sleep") == 0)
				{
					if (run->current_task != 0)
						return "\"timer_set\" for a wait while a task is live";
					run->wait_generation = ev->seq;
				}
				break;
			}

		case WF_EV_TIMER_FIRED:
			{
				char	   *outcome = WfJsonbGetText(p, "outcome");
				char	   *kind = WfJsonbGetText(p, "kind");

				if (outcome != NULL && strcmp(outcome, "applied") == 0 &&
					kind != NULL &&
					(strcmp(kind, "retry") == 0 || strcmp(kind, "sleep") == 0))
				{
					if (WfJsonbGetInt(p, "generation", -1) != run->wait_generation)
						return "\"timer_fired\" applied a timer of another generation";
					run->wait_generation = 0;
				}
				break;
			}

		case WF_EV_LEASE_EXPIRED:
			/* the attempt goes back to its queue: task row state only */
			if (run->current_task == 0 ||
				WfJsonbGetInt(p, "task_id", 0) != run->current_task)
				return "\"lease_expired\" for a task that is not the current one";
			break;

		case WF_EV_TASK_CANCELLED:
			if (run->current_task == 0 ||
				WfJsonbGetInt(p, "task_id", 0) != run->current_task)
				return "\"task_cancelled\" for a task that is not the current one";
			run->current_attempt = 0;
			run->current_task = 0;
			break;

		case WF_EV_APPROVAL_REQUESTED:
			if (run->status != WF_RUN_RUNNING || ev->step == NULL || run->current_task != 0)
				return "\"approval_requested\" while the run is not running or has a live task";
			run->current_step = pstrdup(ev->step);
			run->current_attempt = 0;
			run->step_generation = ev->seq;
			break;

		case WF_EV_APPROVAL_NOTIFIED:
			/* the notification task is done; the step waits for decisions */
			if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
				ev->step == NULL || strcmp(run->current_step, ev->step) != 0 ||
				ev->attempt != run->current_attempt || run->current_task == 0)
				return "\"approval_notified\" for a step or attempt that is not the current one";
			run->current_attempt = 0;
			run->current_task = 0;
			break;

		case WF_EV_APPROVAL_TOKENS_ISSUED:
		case WF_EV_APPROVAL_DECIDED:
		case WF_EV_APPROVAL_TOKENS_REVOKED:
		case WF_EV_APPROVERS_CHANGED:
			if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
				ev->step == NULL || strcmp(run->current_step, ev->step) != 0)
				return "an approval event for a step that is not the current one";
			break;

		case WF_EV_DECISION_REFUSED:
			/* recorded, never applied */
			break;

		case WF_EV_APPROVAL_COMPLETED:
			{
				WfJsonBuilder b;

				if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
					ev->step == NULL || strcmp(run->current_step, ev->step) != 0 ||
					run->current_task != 0)
					return "\"approval_completed\" for a step that is not the current one";
				WfJbBegin(&b);
				WfJbJsonb(&b, "output", WfJsonbGetJsonb(p, "output"));
				WfJbInt(&b, "attempt", 1);
				WfJbInt(&b, "visit", WfJsonbGetInt(p, "visit", 1));
				run->context = context_set_step(run->context, ev->step, WfJbEnd(&b));
				run->current_step = NULL;
				break;
			}

		case WF_EV_WAIT_STARTED:
			if (run->status != WF_RUN_RUNNING || ev->step == NULL || run->current_task != 0)
				return "\"wait_started\" while the run is not running or has a live task";
			run->current_step = pstrdup(ev->step);
			run->current_attempt = 0;
			run->step_generation = ev->seq;
			break;

		case WF_EV_EVENT_RECEIVED:
		case WF_EV_WAIT_TIMED_OUT:
		case WF_EV_CHILDREN_JOINED:
			{
				/* a waiting step ends with the output in the payload */
				WfJsonBuilder b;

				if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
					ev->step == NULL || strcmp(run->current_step, ev->step) != 0)
					return psprintf("\"%s\" for a step that is not the current one",
									WfEventTypeName(ev->type));
				WfJbBegin(&b);
				WfJbJsonb(&b, "output", WfJsonbGetJsonb(p, "output"));
				WfJbInt(&b, "attempt", 1);
				WfJbInt(&b, "visit", WfJsonbGetInt(p, "visit", 1));
				run->context = context_set_step(run->context, ev->step, WfJbEnd(&b));
				run->current_step = NULL;
				break;
			}

		case WF_EV_SIGNAL_RECEIVED:
			/* recorded; the signal waits in wf.signals or was a duplicate */
			break;

		case WF_EV_LEGAL_HOLD_SET:
			/* recorded, in any state; the run row's legal_hold follows it */
			break;

		case WF_EV_CONTEXT_UPDATED:
			{
				Jsonb	   *patch = WfJsonbGetJsonb(p, "patch");

				if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED &&
					 run->status != WF_RUN_FAILED) ||
					patch == NULL || !JB_ROOT_IS_OBJECT(patch))
					return "\"context_updated\" while the run has ended, or without a patch";
				run->context = WfMergeInput(run->context, patch);
				break;
			}

		case WF_EV_RUN_TERMINATED:
			if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED &&
				 !WF_RUN_UNDOING(run->status) &&
				 run->status != WF_RUN_COMPENSATION_FAILED) ||
				run->current_task != 0)
				return "\"run_terminated\" while the run has ended or has a live task";
			run->status = WF_RUN_TERMINATED;
			run->wait_generation = 0;
			run->finished = true;
			run->finished_at = ev->created_at;
			break;

		case WF_EV_RUN_PAUSED:
			if (run->status != WF_RUN_RUNNING)
				return "\"run_paused\" while the run is not running";
			run->status = WF_RUN_PAUSED;
			break;

		case WF_EV_RUN_RESUMED:
			if (run->status != WF_RUN_PAUSED)
				return "\"run_resumed\" while the run is not paused";
			run->status = WF_RUN_RUNNING;
			break;

		case WF_EV_RESULT_HELD:
			/* the task row holds the result; run_resumed applies it */
			if (run->status != WF_RUN_PAUSED || run->current_task == 0 ||
				WfJsonbGetInt(p, "task_id", 0) != run->current_task)
				return "\"result_held\" for a task that is not the current one of a paused run";
			break;

		case WF_EV_STEP_RETRIED:
			if (!(run->status == WF_RUN_FAILED ||
				  (run->status == WF_RUN_COMPENSATION_FAILED && WfIsCompensation(ev->step))) ||
				ev->step == NULL || run->current_task != 0)
				return "\"step_retried\" while the run has not failed";
			run->status = (run->status == WF_RUN_FAILED) ? WF_RUN_RUNNING : WfUndoingStatus(run);
			run->current_step = pstrdup(ev->step);
			run->current_attempt = 0;
			run->step_generation = ev->seq;
			run->wait_generation = 0;
			run->finished = false;
			run->finished_at = 0;
			break;

		case WF_EV_STEP_SKIPPED:
			{
				WfJsonBuilder b;

				if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_FAILED &&
					 run->status != WF_RUN_COMPENSATION_FAILED) ||
					run->current_task != 0 || ev->step == NULL ||
					run->current_step == NULL || strcmp(run->current_step, ev->step) != 0)
					return "\"step_skipped\" for a step that is not the current one";
				if (WfIsCompensation(ev->step))
				{
					/* an operator stands in for a failed compensation */
					const char *problem = compensation_done(run, ev);

					if (problem != NULL)
						return problem;
					run->status = WfUndoingStatus(run);
					run->current_step = NULL;
					run->current_attempt = 0;
					run->wait_generation = 0;
					run->finished = false;
					run->finished_at = 0;
					break;
				}
				WfJbBegin(&b);
				WfJbJsonb(&b, "output", WfJsonbGetJsonb(p, "output"));
				WfJbInt(&b, "attempt", 0);
				WfJbInt(&b, "visit", WfJsonbGetInt(p, "visit", 1));
				WfJbBool(&b, "skipped", true);
				run->context = context_set_step(run->context, ev->step, WfJbEnd(&b));
				run->status = WF_RUN_RUNNING;
				run->current_step = NULL;
				run->current_attempt = 0;
				run->step_generation = ev->seq;
				run->wait_generation = 0;
				run->finished = false;
				run->finished_at = 0;
				break;
			}

		case WF_EV_TASK_COMPLETED:
			{
				WfJsonBuilder b;

				if ((run->status != WF_RUN_RUNNING && !WF_RUN_UNDOING(run->status)) ||
					run->current_step == NULL ||
					ev->step == NULL || strcmp(run->current_step, ev->step) != 0 ||
					ev->attempt != run->current_attempt)
					return "\"task_completed\" for a step or attempt that is not the current one";
				if (WfIsCompensation(ev->step))
				{
					const char *problem = compensation_done(run, ev);

					if (problem != NULL)
						return problem;
					run->current_step = NULL;
					run->current_attempt = 0;
					run->current_task = 0;
					break;
				}
				WfJbBegin(&b);
				WfJbJsonb(&b, "output", WfJsonbGetJsonb(p, "output"));
				WfJbInt(&b, "attempt", ev->attempt);
				WfJbInt(&b, "visit", WfJsonbGetInt(p, "visit", 1));
				run->context = context_set_step(run->context, ev->step, WfJbEnd(&b));
				run->current_step = NULL;
				run->current_attempt = 0;
				run->current_task = 0;
				break;
			}

		case WF_EV_TASK_FAILED:
			if ((run->status != WF_RUN_RUNNING && !WF_RUN_UNDOING(run->status)) ||
				run->current_step == NULL ||
				ev->step == NULL || strcmp(run->current_step, ev->step) != 0 ||
				ev->attempt != run->current_attempt)
				return "\"task_failed\" for a step or attempt that is not the current one";
			/* the step stays current: a retry or run_failed follows */
			run->current_attempt = 0;
			run->current_task = 0;
			break;

		case WF_EV_RESULT_DUPLICATE:
		case WF_EV_RESULT_STALE:
			/* recorded, never applied */
			break;

		case WF_EV_RUN_MIGRATED:
			{
				int64		target = WfJsonbGetInt(p, "definition_id", 0);
				JsonbValue *resched = WfJsonbGet(p, "reschedule");

				if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED) ||
					target <= 0 || run->current_task != 0)
					return "\"run_migrated\" while the run is not live or has a live task";
				run->definition_id = target;
				/* a retry backoff of the old version is cut short */
				if (resched != NULL && resched->type == jbvBool && resched->val.boolean)
					run->wait_generation = 0;
				break;
			}

		case WF_EV_CHILDREN_STARTED:
			{
				WfJsonBuilder b;
				Jsonb	   *runs = WfJsonbGetJsonb(p, "runs");
				int			n;

				if (run->status != WF_RUN_RUNNING || ev->step == NULL || run->current_task != 0 ||
					runs == NULL || !JB_ROOT_IS_ARRAY(runs))
					return "\"children_started\" while the run is not running or has a live task";
				n = JB_ROOT_COUNT(runs);
				WfJbBegin(&b);
				WfJbInt(&b, "visit", WfJsonbGetInt(p, "visit", 1));
				WfJbJsonb(&b, "runs", runs);
				WfJbInt(&b, "join", WfJsonbGetInt(p, "join", n));
				WfJbInt(&b, "finished", 0);
				WfJbInt(&b, "completed", 0);
				WfJbJsonb(&b, "statuses", null_array(n));
				WfJbJsonb(&b, "outputs", null_array(n));
				run->context = context_set_path(run->context, "children", ev->step, NULL, -1,
												WfJbEnd(&b));
				run->current_step = pstrdup(ev->step);
				run->current_attempt = 0;
				run->step_generation = ev->seq;
				break;
			}

		case WF_EV_CHILD_FINISHED:
			{
				Jsonb	   *children;
				int			branch = (int) WfJsonbGetInt(p, "branch", 0);
				char	   *status = WfJsonbGetText(p, "status");
				bool		completed = status != NULL && strcmp(status, "completed") == 0;
				JsonbValue	sv;

				if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
					ev->step == NULL || strcmp(run->current_step, ev->step) != 0 || status == NULL)
					return "\"child_finished\" for a step that is not the current one";
				children = WfJsonbGetJsonb(WfJsonbGetJsonb(run->context, "children"), ev->step);
				if (children == NULL)
					return "\"child_finished\" for a step that started no children";
				sv.type = jbvString;
				sv.val.string.val = status;
				sv.val.string.len = strlen(status);
				run->context = context_set_path(run->context, "children", ev->step, "statuses",
												branch, JsonbValueToJsonb(&sv));
				if (completed)
					run->context = context_set_path(run->context, "children", ev->step, "outputs",
													branch, WfJsonbGetJsonb(p, "output"));
				run->context = context_set_path(run->context, "children", ev->step, "finished", -1,
												int_jsonb(WfJsonbGetInt(children, "finished", 0) + 1));
				if (completed)
					run->context = context_set_path(run->context, "children", ev->step, "completed", -1,
													int_jsonb(WfJsonbGetInt(children, "completed", 0) + 1));
				break;
			}

		case WF_EV_CANCEL_REQUESTED:
			if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED &&
				 run->status != WF_RUN_FAILED) ||
				(run->status == WF_RUN_FAILED && run->current_task != 0))
				return "\"cancel_requested\" while the run is not running, paused or failed";
			run->status = WF_RUN_CANCELLING;
			run->wait_generation = 0;
			/* a failed run is live again until its compensations have run */
			run->finished = false;
			run->finished_at = 0;
			break;

		case WF_EV_COMPENSATION_REQUESTED:
			{
				/* on_failure "compensate": the failure is kept in $.failure */
				WfJsonBuilder b;

				if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED) ||
					run->current_task != 0)
					return "\"compensation_requested\" while the run is not running or paused, or has a live task";
				WfJbBegin(&b);
				WfJbText(&b, "step", WfJsonbGetText(p, "step"));
				WfJbInt(&b, "attempt", WfJsonbGetInt(p, "attempt", 0));
				WfJbText(&b, "reason", WfJsonbGetText(p, "reason"));
				WfJbJsonb(&b, "error", WfJsonbGetJsonb(p, "error"));
				WfJbTimestamp(&b, "at", ev->created_at);
				run->context = context_set_key(run->context, "failure", WfJbEnd(&b));
				run->status = WF_RUN_COMPENSATING;
				run->current_step = WfJsonbGetText(p, "step");
				run->current_attempt = 0;
				run->wait_generation = 0;
				break;
			}

		case WF_EV_COMPENSATION_STARTED:
			{
				WfJsonBuilder b;
				Jsonb	   *pending = WfJsonbGetJsonb(p, "pending");

				if (!WF_RUN_UNDOING(run->status) || run->current_task != 0 ||
					pending == NULL || !JB_ROOT_IS_ARRAY(pending))
					return "\"compensation_started\" while the run is not cancelling or has a live task";
				WfJbBegin(&b);
				WfJbJsonb(&b, "pending", pending);
				WfJbJsonb(&b, "done", DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																		 CStringGetDatum("[]"))));
				/* what they undo; absent: a wf.cancel_run() */
				if (run->status == WF_RUN_COMPENSATING)
					WfJbText(&b, "cause", "failure");
				run->context = context_set_key(run->context, "compensation", WfJbEnd(&b));
				run->current_step = NULL;
				run->current_attempt = 0;
				run->step_generation = ev->seq;
				run->wait_generation = 0;
				break;
			}

		case WF_EV_RUN_CANCELLED:
			if (run->status != WF_RUN_CANCELLING || run->current_task != 0)
				return "\"run_cancelled\" while the run is not cancelling or has a live task";
			run->status = WF_RUN_CANCELLED;
			run->current_step = NULL;
			run->wait_generation = 0;
			run->finished = true;
			run->finished_at = ev->created_at;
			break;

		case WF_EV_RUN_COMPENSATED:
			if (run->status != WF_RUN_COMPENSATING || run->current_task != 0)
				return "\"run_compensated\" while the run is not compensating or has a live task";
			run->status = WF_RUN_COMPENSATED;
			run->current_step = NULL;
			run->wait_generation = 0;
			run->finished = true;
			run->finished_at = ev->created_at;
			break;

		case WF_EV_COMPENSATION_FAILED:
			if (!WF_RUN_UNDOING(run->status) || run->current_task != 0 ||
				ev->step == NULL || !WfIsCompensation(ev->step))
				return "\"compensation_failed\" while the run is not compensating";
			run->status = WF_RUN_COMPENSATION_FAILED;
			run->current_step = pstrdup(ev->step);
			run->wait_generation = 0;
			run->finished = true;
			run->finished_at = ev->created_at;
			break;

		case WF_EV_RUN_COMPLETED:
			if (run->status != WF_RUN_RUNNING || run->current_task != 0)
				return "\"run_completed\" while a task is live";
			run->status = WF_RUN_COMPLETED;
			run->wait_generation = 0;
			run->output = WfJsonbGetJsonb(p, "output");
			run->current_step = NULL;
			run->finished = true;
			run->finished_at = ev->created_at;
			break;

		case WF_EV_RUN_FAILED:
			if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED) ||
				run->current_task != 0)
				return "\"run_failed\" while a task is live";
			run->status = WF_RUN_FAILED;
			run->wait_generation = 0;
			run->current_step = WfJsonbGetText(p, "step");
			run->finished = true;
			run->finished_at = ev->created_at;
			break;

		default:
			return psprintf("unknown event type %d", (int) ev->type);
	}

	run->seq = ev->seq;
	memcpy(run->last_hash, ev->hash, WF_HASH_LEN);
	run->updated_at = ev->created_at;
	return NULL;
}

/*
 * WfHashEventFor computes ev->hash, chained onto the run's last hash.
 */
void
WfHashEventFor(const WfRunState *run, WfEvent *ev)
{
	WfEventHashInput in;
	char	   *text = JsonbToCString(NULL, &ev->payload->root,
									  VARSIZE(ev->payload));

	in.prev_hash = run->last_hash;
	in.run_id = &run->run_id;
	in.tenant_id = run->tenant_id;
	in.seq = ev->seq;
	in.type = WfEventTypeName(ev->type);
	in.step = ev->step;
	in.attempt = ev->attempt;
	in.actor = ev->actor;
	in.created_at = ev->created_at;
	in.payload = text;
	in.payload_len = strlen(text);
	WfHashEvent(&in, ev->hash);
	pfree(text);
}

/* ----------------------------------------------------------------
 *		transitions
 * ----------------------------------------------------------------
 */

/*
 * WfTransitionInit starts a transition of run, at time now.
 */
void
WfTransitionInit(WfTransition *tr, WfRunState *run, const WfDefinition *def,
				 TimestampTz now)
{
	memset(tr, 0, sizeof(WfTransition));
	tr->run = run;
	tr->def = def;
	tr->actor = WfCurrentActor();
	tr->now = now;
}

/*
 * WfAppendEvent appends one event to the transition and applies it to the
 * snapshot.  The payload must already hold everything the reducer needs.
 */
void
WfAppendEvent(WfTransition *tr, WfEventType type, const char *step,
			  int32 attempt, Jsonb *payload)
{
	WfEvent    *ev;
	const char *problem;

	if (tr->nevents >= WF_MAX_TRANSITION_EVENTS)
		elog(ERROR, "too many events in one wfengine transition");
	ev = &tr->events[tr->nevents++];
	ev->seq = tr->run->seq + 1;
	ev->type = type;
	ev->step = step;
	ev->attempt = attempt;
	ev->payload = payload;
	ev->actor = tr->actor;
	ev->created_at = tr->now;
	WfHashEventFor(tr->run, ev);

	problem = WfApplyEvent(tr->run, ev);
	if (problem != NULL)
		elog(ERROR, "wfengine state machine produced an illegal event: %s", problem);
}

/*
 * WfScheduleStep schedules attempt of the step at step_index: it fixes the
 * task id and idempotency key, computes the input (unless given, as for a
 * retry) and appends task_scheduled.
 */
void
WfScheduleStep(WfTransition *tr, int step_index, int32 attempt,
			   TimestampTz available_at, Jsonb *input)
{
	const WfStepDef *sd = &tr->def->steps[step_index];

	WfScheduleTask(tr, sd, WfNextVisit(tr->run, sd->name), attempt, available_at, input);
}

/*
 * WfScheduleTask schedules attempt of visit of the task step sd (a step of
 * the definition, or a step's compensation).
 */
void
WfScheduleTask(WfTransition *tr, const WfStepDef *sd, int32 visit, int32 attempt,
			   TimestampTz available_at, Jsonb *input)
{
	WfNewTask  *t = &tr->task;
	WfJsonBuilder b;
	char		runid[UUID_LEN * 2 + 5];

	if (tr->has_task)
		elog(ERROR, "wfengine transition schedules two tasks");

	t->visit = visit;

	if (input == NULL)
	{
		if (sd->has_input)
			input = WfEvaluateMapping(sd->input, sd->n_input, tr->run->context);
		else
			input = WfJsonbGetJsonb(tr->run->context, "input");
	}
	/* a value that is sealed already (the run's input, a retry's) stays as it is */
	if (sd->n_sensitive_input > 0)
		input = WfSealKeys(tr->run->tenant_id, input, sd->sensitive_input, sd->n_sensitive_input);

	strlcpy(runid, DatumGetCString(DirectFunctionCall1(uuid_out,
													   UUIDPGetDatum(&tr->run->run_id))),
			sizeof(runid));
	t->task_id = nextval_internal(WfTaskIdSequence(), false);
	t->step = sd->name;
	t->attempt = attempt;
	t->queue = sd->queue;
	t->activity = sd->activity;
	t->available_at = available_at;
	t->idempotency_key = psprintf("%s/%s/%d", runid, sd->name, t->visit);
	t->input = input;
	t->schedule_to_start = sd->timeout.schedule_to_start;
	t->start_to_close = sd->timeout.start_to_close;
	t->heartbeat = sd->timeout.heartbeat;
	t->priority = task_priority(sd, tr->run->context);
	tr->has_task = true;

	WfJbBegin(&b);
	WfJbInt(&b, "task_id", t->task_id);
	WfJbText(&b, "queue", t->queue);
	WfJbText(&b, "activity", t->activity);
	WfJbInt(&b, "visit", t->visit);
	WfJbText(&b, "idempotency_key", t->idempotency_key);
	WfJbTimestamp(&b, "available_at", available_at);
	WfJbJsonb(&b, "input", input);
	WfAppendEvent(tr, WF_EV_TASK_SCHEDULED, sd->name, attempt, WfJbEnd(&b));

	/* the step's total timeout runs from its first attempt */
	if (attempt == 1 && sd->timeout.total > 0 && sd->type == WF_STEP_TASK)
		WfSetTimer(tr, WF_TIMER_STEP_TIMEOUT, sd->name, tr->run->step_generation,
				   tr->now + sd->timeout.total, NULL);
}

/*
 * task_priority returns the priority of a new attempt of sd: its fixed
 * "priority", or the integer its JSONPath finds in the context (clamped to
 * the valid range; 0 when it finds none).
 */
static int32
task_priority(const WfStepDef *sd, Jsonb *context)
{
	Jsonb	   *found;
	JsonbValue	v;
	double		d;

	if (sd->priority_path == 0)
		return sd->priority;
	found = WfEvaluatePath(sd->priority_path, context);
	if (found == NULL || !JB_ROOT_IS_SCALAR(found) ||
		!JsonbExtractScalar(&found->root, &v) || v.type != jbvNumeric)
		return 0;
	d = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v.val.numeric)));
	if (d > WF_MAX_PRIORITY)
		return WF_MAX_PRIORITY;
	if (d < -WF_MAX_PRIORITY)
		return -WF_MAX_PRIORITY;
	return (int32) d;
}

/*
 * WfNextVisit returns the visit number of the next entry into step: one
 * more than its last completed visit.  All attempts of one visit share
 * it, and so share the idempotency key.
 */
int32
WfNextVisit(WfRunState *run, const char *step)
{
	JsonbValue *steps = WfJsonbGet(run->context, "steps");

	if (steps != NULL && steps->type == jbvBinary)
	{
		JsonbValue *s = getKeyJsonValueFromContainer(steps->val.binary.data,
													 step, strlen(step), NULL);

		if (s != NULL && s->type == jbvBinary)
		{
			JsonbValue *vv = getKeyJsonValueFromContainer(s->val.binary.data,
														  "visit", 5, NULL);

			if (vv != NULL && vv->type == jbvNumeric)
				return DatumGetInt32(DirectFunctionCall1(numeric_int4,
														 NumericGetDatum(vv->val.numeric))) + 1;
		}
	}
	return 1;
}

/*
 * WfSetTimer adds a timer to the transition and appends timer_set.  For a
 * retry or a sleep the generation is the seq of that timer_set event: the
 * run waits for exactly this timer.  The timer id is returned.
 */
int64
WfSetTimer(WfTransition *tr, WfTimerKind kind, const char *step,
		   int32 generation, TimestampTz fire_at, Jsonb *payload)
{
	WfNewTimer *t;
	WfJsonBuilder b;

	if (tr->ntimers >= WF_MAX_TRANSITION_TIMERS)
		elog(ERROR, "too many timers in one wfengine transition");
	if (kind == WF_TIMER_RETRY || kind == WF_TIMER_SLEEP)
		generation = tr->run->seq + 1;
	if (payload == NULL)
	{
		WfJbBegin(&b);
		payload = WfJbEnd(&b);
	}

	t = &tr->timers[tr->ntimers++];
	t->timer_id = nextval_internal(WfTimerIdSequence(), false);
	t->kind = kind;
	t->step = step;
	t->generation = generation;
	t->fire_at = fire_at;
	t->payload = payload;

	WfJbBegin(&b);
	WfJbInt(&b, "timer_id", t->timer_id);
	WfJbText(&b, "kind", WfTimerKindName(kind));
	WfJbInt(&b, "generation", generation);
	WfJbTimestamp(&b, "fire_at", fire_at);
	WfAppendEvent(tr, WF_EV_TIMER_SET, step, 0, WfJbEnd(&b));
	return t->timer_id;
}

/*
 * WfEnterStep starts the step at step_index: a task step schedules its
 * first attempt, a sleep step starts its timer.
 */
void
WfEnterStep(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder b;
	TimestampTz until;
	int32		visit;

	if (sd->type == WF_STEP_TASK)
	{
		WfScheduleStep(tr, step_index, 1, tr->now, NULL);
		return;
	}
	if (sd->type == WF_STEP_APPROVAL)
	{
		WfEnterApproval(tr, step_index);
		return;
	}
	if (sd->type == WF_STEP_CHOICE)
	{
		enter_choice(tr, step_index);
		return;
	}
	if (sd->type == WF_STEP_SUBWORKFLOW || sd->type == WF_STEP_PARALLEL)
	{
		WfEnterChildren(tr, step_index);
		return;
	}
	if (sd->type == WF_STEP_WAIT_EVENT)
	{
		WfJbBegin(&b);
		WfJbInt(&b, "visit", WfNextVisit(tr->run, sd->name));
		WfJbText(&b, "event", sd->event_name);
		WfAppendEvent(tr, WF_EV_WAIT_STARTED, sd->name, 0, WfJbEnd(&b));
		/* a signal that came before the run got here is consumed now */
		if (!WfTakeSignal(tr, step_index) && sd->timeout.total > 0)
			WfSetTimer(tr, WF_TIMER_STEP_TIMEOUT, sd->name, tr->run->step_generation,
					   tr->now + sd->timeout.total, NULL);
		return;
	}

	Assert(sd->type == WF_STEP_SLEEP);
	visit = WfNextVisit(tr->run, sd->name);
	if (sd->sleep_duration > 0)
		until = tr->now + sd->sleep_duration;
	else
	{
		Jsonb	   *found = WfEvaluatePath(sd->sleep_until, tr->run->context);
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
 * WfTakeSignal consumes the oldest kept signal the wait_event step at
 * step_index waits for, records event_received and moves the run on.
 * Returns false when there is none (the run goes on waiting).
 */
bool
WfTakeSignal(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	Datum		values[4];
	WfJsonBuilder b;
	WfJsonBuilder ob;

	values[0] = UUIDPGetDatum(&tr->run->run_id);
	values[1] = CStringGetTextDatum(sd->event_name);
	values[2] = TimestampTzGetDatum(tr->now);
	values[3] = CStringGetTextDatum(tr->actor);
	if (WfExecPlan(WF_PLAN_SIGNAL_TAKE, values, NULL, false, 0, SPI_OK_UPDATE_RETURNING) != 1)
		return false;

	WfJbBegin(&ob);
	WfJbText(&ob, "event", sd->event_name);
	WfJbText(&ob, "event_id", WfGetTextOrNull(0, 2));
	WfJbJsonb(&ob, "payload", DatumGetJsonbPCopy(WfGetDatumNotNull(0, 3)));
	WfJbBegin(&b);
	WfJbInt(&b, "visit", WfNextVisit(tr->run, sd->name));
	WfJbInt(&b, "signal_id", DatumGetInt64(WfGetDatumNotNull(0, 1)));
	WfJbJsonb(&b, "output", WfJbEnd(&ob));
	WfAppendEvent(tr, WF_EV_EVENT_RECEIVED, sd->name, 0, WfJbEnd(&b));
	WfAdvance(tr, step_index);
	return true;
}

/*
 * enter_choice takes the first branch of a choice step whose condition
 * holds in the run context (or the default), records it, and goes on.
 * A condition that cannot be evaluated does not hold.
 */
static void
enter_choice(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder b;
	WfJsonBuilder ob;
	int			chosen = -1;
	int			next = sd->next;
	int			c;

	for (c = 0; c < sd->n_choices && chosen < 0; c++)
	{
		if (WfPathMatches(sd->choice_when[c], tr->run->context))
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
	WfJbBegin(&b);
	WfJbInt(&b, "visit", WfNextVisit(tr->run, sd->name));
	WfJbJsonb(&b, "output", WfJbEnd(&ob));
	WfAppendEvent(tr, WF_EV_CHOICE_MADE, sd->name, 0, WfJbEnd(&b));
	WfAdvanceTo(tr, step_index, next);
}

/*
 * counted_attempts returns how many attempts of visit of the step count
 * against its max_attempts, the failing one included: every attempt but
 * those withdrawn before any worker claimed them (wf.pause_run,
 * wf.migrate_run).  Such an attempt keeps its attempt number (the next
 * one takes the number after it), but it has used up nothing.
 */
static int32
counted_attempts(WfTransition *tr, const char *step, int32 visit)
{
	Datum		values[3];

	values[0] = UUIDPGetDatum(&tr->run->run_id);
	values[1] = CStringGetTextDatum(step);
	values[2] = Int32GetDatum(visit);
	if (WfExecPlan(WF_PLAN_COUNTED_ATTEMPTS, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		elog(ERROR, "could not count the attempts of step \"%s\"", step);
	return DatumGetInt32(WfGetDatumNotNull(0, 1));
}

/*
 * WfFailAttempt records the failure (or timeout) of an attempt, then
 * waits for a retry on a timer or fails the step and the run, following
 * the step's retry policy.  The policy counts attempts that a worker
 * claimed or the engine failed (counted_attempts), not attempt numbers:
 * an attempt a pause withdrew before any claim is not counted, neither
 * against max_attempts nor in the backoff.
 */
void
WfFailAttempt(WfTransition *tr, const WfStepDef *sd, int64 task_id, int64 fence,
			  int32 attempt, int32 visit, const char *worker, Jsonb *error,
			  bool retryable, Jsonb *input)
{
	const WfRetryPolicy *rp = &sd->retry;
	char	   *code = WfJsonbGetText(error, "code");
	const char *reason = NULL;
	TimestampTz next_at = 0;
	WfJsonBuilder b;
	int			i;
	int32		counted = attempt;

	if (tr->run->status == WF_RUN_CANCELLING && !WfIsCompensation(sd->name))
		reason = "cancelled";	/* in flight when the run was cancelled */
	else if (!retryable)
		reason = "non_retryable";
	else
	{
		for (i = 0; code != NULL && i < rp->n_non_retryable; i++)
			if (strcmp(code, rp->non_retryable[i]) == 0)
				reason = "non_retryable_error";
		if (reason == NULL)
			counted = counted_attempts(tr, sd->name, visit);
		if (reason == NULL && counted >= rp->max_attempts)
			reason = "attempts_exhausted";
	}
	if (reason == NULL)
		next_at = tr->now + WfRetryDelay(rp, counted);

	WfJbBegin(&b);
	WfJbInt(&b, "task_id", task_id);
	WfJbInt(&b, "fence", fence);
	WfJbText(&b, "worker", worker);
	WfJbInt(&b, "visit", visit);
	WfJbJsonb(&b, "error", error);
	WfJbBool(&b, "retryable", retryable);
	if (reason == NULL)
		WfJbTimestamp(&b, "next_attempt_at", next_at);
	else
		WfJbText(&b, "final", reason);
	WfAppendEvent(tr, WF_EV_TASK_FAILED, sd->name, attempt, WfJbEnd(&b));

	if (reason == NULL)
	{
		WfJbBegin(&b);
		WfJbInt(&b, "attempt", attempt + 1);
		WfJbInt(&b, "visit", visit);
		WfJbJsonb(&b, "input", input);
		WfSetTimer(tr, WF_TIMER_RETRY, sd->name, 0, next_at, WfJbEnd(&b));
		return;
	}
	if (strcmp(reason, "cancelled") == 0)
		WfStartCompensation(tr, NULL, 0);	/* nothing of it to undo */
	else if (WfIsCompensation(sd->name))
		WfCompensationFailed(tr, reason, error);
	else
		fail_run(tr, sd->name, reason, error, attempt);	/* the attempt that failed */
}

/*
 * fail_run ends the run as failed at step, naming attempt of the step as
 * the one it failed at, withdrawing its live task first.  A definition
 * with "on_failure": "compensate" undoes the run's completed steps instead
 * (compensate.c).
 */
static void
fail_run(WfTransition *tr, const char *step, const char *reason, Jsonb *error,
		 int32 attempt)
{
	WfJsonBuilder b;

	if (tr->def->compensate_on_failure)
	{
		WfCompensateFailure(tr, step, attempt, reason, error);
		return;
	}

	WfWithdrawCurrentTask(tr, reason);
	WfJbBegin(&b);
	WfJbText(&b, "step", step);
	WfJbInt(&b, "attempt", attempt);
	WfJbText(&b, "reason", reason);
	WfJbJsonb(&b, "error", error);
	WfAppendEvent(tr, WF_EV_RUN_FAILED, NULL, 0, WfJbEnd(&b));
}

/*
 * WfFailRun ends the run as failed at step (NULL for the run as a whole),
 * withdrawing its live task first.  run_failed names the attempt of the
 * step the run failed at: its live attempt, or, when it has none (it
 * waits for a retry), the last attempt of the step's current visit; 0
 * when the step has no attempt (or the run failed as a whole).
 */
void
WfFailRun(WfTransition *tr, const char *step, const char *reason, Jsonb *error)
{
	int32		attempt = tr->run->current_attempt;

	if (attempt == 0 && step != NULL)
	{
		Datum		values[2];

		values[0] = UUIDPGetDatum(&tr->run->run_id);
		values[1] = CStringGetTextDatum(step);
		if (WfExecPlan(WF_PLAN_LAST_TASK_OF_STEP, values, NULL, false, 1, SPI_OK_SELECT) == 1 &&
			DatumGetInt32(WfGetDatumNotNull(0, 2)) == WfNextVisit(tr->run, step))
			attempt = DatumGetInt32(WfGetDatumNotNull(0, 3));
	}
	fail_run(tr, step, reason, error, attempt);
}

/*
 * WfWithdrawCurrentTask cancels the run's live task, if it has one.
 */
void
WfWithdrawCurrentTask(WfTransition *tr, const char *reason)
{
	WfJsonBuilder b;

	if (tr->run->current_task == 0)
		return;
	WfJbBegin(&b);
	WfJbInt(&b, "task_id", tr->run->current_task);
	WfJbText(&b, "reason", reason);
	tr->withdraw_task = tr->run->current_task;
	WfAppendEvent(tr, WF_EV_TASK_CANCELLED, tr->run->current_step,
				  tr->run->current_attempt, WfJbEnd(&b));
}

/*
 * WfRetryDelay returns the wait before attempt + 1, in microseconds:
 * exponential backoff capped at max_interval, of which a random share of
 * up to "jitter" is taken off so that retries of many runs spread out.
 */
int64
WfRetryDelay(const WfRetryPolicy *rp, int32 attempt)
{
	double		d = (double) rp->initial_interval *
		pow(rp->backoff_coefficient, (double) (attempt - 1));

	if (d > (double) rp->max_interval || isinf(d))
		d = (double) rp->max_interval;
	d *= 1.0 - rp->jitter * WfRandomFraction();
	return (int64) d;
}

/*
 * WfAdvance moves the run past the step at from_step (just completed):
 * it schedules the successor or completes the run.  from_step -1 starts
 * the run at its first step.
 */
void
WfAdvance(WfTransition *tr, int from_step)
{
	WfAdvanceTo(tr, from_step,
				(from_step < 0) ? 0 : tr->def->steps[from_step].next);
}

/*
 * WfAdvanceTo moves the run from the step at from_step to the step at
 * next, or completes the run when next is WF_STEP_END.
 */
void
WfAdvanceTo(WfTransition *tr, int from_step, int next)
{
	const WfDefinition *def = tr->def;

	if (next != WF_STEP_END)
	{
		WfEnterStep(tr, next);
		return;
	}
	else
	{
		WfJsonBuilder b;
		Jsonb	   *output;

		if (def->has_output)
			output = WfEvaluateMapping(def->output, def->n_output, tr->run->context);
		else
		{
			JsonbValue *steps = WfJsonbGet(tr->run->context, "steps");
			JsonbValue *last = NULL;

			if (steps != NULL && steps->type == jbvBinary)
			{
				const char *name = def->steps[from_step].name;
				JsonbValue *s = getKeyJsonValueFromContainer(steps->val.binary.data,
															 name, strlen(name), NULL);

				if (s != NULL && s->type == jbvBinary)
					last = getKeyJsonValueFromContainer(s->val.binary.data,
														"output", 6, NULL);
			}
			output = last ? JsonbValueToJsonb(last) : NULL;
		}
		WfJbBegin(&b);
		WfJbJsonb(&b, "output", output);
		WfAppendEvent(tr, WF_EV_RUN_COMPLETED, NULL, 0, WfJbEnd(&b));
	}
}

/*
 * make_array builds a one-dimensional array datum with optional NULLs.
 */
static Datum
make_array(Datum *elems, bool *nulls, int n, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1];
	int			lbs[1];

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	dims[0] = n;
	lbs[0] = 1;
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  elemtype, typlen, typbyval, typalign));
}

/*
 * WfEventArrays fills values[0..5] with the parallel arrays (seq, type,
 * step, attempt, payload, hash) of the transition's events, as both
 * WF_PLAN_TRANSITION and WF_PLAN_RUN_INSERT take them.
 */
void
WfEventArrays(WfTransition *tr, Datum *values)
{
	int			n = tr->nevents;
	Datum	   *seq = palloc(sizeof(Datum) * n);
	Datum	   *type = palloc(sizeof(Datum) * n);
	Datum	   *step = palloc(sizeof(Datum) * n);
	bool	   *step_null = palloc(sizeof(bool) * n);
	Datum	   *attempt = palloc(sizeof(Datum) * n);
	bool	   *attempt_null = palloc(sizeof(bool) * n);
	Datum	   *payload = palloc(sizeof(Datum) * n);
	Datum	   *hash = palloc(sizeof(Datum) * n);
	int			i;

	for (i = 0; i < n; i++)
	{
		WfEvent    *ev = &tr->events[i];
		bytea	   *h = palloc(VARHDRSZ + WF_HASH_LEN);

		SET_VARSIZE(h, VARHDRSZ + WF_HASH_LEN);
		memcpy(VARDATA(h), ev->hash, WF_HASH_LEN);
		seq[i] = Int32GetDatum(ev->seq);
		type[i] = CStringGetTextDatum(WfEventTypeName(ev->type));
		step_null[i] = (ev->step == NULL);
		step[i] = step_null[i] ? (Datum) 0 : CStringGetTextDatum(ev->step);
		attempt_null[i] = (ev->attempt == 0);
		attempt[i] = Int32GetDatum(ev->attempt);
		payload[i] = JsonbPGetDatum(ev->payload);
		hash[i] = PointerGetDatum(h);
	}
	values[0] = make_array(seq, NULL, n, INT4OID);
	values[1] = make_array(type, NULL, n, TEXTOID);
	values[2] = make_array(step, step_null, n, TEXTOID);
	values[3] = make_array(attempt, attempt_null, n, INT4OID);
	values[4] = make_array(payload, NULL, n, JSONBOID);
	values[5] = make_array(hash, NULL, n, BYTEAOID);
}

/*
 * interval_datum makes an interval of usec microseconds.
 */
static Datum
interval_datum(int64 usec)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = usec;
	return IntervalPGetDatum(iv);
}

/*
 * WfTaskValues fills values/nulls[0..11] with the new task of the
 * transition (task_id, step, visit, attempt, queue, activity,
 * available_at, idempotency_key, input, schedule_to_start, start_to_close,
 * heartbeat_timeout), or NULLs when there is none.
 */
void
WfTaskValues(WfTransition *tr, Datum *values, char *nulls)
{
	WfNewTask  *t = &tr->task;
	int			i;

	for (i = 0; i < WF_TASK_NVALUES; i++)
	{
		values[i] = (Datum) 0;
		nulls[i] = tr->has_task ? ' ' : 'n';
	}
	if (!tr->has_task)
		return;
	values[0] = Int64GetDatum(t->task_id);
	values[1] = CStringGetTextDatum(t->step);
	values[2] = Int32GetDatum(t->visit);
	values[3] = Int32GetDatum(t->attempt);
	values[4] = CStringGetTextDatum(t->queue);
	if (t->activity != NULL)
		values[5] = CStringGetTextDatum(t->activity);
	else
		nulls[5] = 'n';
	values[6] = TimestampTzGetDatum(t->available_at);
	values[7] = CStringGetTextDatum(t->idempotency_key);
	values[8] = JsonbPGetDatum(t->input);
	if (t->schedule_to_start > 0)
		values[9] = interval_datum(t->schedule_to_start);
	else
		nulls[9] = 'n';
	if (t->start_to_close > 0)
		values[10] = interval_datum(t->start_to_close);
	else
		nulls[10] = 'n';
	if (t->heartbeat > 0)
		values[11] = interval_datum(t->heartbeat);
	else
		nulls[11] = 'n';
}

/*
 * WfHashDatum returns the run's last hash as a bytea datum.
 */
Datum
WfHashDatum(const uint8 *hash)
{
	bytea	   *h = palloc(VARHDRSZ + WF_HASH_LEN);

	SET_VARSIZE(h, VARHDRSZ + WF_HASH_LEN);
	memcpy(VARDATA(h), hash, WF_HASH_LEN);
	return PointerGetDatum(h);
}

/*
 * WfRunValues fills values/nulls[0..10] with the snapshot columns that a
 * transition writes (status, current_step, seq, context, output,
 * last_hash, finished_at, current_attempt, current_task, step_generation,
 * wait_generation).
 */
void
WfRunValues(const WfRunState *run, Datum *values, char *nulls)
{
	int			i;

	for (i = 0; i < WF_RUN_NVALUES; i++)
		nulls[i] = ' ';
	values[0] = CStringGetTextDatum(WfRunStatusName(run->status));
	if (run->current_step != NULL)
		values[1] = CStringGetTextDatum(run->current_step);
	else
		nulls[1] = 'n';
	values[2] = Int32GetDatum(run->seq);
	values[3] = JsonbPGetDatum(run->context);
	if (run->output != NULL)
		values[4] = JsonbPGetDatum(run->output);
	else
		nulls[4] = 'n';
	values[5] = WfHashDatum(run->last_hash);
	if (run->finished)
		values[6] = TimestampTzGetDatum(run->finished_at);
	else
		nulls[6] = 'n';
	values[7] = Int32GetDatum(run->current_attempt);
	nulls[7] = run->current_attempt == 0 ? 'n' : ' ';
	values[8] = Int64GetDatum(run->current_task);
	nulls[8] = run->current_task == 0 ? 'n' : ' ';
	values[9] = Int32GetDatum(run->step_generation);
	values[10] = Int32GetDatum(run->wait_generation);
}

/*
 * write_timers inserts the timers of the transition, withdraws its task
 * and, when the run has finished, cancels the run's pending timers.
 */
static void
write_side_effects(WfTransition *tr)
{
	WfRunState *run = tr->run;
	int			i;

	for (i = 0; i < tr->ntimers; i++)
	{
		WfNewTimer *t = &tr->timers[i];
		Datum		values[9];
		char		nulls[9];

		if (t->kind != WF_TIMER_CHILD_DONE)
			WfTimerRoom(run->tenant_id, &run->run_id, WfTimerKindName(t->kind),
						t->step, t->generation, tr->now);
		memset(nulls, ' ', sizeof(nulls));
		values[0] = Int64GetDatum(t->timer_id);
		values[1] = CStringGetTextDatum(run->tenant_id);
		values[2] = UUIDPGetDatum(&run->run_id);
		values[3] = CStringGetTextDatum(WfTimerKindName(t->kind));
		if (t->step != NULL)
			values[4] = CStringGetTextDatum(t->step);
		else
			nulls[4] = 'n';
		values[5] = Int32GetDatum(t->generation);
		values[6] = TimestampTzGetDatum(t->fire_at);
		values[7] = JsonbPGetDatum(t->payload);
		values[8] = TimestampTzGetDatum(tr->now);
		WfExecPlan(WF_PLAN_TIMER_INSERT, values, nulls, false, 0, SPI_OK_INSERT);
		WfNoteTimer(t->fire_at);
	}
	if (tr->n_approvers > 0 || tr->close_approvals)
		WfWriteApprovals(tr);
	if ((run->finished || WF_RUN_UNDOING(run->status)) && tr->def->has_approvals)
	{
		/* a run that stops (or undoes) while an approval waits closes its tokens */
		Datum		values[1];

		values[0] = UUIDPGetDatum(&run->run_id);
		WfExecPlan(WF_PLAN_APPROVALS_CLOSE_RUN, values, NULL, false, 0, SPI_OK_UPDATE);
	}
	if (run->finished)
	{
		Datum		values[2];

		values[0] = UUIDPGetDatum(&run->run_id);
		values[1] = TimestampTzGetDatum(tr->now);
		WfExecPlan(WF_PLAN_TIMERS_CANCEL, values, NULL, false, 0, SPI_OK_UPDATE);
		if (WfJsonbGet(run->context, "parent") != NULL)
			WfNoteChildEnd(tr);
		if (tr->def->has_children && tr->stop_children == WF_STOP_NONE)
			tr->stop_children = run->status == WF_RUN_TERMINATED ?
				WF_STOP_TERMINATE : WF_STOP_CANCEL;
	}
	/* last: other runs' transitions, in the order parent, then child */
	if (tr->stop_children != WF_STOP_NONE)
		WfStopChildren(run, tr->stop_children);
}

/*
 * withdraw_task cancels the live task the transition withdraws; it runs
 * before a new attempt of the same step is inserted, which the unique
 * index of live attempts would refuse otherwise.
 */
static void
withdraw_task(WfTransition *tr)
{
	Datum		values[3];

	values[0] = Int64GetDatum(tr->withdraw_task);
	values[1] = TimestampTzGetDatum(tr->now);
	values[2] = Int32GetDatum(tr->withdraw_expirations);
	WfExecPlan(WF_PLAN_TASK_WITHDRAW, values, NULL, false, 0, SPI_OK_UPDATE);
}

/*
 * WfTransitionWrite writes the transition of an existing run: its events,
 * its new task attempt and the new snapshot in one statement, then its
 * timers (rare, so in statements of their own).
 */
void
WfTransitionWrite(WfTransition *tr)
{
	WfRunState *run = tr->run;
	Datum		values[WF_TRANSITION_NARGS];
	char		nulls[WF_TRANSITION_NARGS];

	if (tr->nevents == 0)
		return;
	if (tr->withdraw_task != 0)
		withdraw_task(tr);
	memset(nulls, ' ', sizeof(nulls));
	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(run->tenant_id);
	values[2] = CStringGetTextDatum(tr->actor);
	values[3] = TimestampTzGetDatum(tr->now);
	WfEventArrays(tr, &values[4]);
	WfTaskValues(tr, &values[10], &nulls[10]);
	WfRunValues(run, &values[10 + WF_TASK_NVALUES], &nulls[10 + WF_TASK_NVALUES]);
	values[WF_TRANSITION_NARGS - 1] = Int32GetDatum(tr->task.priority);
	nulls[WF_TRANSITION_NARGS - 1] = tr->has_task ? ' ' : 'n';

	if (WfExecPlan(WF_PLAN_TRANSITION, values, nulls, false, 0, SPI_OK_UPDATE) != 1)
		elog(ERROR, "run snapshot vanished during a wfengine transition");
	write_side_effects(tr);
	if (tr->has_task)
		note_new_task(tr);
}

/*
 * note_new_task asks for the commit-time signals of a new task attempt:
 * waiting claimers of its queue, and the engine worker when the attempt
 * has a schedule-to-start deadline.
 */
static void
note_new_task(WfTransition *tr)
{
	WfNoteTaskReady(tr->run->tenant_id, tr->task.queue);
	if (tr->task.schedule_to_start > 0)
		WfNoteTimer(tr->task.available_at + tr->task.schedule_to_start);
}

/*
 * WfTransitionWriteNew writes the first transition of a new run; see
 * WF_PLAN_RUN_INSERT.  It returns false when a run with the same
 * idempotency key exists (and then wrote nothing).
 */
bool
WfTransitionWriteNew(WfTransition *tr, const char *defname, int32 version,
					 Jsonb *input, const char *key)
{
	WfRunState *run = tr->run;
	Datum		values[WF_RUN_INSERT_NARGS];
	char		nulls[WF_RUN_INSERT_NARGS];

	memset(nulls, ' ', sizeof(nulls));
	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(run->tenant_id);
	values[2] = CStringGetTextDatum(tr->actor);
	values[3] = TimestampTzGetDatum(tr->now);
	WfEventArrays(tr, &values[4]);
	WfTaskValues(tr, &values[10], &nulls[10]);
	WfRunValues(run, &values[10 + WF_TASK_NVALUES], &nulls[10 + WF_TASK_NVALUES]);
	values[WF_TRANSITION_NARGS - 1] = Int32GetDatum(tr->task.priority);
	nulls[WF_TRANSITION_NARGS - 1] = tr->has_task ? ' ' : 'n';
	values[WF_TRANSITION_NARGS] = Int64GetDatum(run->definition_id);
	values[WF_TRANSITION_NARGS + 1] = CStringGetTextDatum(defname);
	values[WF_TRANSITION_NARGS + 2] = Int32GetDatum(version);
	values[WF_TRANSITION_NARGS + 3] = JsonbPGetDatum(input);
	if (key != NULL)
		values[WF_TRANSITION_NARGS + 4] = CStringGetTextDatum(key);
	else
		nulls[WF_TRANSITION_NARGS + 4] = 'n';
	if (tr->input_digest != NULL)
		values[WF_TRANSITION_NARGS + 5] = PointerGetDatum(tr->input_digest);
	else
		nulls[WF_TRANSITION_NARGS + 5] = 'n';

	if (WfExecPlan(WF_PLAN_RUN_INSERT, values, nulls, false, 0, SPI_OK_SELECT) != 1)
		elog(ERROR, "could not insert run");
	if (DatumGetInt64(WfGetDatumNotNull(0, 1)) != 1)
		return false;
	write_side_effects(tr);
	if (tr->has_task)
		note_new_task(tr);
	return true;
}

/*
 * WfLockTaskAndRun locks task task_id of tenant and then its run (the lock
 * order of this file) with WF_PLAN_LOCK_TASK_AND_RUN, and reads both into
 * *run and *task; false when there is no such task.  The deadline columns
 * of the row stay in SPI_tuptable after the task's, for the engine worker.
 */
bool
WfLockTaskAndRun(int64 task_id, const char *tenant, WfRunState *run, WfLockedTask *task)
{
	Datum		values[2];
	int			c = WF_RUN_NCOLUMNS;

	values[0] = Int64GetDatum(task_id);
	values[1] = CStringGetTextDatum(tenant);
	if (WfExecPlan(WF_PLAN_LOCK_TASK_AND_RUN, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		return false;
	WfRunStateFromTuple(run, 0);
	task->status = WfGetTextOrNull(0, c + 1);
	task->fence = DatumGetInt64(WfGetDatumNotNull(0, c + 2));
	task->step = WfGetTextOrNull(0, c + 3);
	task->visit = DatumGetInt32(WfGetDatumNotNull(0, c + 4));
	task->attempt = DatumGetInt32(WfGetDatumNotNull(0, c + 5));
	task->worker = WfGetTextOrNull(0, c + 6);
	task->input = DatumGetJsonbPCopy(WfGetDatumNotNull(0, c + 7));
	return true;
}

/*
 * WfRunStateFromTuple reads a snapshot from row of the current SPI result,
 * selected with the WF_RUN_COLUMNS list.  The values are copied into the
 * current memory context.
 */
void
WfRunStateFromTuple(WfRunState *run, int row)
{
	bool		isnull;
	Datum		d;

	memset(run, 0, sizeof(WfRunState));
	memcpy(&run->run_id, DatumGetUUIDP(WfGetDatumNotNull(row, 1)), sizeof(pg_uuid_t));
	run->tenant_id = WfGetTextOrNull(row, 2);
	run->definition_id = DatumGetInt64(WfGetDatumNotNull(row, 3));
	run->status = WfRunStatusFromName(WfGetTextOrNull(row, 4));
	run->current_step = WfGetTextOrNull(row, 5);
	run->seq = DatumGetInt32(WfGetDatumNotNull(row, 6));
	run->context = DatumGetJsonbPCopy(WfGetDatumNotNull(row, 7));
	d = WfGetDatum(row, 8, &isnull);
	run->output = isnull ? NULL : DatumGetJsonbPCopy(d);
	d = WfGetDatumNotNull(row, 9);
	if (VARSIZE_ANY_EXHDR(DatumGetByteaPP(d)) != WF_HASH_LEN)
		elog(ERROR, "run snapshot has a malformed last_hash");
	memcpy(run->last_hash, VARDATA_ANY(DatumGetByteaPP(d)), WF_HASH_LEN);
	run->updated_at = DatumGetTimestampTz(WfGetDatumNotNull(row, 10));
	d = WfGetDatum(row, 11, &isnull);
	run->finished = !isnull;
	run->finished_at = isnull ? 0 : DatumGetTimestampTz(d);
	d = WfGetDatum(row, 12, &isnull);
	run->current_attempt = isnull ? 0 : DatumGetInt32(d);
	d = WfGetDatum(row, 13, &isnull);
	run->current_task = isnull ? 0 : DatumGetInt64(d);
	run->step_generation = DatumGetInt32(WfGetDatumNotNull(row, 14));
	run->wait_generation = DatumGetInt32(WfGetDatumNotNull(row, 15));
}

