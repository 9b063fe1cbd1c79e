/*-------------------------------------------------------------------------
 *
 * step_children.c
 *	  The subworkflow and parallel step kinds: child runs.
 *
 * A subworkflow step starts one child run of a named definition, pinned
 * to a version; a parallel step starts one child run per branch (each
 * branch is a definition of its own, published with its parent).  The
 * child runs are ordinary runs: their own snapshot, history, tasks and
 * timers, so everything a run can do, a branch can do.  The parent waits
 * at the step with no task; its context keeps the children and their
 * results ($.children.<step>).
 *
 * A child that ends tells its parent through a timer row of kind
 * child_done, written in the child's last transaction and fired on the
 * parent like any timer: no transaction ever locks a child and then its
 * parent, so the only lock order between runs is parent before child
 * (a parent that ends, is cancelled or joins cancels its live children).
 * The timer's generation is the visit of the parent's step; a child of an
 * earlier visit, or one whose step has moved on, fires as stale.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_children.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/sequence.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "correlate.h"
#include "crypto.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "notify.h"
#include "runstore.h"
#include "sensitive.h"
#include "spi_util.h"
#include "state.h"
#include "step_children.h"
#include "step_compensate.h"
#include "stepkind.h"
#include "tenant.h"
#include "transition.h"
#include "waits.h"

/* the statements of step_children.c (registered by _PG_init: WfStepChildrenPlans) */
enum
{
	PLAN_RUN_SET_PARENT = 0,
	PLAN_STOP_CHILDREN,
	PLAN_EXPLAIN_CHILDREN
};

static const WfPlanSpec step_children_plan_specs[] = {
	[PLAN_RUN_SET_PARENT] = {
		"run_set_parent",
		"UPDATE wf.runs r SET parent_run_id = $2 WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		2, {UUIDOID, UUIDOID}
	},
	[PLAN_STOP_CHILDREN] = {
		"stop_children",
		"SELECT c.run_id FROM wf.runs c WHERE c.parent_run_id OPERATOR(pg_catalog.=) $1"
		" AND c.status OPERATOR(pg_catalog.=) ANY ('{running,paused}'::pg_catalog.text[])"
		" ORDER BY c.run_id",
		1, {UUIDOID}
	},
	[PLAN_EXPLAIN_CHILDREN] = {
		"explain_children",
		/* $1: the step's entry of $.children in the context; $2 the tenant */
		"SELECT pg_catalog.jsonb_build_object("
		" 'runs', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('run_id', c.run_id,"
		"   'definition', c.definition_name, 'status', c.status, 'step', c.current_step)"
		"   ORDER BY c.created_at, c.run_id)"
		"  FROM wf.runs c WHERE c.run_id OPERATOR(pg_catalog.=) ANY (ARRAY("
		"   SELECT pg_catalog.jsonb_array_elements_text($1 OPERATOR(pg_catalog.->) 'runs')::pg_catalog.uuid))"
		"   AND c.tenant_id OPERATOR(pg_catalog.=) $2),"
		" 'join', $1 OPERATOR(pg_catalog.->) 'join',"
		" 'completed', $1 OPERATOR(pg_catalog.->) 'completed')",
		2, {JSONBOID, TEXTOID}
	},
};

WfPlanTable WfStepChildrenPlans = WF_PLAN_TABLE("step_children", step_children_plan_specs);


/* a child run may start children of its own, this many levels deep */
#define WF_MAX_CHILD_DEPTH 5

/* forward declarations */
static void child_finished(WfTransition *tr, int step_index, Jsonb *payload);
static char *start_child(WfTransition *tr, const WfStepDef *sd, int branch,
						 int32 visit, Jsonb *input, int depth);

/*
 * start_child starts the child run of branch (0 for a subworkflow) of the
 * step sd in the same transaction as the parent's transition, and returns
 * its id as text.
 */
