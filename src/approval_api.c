/*-------------------------------------------------------------------------
 *
 * approval_api.c
 *	  The SQL-callable side of approval steps: one-time tokens, decisions,
 *	  and the operator commands on a waiting approval step.
 *
 * Entering an approval step, its wf.approvals rows, the policy and the
 * expiry are the step kind's (step_approval.c); this file serves the
 * calls that come while the run waits there.
 *
 * Tokens.  The worker that holds the notification task calls
 * wf.issue_approval_tokens(task_id, fence): under the task and run locks,
 * and only for the current lease, it mints one token per pending approver
 * for each decision kind (256 random bits, crypto.c: an "approve" token
 * and a "reject" token, each good for its own decision only), stores only
 * their keyed hashes, and returns the tokens to that caller alone.  Calling it again, or a redelivery of the
 * notification task to a new worker, mints new tokens and so invalidates
 * the old ones.  No table, event or log line written here contains a
 * token.
 *
 * Decisions.  wf.decide(token, decision, approver, ...) finds the row by
 * the token's keyed hash, takes the run lock, and checks, in this order,
 * that the token is bound to this tenant and approver, that it was not
 * used, that it has not expired, and that the step still waits for this
 * visit; only then is the row consumed by a conditional update, so that of
 * two uses of one token exactly one succeeds.  The answers are
 * "accepted", "already_decided", "expired" and "invalid" (which does not
 * say which part failed), and "throttled" for an approver with too many
 * failures in the current window (approver_throttled), whose token is not
 * looked at.  Every call is written to wf.approval_attempts;
 * calls that can be tied to a run are recorded in its history too
 * (approval_decided, or decision_refused).  Rows exist only for the
 * approvers of the current visit, so an approver is authorised when the
 * decision is made, not only when the token was issued.
 *
 * After a decision, and after a change of the approvers, the policy is
 * evaluated (WfEvaluateApprovalPolicy, step_approval.c): the step may end
 * there, its other tokens closed and a notification task still live
 * withdrawn.
 *
 * Operator commands (wf.revoke_approval_tokens, wf.reissue_approval_tokens,
 * wf.set_approvers) each take a reason and record it, with the actor and
 * what changed, as an event of the run; they apply only while the run
 * waits at that approval step.  They are run commands (command.c), which
 * check the step and the run's status here (approval_command_begin).
 *
 * Lock order: task row, then run row, then approval rows; wf.decide and
 * the commands lock the run's live task first (WfLockRunAndTask), since
 * ending or re-issuing the step withdraws it.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/approval_api.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sodium.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "api.h"
#include "approval_api.h"
#include "argcheck.h"
#include "command.h"
#include "crypto.h"
#include "defcompile.h"
#include "definition.h"
#include "guc.h"
#include "jsonutil.h"
#include "notify.h"
#include "quota.h"
#include "runstore.h"
#include "sensitive.h"
#include "spi_util.h"
#include "state.h"
#include "step_approval.h"
#include "tenant.h"
#include "transition.h"

PG_FUNCTION_INFO_V1(wfengine_issue_approval_tokens);
PG_FUNCTION_INFO_V1(wfengine_decide);
PG_FUNCTION_INFO_V1(wfengine_revoke_approval_tokens);
PG_FUNCTION_INFO_V1(wfengine_reissue_approval_tokens);
PG_FUNCTION_INFO_V1(wfengine_set_approvers);

/* the statements of approval_api.c (registered by _PG_init: WfApprovalApiPlans) */
enum
{
	PLAN_APPROVALS_PENDING = 0,
	PLAN_APPROVAL_SET_TOKEN,
	PLAN_APPROVAL_BY_HASH,
	PLAN_APPROVAL_CONSUME,
	PLAN_ATTEMPT_INSERT,
	PLAN_DECIDE_LOCKED,
	PLAN_DECIDE_THROTTLE,
	PLAN_DECIDE_FAILURE,
	PLAN_APPROVALS_REVOKE_TOKENS,
	PLAN_APPROVALS_REMOVE,
	PLAN_APPROVALS_ADD,
	PLAN_APPROVAL_EXPIRES
};

