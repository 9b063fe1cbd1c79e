/*-------------------------------------------------------------------------
 *
 * step_approval.c
 *	  The approval step kind: approvers, their rows, the policy, the expiry.
 *
 * Entering an approval step records approval_requested, writes one
 * wf.approvals row per approver (no token yet), schedules a notification
 * task on the step's notify_queue and, with "expires", an expiry timer.
 * The run then costs only rows while it waits.  The worker that holds the
 * notification task issues the tokens, and decisions come through
 * wf.decide (approval_api.c); after each, and after each change of the
 * approvers, the policy is evaluated here (WfEvaluateApprovalPolicy).
 *
 * Policy.  "any" needs one approval, "all" every approver, {"quorum": N}
 * N distinct approvers.  "rejections" rejects (default 1) end the step as
 * rejected (the run fails), and so do so many rejects that the policy can
 * no longer be met.  Each approver decides once.  When the step ends its
 * other tokens are closed, a notification task still live is withdrawn,
 * and the step's output is {"outcome": ..., "decisions": [...]}, with
 * each decision's comment and data.  An expiry goes to the step's
 * on_expiry step, or fails the run.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_approval.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "step_approval.h"
#include "stepkind.h"
#include "transition.h"
#include "waits.h"

/* the statements of step_approval.c (registered by _PG_init: WfStepApprovalPlans) */
enum
{
	PLAN_APPROVALS_INSERT = 0,
	PLAN_APPROVALS_CLOSE,
	PLAN_APPROVAL_TALLY,
	PLAN_APPROVALS_CLOSE_RUN,
	PLAN_EXPLAIN_APPROVAL
};