static char *
start_child(WfTransition *tr, const WfStepDef *sd, int branch, int32 visit,
			Jsonb *input, int depth)
{
	WfDefinition *cdef = WfDefinitionGet(sd->child_ids[branch]);
	WfRunState *crun = palloc0(sizeof(WfRunState));
	WfTransition *ctr = palloc(sizeof(WfTransition));
	WfJsonBuilder b;
	WfJsonBuilder pb;
	char	   *parent_id = WfRunIdText(&tr->run->run_id);
	char	   *child_id;
	Datum		values[2];

	WfNewRunId(&crun->run_id);
	crun->tenant_id = tr->run->tenant_id;
	if (cdef->n_sensitive_input > 0)
		input = WfSealKeys(crun->tenant_id, input, cdef->sensitive_input, cdef->n_sensitive_input);
	WfTransitionInit(ctr, crun, cdef, tr->now);
	ctr->actor = tr->actor;

	WfJbBegin(&pb);
	WfJbText(&pb, "run_id", parent_id);
	WfJbText(&pb, "step", sd->name);
	WfJbInt(&pb, "visit", visit);
	WfJbInt(&pb, "branch", branch);
	WfJbInt(&pb, "depth", depth);
	WfJbBegin(&b);
	WfJbText(&b, "definition", cdef->name);
	WfJbInt(&b, "version", cdef->version);
	WfJbInt(&b, "definition_id", cdef->definition_id);
	WfJbJsonb(&b, "input", input);
	WfJbText(&b, "idempotency_key", NULL);
	WfJbJsonb(&b, "parent", WfJbEnd(&pb));
	WfAppendEvent(ctr, WF_EV_RUN_STARTED, NULL, 0, WfJbEnd(&b));
	if (cdef->run_timeout > 0)
		WfSetTimer(ctr, WF_TIMER_RUN_TIMEOUT, NULL, 1, tr->now + cdef->run_timeout, NULL);
	WfAdvance(ctr, -1);
	if (!WfTransitionWriteNew(ctr, cdef->name, cdef->version, input, NULL))
		elog(ERROR, "could not start a child run of definition \"%s\"", cdef->name);

	values[0] = UUIDPGetDatum(&crun->run_id);
	values[1] = UUIDPGetDatum(&tr->run->run_id);
	WfPlanExec(&WfStepChildrenPlans, PLAN_RUN_SET_PARENT, values, NULL, false, 0, SPI_OK_UPDATE);
	if (cdef->n_correlation > 0)
		WfWriteCorrelations(cdef, crun, input, tr->now);
	WfNoteRunChange(crun->tenant_id, &crun->run_id, "started");
	child_id = WfRunIdText(&crun->run_id);
	return child_id;
}

/*
 * children_enter enters a subworkflow or parallel step: it starts the
 * child runs and records children_started; the run then waits.
 */
static void
children_enter(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	int32		visit = WfNextVisit(tr->run, sd->name);
	Jsonb	   *parent = WfJsonbGetJsonb(tr->run->context, "parent");
	int			depth = (parent ? (int) WfJsonbGetInt(parent, "depth", 0) : 0) + 1;
	int			n = sd->type == WF_STEP_PARALLEL ? sd->n_branches : 1;
	char	  **ids = palloc(sizeof(char *) * n);
	Jsonb	   *input;
	WfJsonBuilder b;
	int			i;

	if (depth > WF_MAX_CHILD_DEPTH)
	{
		WfJbBegin(&b);
		WfJbText(&b, "code", "child_depth");
		WfJbText(&b, "message", psprintf("child runs are nested more than %d deep", WF_MAX_CHILD_DEPTH));
		WfFailRun(tr, sd->name, "child_depth", WfJbEnd(&b));
		return;
	}
	input = sd->has_input ?
		WfRunEvaluateMapping(tr, sd->input, sd->n_input) :
		WfJsonbGetJsonb(tr->run->context, "input");
	for (i = 0; i < n; i++)
		ids[i] = start_child(tr, sd, i, visit, input, depth);

	WfJbBegin(&b);
	WfJbInt(&b, "visit", visit);
	WfJbText(&b, "kind", sd->type == WF_STEP_PARALLEL ? "parallel" : "subworkflow");
	WfJbJsonb(&b, "runs", WfJsonbTextArray(ids, n));
	WfJbInt(&b, "join", sd->type == WF_STEP_PARALLEL ? sd->join_count : 1);
	WfAppendEvent(tr, WF_EV_CHILDREN_STARTED, sd->name, 0, WfJbEnd(&b));
}

