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
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

#include "crypto.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
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
static Jsonb *context_set_step(Jsonb *context, const char *step, Jsonb *value);
static Jsonb *context_set_key(Jsonb *context, const char *key, Jsonb *value);
static Jsonb *context_set_path(Jsonb *context, const char *a, const char *b,
							   const char *c, int index, Jsonb *value);
static Jsonb *empty_object(void);
static Jsonb *null_array(int n);
static Jsonb *int_jsonb(int64 value);
static const char *compensation_done(WfRunState *run, const WfEvent *ev);

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
 * WF_NAMES defines the two functions of one kind of stored name: Name(v)
 * returns the stored name of value v (an internal error for a value out
 * of range), FromName(name) maps a stored name back to its value, or 0
 * for a name it does not know.  Values first..last have names; FromName
 * answers from from_first on (a run's status "none" is never stored).
 */
#define WF_NAMES(Type, Name, FromName, names, first, from_first, last, what) \
const char * \
Name(Type value) \
{ \
	return name_of(names, first, last, value, what); \
} \
Type \
FromName(const char *name) \
{ \
	return (Type) value_of(names, from_first, last, name); \
}

WF_NAMES(WfRunStatus, WfRunStatusName, WfRunStatusFromName, run_status_names,
		 WF_RUN_NONE, WF_RUN_RUNNING, WF_RUN_LAST, "run status")
WF_NAMES(WfEventType, WfEventTypeName, WfEventTypeFromName, event_type_names,
		 WF_EV_RUN_STARTED, WF_EV_RUN_STARTED, WF_EV_LAST, "event type")
WF_NAMES(WfTimerKind, WfTimerKindName, WfTimerKindFromName, timer_kind_names,
		 WF_TIMER_RETRY, WF_TIMER_RETRY, WF_TIMER_CHILD_DONE, "timer kind")

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
	return WfJsonbSetKey(context, key, value);
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
	return WfJsonbSetKeyIn(context, "steps", step, value);
}

/*
 * WfEventOutput returns the output an event records for its step (its
 * payload's "output"), or NULL.
 */
Jsonb *
WfEventOutput(const WfEvent *ev)
{
	return WfJsonbGetJsonb(ev->payload, "output");
}

/*
 * seq_of_numeric returns a seq a context refers to, or -1 when it is not
 * one (a value out of int4's range, which only a snapshot changed behind
 * the engine's back holds: wf.verify_run then reports it rather than fail).
 */
static int32
seq_of_numeric(Numeric n)
{
	bool		error = false;
	int32		seq = numeric_int4_opt_error(n, &error);

	return error ? -1 : seq;
}

/*
 * output_seq_of returns the seq a step's entry of $.steps refers to for its
 * output (WF_OUTPUT_SEQ_KEY), or 0 when the entry holds its output.
 */
static int32
output_seq_of(const JsonbValue *entry)
{
	JsonbValue *v;

	if (entry->type != jbvBinary || !JsonContainerIsObject(entry->val.binary.data))
		return 0;
	v = getKeyJsonValueFromContainer(entry->val.binary.data, WF_OUTPUT_SEQ_KEY,
									 strlen(WF_OUTPUT_SEQ_KEY), NULL);
	if (v == NULL || v->type != jbvNumeric)
		return 0;
	return seq_of_numeric(v->val.numeric);
}

/*
 * WfContextMayReferToOutputs: false when the context surely refers to no
 * output (WF_OUTPUT_SEQ_KEY is nowhere in its bytes: jsonb keeps keys as
 * they are), for a test that costs no walk of $.steps on the common path.
 */
bool
WfContextMayReferToOutputs(Jsonb *context)
{
	return memmem(VARDATA(context), VARSIZE(context) - VARHDRSZ,
				  WF_OUTPUT_SEQ_KEY, strlen(WF_OUTPUT_SEQ_KEY)) != NULL;
}

/*
 * add_seq appends seq to the array *seqs of *n (of room for *max).
 */
static void
add_seq(int32 **seqs, int *n, int *max, int32 seq)
{
	if (*n >= *max)
	{
		*max = Max(16, *max * 2);
		*seqs = *seqs ? repalloc(*seqs, sizeof(int32) * *max) : palloc(sizeof(int32) * *max);
	}
	(*seqs)[(*n)++] = seq;
}

/*
 * branch_output_seqs returns the WF_OUTPUT_SEQS_KEY array of an entry of
 * $.children (a JSON container), or NULL.
 */