static const WfPlanSpec approval_api_plan_specs[] = {
	[PLAN_APPROVALS_PENDING] = {
		"approvals_pending",
		"SELECT ap.approval_id, ap.approver, ap.expires_at, ap.approve_hash IS NOT NULL FROM wf.approvals ap "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3 AND ap.status OPERATOR(pg_catalog.=) 'pending' "
		"ORDER BY ap.approver",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[PLAN_APPROVAL_SET_TOKEN] = {
		"approval_set_token",
		"UPDATE wf.approvals ap SET approve_hash = $2, reject_hash = $3,"
		" token_generation = ap.token_generation OPERATOR(pg_catalog.+) 1 "
		"WHERE ap.approval_id OPERATOR(pg_catalog.=) $1 RETURNING ap.token_generation",
		3, {INT8OID, BYTEAOID, BYTEAOID}
	},
	[PLAN_APPROVAL_BY_HASH] = {
		"approval_by_hash",
		"SELECT ap.approval_id, ap.tenant_id, ap.run_id, ap.step, ap.visit, ap.approver,"
		" ap.status, ap.expires_at, ap.approve_hash, ap.reject_hash FROM wf.approvals ap "
		"WHERE ap.approve_hash OPERATOR(pg_catalog.=) $1 OR ap.reject_hash OPERATOR(pg_catalog.=) $1",
		1, {BYTEAOID}
	},
	[PLAN_APPROVAL_CONSUME] = {
		"approval_consume",
		"UPDATE wf.approvals ap SET status = 'decided', decision = $2, comment = $3, data = $4,"
		" decided_at = $5, decided_by = $6 "
		"WHERE ap.approval_id OPERATOR(pg_catalog.=) $1 AND ap.status OPERATOR(pg_catalog.=) 'pending'",
		6, {INT8OID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID}
	},
	[PLAN_ATTEMPT_INSERT] = {
		"attempt_insert",
		"INSERT INTO wf.approval_attempts (tenant_id, attempted_at, actor, approver, decision,"
		" outcome, run_id, step) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
		8, {TEXTOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, UUIDOID, TEXTOID}
	},
	[PLAN_DECIDE_LOCKED] = {
		"decide_locked",
		"SELECT 1 FROM wf.decide_failures f "
		"WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.kind OPERATOR(pg_catalog.=) 'approver' "
		"AND f.subject OPERATOR(pg_catalog.=) $2 AND f.window_start OPERATOR(pg_catalog.>) $3 "
		"AND f.failures OPERATOR(pg_catalog.>=) $4",
		4, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID}
	},
	[PLAN_DECIDE_THROTTLE] = {
		"decide_throttle",
		"UPDATE wf.decide_failures f SET throttled = f.throttled OPERATOR(pg_catalog.+) 1, last_at = $3 "
		"WHERE f.tenant_id OPERATOR(pg_catalog.=) $1 AND f.kind OPERATOR(pg_catalog.=) 'approver' "
		"AND f.subject OPERATOR(pg_catalog.=) $2",
		3, {TEXTOID, TEXTOID, TIMESTAMPTZOID}
	},
	[PLAN_DECIDE_FAILURE] = {
		"decide_failure",
		"INSERT INTO wf.decide_failures AS f (tenant_id, kind, subject, run_id, window_start,"
		" failures, suppressed, throttled, last_at) VALUES ($1, $2, $3, $4, $5, 1, 0, 0, $5) "
		"ON CONFLICT (tenant_id, kind, subject) DO UPDATE SET"
		" window_start = CASE WHEN f.window_start OPERATOR(pg_catalog.<=) $6 THEN $5 ELSE f.window_start END,"
		" failures = CASE WHEN f.window_start OPERATOR(pg_catalog.<=) $6 THEN 1"
		"  ELSE f.failures OPERATOR(pg_catalog.+) 1 END,"
		" suppressed = f.suppressed OPERATOR(pg_catalog.+) CASE WHEN f.window_start OPERATOR(pg_catalog.>) $6"
		"  AND f.failures OPERATOR(pg_catalog.>=) $7 THEN 1 ELSE 0 END,"
		" last_at = $5 "
		"RETURNING f.failures OPERATOR(pg_catalog.>) $7",
		7, {TEXTOID, TEXTOID, TEXTOID, UUIDOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID}
	},
	[PLAN_APPROVALS_REVOKE_TOKENS] = {
		"approvals_revoke_tokens",
		"UPDATE wf.approvals ap SET approve_hash = NULL, reject_hash = NULL "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3 AND ap.status OPERATOR(pg_catalog.=) 'pending' "
		"AND ap.approve_hash IS NOT NULL",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
	[PLAN_APPROVALS_REMOVE] = {
		"approvals_remove",
		"UPDATE wf.approvals ap SET status = 'revoked' "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3 AND ap.status OPERATOR(pg_catalog.=) 'pending' "
		"AND ap.approver OPERATOR(pg_catalog.<>) ALL ($4) RETURNING ap.approver",
		4, {UUIDOID, TEXTOID, INT4OID, TEXTARRAYOID}
	},
	[PLAN_APPROVALS_ADD] = {
		"approvals_add",
		"INSERT INTO wf.approvals AS ap (tenant_id, run_id, step, visit, approver, expires_at,"
		" created_at) "
		"SELECT $1, $2, $3, $4, a, $6, $7 FROM pg_catalog.unnest($5) AS a "
		"ON CONFLICT (run_id, step, visit, approver) DO UPDATE SET status = 'pending',"
		" approve_hash = NULL, reject_hash = NULL"
		" WHERE ap.status OPERATOR(pg_catalog.=) 'revoked' "
		"RETURNING ap.approver",
		7, {TEXTOID, UUIDOID, TEXTOID, INT4OID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	[PLAN_APPROVAL_EXPIRES] = {
		"approval_expires",
		"SELECT pg_catalog.max(ap.expires_at), COALESCE(pg_catalog.max(t.attempt), 0) "
		"FROM wf.approvals ap LEFT JOIN wf.tasks t ON t.run_id OPERATOR(pg_catalog.=) ap.run_id"
		" AND t.step OPERATOR(pg_catalog.=) ap.step AND t.visit OPERATOR(pg_catalog.=) ap.visit "
		"WHERE ap.run_id OPERATOR(pg_catalog.=) $1 AND ap.step OPERATOR(pg_catalog.=) $2 "
		"AND ap.visit OPERATOR(pg_catalog.=) $3",
		3, {UUIDOID, TEXTOID, INT4OID}
	},
};

WfPlanTable WfApprovalApiPlans = WF_PLAN_TABLE("approval_api", approval_api_plan_specs);

/* the columns of approval_expires */
enum
{
	APPROVAL_EXPIRES_COL_EXPIRES_AT = 1,
	APPROVAL_EXPIRES_COL_LAST_ATTEMPT
};

/* the columns of approval_by_hash */
enum
{
	APPROVAL_BY_HASH_COL_APPROVAL_ID = 1,
	APPROVAL_BY_HASH_COL_TENANT_ID,
	APPROVAL_BY_HASH_COL_RUN_ID,
	APPROVAL_BY_HASH_COL_STEP,
	APPROVAL_BY_HASH_COL_VISIT,
	APPROVAL_BY_HASH_COL_APPROVER,
	APPROVAL_BY_HASH_COL_STATUS,
	APPROVAL_BY_HASH_COL_EXPIRES_AT,
	APPROVAL_BY_HASH_COL_APPROVE_HASH,
	APPROVAL_BY_HASH_COL_REJECT_HASH
};

/* the columns of approvals_pending */
enum
{
	APPROVALS_PENDING_COL_APPROVAL_ID = 1,
	APPROVALS_PENDING_COL_APPROVER,
	APPROVALS_PENDING_COL_EXPIRES_AT,
	APPROVALS_PENDING_COL_HAS_TOKEN
};


/* forward declarations */
static Datum hash_datum(const uint8 *hash);
static void audit_attempt(const char *tenant, TimestampTz now, const char *approver,
						  const char *decision, const char *outcome,
						  pg_uuid_t *run_id, const char *step);
static bool approver_throttled(const char *tenant, const char *approver, TimestampTz now);
static bool note_failure(const char *tenant, const char *approver, const uint8 *hash,
						 pg_uuid_t *run_id, TimestampTz now);

/*
 * hash_datum returns a token hash as a bytea datum.
 */
static Datum
hash_datum(const uint8 *hash)
{
	return WfHashDatum(hash);
}

/*
 * audit_attempt writes one row of wf.approval_attempts.
 */
static void
audit_attempt(const char *tenant, TimestampTz now, const char *approver,
			  const char *decision, const char *outcome, pg_uuid_t *run_id,
			  const char *step)
{
	Datum		values[8];
	char		nulls[8];

	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(tenant);
	values[1] = TimestampTzGetDatum(now);
	values[2] = CStringGetTextDatum(WfCurrentActor());
	values[3] = CStringGetTextDatum(approver);
	values[4] = CStringGetTextDatum(decision);
	values[5] = CStringGetTextDatum(outcome);
	if (run_id != NULL)
		values[6] = UUIDPGetDatum(run_id);
	else
		nulls[6] = 'n';
	WfSetTextOrNull(values, nulls, 7, step);
	WfPlanExec(&WfApprovalApiPlans, PLAN_ATTEMPT_INSERT, values, nulls, false, 0, SPI_OK_INSERT);
}

/*
 * approver_throttled tells whether the approver has had
 * wfengine.decide_failure_limit failures in the current window of its
 * wf.decide_failures row; if so the call is counted there (throttled).
 * For an approver not locked out, one index probe that writes nothing.
 */
static bool
approver_throttled(const char *tenant, const char *approver, TimestampTz now)
{
	Datum		values[4];

	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(approver);
	values[2] = TimestampTzGetDatum(now - (TimestampTz) wf_decide_failure_window * USECS_PER_SEC);
	values[3] = Int32GetDatum(wf_decide_failure_limit);
	/* not read-only: it must see the failures of earlier calls of this statement */
	if (WfPlanExec(&WfApprovalApiPlans, PLAN_DECIDE_LOCKED, values, NULL, false, 1, SPI_OK_SELECT) == 0)
		return false;
	values[2] = TimestampTzGetDatum(now);
	WfPlanExec(&WfApprovalApiPlans, PLAN_DECIDE_THROTTLE, values, NULL, false, 0, SPI_OK_UPDATE);
	return true;
}

/*
 * note_failure counts a call of wf.decide that was not accepted against the
 * approver and, for a token tied to a run (hash not NULL), against the
 * token's hash, each in its row of wf.decide_failures.  Returns true when
 * the failure is within wfengine.decide_failure_limit of both windows and
 * is to be stored as usual (its wf.approval_attempts row and the run's
 * event); false when it was only counted (suppressed).
 */
static bool
note_failure(const char *tenant, const char *approver, const uint8 *hash,
			 pg_uuid_t *run_id, TimestampTz now)
{
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', 'n', ' ', ' ', ' '};
	bool		store = true;
	int			k;

	values[0] = CStringGetTextDatum(tenant);
	values[4] = TimestampTzGetDatum(now);
	values[5] = TimestampTzGetDatum(now - (TimestampTz) wf_decide_failure_window * USECS_PER_SEC);
	values[6] = Int32GetDatum(wf_decide_failure_limit);
	for (k = 0; k < (hash != NULL ? 2 : 1); k++)
	{
		if (k == 0)
		{
			values[1] = CStringGetTextDatum("approver");
			values[2] = CStringGetTextDatum(approver);
		}
		else
		{
			char		hex[WF_HASH_LEN * 2 + 1];

			hex_encode((const char *) hash, WF_HASH_LEN, hex);
			hex[WF_HASH_LEN * 2] = '\0';
			values[1] = CStringGetTextDatum("token");
			values[2] = CStringGetTextDatum(hex);
			values[3] = UUIDPGetDatum(run_id);
			nulls[3] = ' ';
		}
		WfPlanExec(&WfApprovalApiPlans, PLAN_DECIDE_FAILURE, values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
		if (DatumGetBool(WfGetDatumNotNull(0, 1)))
			store = false;
	}
	return store;
}

/* the approvers of a visit still pending, that wf.issue_approval_tokens serves */
typedef struct PendingApprovers
{
	uint64		n;
	int64	   *ids;			/* their wf.approvals rows */
	char	  **names;
	TimestampTz *expires;
	bool	   *expires_null;
	bool		reissue;		/* tokens of the visit were issued before */
} PendingApprovers;

/*
 * lock_notification_task locks task task_id and its run for
 * wf.issue_approval_tokens, and checks that it is the notification task of
 * an approval step and that fence is its current lease.
 */
static void
lock_notification_task(int64 task_id, int64 fence, WfRunState *run,
					   WfLockedTask *task, WfDefinition **def)
{
	int			idx;
	const char *tenant = WfCurrentTenant();

	/*
	 * An attempt that completed has no row any more (since 0.3.0): the
	 * history's task_completed says what its row said, and the checks below
	 * answer as they did for its row (not an approval step's task, or not
	 * the current lease).
	 */
	if (!WfLockTaskAndRun(task_id, tenant, run, task, NULL) &&
		!WfLockCompletedTask(task_id, tenant, run, task))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("task %lld does not exist", (long long) task_id)));
	*def = WfDefinitionGet(run->definition_id);
	idx = WfDefinitionStepIndex(*def, task->step);

	if (idx < 0 || (*def)->steps[idx].type != WF_STEP_APPROVAL)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("task %lld is not the notification task of an approval step",
						(long long) task_id)));
	if (strcmp(task->status, "leased") != 0 || fence != task->fence ||
		run->status != WF_RUN_RUNNING || run->current_task != task_id)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fence %lld is not the current lease of task %lld",
						(long long) fence, (long long) task_id),
				 errhint("Only the worker holding the current lease of the notification task can issue its tokens.")));
}