/*
 * child_finished applies a child_done timer of the step at step_index:
 * child_finished records the child's end, then the step joins (its output:
 * the child's output, or the branch outputs in branch order), fails
 * (a child that did not complete, unless a parallel step ignores branch
 * failures and can still join), or goes on waiting.  Children still
 * running when the step joins or fails are cancelled.
 */
static void
child_finished(WfTransition *tr, int step_index, Jsonb *payload)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	Jsonb	   *children;
	int			completed;
	int			finished;
	int			n;
	char	   *status = WfJsonbGetText(payload, "status");
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbInt(&b, "visit", WfNextVisit(tr->run, sd->name));
	WfJbText(&b, "run", WfJsonbGetText(payload, "child_run_id"));
	WfJbInt(&b, "branch", WfJsonbGetInt(payload, "branch", 0));
	WfJbText(&b, "status", status);
	WfJbJsonb(&b, "output", WfJsonbGetJsonb(payload, "output"));
	WfJbJsonb(&b, "error", WfJsonbGetJsonb(payload, "error"));
	WfAppendEvent(tr, WF_EV_CHILD_FINISHED, sd->name, 0, WfJbEnd(&b));

	children = WfJsonbGetJsonb(WfJsonbGetJsonb(tr->run->context, "children"), sd->name);
	completed = (int) WfJsonbGetInt(children, "completed", 0);
	finished = (int) WfJsonbGetInt(children, "finished", 0);
	n = sd->type == WF_STEP_PARALLEL ? sd->n_branches : 1;

	if (completed >= (sd->type == WF_STEP_PARALLEL ? sd->join_count : 1))
	{
		Jsonb	   *output;

		if (sd->type == WF_STEP_PARALLEL)
		{
			/* with the branch outputs kept in the history put back (state.c) */
			children = WfJsonbGetJsonb(WfJsonbGetJsonb(WfRunContextForChildren(tr), "children"),
									   sd->name);
			output = WfJsonbGetJsonb(children, "outputs");
		}
		else
			output = WfJsonbGetJsonb(payload, "output");
		WfJbBegin(&b);
		WfJbInt(&b, "visit", WfNextVisit(tr->run, sd->name));
		WfJbInt(&b, "completed", completed);
		WfJbJsonb(&b, "output", output);
		WfAppendEvent(tr, WF_EV_CHILDREN_JOINED, sd->name, 0, WfJbEnd(&b));
		if (finished < n)
			tr->stop_children = WF_STOP_CANCEL;	/* the branches that lost */
		WfAdvance(tr, step_index);
		return;
	}
	if (strcmp(status, "completed") != 0 &&
		(!sd->ignore_branch_failure || completed + (n - finished) < sd->join_count))
	{
		WfJsonBuilder eb;

		WfJbBegin(&eb);
		WfJbText(&eb, "code", sd->type == WF_STEP_PARALLEL ? "branch_failed" : "child_failed");
		WfJbText(&eb, "run", WfJsonbGetText(payload, "child_run_id"));
		WfJbInt(&eb, "branch", WfJsonbGetInt(payload, "branch", 0));
		WfJbText(&eb, "status", status);
		WfJbJsonb(&eb, "error", WfJsonbGetJsonb(payload, "error"));
		if (finished < n)
			tr->stop_children = WF_STOP_CANCEL;
		WfFailRun(tr, sd->name, sd->type == WF_STEP_PARALLEL ? "branch_failed" : "child_failed",
				  WfJbEnd(&eb));
	}
}

/*
 * note_child_end: a child run has just finished in this transition; its
 * parent gets a child_done timer, due now, with how it ended.
 */