static JsonbContainer *
branch_output_seqs(const JsonbValue *entry)
{
	JsonbValue *v;

	if (entry->type != jbvBinary || !JsonContainerIsObject(entry->val.binary.data))
		return NULL;
	v = getKeyJsonValueFromContainer(entry->val.binary.data, WF_OUTPUT_SEQS_KEY,
									 strlen(WF_OUTPUT_SEQS_KEY), NULL);
	if (v == NULL || v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		return NULL;
	return v->val.binary.data;
}

/*
 * children_output_seqs appends to *seqs the seqs $.children refers to for
 * branch outputs (the child_finished events that hold them).
 */
static void
children_output_seqs(Jsonb *context, int32 **seqs, int *n, int *max)
{
	JsonbValue *children = WfJsonbGet(context, "children");
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (children == NULL || children->type != jbvBinary ||
		!JsonContainerIsObject(children->val.binary.data))
		return;
	it = JsonbIteratorInit(children->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbContainer *refs;
		JsonbIterator *rit;
		JsonbValue	r;

		if (tok != WJB_VALUE || (refs = branch_output_seqs(&v)) == NULL)
			continue;
		rit = JsonbIteratorInit(refs);
		while ((tok = JsonbIteratorNext(&rit, &r, true)) != WJB_DONE)
			if (tok == WJB_ELEM && r.type == jbvNumeric)
				add_seq(seqs, n, max, seq_of_numeric(r.val.numeric));
	}
}

/*
 * WfContextOutputSeqs sets *seqs to the seqs of the events whose outputs
 * the context refers to (record_step_output, and child_finished for the
 * branch outputs of $.children), for the steps wanted may read (NULL:
 * every step and $.children), and returns how many there are: 0 when it
 * holds those outputs itself.
 */
int
WfContextOutputSeqs(Jsonb *context, const WfStepsRead *wanted, int32 **seqs)
{
	JsonbValue *steps = WfJsonbGet(context, "steps");
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0;
	int			max = 0;

	*seqs = NULL;
	if (wanted == NULL || wanted->all || wanted->children)
		children_output_seqs(context, seqs, &n, &max);
	if (steps == NULL || steps->type != jbvBinary ||
		!JsonContainerIsObject(steps->val.binary.data))
		return n;
	it = JsonbIteratorInit(steps->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		int32		seq;

		if (tok == WJB_KEY)
		{
			/* a step the paths do not read: its value is skipped */
			if (wanted != NULL &&
				!WfStepsReadHas(wanted, v.val.string.val, v.val.string.len))
				(void) JsonbIteratorNext(&it, &v, true);
			continue;
		}
		if (tok != WJB_VALUE || (seq = output_seq_of(&v)) <= 0)
			continue;
		add_seq(seqs, &n, &max, seq);
	}
	return n;
}

/*
 * output_of returns the output listed for the event of seq (outputs[i] of
 * seqs[i]) in *output; false when seq is not listed.
 */
static bool
output_of(int32 seq, int n, const int32 *seqs, Jsonb **outputs, Jsonb **output)
{
	int			i;

	for (i = 0; i < n; i++)
		if (seqs[i] == seq)
		{
			*output = outputs[i];
			return true;
		}
	return false;
}

/*
 * push_output pushes output (NULL: a JSON null) as the value or element
 * tok.
 */
static JsonbValue *
push_output(JsonbParseState **ps, JsonbIteratorToken tok, Jsonb *output)
{
	JsonbValue	v;

	if (output == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvBinary;
		v.val.binary.data = &output->root;
		v.val.binary.len = VARSIZE(output) - VARHDRSZ;
	}
	return pushJsonbValue(ps, tok, &v);
}

/*
 * entry_with_output returns a step's entry of $.steps (an object holding
 * WF_OUTPUT_SEQ_KEY) with that member replaced by "output": output (NULL:
 * a JSON null).
 */
static Jsonb *
entry_with_output(JsonbContainer *entry, Jsonb *output)
{
	JsonbParseState *ps = NULL;
	JsonbIterator *it = JsonbIteratorInit(entry);
	JsonbValue	v;
	JsonbValue *res = NULL;
	JsonbIteratorToken tok;
	size_t		keylen = strlen(WF_OUTPUT_SEQ_KEY);

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY && v.val.string.len == keylen &&
			memcmp(v.val.string.val, WF_OUTPUT_SEQ_KEY, keylen) == 0)
		{
			v.val.string.val = "output";
			v.val.string.len = 6;
			pushJsonbValue(&ps, WJB_KEY, &v);
			(void) JsonbIteratorNext(&it, &v, true);	/* the seq */
			res = push_output(&ps, WJB_VALUE, output);
			continue;
		}
		res = pushJsonbValue(&ps, tok, tok < WJB_BEGIN_ARRAY ? &v : NULL);
	}
	return JsonbValueToJsonb(res);
}

/*
 * children_entry_with_outputs returns an entry of $.children whose branch
 * outputs it refers to (refs, its WF_OUTPUT_SEQS_KEY array) are all
 * listed, with them in "outputs" and without refs; NULL when one is not
 * listed (the entry stays as it is).
 */