/*
 * read_pending_approvers reads the approvers of the visit of the task's
 * step that have not decided yet.
 */
static void
read_pending_approvers(WfRunState *run, WfLockedTask *task, PendingApprovers *p)
{
	Datum		values[3];
	uint64		n;
	uint64		i;

	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(task->step);
	values[2] = Int32GetDatum(task->visit);
	n = WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVALS_PENDING, values, NULL, false, 0, SPI_OK_SELECT);
	p->n = n;
	p->ids = palloc(sizeof(int64) * Max(n, 1));
	p->names = palloc(sizeof(char *) * Max(n, 1));
	p->expires = palloc(sizeof(TimestampTz) * Max(n, 1));
	p->expires_null = palloc(sizeof(bool) * Max(n, 1));
	p->reissue = false;
	for (i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		d;

		p->ids[i] = DatumGetInt64(WfGetDatumNotNull(i, APPROVALS_PENDING_COL_APPROVAL_ID));
		p->names[i] = WfGetTextOrNull(i, APPROVALS_PENDING_COL_APPROVER);
		d = WfGetDatum(i, APPROVALS_PENDING_COL_EXPIRES_AT, &isnull);
		p->expires_null[i] = isnull;
		p->expires[i] = isnull ? 0 : DatumGetTimestampTz(d);
		/* issuing again, which the holder could repeat without bound */
		if (DatumGetBool(WfGetDatumNotNull(i, APPROVALS_PENDING_COL_HAS_TOKEN)))
			p->reissue = true;
	}
}