static const WfPlanSpec step_approval_plan_specs[] = {
	[PLAN_APPROVALS_INSERT] = {
		"approvals_insert",
		"INSERT INTO wf.approvals (tenant_id, run_id, step, visit, approver, expires_at, created_at) "
		"SELECT $1, $2, $3, $4, a, $6, $7 FROM pg_catalog.unnest($5) AS a",
		7, {TEXTOID, UUIDOID, TEXTOID, INT4OID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[PLAN_APPROVALS_CLOSE] = {
		"approvals_close",
		"UPDATE wf.approvals ap SET status = 'closed' "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3 AND ap.status OPERATOR(pg_catalog.=) 'pending'",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[PLAN_APPROVAL_TALLY] = {
		"approval_tally",
		"SELECT pg_catalog.count(*) FILTER (WHERE ap.status OPERATOR(pg_catalog.<>) 'revoked'),"
		" pg_catalog.count(*) FILTER (WHERE ap.decision OPERATOR(pg_catalog.=) 'approve'),"
		" pg_catalog.count(*) FILTER (WHERE ap.decision OPERATOR(pg_catalog.=) 'reject'),"
		" COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('approver', ap.approver,"
		"  'decision', ap.decision, 'comment', ap.comment, 'data', ap.data)"
		"  ORDER BY ap.decided_at, ap.approval_id) FILTER (WHERE ap.status OPERATOR(pg_catalog.=) 'decided'),"
		"  '[]'::pg_catalog.jsonb) "
		"FROM wf.approvals ap WHERE ap.run_id OPERATOR(pg_catalog.=) $1 "
		"AND ap.step OPERATOR(pg_catalog.=) $2 AND ap.visit OPERATOR(pg_catalog.=) $3",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[PLAN_APPROVALS_CLOSE_RUN] = {
		"approvals_close_run",
		"UPDATE wf.approvals ap SET status = 'closed' "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.status OPERATOR(pg_catalog.=) 'pending'",
		1, {UUIDOID}
	},
	[PLAN_EXPLAIN_APPROVAL] = {
		"explain_approval",
		"SELECT pg_catalog.jsonb_build_object('pending',"
		" COALESCE(pg_catalog.jsonb_agg(ap.approver ORDER BY ap.approver), '[]'::pg_catalog.jsonb),"
		" 'since', pg_catalog.min(ap.created_at), 'expires_at', pg_catalog.max(ap.expires_at),"
		" 'tokens_issued', COALESCE(pg_catalog.bool_or(ap.approve_hash IS NOT NULL), false)) "
		"FROM wf.approvals ap WHERE ap.run_id OPERATOR(pg_catalog.=) $1"
		" AND ap.step OPERATOR(pg_catalog.=) $2 AND ap.status OPERATOR(pg_catalog.=) 'pending'",
		2, {UUIDOID, TEXTOID}
	},
};

WfPlanTable WfStepApprovalPlans = WF_PLAN_TABLE("step_approval", step_approval_plan_specs);

/* the columns of approval_tally */
enum
{
	APPROVAL_TALLY_COL_TOTAL = 1,
	APPROVAL_TALLY_COL_APPROVALS,
	APPROVAL_TALLY_COL_REJECTIONS,
	APPROVAL_TALLY_COL_DECISIONS
};


/* the approval rows a transition writes (its kind_writes slot) */
typedef struct ApprovalWrites
{
	const char *step;			/* the visit they are of */
	int32		visit;
	int			n_approvers;	/* approvers of a new visit, or 0 */
	char	  **approvers;
	TimestampTz expires;		/* 0 = never */
	bool		close;			/* close the visit's tokens */
} ApprovalWrites;

static void complete_approval(WfTransition *tr, int step_index, int32 visit,
							  const char *outcome, Jsonb *decisions);

/*
 * approval_writes returns the approval rows of the transition, for the
 * visit of step.
 */
static ApprovalWrites *
approval_writes(WfTransition *tr, const char *step, int32 visit)
{
	ApprovalWrites *w = tr->kind_writes[WF_STEP_APPROVAL];

	if (w == NULL)
	{
		w = palloc0(sizeof(ApprovalWrites));
		tr->kind_writes[WF_STEP_APPROVAL] = w;
	}
	w->step = step;
	w->visit = visit;
	return w;
}

/*
 * evaluate_approvers returns the approvers of a visit: the step's list, or
 * the strings its JSONPath finds (an array of strings, or one string),
 * without duplicates.  Returns how many; 0 when there are none.
 */
static int
evaluate_approvers(const WfStepDef *sd, Jsonb *context, char ***out)
{
	char	  **list = palloc0(sizeof(char *) * WF_MAX_APPROVERS);
	int			n = 0;
	int			i;
	int			j;

	if (sd->approvers_path == (Datum) 0)
	{
		for (i = 0; i < sd->n_approvers && n < WF_MAX_APPROVERS; i++)
			list[n++] = sd->approvers[i];
	}
	else
	{
		Jsonb	   *found = WfEvaluatePath(sd->approvers_path, context);

		if (found != NULL && JB_ROOT_IS_SCALAR(found))
		{
			JsonbValue	v;

			if (JsonbExtractScalar(&found->root, &v) && v.type == jbvString &&
				v.val.string.len > 0)
				list[n++] = pnstrdup(v.val.string.val, v.val.string.len);
		}
		else if (found != NULL && JB_ROOT_IS_ARRAY(found))
		{
			JsonbIterator *it = JsonbIteratorInit(&found->root);
			JsonbValue	v;
			JsonbIteratorToken tok;

			while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
			{
				if (tok != WJB_ELEM)
					continue;
				if (v.type != jbvString || v.val.string.len == 0)
					return 0;	/* not a list of approvers */
				if (n >= WF_MAX_APPROVERS)
					return -1;	/* too many */
				list[n++] = pnstrdup(v.val.string.val, v.val.string.len);
			}
		}
	}

	/* drop duplicates, keeping the first of each */
	for (i = 0, j = 0; i < n; i++)
	{
		int			k;
		bool		dup = false;

		for (k = 0; k < j; k++)
			if (strcmp(list[k], list[i]) == 0)
				dup = true;
		if (!dup)
			list[j++] = list[i];
	}
	*out = list;
	return j;
}

/*
 * needed_approvals returns how many approvals end the step as approved.
 */
static int
needed_approvals(const WfStepDef *sd, int napprovers)
{
	switch (sd->policy)
	{
		case WF_POLICY_ALL:
			return napprovers;
		case WF_POLICY_QUORUM:
			return sd->quorum;
		case WF_POLICY_ANY:
		default:
			return 1;
	}
}

/*
 * approval_enter starts a visit of the approval step at step_index.
 */
static void
approval_enter(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder b;
	char	  **approvers;
	int			n;
	int			needed;
	int32		visit = WfNextVisit(tr->run, sd->name);
	TimestampTz expires_at = sd->expires > 0 ? tr->now + sd->expires : 0;
	Jsonb	   *approvers_json;

	n = evaluate_approvers(sd, WfRunContextForPath(tr, sd->approvers_path), &approvers);
	needed = needed_approvals(sd, n);
	if (n <= 0 || needed > n)
	{
		const char *code = n == 0 ? "no_approvers" :
			n < 0 ? "too_many_approvers" : "not_enough_approvers";

		WfJbBegin(&b);
		WfJbText(&b, "code", code);
		WfJbText(&b, "message", n == 0 ? "the approval step found no approvers" :
				 n < 0 ? "the approval step found more than 100 approvers" :
				 "the approval step found fewer approvers than its quorum");
		WfJbInt(&b, "needed", needed);
		WfFailRun(tr, sd->name, code, WfJbEnd(&b));
		return;
	}

	approvers_json = WfJsonbTextArray(approvers, n);

	WfJbBegin(&b);
	WfJbInt(&b, "visit", visit);
	WfJbJsonb(&b, "approvers", approvers_json);
	WfJbText(&b, "policy", sd->policy == WF_POLICY_ALL ? "all" :
			 sd->policy == WF_POLICY_QUORUM ? "quorum" : "any");
	WfJbInt(&b, "needed", needed);
	if (expires_at != 0)
		WfJbTimestamp(&b, "expires_at", expires_at);
	WfAppendEvent(tr, WF_EV_APPROVAL_REQUESTED, sd->name, 0, WfJbEnd(&b));

	{
		ApprovalWrites *w = approval_writes(tr, sd->name, visit);

		w->n_approvers = n;
		w->approvers = approvers;
		w->expires = expires_at;
	}

	/* the notification task: whoever holds it may issue the tokens */
	WfJbBegin(&b);
	WfJbText(&b, "run_id", DatumGetCString(DirectFunctionCall1(uuid_out,
															   UUIDPGetDatum(&tr->run->run_id))));
	WfJbText(&b, "step", sd->name);
	WfJbInt(&b, "visit", visit);
	WfJbJsonb(&b, "approvers", approvers_json);
	if (expires_at != 0)
		WfJbTimestamp(&b, "expires_at", expires_at);
	WfScheduleStep(tr, step_index, 1, tr->now, WfJbEnd(&b));

	if (expires_at != 0)
	{
		WfJbBegin(&b);
		WfJbInt(&b, "visit", visit);
		WfSetTimer(tr, WF_TIMER_APPROVAL_EXPIRY, sd->name, tr->run->step_generation,
				   expires_at, WfJbEnd(&b));
	}
}

/*
 * approval_write writes the approval rows of a transition: the approvers
 * of a new visit, or the closing of a visit's tokens; and a run that stops
 * (or is undone) while an approval waits closes all its tokens.
 */
static void
approval_write(WfTransition *tr)
{
	ApprovalWrites *w = tr->kind_writes[WF_STEP_APPROVAL];
	Datum		values[7];
	char		nulls[7];

	if (w != NULL && w->close)
	{
		values[0] = UUIDPGetDatum(&tr->run->run_id);
		values[1] = CStringGetTextDatum(w->step);
		values[2] = Int32GetDatum(w->visit);
		WfPlanExec(&WfStepApprovalPlans, PLAN_APPROVALS_CLOSE, values, NULL, false, 0, SPI_OK_UPDATE);
	}
	if (w != NULL && w->n_approvers > 0)
	{
		Datum	   *elems = palloc(sizeof(Datum) * w->n_approvers);
		int			i;

		for (i = 0; i < w->n_approvers; i++)
			elems[i] = CStringGetTextDatum(w->approvers[i]);
		memset(nulls, ' ', sizeof(nulls));
		values[0] = CStringGetTextDatum(tr->run->tenant_id);
		values[1] = UUIDPGetDatum(&tr->run->run_id);
		values[2] = CStringGetTextDatum(w->step);
		values[3] = Int32GetDatum(w->visit);
		values[4] = PointerGetDatum(construct_array(elems, w->n_approvers, TEXTOID,
													-1, false, TYPALIGN_INT));
		if (w->expires != 0)
			values[5] = TimestampTzGetDatum(w->expires);
		else
			nulls[5] = 'n';
		values[6] = TimestampTzGetDatum(tr->now);
		WfPlanExec(&WfStepApprovalPlans, PLAN_APPROVALS_INSERT, values, nulls, false, 0, SPI_OK_INSERT);
	}
	if ((tr->run->finished || WF_RUN_UNDOING(tr->run->status)) && tr->def->has_approvals)
	{
		values[0] = UUIDPGetDatum(&tr->run->run_id);
		WfPlanExec(&WfStepApprovalPlans, PLAN_APPROVALS_CLOSE_RUN, values, NULL, false, 0, SPI_OK_UPDATE);
	}
}

/*
 * approval_task_completed: the notification task of an approval step
 * finished; the step goes on waiting for decisions.
 */
static void
approval_task_completed(WfTransition *tr, int step_index, const WfTaskResult *res)
{
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbTaskResult(&b, res);
	WfJbJsonb(&b, "output", res->output);
	WfAppendEvent(tr, WF_EV_APPROVAL_NOTIFIED, tr->def->steps[step_index].name,
				  tr->run->current_attempt, WfJbEnd(&b));
}

/*
 * complete_approval ends a visit of an approval step with outcome, closing
 * its other tokens and withdrawing a notification task still live.
 */
static void
complete_approval(WfTransition *tr, int step_index, int32 visit,
				  const char *outcome, Jsonb *decisions)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder ob;
	WfJsonBuilder b;

	WfWithdrawCurrentTask(tr, "approval_completed");
	approval_writes(tr, sd->name, visit)->close = true;

	WfJbBegin(&ob);
	WfJbText(&ob, "outcome", outcome);
	WfJbJsonb(&ob, "decisions", decisions);
	WfJbBegin(&b);
	WfJbInt(&b, "visit", visit);
	WfJbJsonb(&b, "output", WfJbEnd(&ob));
	WfAppendEvent(tr, WF_EV_APPROVAL_COMPLETED, sd->name, 0, WfJbEnd(&b));
}

/*
 * WfEvaluateApprovalPolicy tallies the current visit of the approval step at
 * step_index and ends it when its policy is decided.  It is the one
 * evaluation of the policy: wf.decide calls it after each accepted
 * decision (approver is who decided), wf.set_approvers after each change of
 * the approvers (approver NULL).  The tally counts the rows that are not
 * revoked: the listed approvers and those who have decided.  The step ends
 *
 *	rejected	with the step's "rejections" rejects (at most as many as
 *				there are approvers), or with so many rejects that the
 *				approvers left can no longer approve: the run fails with
 *				reason "rejected";
 *	failed		with fewer approvers left than the policy needs and no
 *				reject (only a change of approvers can cause it): the run
 *				fails with reason "not_enough_approvers", or
 *				"no_approvers" with none;
 *	approved	with the approvals the policy needs: the run goes on.
 *
 * Returns the outcome ("approved", "rejected" or the failure's reason), or
 * NULL when the step goes on waiting.
 */
const char *
WfEvaluateApprovalPolicy(WfTransition *tr, int step_index, int32 visit, const char *approver)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	Datum		values[3];
	int64		total;
	int64		approvals;
	int64		rejections;
	int			needed;
	Jsonb	   *decisions;
	WfJsonBuilder eb;

	values[0] = UUIDPGetDatum(&tr->run->run_id);
	values[1] = CStringGetTextDatum(sd->name);
	values[2] = Int32GetDatum(visit);
	WfPlanExec(&WfStepApprovalPlans, PLAN_APPROVAL_TALLY, values, NULL, false, 1, SPI_OK_SELECT);
	total = DatumGetInt64(WfGetDatumNotNull(0, APPROVAL_TALLY_COL_TOTAL));
	approvals = DatumGetInt64(WfGetDatumNotNull(0, APPROVAL_TALLY_COL_APPROVALS));
	rejections = DatumGetInt64(WfGetDatumNotNull(0, APPROVAL_TALLY_COL_REJECTIONS));
	decisions = DatumGetJsonbPCopy(WfGetDatumNotNull(0, APPROVAL_TALLY_COL_DECISIONS));
	needed = needed_approvals(sd, (int) total);

	if (rejections == 0 && (total == 0 || total < needed))
	{
		/* no reject, but too few approvers left: the approvers changed */
		const char *code = total == 0 ? "no_approvers" : "not_enough_approvers";

		complete_approval(tr, step_index, visit, "failed", decisions);
		WfJbBegin(&eb);
		WfJbText(&eb, "code", code);
		WfJbText(&eb, "message",
				 psprintf("the approval step has %lld approvers left, its policy needs %d approvals",
						  (long long) total, needed));
		WfJbInt(&eb, "needed", needed);
		WfJbInt(&eb, "approvers", total);
		WfFailRun(tr, sd->name, code, WfJbEnd(&eb));
		return code;
	}
	if (rejections >= Min(sd->rejections, total) || total - rejections < needed)
	{
		/* enough rejects, or too few approvers left to approve */
		complete_approval(tr, step_index, visit, "rejected", decisions);
		WfJbBegin(&eb);
		WfJbText(&eb, "code", "rejected");
		if (approver != NULL)
			WfJbText(&eb, "message", psprintf("rejected by %s", approver));
		else
			WfJbText(&eb, "message",
					 psprintf("rejected: %lld rejects of the %lld approvers left, who can no longer meet the policy",
							  (long long) rejections, (long long) total));
		WfFailRun(tr, sd->name, "rejected", WfJbEnd(&eb));
		return "rejected";
	}
	if (approvals >= needed)
	{
		complete_approval(tr, step_index, visit, "approved", decisions);
		WfAdvance(tr, step_index);
		return "approved";
	}
	return NULL;
}

/*
 * approval_timer_fired ends a visit whose expiry timer fired: the run goes
 * to the step's on_expiry step, or fails.
 */
static bool
approval_timer_fired(WfTransition *tr, int step_index, WfTimerKind kind,
					 Jsonb *payload, TimestampTz due_at)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	Datum		values[3];
	Jsonb	   *decisions;

	if (kind != WF_TIMER_APPROVAL_EXPIRY)
		return false;
	values[0] = UUIDPGetDatum(&tr->run->run_id);
	values[1] = CStringGetTextDatum(sd->name);
	values[2] = Int32GetDatum(WfNextVisit(tr->run, sd->name));
	WfPlanExec(&WfStepApprovalPlans, PLAN_APPROVAL_TALLY, values, NULL, false, 1, SPI_OK_SELECT);
	decisions = DatumGetJsonbPCopy(WfGetDatumNotNull(0, APPROVAL_TALLY_COL_DECISIONS));

	complete_approval(tr, step_index, DatumGetInt32(values[2]), "expired", decisions);
	if (sd->expiry_next != WF_STEP_END)
		WfEnterStep(tr, sd->expiry_next);
	else
	{
		WfJsonBuilder b;

		WfJbBegin(&b);
		WfJbText(&b, "code", "approval_expired");
		WfJbText(&b, "message", "the approval step expired before it was decided");
		WfFailRun(tr, sd->name, "approval_expired", WfJbEnd(&b));
	}
	return true;
}