static Jsonb *
children_entry_with_outputs(JsonbContainer *entry, JsonbContainer *refs,
							int n, const int32 *seqs, Jsonb **outputs)
{
	int			nb = JsonContainerSize(refs);
	Jsonb	  **branch = palloc0(sizeof(Jsonb *) * Max(nb, 1));
	bool	   *listed = palloc0(sizeof(bool) * Max(nb, 1));
	JsonbParseState *ps = NULL;
	JsonbIterator *it = JsonbIteratorInit(refs);
	JsonbValue	v;
	JsonbValue *res = NULL;
	JsonbIteratorToken tok;
	int			b = 0;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (v.type == jbvNumeric)
		{
			int32		seq = seq_of_numeric(v.val.numeric);

			if (!output_of(seq, n, seqs, outputs, &branch[b]))
				return NULL;
			listed[b] = true;
		}
		b++;
	}
	it = JsonbIteratorInit(entry);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		is_outputs = tok == WJB_KEY && v.val.string.len == 7 &&
			memcmp(v.val.string.val, "outputs", 7) == 0;

		if (tok == WJB_KEY && v.val.string.len == strlen(WF_OUTPUT_SEQS_KEY) &&
			memcmp(v.val.string.val, WF_OUTPUT_SEQS_KEY, v.val.string.len) == 0)
		{
			(void) JsonbIteratorNext(&it, &v, true);	/* its value: dropped */
			continue;
		}
		res = pushJsonbValue(&ps, tok, tok < WJB_BEGIN_ARRAY ? &v : NULL);
		if (is_outputs)
		{
			JsonbIterator *oit;
			JsonbValue	o;

			(void) JsonbIteratorNext(&it, &v, true);	/* the array */
			if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
				return NULL;
			oit = JsonbIteratorInit(v.val.binary.data);
			b = 0;
			while ((tok = JsonbIteratorNext(&oit, &o, true)) != WJB_DONE)
			{
				if (tok != WJB_ELEM)
					res = pushJsonbValue(&ps, tok, NULL);
				else if (b < nb && listed[b++])
					res = push_output(&ps, WJB_ELEM, branch[b - 1]);
				else
					res = pushJsonbValue(&ps, WJB_ELEM, &o);
			}
		}
	}
	return JsonbValueToJsonb(res);
}

/*
 * children_with_outputs returns the context with the branch outputs of
 * $.children it refers to put back, for each entry whose references are
 * all listed in seqs (WfContextWithOutputs).
 */
static Jsonb *
children_with_outputs(Jsonb *context, int n, const int32 *seqs, Jsonb **outputs)
{
	JsonbValue *children = WfJsonbGet(context, "children");
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	List	   *names = NIL;
	List	   *entries = NIL;
	ListCell   *ln;
	ListCell   *le;
	char	   *name = NULL;

	if (children == NULL || children->type != jbvBinary ||
		!JsonContainerIsObject(children->val.binary.data))
		return context;
	it = JsonbIteratorInit(children->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbContainer *refs;
		Jsonb	   *entry;

		if (tok == WJB_KEY)
			name = pnstrdup(v.val.string.val, v.val.string.len);
		if (tok != WJB_VALUE || (refs = branch_output_seqs(&v)) == NULL)
			continue;
		entry = children_entry_with_outputs(v.val.binary.data, refs, n, seqs, outputs);
		if (entry == NULL)
			continue;
		names = lappend(names, name);
		entries = lappend(entries, entry);
	}
	forboth(ln, names, le, entries)
		context = WfJsonbSetKeyIn(context, "children", lfirst(ln), lfirst(le));
	return context;
}

/*
 * WfContextWithOutputs returns the context with the outputs of the events
 * seqs put back: outputs[i] is that of the event of seq seqs[i], as
 * WfContextOutputSeqs listed them (NULL: the event recorded none).  The
 * steps (and $.children entries) listed are then what they would be had
 * their outputs been copied into the context; a reference not listed
 * stays.
 */
Jsonb *
WfContextWithOutputs(Jsonb *context, int n, const int32 *seqs, Jsonb **outputs)
{
	JsonbValue *steps;
	JsonbParseState *ps = NULL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbValue *res = NULL;
	JsonbIteratorToken tok;

	if (n == 0)
		return context;
	context = children_with_outputs(context, n, seqs, outputs);
	steps = WfJsonbGet(context, "steps");
	if (steps == NULL || steps->type != jbvBinary)
		return context;
	it = JsonbIteratorInit(steps->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		int32		seq;
		Jsonb	   *output;
		Jsonb	   *entry;

		if (tok != WJB_VALUE || (seq = output_seq_of(&v)) <= 0)
		{
			res = pushJsonbValue(&ps, tok, tok < WJB_BEGIN_ARRAY ? &v : NULL);
			continue;
		}
		if (!output_of(seq, n, seqs, outputs, &output))
		{
			res = pushJsonbValue(&ps, tok, &v);	/* not listed: stays */
			continue;
		}
		entry = entry_with_output(v.val.binary.data, output);
		v.type = jbvBinary;
		v.val.binary.data = &entry->root;
		v.val.binary.len = VARSIZE(entry) - VARHDRSZ;
		res = pushJsonbValue(&ps, WJB_VALUE, &v);
	}
	return WfJsonbSetKey(context, "steps", JsonbValueToJsonb(res));
}

/* ----------------------------------------------------------------
 *		the reducer
 * ----------------------------------------------------------------
 */