static void
note_child_end(WfTransition *tr)
{
	WfRunState *run = tr->run;
	Jsonb	   *parent = WfJsonbGetJsonb(run->context, "parent");
	WfEvent    *last;
	WfJsonBuilder b;
	Datum		values[9];
	pg_uuid_t  *parent_id;
	char	   *parent_text;

	if (parent == NULL || tr->nevents == 0)
		return;
	last = &tr->events[tr->nevents - 1];
	parent_text = WfJsonbGetText(parent, "run_id");
	parent_id = DatumGetUUIDP(DirectFunctionCall1(uuid_in, CStringGetDatum(parent_text)));

	WfJbBegin(&b);
	WfJbText(&b, "child_run_id", WfRunIdText(&run->run_id));
	WfJbInt(&b, "branch", WfJsonbGetInt(parent, "branch", 0));
	WfJbText(&b, "status", WfRunStatusName(run->status));
	WfJbJsonb(&b, "output", run->output);
	WfJbText(&b, "reason", WfJsonbGetText(last->payload, "reason"));
	WfJbJsonb(&b, "error", WfJsonbGetJsonb(last->payload, "error"));

	values[0] = Int64GetDatum(nextval_internal(WfTimerIdSequence(), false));
	values[1] = CStringGetTextDatum(run->tenant_id);
	values[2] = UUIDPGetDatum(parent_id);
	values[3] = CStringGetTextDatum(WfTimerKindName(WF_TIMER_CHILD_DONE));
	values[4] = CStringGetTextDatum(WfJsonbGetText(parent, "step"));
	values[5] = Int32GetDatum((int32) WfJsonbGetInt(parent, "visit", 1));
	values[6] = TimestampTzGetDatum(tr->now);
	values[7] = JsonbPGetDatum(WfJbEnd(&b));
	values[8] = TimestampTzGetDatum(tr->now);
	WfPlanExec(&WfRunstorePlans, WF_RUNSTORE_TIMER_INSERT, values, NULL, false, 0, SPI_OK_INSERT);
	WfNoteTimer(tr->now);
}

/* one child run to stop, for stop_child */
typedef struct StopChild
{
	pg_uuid_t  *child;
	int			how;			/* WF_STOP_CANCEL or WF_STOP_TERMINATE */
	const char *reason;
} StopChild;

/*
 * stop_child cancels (with compensation, WfRequestCancel) or terminates
 * one child run, as wf.cancel_run or wf.terminate_run would: it locks the
 * child (its live task first), refuses a child that has ended meanwhile
 * (object_not_in_prerequisite_state), and writes the child's transition.
 */
static void
stop_child(void *arg)
{
	StopChild  *sc = (StopChild *) arg;
	WfRunState	run;
	WfTransition tr;
	bool		stoppable;

	WfLockRun(sc->child, &run);
	if (sc->how == WF_STOP_TERMINATE)
		stoppable = run.status == WF_RUN_RUNNING || run.status == WF_RUN_PAUSED ||
			WF_RUN_UNDOING(run.status) || run.status == WF_RUN_COMPENSATION_FAILED;
	else
		stoppable = run.status == WF_RUN_RUNNING || run.status == WF_RUN_PAUSED ||
			run.status == WF_RUN_FAILED;
	if (!stoppable)
		WfRefuseRun(sc->child, WfRunStatusName(run.status),
					sc->how == WF_STOP_TERMINATE ? "terminate" : "cancel", NULL);
	WfTransitionInit(&tr, &run, WfDefinitionGet(run.definition_id), GetCurrentTimestamp());
	if (sc->how == WF_STOP_TERMINATE)
		WfTerminateRun(&tr, sc->reason);
	else
		WfRequestCancel(&tr, sc->reason);
	WfTransitionWrite(&tr);
	WfNoteRunChange(run.tenant_id, &run.run_id, WfRunStatusName(run.status));
}

/*
 * stop_children cancels (or terminates) the live child runs of a run,
 * after its own transition is written: the lock order between runs is
 * parent, then child.  Each child is stopped in a subtransaction of its
 * own, in run id order; one that has ended meanwhile is left alone.  The
 * children are the parent's tenant's, whoever makes the transition.
 */