/*
 * approval_leave: the run leaves the step unfinished (a skip, a
 * cancellation).  Its notification task is withdrawn (a notification has
 * nothing to undo) and the tokens of the visit stop working.
 */
static void
approval_leave(WfTransition *tr, int step_index, const char *reason)
{
	const WfStepDef *sd = &tr->def->steps[step_index];

	WfWithdrawCurrentTask(tr, reason);
	approval_writes(tr, sd->name, WfNextVisit(tr->run, sd->name))->close = true;
}

/*
 * approval_explain: a running approval step waits for its approvers (what
 * its notification task waits for, while it is live, goes under
 * "notification"); the commands of approvals apply.
 */
static void
approval_explain(const WfRunState *run, const WfStepDef *sd, WfExplanation *ex)
{
	WfJsonBuilder b;
	WfJsonBuilder w;
	Datum		values[2];

	WfExplainAttempt(run, sd, ex);
	if (run->status != WF_RUN_RUNNING)
		return;
	if (ex->waiting != NULL)
	{
		WfJbBegin(&b);
		WfJbText(&b, "waiting_for", ex->waiting);
		WfJbBegin(&w);
		WfJbJsonb(&w, "notification", WfJsonbConcat(ex->details, WfJbEnd(&b)));
		ex->details = WfJbEnd(&w);
	}
	ex->waiting = "approval";
	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(run->current_step);
	(void) WfPlanExec(&WfStepApprovalPlans, PLAN_EXPLAIN_APPROVAL, values, NULL, true, 1,
					  SPI_OK_SELECT);
	WfJbBegin(&b);
	WfJbJsonb(&b, "approval", DatumGetJsonbPCopy(WfGetDatumNotNull(0, 1)));
	ex->details = WfJsonbConcat(ex->details, WfJbEnd(&b));
	ex->commands = lappend(ex->commands, "wf.decide");
	ex->commands = lappend(ex->commands, "wf.revoke_approval_tokens");
	ex->commands = lappend(ex->commands, "wf.reissue_approval_tokens");
	ex->commands = lappend(ex->commands, "wf.set_approvers");
}

const WfStepKindOps WfApprovalStepKind = {
	.name = "approval",
	.explain = approval_explain,
	.enter = approval_enter,
	.task_completed = approval_task_completed,
	.timer_fired = approval_timer_fired,
	.leave = approval_leave,
	.resume = WfRescheduleWithdrawnAsBefore,
	.write = approval_write,
};