/*
 * record_step_output records the output of a visit of ev's step that has
 * ended (the payload's output and visit, and the attempt that produced
 * it; skipped: by wf.skip_step) in $.steps of the context; the run is at
 * no step until it enters the next.  An output of WF_OUTPUT_REF_MIN bytes
 * or more is recorded by reference, the seq of ev (WF_OUTPUT_SEQ_KEY), in
 * a run whose snapshot may hold references (output_refs: 0.3.0 on).
 */
static void
record_step_output(WfRunState *run, const WfEvent *ev, int32 attempt, bool skipped)
{
	WfJsonBuilder b;
	Jsonb	   *output = WfEventOutput(ev);

	WfJbBegin(&b);
	/* a large output stays in ev's row of the history only */
	if (run->output_refs && output != NULL && VARSIZE(output) >= WF_OUTPUT_REF_MIN)
		WfJbInt(&b, WF_OUTPUT_SEQ_KEY, ev->seq);
	else
		WfJbJsonb(&b, "output", output);
	WfJbInt(&b, "attempt", attempt);
	WfJbInt(&b, "visit", WfJsonbGetInt(ev->payload, "visit", 1));
	if (skipped)
		WfJbBool(&b, "skipped", true);
	run->context = context_set_step(run->context, ev->step, WfJbEnd(&b));
	run->current_step = NULL;
}

/*
 * step_may_begin: ev may begin a visit of its step (the run is running, at
 * no live task); refuse_begin is the reducer's answer when it may not.
 */
static bool
step_may_begin(const WfRunState *run, const WfEvent *ev)
{
	return run->status == WF_RUN_RUNNING && ev->step != NULL && run->current_task == 0;
}

static const char *
refuse_begin(const WfEvent *ev)
{
	return psprintf("\"%s\" while the run is not running or has a live task",
					WfEventTypeName(ev->type));
}

/*
 * at_current_step: ev is about the step the running run is at;
 * refuse_not_current is the reducer's answer when it is not.
 */
static bool
at_current_step(const WfRunState *run, const WfEvent *ev)
{
	return run->status == WF_RUN_RUNNING && run->current_step != NULL &&
		ev->step != NULL && strcmp(run->current_step, ev->step) == 0;
}

static const char *
refuse_not_current(const WfEvent *ev)
{
	return psprintf("\"%s\" for a step that is not the current one",
					WfEventTypeName(ev->type));
}

/*
 * at_current_attempt: ev is about the current attempt of the step the run
 * is at, while it runs or undoes (compensation tasks complete while
 * cancelling or compensating).
 */
static bool
at_current_attempt(const WfRunState *run, const WfEvent *ev)
{
	return (run->status == WF_RUN_RUNNING || WF_RUN_UNDOING(run->status)) &&
		run->current_step != NULL && ev->step != NULL &&
		strcmp(run->current_step, ev->step) == 0 && ev->attempt == run->current_attempt;
}

static const char *
refuse_not_current_attempt(const WfEvent *ev)
{
	return psprintf("\"%s\" for a step or attempt that is not the current one",
					WfEventTypeName(ev->type));
}

/*
 * enter_visit makes ev's step the run's current one, in a visit that
 * begins at ev (its step_generation) with no attempt yet.
 */
static void
enter_visit(WfRunState *run, const WfEvent *ev)
{
	run->current_step = pstrdup(ev->step);
	run->current_attempt = 0;
	run->step_generation = ev->seq;
}

/*
 * begin_visit applies an event that begins a visit of its step with no
 * attempt yet (a sleep, a wait, an approval): the reducer's answer.
 */
static const char *
begin_visit(WfRunState *run, const WfEvent *ev)
{
	if (!step_may_begin(run, ev))
		return refuse_begin(ev);
	enter_visit(run, ev);
	return NULL;
}

/*
 * end_run ends the run with status at ev, at step (NULL: at no step); it
 * waits for nothing any more.
 */
static void
end_run(WfRunState *run, WfRunStatus status, char *step, const WfEvent *ev)
{
	run->status = status;
	run->current_step = step;
	run->wait_generation = 0;
	run->finished = true;
	run->finished_at = ev->created_at;
}

/*
 * reopen_run makes an ended (or failing) run live again with status,
 * waiting for nothing yet: a retried or skipped step, a cancellation.
 */
static void
reopen_run(WfRunState *run, WfRunStatus status)
{
	run->status = status;
	run->wait_generation = 0;
	run->finished = false;
	run->finished_at = 0;
}

/*
 * apply_run_event applies the events of the run as a whole: start, end, pause, resume, migration, hold, context, signals kept.
 */
static const char *
apply_run_event(WfRunState *run, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;

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
			end_run(run, WF_RUN_TERMINATED, run->current_step, ev);
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

		case WF_EV_RUN_COMPLETED:
			if (run->status != WF_RUN_RUNNING || run->current_task != 0)
				return "\"run_completed\" while a task is live";
			end_run(run, WF_RUN_COMPLETED, NULL, ev);
			run->output = WfJsonbGetJsonb(p, "output");
			break;

		case WF_EV_RUN_FAILED:
			if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED) ||
				run->current_task != 0)
				return "\"run_failed\" while a task is live";
			end_run(run, WF_RUN_FAILED, WfJsonbGetText(p, "step"), ev);
			break;

		default:
			elog(ERROR, "event type %d is not one of apply_run_event's", (int) ev->type);
	}
	return NULL;
}