/*
 * mint_tokens mints two tokens for each pending approver, an "approve"
 * and a "reject" one, stores their hashes, and returns them in the
 * function's result set.  Returns the highest token generation written.
 */
static int32
mint_tokens(ReturnSetInfo *rsinfo, const PendingApprovers *p)
{
	static const char *const kinds[2] = {"approve", "reject"};
	int32		generation = 0;
	uint64		i;

	for (i = 0; i < p->n; i++)
	{
		char		token[2][WF_TOKEN_TEXT_LEN];
		uint8		hash[2][WF_HASH_LEN];
		Datum		tv[3];
		int			k;

		/* one token per decision kind, each bound to it */
		for (k = 0; k < 2; k++)
			WfMintToken(token[k], hash[k]);
		tv[0] = Int64GetDatum(p->ids[i]);
		tv[1] = hash_datum(hash[0]);
		tv[2] = hash_datum(hash[1]);
		WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVAL_SET_TOKEN, tv, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
		generation = Max(generation, DatumGetInt32(WfGetDatumNotNull(0, 1)));

		for (k = 0; k < 2; k++)
		{
			Datum		out[4];
			bool		onulls[4] = {false, false, false, false};

			out[0] = CStringGetTextDatum(p->names[i]);
			out[1] = CStringGetTextDatum(kinds[k]);
			out[2] = CStringGetTextDatum(token[k]);
			out[3] = TimestampTzGetDatum(p->expires[i]);
			onulls[3] = p->expires_null[i];
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, onulls);
		}
		sodium_memzero(token, sizeof(token));
	}
	return generation;
}

/*
 * wfengine_issue_approval_tokens is wf.issue_approval_tokens(task_id,
 * fence): for the holder of the current lease of an approval step's
 * notification task, it mints a token for every approver still pending
 * and returns them, once.
 */