static void
stop_children(WfRunState *run, int how)
{
	Datum		values[1];
	const char *volatile old_tenant;
	pg_uuid_t  *children;
	uint64		n;
	uint64		i;

	values[0] = UUIDPGetDatum(&run->run_id);
	n = WfPlanExec(&WfStepChildrenPlans, PLAN_STOP_CHILDREN, values, NULL, false, 0, SPI_OK_SELECT);
	if (n == 0)
		return;
	children = palloc(sizeof(pg_uuid_t) * n);
	for (i = 0; i < n; i++)
		memcpy(&children[i], DatumGetUUIDP(WfGetDatumNotNull(i, 1)), sizeof(pg_uuid_t));

	old_tenant = WfActForTenant(run->tenant_id);
	PG_TRY();
	{
		for (i = 0; i < n; i++)
		{
			StopChild	sc;

			sc.child = &children[i];
			sc.how = how;
			sc.reason = how == WF_STOP_TERMINATE ?
				"its parent run was terminated" :
				"its parent run was cancelled or no longer needs it";
			(void) WfTryInSubxactCatching(stop_child, &sc,
										  ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
		}
	}
	PG_FINALLY();
	{
		(void) WfActForTenant(old_tenant);
	}
	PG_END_TRY();
}

/*
 * child_awaited tells whether the child run a child_done timer reports on
 * is one the run's step still waits for: it is the run recorded for its
 * branch, and that branch has no result yet.
 */
static bool
child_awaited(WfRunState *run, const char *step, Jsonb *payload)
{
	Jsonb	   *children = WfJsonbGetJsonb(WfJsonbGetJsonb(run->context, "children"), step);
	Jsonb	   *runs = children ? WfJsonbGetJsonb(children, "runs") : NULL;
	Jsonb	   *statuses = children ? WfJsonbGetJsonb(children, "statuses") : NULL;
	int			branch = (int) WfJsonbGetInt(payload, "branch", -1);
	char	   *child = WfJsonbGetText(payload, "child_run_id");
	JsonbValue *r;
	JsonbValue *st;

	if (runs == NULL || statuses == NULL || child == NULL || branch < 0 ||
		branch >= (int) JB_ROOT_COUNT(runs))
		return false;
	r = getIthJsonbValueFromContainer(&runs->root, branch);
	st = getIthJsonbValueFromContainer(&statuses->root, branch);
	return r != NULL && r->type == jbvString &&
		(size_t) r->val.string.len == strlen(child) &&
		strncmp(r->val.string.val, child, r->val.string.len) == 0 &&
		st != NULL && st->type == jbvNull;
}

/*
 * children_timer_applies: a child_done timer concerns the current visit of
 * the step (its generation) and a child it still waits for.
 */
static bool
children_timer_applies(WfRunState *run, const WfStepDef *sd, WfTimerKind kind,
					   int32 generation, Jsonb *payload)
{
	return kind == WF_TIMER_CHILD_DONE &&
		WfNextVisit(run, sd->name) == generation &&
		child_awaited(run, sd->name, payload);
}

/*
 * children_timer_fired: a child run the step waits for ended.
 */
static bool
children_timer_fired(WfTransition *tr, int step_index, WfTimerKind kind,
					 Jsonb *payload, TimestampTz due_at)
{
	if (kind != WF_TIMER_CHILD_DONE)
		return false;
	child_finished(tr, step_index, payload);
	return true;
}

/*
 * children_leave: the run leaves the step unfinished; its live child runs
 * are cancelled (they undo their own work).
 */
static void
children_leave(WfTransition *tr, int step_index, const char *reason)
{
	tr->stop_children = WF_STOP_CANCEL;
}

/*
 * children_write: a run that has just finished tells its parent, if it has
 * one; a transition that stops the run's live child runs stops them, last
 * (other runs' transitions, in the lock order parent, then child).
 */
static void
children_write(WfTransition *tr)
{
	if (tr->run->finished && WfJsonbGet(tr->run->context, "parent") != NULL)
		note_child_end(tr);
	if (tr->stop_children != WF_STOP_NONE)
		stop_children(tr->run, tr->stop_children);
}

/*
 * children_explain: the step waits for its child runs.
 */
static void
children_explain(const WfRunState *run, const WfStepDef *sd, WfExplanation *ex)
{
	Jsonb	   *children;
	Datum		values[2];

	if (WfExplainLiveTask(run, ex) || WfExplainWaitTimer(run, ex))
		return;
	children = WfJsonbGetJsonb(WfJsonbGetJsonb(run->context, "children"), run->current_step);
	if (children == NULL)
		return;
	values[0] = JsonbPGetDatum(children);
	values[1] = CStringGetTextDatum(run->tenant_id);
	(void) WfExplainRow(&WfStepChildrenPlans, PLAN_EXPLAIN_CHILDREN, values, "children", ex);
}

const WfStepKindOps WfChildrenStepKind = {
	.name = "children",
	.explain = children_explain,
	.enter = children_enter,
	.timer_applies = children_timer_applies,
	.timer_fired = children_timer_fired,
	.leave = children_leave,
	.write = children_write,
};