/*
 * apply_task_event applies the events of task attempts: scheduled, finished, withdrawn, retried, skipped; reports that are only recorded.
 */
static const char *
apply_task_event(WfRunState *run, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;

	switch (ev->type)
	{
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
			reopen_run(run, (run->status == WF_RUN_FAILED) ? WF_RUN_RUNNING : WfUndoingStatus(run));
			enter_visit(run, ev);
			break;

		case WF_EV_STEP_SKIPPED:
			{
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
					reopen_run(run, WfUndoingStatus(run));
					run->current_step = NULL;
					run->current_attempt = 0;
					break;
				}
				record_step_output(run, ev, 0, true);
				reopen_run(run, WF_RUN_RUNNING);
				run->current_step = NULL;
				run->current_attempt = 0;
				run->step_generation = ev->seq;
				break;
			}

		case WF_EV_TASK_COMPLETED:
			{
				if (!at_current_attempt(run, ev))
					return refuse_not_current_attempt(ev);
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
				record_step_output(run, ev, ev->attempt, false);
				run->current_attempt = 0;
				run->current_task = 0;
				break;
			}

		case WF_EV_TASK_FAILED:
			if (!at_current_attempt(run, ev))
				return refuse_not_current_attempt(ev);
			/* the step stays current: a retry or run_failed follows */
			run->current_attempt = 0;
			run->current_task = 0;
			break;

		case WF_EV_RESULT_DUPLICATE:
		case WF_EV_RESULT_STALE:
			/* recorded, never applied */
			break;

		default:
			elog(ERROR, "event type %d is not one of apply_task_event's", (int) ev->type);
	}
	return NULL;
}

/*
 * apply_timer_event applies the events of timers: what the run waits for (wait_generation).
 */
static const char *
apply_timer_event(WfRunState *run, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;

	switch (ev->type)
	{
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

		default:
			elog(ERROR, "event type %d is not one of apply_timer_event's", (int) ev->type);
	}
	return NULL;
}

/*
 * apply_wait_event applies the events of steps that run no task: sleeps, choices, waits for events; a wait ends with its output.
 */
static const char *
apply_wait_event(WfRunState *run, const WfEvent *ev)
{
	switch (ev->type)
	{
		case WF_EV_SLEEP_STARTED:
		case WF_EV_WAIT_STARTED:
			return begin_visit(run, ev);

		case WF_EV_CHOICE_MADE:
			{
				if (!step_may_begin(run, ev))
					return refuse_begin(ev);
				record_step_output(run, ev, 1, false);
				run->step_generation = ev->seq;
				break;
			}

		case WF_EV_SLEEP_FINISHED:
			{
				if (!at_current_step(run, ev))
					return refuse_not_current(ev);
				record_step_output(run, ev, 1, false);
				run->wait_generation = 0;
				break;
			}

		case WF_EV_EVENT_RECEIVED:
		case WF_EV_WAIT_TIMED_OUT:
		case WF_EV_CHILDREN_JOINED:
			{
				/* a waiting step ends with the output in the payload */
				if (!at_current_step(run, ev))
					return refuse_not_current(ev);
				record_step_output(run, ev, 1, false);
				break;
			}

		default:
			elog(ERROR, "event type %d is not one of apply_wait_event's", (int) ev->type);
	}
	return NULL;
}

/*
 * apply_approval_event applies the events of approval steps.
 */
static const char *
apply_approval_event(WfRunState *run, const WfEvent *ev)
{
	switch (ev->type)
	{
		case WF_EV_APPROVAL_REQUESTED:
			return begin_visit(run, ev);

		case WF_EV_APPROVAL_NOTIFIED:
			/* the notification task is done; the step waits for decisions */
			if (!at_current_step(run, ev) ||
				ev->attempt != run->current_attempt || run->current_task == 0)
				return "\"approval_notified\" for a step or attempt that is not the current one";
			run->current_attempt = 0;
			run->current_task = 0;
			break;

		case WF_EV_APPROVAL_TOKENS_ISSUED:
		case WF_EV_APPROVAL_DECIDED:
		case WF_EV_APPROVAL_TOKENS_REVOKED:
		case WF_EV_APPROVERS_CHANGED:
			if (!at_current_step(run, ev))
				return "an approval event for a step that is not the current one";
			break;

		case WF_EV_DECISION_REFUSED:
			/* recorded, never applied */
			break;

		case WF_EV_APPROVAL_COMPLETED:
			{
				if (!at_current_step(run, ev) || run->current_task != 0)
					return refuse_not_current(ev);
				record_step_output(run, ev, 1, false);
				break;
			}

		default:
			elog(ERROR, "event type %d is not one of apply_approval_event's", (int) ev->type);
	}
	return NULL;
}