Datum
wfengine_issue_approval_tokens(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		task_id;
	int64		fence;
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	WfLockedTask task;
	PendingApprovers pending;
	int32		generation;
	WfJsonBuilder b;

	WfRequireArgs(fcinfo, 2, "task_id and fence");
	task_id = PG_GETARG_INT64(0);
	fence = PG_GETARG_INT64(1);
	if (!WfTokenKeyConfigured())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("approval tokens need wfengine.approval_key"),
				 errhint("A superuser sets wfengine.approval_key to 32 to 64 random bytes in hex, e.g. the output of \"openssl rand -hex 32\".")));

	InitMaterializedSRF(fcinfo, 0);
	WfApiBegin();
	lock_notification_task(task_id, fence, &run, &task, &def);
	read_pending_approvers(&run, &task, &pending);
	if (pending.reissue)
		WfCheckEventQuota(&run, "The tokens of this visit were issued already and are not issued again; wf.reissue_approval_tokens() does not apply either at this limit.");
	generation = mint_tokens(rsinfo, &pending);

	WfTransitionInit(&tr, &run, def, GetCurrentTimestamp());
	WfJbBegin(&b);
	WfJbInt(&b, "task_id", task_id);
	WfJbInt(&b, "fence", fence);
	WfJbInt(&b, "visit", task.visit);
	WfJbJsonb(&b, "approvers", WfJsonbTextArray(pending.names, (int) pending.n));
	WfJbInt(&b, "generation", generation);
	WfAppendEvent(&tr, WF_EV_APPROVAL_TOKENS_ISSUED, task.step, 0, WfJbEnd(&b));
	WfTransitionWrite(&tr);

	WfApiEnd();
	return (Datum) 0;
}

/*
 * token_matches tells whether column col of row holds hash (compared in
 * constant time) and the token's kind is the decision asked for.
 */
static bool
token_matches(int row, int col, const uint8 *hash, const char *decision,
			  const char *kind)
{
	bool		isnull;
	Datum		d = WfGetDatum(row, col, &isnull);
	bytea	   *stored;

	if (isnull)
		return false;
	stored = DatumGetByteaPP(d);
	if (VARSIZE_ANY_EXHDR(stored) != WF_HASH_LEN ||
		sodium_memcmp(VARDATA_ANY(stored), hash, WF_HASH_LEN) != 0)
		return false;
	return strcmp(decision, kind) == 0;
}

/* a call of wf.decide, and the approval row its token matched */
typedef struct Decision
{
	char	   *decision;
	char	   *approver;
	text	   *comment;
	Jsonb	   *data;
	uint8		hash[WF_HASH_LEN];	/* of the token */
	bool		well_formed;	/* the token has the form of one */
	int64		approval_id;
	pg_uuid_t	run_id;
	char	   *step;
	int32		visit;
	char	   *row_approver;
} Decision;

/*
 * decide_arguments reads and checks the arguments of wf.decide, and
 * hashes the token (wiping the plain one).
 */
static void
decide_arguments(FunctionCallInfo fcinfo, Decision *d)
{
	char	   *token;

	d->comment = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	d->data = PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4);
	WfRequireArgs(fcinfo, 3, "token, decision and approver");
	token = text_to_cstring(PG_GETARG_TEXT_PP(0));
	d->decision = WfTextArg(fcinfo, 1, "decision", WF_ARG_NAME);
	d->approver = WfTextArg(fcinfo, 2, "approver", WF_ARG_KEY);
	if (strcmp(d->decision, "approve") != 0 && strcmp(d->decision, "reject") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid decision \"%s\"", d->decision),
				 errhint("A decision is \"approve\" or \"reject\".")));
	if (d->approver[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("approver must have 1 to %d bytes", WF_ARG_MAX_KEY)));
	WfCheckTextArg(d->comment, "comment", WF_ARG_REASON);
	WfCheckPayloadSize(d->data, "decision data", "an approval");
	WfRefuseSealedLookalikes(d->data, "decision data", "an approval");
	if (d->comment != NULL)
		WfRefuseSealedLookalikeText(text_to_cstring(d->comment), "comment", "an approval");

	d->well_formed = WfHashToken(token, d->hash);
	sodium_memzero(token, strlen(token));
}

/*
 * match_token finds the approval row of the token, of this tenant and for
 * the decision asked for, and reads it into *d; false when there is none.
 */