/*
 * apply_children_event applies the events of child runs.
 */
static const char *
apply_children_event(WfRunState *run, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;

	switch (ev->type)
	{
		case WF_EV_CHILDREN_STARTED:
			{
				WfJsonBuilder b;
				Jsonb	   *runs = WfJsonbGetJsonb(p, "runs");
				int			n;

				if (!step_may_begin(run, ev) || runs == NULL || !JB_ROOT_IS_ARRAY(runs))
					return refuse_begin(ev);
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
				enter_visit(run, ev);
				break;
			}

		case WF_EV_CHILD_FINISHED:
			{
				Jsonb	   *children;
				int			branch = (int) WfJsonbGetInt(p, "branch", 0);
				char	   *status = WfJsonbGetText(p, "status");
				bool		completed = status != NULL && strcmp(status, "completed") == 0;
				JsonbValue	sv;

				if (!at_current_step(run, ev) || status == NULL)
					return refuse_not_current(ev);
				children = WfJsonbGetJsonb(WfJsonbGetJsonb(run->context, "children"), ev->step);
				if (children == NULL)
					return "\"child_finished\" for a step that started no children";
				sv.type = jbvString;
				sv.val.string.val = status;
				sv.val.string.len = strlen(status);
				run->context = context_set_path(run->context, "children", ev->step, "statuses",
												branch, JsonbValueToJsonb(&sv));
				if (completed)
				{
					Jsonb	   *output = WfEventOutput(ev);

					/*
					 * A large branch output stays in this event's row of the
					 * history only: outputs[branch] stays null and
					 * output_seqs[branch] is this event's seq (as
					 * record_step_output does for a step's output).
					 */
					if (run->output_refs && output != NULL && VARSIZE(output) >= WF_OUTPUT_REF_MIN)
					{
						if (WfJsonbGet(children, WF_OUTPUT_SEQS_KEY) == NULL)
						{
							Jsonb	   *outs = WfJsonbGetJsonb(children, "outputs");

							run->context = context_set_path(run->context, "children", ev->step,
															WF_OUTPUT_SEQS_KEY, -1,
															null_array(outs != NULL && JB_ROOT_IS_ARRAY(outs) ?
																	   JB_ROOT_COUNT(outs) : branch + 1));
						}
						run->context = context_set_path(run->context, "children", ev->step,
														WF_OUTPUT_SEQS_KEY, branch, int_jsonb(ev->seq));
					}
					else
						run->context = context_set_path(run->context, "children", ev->step, "outputs",
														branch, output);
				}
				run->context = context_set_path(run->context, "children", ev->step, "finished", -1,
												int_jsonb(WfJsonbGetInt(children, "finished", 0) + 1));
				if (completed)
					run->context = context_set_path(run->context, "children", ev->step, "completed", -1,
													int_jsonb(WfJsonbGetInt(children, "completed", 0) + 1));
				break;
			}

		default:
			elog(ERROR, "event type %d is not one of apply_children_event's", (int) ev->type);
	}
	return NULL;
}

/*
 * apply_undo_event applies the events of the undoing of a run: cancellation, compensation, their ends.
 */
static const char *
apply_undo_event(WfRunState *run, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;

	switch (ev->type)
	{
		case WF_EV_CANCEL_REQUESTED:
			if ((run->status != WF_RUN_RUNNING && run->status != WF_RUN_PAUSED &&
				 run->status != WF_RUN_FAILED) ||
				(run->status == WF_RUN_FAILED && run->current_task != 0))
				return "\"cancel_requested\" while the run is not running, paused or failed";
			/* a failed run is live again until its compensations have run */
			reopen_run(run, WF_RUN_CANCELLING);
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
			end_run(run, WF_RUN_CANCELLED, NULL, ev);
			break;

		case WF_EV_RUN_COMPENSATED:
			if (run->status != WF_RUN_COMPENSATING || run->current_task != 0)
				return "\"run_compensated\" while the run is not compensating or has a live task";
			end_run(run, WF_RUN_COMPENSATED, NULL, ev);
			break;

		case WF_EV_COMPENSATION_FAILED:
			if (!WF_RUN_UNDOING(run->status) || run->current_task != 0 ||
				ev->step == NULL || !WfIsCompensation(ev->step))
				return "\"compensation_failed\" while the run is not compensating";
			end_run(run, WF_RUN_COMPENSATION_FAILED, pstrdup(ev->step), ev);
			break;

		default:
			elog(ERROR, "event type %d is not one of apply_undo_event's", (int) ev->type);
	}
	return NULL;
}

/* the reducer's handler of each event type, by family */
typedef const char *(*WfEventHandler) (WfRunState *run, const WfEvent *ev);

static const WfEventHandler event_handlers[WF_EV_LAST + 1] = {
	[WF_EV_RUN_STARTED] = apply_run_event,
	[WF_EV_TASK_SCHEDULED] = apply_task_event,
	[WF_EV_TASK_COMPLETED] = apply_task_event,
	[WF_EV_TASK_FAILED] = apply_task_event,
	[WF_EV_RESULT_DUPLICATE] = apply_task_event,
	[WF_EV_RESULT_STALE] = apply_task_event,
	[WF_EV_RUN_COMPLETED] = apply_run_event,
	[WF_EV_RUN_FAILED] = apply_run_event,
	[WF_EV_TIMER_SET] = apply_timer_event,
	[WF_EV_TIMER_FIRED] = apply_timer_event,
	[WF_EV_SLEEP_STARTED] = apply_wait_event,
	[WF_EV_SLEEP_FINISHED] = apply_wait_event,
	[WF_EV_LEASE_EXPIRED] = apply_task_event,
	[WF_EV_TASK_CANCELLED] = apply_task_event,
	[WF_EV_RUN_PAUSED] = apply_run_event,
	[WF_EV_APPROVAL_REQUESTED] = apply_approval_event,
	[WF_EV_APPROVAL_NOTIFIED] = apply_approval_event,
	[WF_EV_APPROVAL_TOKENS_ISSUED] = apply_approval_event,
	[WF_EV_APPROVAL_DECIDED] = apply_approval_event,
	[WF_EV_DECISION_REFUSED] = apply_approval_event,
	[WF_EV_APPROVAL_COMPLETED] = apply_approval_event,
	[WF_EV_APPROVAL_TOKENS_REVOKED] = apply_approval_event,
	[WF_EV_APPROVERS_CHANGED] = apply_approval_event,
	[WF_EV_CHOICE_MADE] = apply_wait_event,
	[WF_EV_RUN_TERMINATED] = apply_run_event,
	[WF_EV_CONTEXT_UPDATED] = apply_run_event,
	[WF_EV_WAIT_STARTED] = apply_wait_event,
	[WF_EV_SIGNAL_RECEIVED] = apply_run_event,
	[WF_EV_EVENT_RECEIVED] = apply_wait_event,
	[WF_EV_RUN_RESUMED] = apply_run_event,
	[WF_EV_RESULT_HELD] = apply_task_event,
	[WF_EV_STEP_RETRIED] = apply_task_event,
	[WF_EV_STEP_SKIPPED] = apply_task_event,
	[WF_EV_CANCEL_REQUESTED] = apply_undo_event,
	[WF_EV_COMPENSATION_STARTED] = apply_undo_event,
	[WF_EV_RUN_CANCELLED] = apply_undo_event,
	[WF_EV_COMPENSATION_FAILED] = apply_undo_event,
	[WF_EV_WAIT_TIMED_OUT] = apply_wait_event,
	[WF_EV_RUN_MIGRATED] = apply_run_event,
	[WF_EV_CHILDREN_STARTED] = apply_children_event,
	[WF_EV_CHILD_FINISHED] = apply_children_event,
	[WF_EV_CHILDREN_JOINED] = apply_wait_event,
	[WF_EV_LEGAL_HOLD_SET] = apply_run_event,
	[WF_EV_COMPENSATION_REQUESTED] = apply_undo_event,
	[WF_EV_RUN_COMPENSATED] = apply_undo_event,
};

/*
 * WfApplyEvent applies one event to a run snapshot.  It is the only code
 * that changes a WfRunState, for live transitions and replay alike.  It
 * returns NULL, or a description of why the event cannot follow the
 * current state (which only a tampered or corrupt history can cause).
 * Each event type has its handler in event_handlers, one per family.
 */
const char *
WfApplyEvent(WfRunState *run, const WfEvent *ev)
{
	const char *problem;

	if (ev->seq != run->seq + 1)
		return psprintf("event %d follows event %d", ev->seq, run->seq);
	if (run->status == WF_RUN_NONE && ev->type != WF_EV_RUN_STARTED)
		return psprintf("the first event is \"%s\", not \"run_started\"",
						WfEventTypeName(ev->type));
	if ((int) ev->type <= 0 || (int) ev->type > WF_EV_LAST ||
		event_handlers[ev->type] == NULL)
		return psprintf("unknown event type %d", (int) ev->type);
	problem = event_handlers[ev->type] (run, ev);
	if (problem != NULL)
		return problem;

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
	int			len;
	char	   *text = WfJsonbToText(ev->payload, &len);

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
	in.payload_len = len;
	WfHashEvent(&in, ev->hash);
	pfree(text);
}

/*
 * Events that share a row of wf.events.
 *
 * Since 0.3.0 a task_scheduled or run_completed event appended right after
 * another event of the same transition is stored in that event's row, in
 * its column "more", rather than in a row of its own: a step's completion
 * and the next step's attempt are one row and one events_pkey entry (about
 * 170 bytes of every step's WAL less, docs/benchmarks.md).  "more" is a
 * json array (text) of [type, step, attempt, payload] arrays (step and
 * attempt null when the event has none: positional, 36 bytes a step
 * shorter than objects with keys); the k-th element is event seq + k, with
 * the row's actor and created_at (a transition's events share both).  The
 * row's hash is that of its last event; the hashes before it are those the
 * chain gives, event by event, as if each had a row of its own, so that
 * wf.history and wf.verify_run read the same events, seqs and hashes
 * whichever way they were stored.  The types that ride along are those
 * nothing looks up in wf.events by type with an index: task_completed,
 * which events_task_completed_idx and the statistics find by type, always
 * starts a row.
 */