static bool
match_token(Decision *d, const char *tenant)
{
	Datum		values[1];

	values[0] = hash_datum(d->hash);
	if (!d->well_formed ||
		WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVAL_BY_HASH, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		return false;

	/*
	 * A hash match.  Compare in constant time all the same, and find which
	 * decision the token is for: it is bound to one.
	 */
	if (strcmp(WfGetTextOrNull(0, APPROVAL_BY_HASH_COL_TENANT_ID), tenant) != 0 ||
		!(token_matches(0, 9, d->hash, d->decision, "approve") ||
		  token_matches(0, 10, d->hash, d->decision, "reject")))
		return false;
	d->approval_id = DatumGetInt64(WfGetDatumNotNull(0, APPROVAL_BY_HASH_COL_APPROVAL_ID));
	memcpy(&d->run_id, DatumGetUUIDP(WfGetDatumNotNull(0, APPROVAL_BY_HASH_COL_RUN_ID)), sizeof(pg_uuid_t));
	d->step = WfGetTextOrNull(0, APPROVAL_BY_HASH_COL_STEP);
	d->visit = DatumGetInt32(WfGetDatumNotNull(0, APPROVAL_BY_HASH_COL_VISIT));
	d->row_approver = WfGetTextOrNull(0, APPROVAL_BY_HASH_COL_APPROVER);
	return true;
}

/*
 * refused_outcome reads the approval row again under the run lock and
 * returns why the decision is refused ("invalid", "already_decided",
 * "expired"), or NULL when it may be taken: the row is the approver's,
 * pending and unexpired, and the run waits at its visit of the step.
 */
static const char *
refused_outcome(Decision *d, WfRunState *run, int idx, TimestampTz now)
{
	Datum		values[1];
	char	   *row_status;
	bool		isnull;
	Datum		e;
	TimestampTz expires_at = 0;

	values[0] = hash_datum(d->hash);
	if (WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVAL_BY_HASH, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		return "invalid";		/* re-issued meanwhile */
	row_status = WfGetTextOrNull(0, APPROVAL_BY_HASH_COL_STATUS);
	e = WfGetDatum(0, APPROVAL_BY_HASH_COL_EXPIRES_AT, &isnull);
	if (!isnull)
		expires_at = DatumGetTimestampTz(e);

	if (strcmp(d->row_approver, d->approver) != 0 || strcmp(row_status, "revoked") == 0)
		return "invalid";
	if (strcmp(row_status, "decided") == 0)
		return "already_decided";
	if (expires_at != 0 && expires_at <= now)
		return "expired";
	if (strcmp(row_status, "pending") != 0)
		return "already_decided";	/* the step ended */
	if (idx < 0 || run->status != WF_RUN_RUNNING || run->current_step == NULL ||
		strcmp(run->current_step, d->step) != 0 ||
		WfNextVisit(run, d->step) != d->visit)
		return "invalid";
	return NULL;
}

/*
 * consume_approval records the decision in its approval row, on condition
 * that the row is still pending: of two uses of one token, one succeeds.
 */
static bool
consume_approval(Decision *d, TimestampTz now)
{
	Datum		values[6] = {Int64GetDatum(d->approval_id), CStringGetTextDatum(d->decision),
	PointerGetDatum(d->comment), JsonbPGetDatum(d->data), TimestampTzGetDatum(now),
	CStringGetTextDatum(WfCurrentActor())};
	char		nulls[6] = {' ', ' ', d->comment ? ' ' : 'n', d->data ? ' ' : 'n', ' ', ' '};

	return WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVAL_CONSUME, values, nulls, false, 0, SPI_OK_UPDATE) == 1;
}

/*
 * append_decision appends approval_decided for an accepted decision, or
 * decision_refused with the outcome for a refused one.
 */
static void
append_decision(WfTransition *tr, const Decision *d, const char *outcome)
{
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbText(&b, "approver", d->approver);
	WfJbText(&b, "decision", d->decision);
	if (outcome != NULL)
	{
		WfJbText(&b, "outcome", outcome);
		WfAppendEvent(tr, WF_EV_DECISION_REFUSED, d->step, 0, WfJbEnd(&b));
		return;
	}
	WfJbInt(&b, "visit", d->visit);
	WfJbText(&b, "comment", d->comment ? text_to_cstring(d->comment) : NULL);
	WfJbJsonb(&b, "data", d->data);
	WfAppendEvent(tr, WF_EV_APPROVAL_DECIDED, d->step, 0, WfJbEnd(&b));
}

/*
 * wfengine_decide is wf.decide(token, decision, approver, comment, data).
 */
Datum
wfengine_decide(PG_FUNCTION_ARGS)
{
	const char *tenant = WfCurrentTenant();
	TimestampTz now = GetCurrentTimestamp();
	Decision	d;
	const char *outcome;
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	int			idx;
	bool		stored = true;

	decide_arguments(fcinfo, &d);
	WfApiBegin();

	/* an approver locked out for this window: the token is not looked at */
	if (approver_throttled(tenant, d.approver, now))
	{
		WfApiEnd();
		PG_RETURN_TEXT_P(cstring_to_text("throttled"));
	}
	if (!match_token(&d, tenant))
	{
		if (note_failure(tenant, d.approver, NULL, NULL, now))
			audit_attempt(tenant, now, d.approver, d.decision, "invalid", NULL, NULL);
		WfApiEnd();
		PG_RETURN_TEXT_P(cstring_to_text("invalid"));
	}

	/* lock the live task and the run, then read the approval row again */
	if (!WfLockRunAndTask(&d.run_id, tenant, &run))
		elog(ERROR, "the run of approval %lld vanished", (long long) d.approval_id);
	def = WfDefinitionGet(run.definition_id);
	idx = WfDefinitionStepIndex(def, d.step);
	WfTransitionInit(&tr, &run, def, now);
	outcome = refused_outcome(&d, &run, idx, now);
	if (outcome == NULL && !consume_approval(&d, now))
		outcome = "already_decided";

	if (outcome == NULL)
	{
		outcome = "accepted";
		append_decision(&tr, &d, NULL);
		WfEvaluateApprovalPolicy(&tr, idx, d.visit, d.approver);
	}
	else if ((stored = note_failure(tenant, d.approver, d.hash, &d.run_id, now)) &&
			 !WfSuppressAuditEvent(tr.run, WF_EV_DECISION_REFUSED, tr.now))
		append_decision(&tr, &d, outcome);

	WfTransitionWrite(&tr);
	if (stored)
		audit_attempt(tenant, now, d.approver, d.decision, outcome, &d.run_id, d.step);
	if (strcmp(outcome, "accepted") == 0)
		WfNoteRunChange(run.tenant_id, &d.run_id, run.status == WF_RUN_RUNNING ? "decided" :
						WfRunStatusName(run.status));
	WfApiEnd();
	PG_RETURN_TEXT_P(cstring_to_text(outcome));
}

/* what an operator command on a waiting approval step works on */
typedef struct ApprovalCommand
{
	WfRunCommand rc;			/* the run command: the run, its transition */
	int			idx;
	char	   *step;
	int32		visit;
} ApprovalCommand;

/* the approval commands check the run's status themselves, after the step */
static const WfRunCommandSpec approval_command_spec = {
	.what = "change the approvals of",
};

/*
 * approval_command_begin checks the arguments of an operator command,
 * begins the run command, and checks that the run waits at the approval
 * step.
 */
static void
approval_command_begin(FunctionCallInfo fcinfo, int reason_arg, ApprovalCommand *cmd)
{
	pg_uuid_t  *run_id;
	char	   *reason;
	WfRunState *run = &cmd->rc.run;

	WfRequireArgs(fcinfo, 2, "run and step");
	reason = WfRequireReason(fcinfo, reason_arg);
	run_id = PG_GETARG_UUID_P(0);
	cmd->step = WfTextArg(fcinfo, 1, "step", WF_ARG_NAME);

	WfRunCommandBegin(&cmd->rc, run_id, reason, &approval_command_spec);
	cmd->idx = WfDefinitionStepIndex(cmd->rc.def, cmd->step);
	if (cmd->idx < 0 || cmd->rc.def->steps[cmd->idx].type != WF_STEP_APPROVAL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("step \"%s\" of run %s is not an approval step", cmd->step,
						WfRunIdText(run_id))));
	if (run->status != WF_RUN_RUNNING || run->current_step == NULL ||
		strcmp(run->current_step, cmd->step) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %s is not waiting at approval step \"%s\"",
						WfRunIdText(run_id), cmd->step),
				 errdetail("The run is \"%s\"%s%s%s.", WfRunStatusName(run->status),
						   run->current_step ? " at step \"" : "",
						   run->current_step ? run->current_step : "",
						   run->current_step ? "\"" : "")));
	WfCheckEventQuota(run, "The run takes no more changes of its approvers or tokens; decisions are still taken.");
	cmd->visit = WfNextVisit(run, cmd->step);
}