bool
WfEventRidesAlong(WfEventType type)
{
	return type == WF_EV_TASK_SCHEDULED || type == WF_EV_RUN_COMPLETED;
}

/*
 * WfPackEvents returns the column "more" of a row for the n events evs that
 * follow its first event: json text, [type, step, attempt, payload] per
 * event, without the spaces of jsonb's output between them.  Text, not
 * jsonb: the column is written on every step and read only by the readers
 * of a whole history, and jsonb's binary form of the common case (one
 * task_scheduled) is about 100 bytes against 55.
 */
text *
WfPackEvents(const WfEvent *evs, int n)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfoChar(&buf, '[');
		escape_json(&buf, WfEventTypeName(evs[i].type));
		appendStringInfoChar(&buf, ',');
		if (evs[i].step != NULL)
			escape_json(&buf, evs[i].step);
		else
			appendStringInfoString(&buf, "null");
		if (evs[i].attempt != 0)
			appendStringInfo(&buf, ",%d,", evs[i].attempt);
		else
			appendStringInfoString(&buf, ",null,");
		(void) JsonbToCString(&buf, &evs[i].payload->root, VARSIZE(evs[i].payload));
		appendStringInfoChar(&buf, ']');
	}
	appendStringInfoChar(&buf, ']');
	return cstring_to_text_with_len(buf.data, buf.len);
}

/*
 * WfUnpackEvents returns the events of a row of wf.events: its first event
 * head, then those of its column more (NULL: none; json text, which the
 * column's type has checked), in *n.  An element of more that is not an
 * event as WfPackEvents writes it gives an event of type 0 (unknown),
 * which replay refuses.
 */
WfEvent *
WfUnpackEvents(const WfEvent *head, text *more_text, int *n)
{
	WfEvent    *evs;
	Jsonb	   *more = NULL;
	int			count = 1;
	int			i;

	if (more_text != NULL)
		more = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
												  CStringGetDatum(text_to_cstring(more_text))));
	if (more != NULL && JB_ROOT_IS_ARRAY(more) && !JB_ROOT_IS_SCALAR(more))
		count += JB_ROOT_COUNT(more);
	evs = palloc0(sizeof(WfEvent) * count);
	evs[0] = *head;
	for (i = 1; i < count; i++)
	{
		JsonbValue *elem = getIthJsonbValueFromContainer(&more->root, i - 1);
		WfEvent    *ev = &evs[i];
		JsonbContainer *c;
		JsonbValue *type;
		JsonbValue *step;
		JsonbValue *attempt;
		JsonbValue *payload;

		ev->seq = head->seq + i;
		ev->actor = head->actor;
		ev->created_at = head->created_at;
		/* type 0 unless it is [type, step or null, attempt or null, payload] */
		if (elem == NULL || elem->type != jbvBinary)
			continue;
		c = elem->val.binary.data;
		if (!JsonContainerIsArray(c) || JsonContainerSize(c) != 4)
			continue;
		type = getIthJsonbValueFromContainer(c, 0);
		step = getIthJsonbValueFromContainer(c, 1);
		attempt = getIthJsonbValueFromContainer(c, 2);
		payload = getIthJsonbValueFromContainer(c, 3);
		if (type->type != jbvString ||
			(step->type != jbvString && step->type != jbvNull) ||
			(attempt->type != jbvNumeric && attempt->type != jbvNull) ||
			payload->type != jbvBinary || !JsonContainerIsObject(payload->val.binary.data))
			continue;
		ev->step = step->type == jbvString ?
			pnstrdup(step->val.string.val, step->val.string.len) : NULL;
		if (attempt->type == jbvNumeric)
		{
			bool		bad = false;

			ev->attempt = numeric_int4_opt_error(attempt->val.numeric, &bad);
			if (bad)
				continue;		/* not an attempt number */
		}
		ev->payload = JsonbValueToJsonb(payload);
		ev->type = WfEventTypeFromName(pnstrdup(type->val.string.val, type->val.string.len));
	}
	*n = count;
	return evs;
}

/*
 * WfHashEventsFrom hashes the n events evs, in order, onto the chain that
 * ends at last_hash (the hash of the event before the first): each event's
 * hash, as if each had a row of its own, for run (its id and tenant).
 */
void
WfHashEventsFrom(const WfRunState *run, const uint8 *last_hash, WfEvent *evs, int n)
{
	WfRunState	chain = *run;
	int			i;

	memcpy(chain.last_hash, last_hash, WF_HASH_LEN);
	for (i = 0; i < n; i++)
	{
		WfHashEventFor(&chain, &evs[i]);
		memcpy(chain.last_hash, evs[i].hash, WF_HASH_LEN);
	}
}

/* ----------------------------------------------------------------
 *		transitions
 * ----------------------------------------------------------------
 */