/*
 * revoke_tokens clears the hashes of the unused tokens of the visit and
 * returns how many.
 */
static int
revoke_tokens(ApprovalCommand *cmd)
{
	Datum		values[3];

	values[0] = UUIDPGetDatum(cmd->rc.run_id);
	values[1] = CStringGetTextDatum(cmd->step);
	values[2] = Int32GetDatum(cmd->visit);
	return (int) WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVALS_REVOKE_TOKENS, values, NULL, false, 0,
							SPI_OK_UPDATE);
}

/*
 * wfengine_revoke_approval_tokens is wf.revoke_approval_tokens(run, step,
 * reason): every unused token of the waiting step stops working.
 */
Datum
wfengine_revoke_approval_tokens(PG_FUNCTION_ARGS)
{
	ApprovalCommand cmd;
	WfJsonBuilder b;
	int			n;

	approval_command_begin(fcinfo, 2, &cmd);
	n = revoke_tokens(&cmd);
	WfJbBegin(&b);
	WfJbInt(&b, "visit", cmd.visit);
	WfJbInt(&b, "revoked", n);
	WfJbText(&b, "reason", cmd.rc.reason);
	WfAppendEvent(&cmd.rc.tr, WF_EV_APPROVAL_TOKENS_REVOKED, cmd.step, 0, WfJbEnd(&b));
	WfRunCommandWrite(&cmd.rc, NULL);
	PG_RETURN_DATUM(WfApiReturn(Int32GetDatum(n), true, sizeof(int32)));
}

/*
 * wfengine_reissue_approval_tokens is wf.reissue_approval_tokens(run,
 * step, reason): it revokes the unused tokens and schedules a new
 * notification task (withdrawing one still live), whose worker then issues
 * new tokens.  Returns the new task's id.
 */
Datum
wfengine_reissue_approval_tokens(PG_FUNCTION_ARGS)
{
	ApprovalCommand cmd;
	WfTransition *tr = &cmd.rc.tr;
	WfJsonBuilder b;
	Datum		values[3];
	int			n;
	int32		last_attempt;
	bool		isnull;
	Datum		d;
	TimestampTz expires_at = 0;
	const WfStepDef *sd;

	approval_command_begin(fcinfo, 2, &cmd);
	sd = &cmd.rc.def->steps[cmd.idx];
	n = revoke_tokens(&cmd);

	values[0] = UUIDPGetDatum(cmd.rc.run_id);
	values[1] = CStringGetTextDatum(cmd.step);
	values[2] = Int32GetDatum(cmd.visit);
	WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVAL_EXPIRES, values, NULL, false, 1, SPI_OK_SELECT);
	d = WfGetDatum(0, APPROVAL_EXPIRES_COL_EXPIRES_AT, &isnull);
	if (!isnull)
		expires_at = DatumGetTimestampTz(d);
	last_attempt = DatumGetInt32(WfGetDatumNotNull(0, APPROVAL_EXPIRES_COL_LAST_ATTEMPT));

	WfJbBegin(&b);
	WfJbInt(&b, "visit", cmd.visit);
	WfJbInt(&b, "revoked", n);
	WfJbText(&b, "reason", cmd.rc.reason);
	WfJbBool(&b, "reissue", true);
	WfAppendEvent(tr, WF_EV_APPROVAL_TOKENS_REVOKED, cmd.step, 0, WfJbEnd(&b));
	WfWithdrawCurrentTask(tr, "reissue");

	WfJbBegin(&b);
	WfJbText(&b, "run_id", WfRunIdText(cmd.rc.run_id));
	WfJbText(&b, "step", sd->name);
	WfJbInt(&b, "visit", cmd.visit);
	WfJbBool(&b, "reissue", true);
	if (expires_at != 0)
		WfJbTimestamp(&b, "expires_at", expires_at);
	WfScheduleStep(tr, cmd.idx, last_attempt + 1, tr->now, WfJbEnd(&b));
	WfRunCommandWrite(&cmd.rc, NULL);
	PG_RETURN_DATUM(WfApiReturn(Int64GetDatum(tr->task.task_id), FLOAT8PASSBYVAL,
								sizeof(int64)));
}

/*
 * approver_names checks the approvers argument of wf.set_approvers and
 * returns its names without repeats, in *names and as an array.
 */
static ArrayType *
approver_names(FunctionCallInfo fcinfo, char ***names, int *nnames)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *elem_nulls;
	int			nelems;
	int			i;
	int			j = 0;
	int			k;

	WfRequireArg(fcinfo, 2, "approvers", NULL);
	arr = PG_GETARG_ARRAYTYPE_P(2);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &elem_nulls, &nelems);
	if (nelems == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an approval step needs at least one approver")));
	if (nelems > WF_MAX_APPROVERS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("an approval step can have at most %d approvers, not %d",
						WF_MAX_APPROVERS, nelems)));
	*names = palloc(sizeof(char *) * nelems);
	for (i = 0; i < nelems; i++)
	{
		char	   *name;
		bool		dup = false;

		if (!elem_nulls[i])
			WfCheckTextArg(DatumGetTextPP(elems[i]), "approver name", WF_ARG_KEY);
		if (elem_nulls[i] || VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("approver names must have 1 to %d bytes", WF_ARG_MAX_KEY)));
		name = TextDatumGetCString(elems[i]);
		for (k = 0; k < j; k++)
			if (strcmp((*names)[k], name) == 0)
				dup = true;
		if (!dup)
			(*names)[j++] = name;
	}
	*nnames = j;
	for (k = 0; k < j; k++)
		elems[k] = CStringGetTextDatum((*names)[k]);
	return construct_array(elems, j, TEXTOID, -1, false, TYPALIGN_INT);
}

/*
 * returned_names returns column 1 of the n rows of the last statement.
 */
static char **
returned_names(uint64 n)
{
	char	  **names = palloc(sizeof(char *) * Max(n, 1));
	uint64		i;

	for (i = 0; i < n; i++)
		names[i] = WfGetTextOrNull(i, 1);
	return names;
}

/*
 * wfengine_set_approvers is wf.set_approvers(run, step, approvers,
 * reason): approvers no longer listed lose their tokens at once (their
 * decisions already made stay); new ones are added without a token, to
 * be issued with wf.reissue_approval_tokens().
 */
Datum
wfengine_set_approvers(PG_FUNCTION_ARGS)
{
	ApprovalCommand cmd;
	WfRunState *run = &cmd.rc.run;
	WfJsonBuilder b;
	Datum		values[7];
	char		nulls[7];
	ArrayType  *arr;
	char	  **names;
	int			nnames;
	char	  **removed;
	char	  **added;
	uint64		nr;
	uint64		na;
	bool		isnull;
	Datum		d;
	bool		ended;

	arr = approver_names(fcinfo, &names, &nnames);
	approval_command_begin(fcinfo, 3, &cmd);

	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(cmd.step);
	values[2] = Int32GetDatum(cmd.visit);
	values[3] = PointerGetDatum(arr);
	nr = WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVALS_REMOVE, values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	removed = returned_names(nr);

	WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVAL_EXPIRES, values, NULL, false, 1, SPI_OK_SELECT);
	d = WfGetDatum(0, APPROVAL_EXPIRES_COL_EXPIRES_AT, &isnull);

	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(run->tenant_id);
	values[1] = UUIDPGetDatum(&run->run_id);
	values[2] = CStringGetTextDatum(cmd.step);
	values[3] = Int32GetDatum(cmd.visit);
	values[4] = PointerGetDatum(arr);
	if (!isnull)
		values[5] = d;
	else
		nulls[5] = 'n';
	values[6] = TimestampTzGetDatum(cmd.rc.tr.now);
	na = WfPlanExec(&WfApprovalApiPlans, PLAN_APPROVALS_ADD, values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
	added = returned_names(na);

	WfJbBegin(&b);
	WfJbInt(&b, "visit", cmd.visit);
	WfJbJsonb(&b, "approvers", WfJsonbTextArray(names, nnames));
	WfJbJsonb(&b, "removed", WfJsonbTextArray(removed, (int) nr));
	WfJbJsonb(&b, "added", WfJsonbTextArray(added, (int) na));
	WfJbText(&b, "reason", cmd.rc.reason);
	WfAppendEvent(&cmd.rc.tr, WF_EV_APPROVERS_CHANGED, cmd.step, 0, WfJbEnd(&b));
	/* the policy counts the new approvers at once: the step may end here */
	ended = WfEvaluateApprovalPolicy(&cmd.rc.tr, cmd.idx, cmd.visit, NULL) != NULL;
	WfRunCommandWrite(&cmd.rc, !ended ? NULL :
					  run->status == WF_RUN_RUNNING ? "step_done" :
					  WfRunStatusName(run->status));
	WfApiEnd();
	PG_RETURN_VOID();
}
