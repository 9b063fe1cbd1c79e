/*-------------------------------------------------------------------------
 *
 * approval.c
 *	  Human approval steps with one-time tokens.
 *
 * Entering an approval step records approval_requested, writes one
 * wf.approvals row per approver (no token yet), schedules a notification
 * task on the step's notify_queue and, with "expires", an expiry timer.
 * The run then costs only rows while it waits.
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
 * say which part failed).  Every call is written to wf.approval_attempts;
 * calls that can be tied to a run are recorded in its history too
 * (approval_decided, or decision_refused).  Rows exist only for the
 * approvers of the current visit, so an approver is authorised when the
 * decision is made, not only when the token was issued.
 *
 * Policy.  "any" needs one approval, "all" every approver, {"quorum": N}
 * N distinct approvers.  "rejections" rejects (default 1) end the step as
 * rejected (the run fails), and so do so many rejects that the policy can
 * no longer be met.  Each approver decides once.  When the step ends its other
 * tokens are closed, a notification task still live is withdrawn, and the
 * step's output is {"outcome": ..., "decisions": [...]}, with each
 * decision's comment and data.
 *
 * Operator commands (wf.revoke_approval_tokens, wf.reissue_approval_tokens,
 * wf.set_approvers) each take a reason and record it, with the actor and
 * what changed, as an event of the run; they apply only while the run
 * waits at that approval step.
 *
 * Lock order: task row, then run row, then approval rows; wf.decide and
 * the commands lock the run's live task first (WfLockRunAndTask), since
 * ending or re-issuing the step withdraws it.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/approval.c
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
#include "argcheck.h"
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
#include "transition.h"
#include "wfengine.h"

PG_FUNCTION_INFO_V1(wfengine_issue_approval_tokens);
PG_FUNCTION_INFO_V1(wfengine_decide);
PG_FUNCTION_INFO_V1(wfengine_revoke_approval_tokens);
PG_FUNCTION_INFO_V1(wfengine_reissue_approval_tokens);
PG_FUNCTION_INFO_V1(wfengine_set_approvers);

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
	if (step != NULL)
		values[7] = CStringGetTextDatum(step);
	else
		nulls[7] = 'n';
	WfExecPlan(WF_PLAN_ATTEMPT_INSERT, values, nulls, false, 0, SPI_OK_INSERT);
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
	if (WfExecPlan(WF_PLAN_DECIDE_LOCKED, values, NULL, false, 1, SPI_OK_SELECT) == 0)
		return false;
	values[2] = TimestampTzGetDatum(now);
	WfExecPlan(WF_PLAN_DECIDE_THROTTLE, values, NULL, false, 0, SPI_OK_UPDATE);
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
		WfExecPlan(WF_PLAN_DECIDE_FAILURE, values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
		if (DatumGetBool(WfGetDatumNotNull(0, 1)))
			store = false;
	}
	return store;
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
	const char *tenant = WfCurrentTenant();
	int64		task_id;
	int64		fence;
	Datum		values[3];
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	WfLockedTask task;
	int			idx;
	uint64		n;
	uint64		i;
	int64	   *ids;
	char	  **names;
	TimestampTz *expires;
	bool	   *expires_null;
	int32		generation = 0;
	bool		reissue = false;
	WfJsonBuilder b;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("task_id and fence must not be null")));
	task_id = PG_GETARG_INT64(0);
	fence = PG_GETARG_INT64(1);
	if (!WfTokenKeyConfigured())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("approval tokens need wfengine.approval_key"),
				 errhint("A superuser sets wfengine.approval_key to 32 to 64 random bytes in hex, e.g. the output of \"openssl rand -hex 32\".")));

	InitMaterializedSRF(fcinfo, 0);
	WfApiBegin();

	if (!WfLockTaskAndRun(task_id, tenant, &run, &task))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("task %lld does not exist", (long long) task_id)));
	def = WfDefinitionGet(run.definition_id);
	idx = WfDefinitionStepIndex(def, task.step);

	if (idx < 0 || def->steps[idx].type != WF_STEP_APPROVAL)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("task %lld is not the notification task of an approval step",
						(long long) task_id)));
	if (strcmp(task.status, "leased") != 0 || fence != task.fence ||
		run.status != WF_RUN_RUNNING || run.current_task != task_id)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fence %lld is not the current lease of task %lld",
						(long long) fence, (long long) task_id),
				 errhint("Only the worker holding the current lease of the notification task can issue its tokens.")));

	values[0] = UUIDPGetDatum(&run.run_id);
	values[1] = CStringGetTextDatum(task.step);
	values[2] = Int32GetDatum(task.visit);
	n = WfExecPlan(WF_PLAN_APPROVALS_PENDING, values, NULL, false, 0, SPI_OK_SELECT);
	ids = palloc(sizeof(int64) * Max(n, 1));
	names = palloc(sizeof(char *) * Max(n, 1));
	expires = palloc(sizeof(TimestampTz) * Max(n, 1));
	expires_null = palloc(sizeof(bool) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		d;

		ids[i] = DatumGetInt64(WfGetDatumNotNull(i, 1));
		names[i] = WfGetTextOrNull(i, 2);
		d = WfGetDatum(i, 3, &isnull);
		expires_null[i] = isnull;
		expires[i] = isnull ? 0 : DatumGetTimestampTz(d);
		/* issuing again, which the holder could repeat without bound */
		if (DatumGetBool(WfGetDatumNotNull(i, 4)))
			reissue = true;
	}
	if (reissue)
		WfCheckEventQuota(&run, "The tokens of this visit were issued already and are not issued again; wf.reissue_approval_tokens() does not apply either at this limit.");

	for (i = 0; i < n; i++)
	{
		static const char *const kinds[2] = {"approve", "reject"};
		char		token[2][WF_TOKEN_TEXT_LEN];
		uint8		hash[2][WF_HASH_LEN];
		Datum		tv[3];
		int			k;

		/* one token per decision kind, each bound to it */
		for (k = 0; k < 2; k++)
			WfMintToken(token[k], hash[k]);
		tv[0] = Int64GetDatum(ids[i]);
		tv[1] = hash_datum(hash[0]);
		tv[2] = hash_datum(hash[1]);
		WfExecPlan(WF_PLAN_APPROVAL_SET_TOKEN, tv, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
		generation = Max(generation, DatumGetInt32(WfGetDatumNotNull(0, 1)));

		for (k = 0; k < 2; k++)
		{
			Datum		out[4];
			bool		onulls[4] = {false, false, false, false};

			out[0] = CStringGetTextDatum(names[i]);
			out[1] = CStringGetTextDatum(kinds[k]);
			out[2] = CStringGetTextDatum(token[k]);
			out[3] = TimestampTzGetDatum(expires[i]);
			onulls[3] = expires_null[i];
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, onulls);
		}
		sodium_memzero(token, sizeof(token));
	}

	WfTransitionInit(&tr, &run, def, GetCurrentTimestamp());
	WfJbBegin(&b);
	WfJbInt(&b, "task_id", task_id);
	WfJbInt(&b, "fence", fence);
	WfJbInt(&b, "visit", task.visit);
	WfJbJsonb(&b, "approvers", WfJsonbTextArray(names, (int) n));
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

/*
 * wfengine_decide is wf.decide(token, decision, approver, comment, data).
 */
Datum
wfengine_decide(PG_FUNCTION_ARGS)
{
	const char *tenant = WfCurrentTenant();
	TimestampTz now = GetCurrentTimestamp();
	char	   *token;
	char	   *decision;
	char	   *approver;
	text	   *comment = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	Jsonb	   *data = PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4);
	uint8		hash[WF_HASH_LEN];
	bool		well_formed;
	const char *outcome = NULL;
	Datum		values[6];
	char		nulls[6];
	int64		approval_id;
	pg_uuid_t	run_id;
	char	   *step;
	int32		visit;
	char	   *row_approver;
	char	   *row_status;
	bool		isnull;
	Datum		d;
	TimestampTz expires_at = 0;
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	int			idx;
	WfJsonBuilder b;
	bool		stored = true;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("token, decision and approver must not be null")));
	token = text_to_cstring(PG_GETARG_TEXT_PP(0));
	decision = WfTextArg(fcinfo, 1, "decision", WF_ARG_NAME);
	approver = WfTextArg(fcinfo, 2, "approver", WF_ARG_KEY);
	if (strcmp(decision, "approve") != 0 && strcmp(decision, "reject") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid decision \"%s\"", decision),
				 errhint("A decision is \"approve\" or \"reject\".")));
	if (approver[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("approver must have 1 to %d bytes", WF_ARG_MAX_KEY)));
	WfCheckTextArg(comment, "comment", WF_ARG_REASON);
	WfCheckPayloadSize(data, "decision data", "an approval");
	WfRefuseSealedLookalikes(data, "decision data", "an approval");
	if (comment != NULL)
		WfRefuseSealedLookalikeText(text_to_cstring(comment), "comment", "an approval");

	well_formed = WfHashToken(token, hash);
	sodium_memzero(token, strlen(token));

	WfApiBegin();

	/* an approver locked out for this window: the token is not looked at */
	if (approver_throttled(tenant, approver, now))
	{
		WfApiEnd();
		PG_RETURN_TEXT_P(cstring_to_text("throttled"));
	}

	values[0] = hash_datum(hash);
	if (!well_formed ||
		WfExecPlan(WF_PLAN_APPROVAL_BY_HASH, values, NULL, false, 1, SPI_OK_SELECT) != 1)
	{
		if (note_failure(tenant, approver, NULL, NULL, now))
			audit_attempt(tenant, now, approver, decision, "invalid", NULL, NULL);
		WfApiEnd();
		PG_RETURN_TEXT_P(cstring_to_text("invalid"));
	}

	/*
	 * A hash match.  Compare in constant time all the same, and find which
	 * decision the token is for: it is bound to one.
	 */
	if (strcmp(WfGetTextOrNull(0, 2), tenant) != 0 ||
		!(token_matches(0, 9, hash, decision, "approve") ||
		  token_matches(0, 10, hash, decision, "reject")))
	{
		if (note_failure(tenant, approver, NULL, NULL, now))
			audit_attempt(tenant, now, approver, decision, "invalid", NULL, NULL);
		WfApiEnd();
		PG_RETURN_TEXT_P(cstring_to_text("invalid"));
	}
	approval_id = DatumGetInt64(WfGetDatumNotNull(0, 1));
	memcpy(&run_id, DatumGetUUIDP(WfGetDatumNotNull(0, 3)), sizeof(pg_uuid_t));
	step = WfGetTextOrNull(0, 4);
	visit = DatumGetInt32(WfGetDatumNotNull(0, 5));
	row_approver = WfGetTextOrNull(0, 6);

	/* lock the live task and the run, then read the approval row again */
	if (!WfLockRunAndTask(&run_id, tenant, &run))
		elog(ERROR, "the run of approval %lld vanished", (long long) approval_id);
	def = WfDefinitionGet(run.definition_id);
	idx = WfDefinitionStepIndex(def, step);
	WfTransitionInit(&tr, &run, def, now);

	values[0] = hash_datum(hash);
	if (WfExecPlan(WF_PLAN_APPROVAL_BY_HASH, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		outcome = "invalid";	/* re-issued meanwhile */
	else
	{
		row_status = WfGetTextOrNull(0, 7);
		d = WfGetDatum(0, 8, &isnull);
		if (!isnull)
			expires_at = DatumGetTimestampTz(d);

		if (strcmp(row_approver, approver) != 0 || strcmp(row_status, "revoked") == 0)
			outcome = "invalid";
		else if (strcmp(row_status, "decided") == 0)
			outcome = "already_decided";
		else if (expires_at != 0 && expires_at <= now)
			outcome = "expired";
		else if (strcmp(row_status, "pending") != 0)
			outcome = "already_decided";	/* the step ended */
		else if (idx < 0 || run.status != WF_RUN_RUNNING || run.current_step == NULL ||
				 strcmp(run.current_step, step) != 0 ||
				 WfNextVisit(&run, step) != visit)
			outcome = "invalid";
	}

	if (outcome == NULL)
	{
		memset(nulls, ' ', sizeof(nulls));
		values[0] = Int64GetDatum(approval_id);
		values[1] = CStringGetTextDatum(decision);
		if (comment != NULL)
			values[2] = PointerGetDatum(comment);
		else
			nulls[2] = 'n';
		if (data != NULL)
			values[3] = JsonbPGetDatum(data);
		else
			nulls[3] = 'n';
		values[4] = TimestampTzGetDatum(now);
		values[5] = CStringGetTextDatum(WfCurrentActor());
		if (WfExecPlan(WF_PLAN_APPROVAL_CONSUME, values, nulls, false, 0, SPI_OK_UPDATE) != 1)
			outcome = "already_decided";
	}

	if (outcome == NULL)
	{
		outcome = "accepted";
		WfJbBegin(&b);
		WfJbText(&b, "approver", approver);
		WfJbText(&b, "decision", decision);
		WfJbInt(&b, "visit", visit);
		WfJbText(&b, "comment", comment ? text_to_cstring(comment) : NULL);
		WfJbJsonb(&b, "data", data);
		WfAppendEvent(&tr, WF_EV_APPROVAL_DECIDED, step, 0, WfJbEnd(&b));

		WfEvaluateApprovalPolicy(&tr, idx, visit, approver);
	}
	else if ((stored = note_failure(tenant, approver, hash, &run_id, now)) &&
			 !WfSuppressAuditEvent(&tr, WF_EV_DECISION_REFUSED))
	{
		WfJbBegin(&b);
		WfJbText(&b, "approver", approver);
		WfJbText(&b, "decision", decision);
		WfJbText(&b, "outcome", outcome);
		WfAppendEvent(&tr, WF_EV_DECISION_REFUSED, step, 0, WfJbEnd(&b));
	}

	WfTransitionWrite(&tr);
	if (stored)
		audit_attempt(tenant, now, approver, decision, outcome, &run_id, step);
	if (strcmp(outcome, "accepted") == 0)
		WfNoteRunChange(run.tenant_id, &run_id, run.status == WF_RUN_RUNNING ? "decided" :
						WfRunStatusName(run.status));
	WfApiEnd();
	PG_RETURN_TEXT_P(cstring_to_text(outcome));
}

/* what an operator command on a waiting approval step works on */
typedef struct ApprovalCommand
{
	WfRunState	run;
	WfDefinition *def;
	int			idx;
	char	   *step;
	int32		visit;
	char	   *reason;
	WfTransition tr;
} ApprovalCommand;

/*
 * begin_command checks the arguments of an operator command, locks the
 * run and checks that it waits at the approval step.  The caller is
 * connected to SPI.
 */
static void
begin_command(FunctionCallInfo fcinfo, int reason_arg, ApprovalCommand *cmd)
{
	pg_uuid_t  *run_id;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("run and step must not be null")));
	cmd->reason = WfRequireReason(fcinfo, reason_arg);
	run_id = PG_GETARG_UUID_P(0);
	cmd->step = WfTextArg(fcinfo, 1, "step", WF_ARG_NAME);

	if (!WfLockRunAndTask(run_id, WfCurrentTenant(), &cmd->run))
		WfUnknownRun(run_id);
	cmd->def = WfDefinitionGet(cmd->run.definition_id);
	cmd->idx = WfDefinitionStepIndex(cmd->def, cmd->step);
	if (cmd->idx < 0 || cmd->def->steps[cmd->idx].type != WF_STEP_APPROVAL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("step \"%s\" of run %s is not an approval step", cmd->step,
						DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(run_id))))));
	if (cmd->run.status != WF_RUN_RUNNING || cmd->run.current_step == NULL ||
		strcmp(cmd->run.current_step, cmd->step) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %s is not waiting at approval step \"%s\"",
						DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(run_id))),
						cmd->step),
				 errdetail("The run is \"%s\"%s%s%s.", WfRunStatusName(cmd->run.status),
						   cmd->run.current_step ? " at step \"" : "",
						   cmd->run.current_step ? cmd->run.current_step : "",
						   cmd->run.current_step ? "\"" : "")));
	WfCheckEventQuota(&cmd->run, "The run takes no more changes of its approvers or tokens; decisions are still taken.");
	cmd->visit = WfNextVisit(&cmd->run, cmd->step);
	WfTransitionInit(&cmd->tr, &cmd->run, cmd->def, GetCurrentTimestamp());
}

/*
 * revoke_tokens clears the hashes of the unused tokens of the visit and
 * returns how many.
 */
static int
revoke_tokens(ApprovalCommand *cmd)
{
	Datum		values[3];

	values[0] = UUIDPGetDatum(&cmd->run.run_id);
	values[1] = CStringGetTextDatum(cmd->step);
	values[2] = Int32GetDatum(cmd->visit);
	return (int) WfExecPlan(WF_PLAN_APPROVALS_REVOKE_TOKENS, values, NULL, false, 0,
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

	WfApiBegin();
	begin_command(fcinfo, 2, &cmd);
	n = revoke_tokens(&cmd);
	WfJbBegin(&b);
	WfJbInt(&b, "visit", cmd.visit);
	WfJbInt(&b, "revoked", n);
	WfJbText(&b, "reason", cmd.reason);
	WfAppendEvent(&cmd.tr, WF_EV_APPROVAL_TOKENS_REVOKED, cmd.step, 0, WfJbEnd(&b));
	WfTransitionWrite(&cmd.tr);
	WfApiEnd();
	PG_RETURN_INT32(n);
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
	WfJsonBuilder b;
	Datum		values[3];
	int			n;
	int32		last_attempt;
	bool		isnull;
	Datum		d;
	TimestampTz expires_at = 0;
	const WfStepDef *sd;
	Datum		result;

	WfApiBegin();
	begin_command(fcinfo, 2, &cmd);
	sd = &cmd.def->steps[cmd.idx];
	n = revoke_tokens(&cmd);

	values[0] = UUIDPGetDatum(&cmd.run.run_id);
	values[1] = CStringGetTextDatum(cmd.step);
	values[2] = Int32GetDatum(cmd.visit);
	WfExecPlan(WF_PLAN_APPROVAL_EXPIRES, values, NULL, false, 1, SPI_OK_SELECT);
	d = WfGetDatum(0, 1, &isnull);
	if (!isnull)
		expires_at = DatumGetTimestampTz(d);
	last_attempt = DatumGetInt32(WfGetDatumNotNull(0, 2));

	WfJbBegin(&b);
	WfJbInt(&b, "visit", cmd.visit);
	WfJbInt(&b, "revoked", n);
	WfJbText(&b, "reason", cmd.reason);
	WfJbBool(&b, "reissue", true);
	WfAppendEvent(&cmd.tr, WF_EV_APPROVAL_TOKENS_REVOKED, cmd.step, 0, WfJbEnd(&b));
	WfWithdrawCurrentTask(&cmd.tr, "reissue");

	WfJbBegin(&b);
	WfJbText(&b, "run_id", DatumGetCString(DirectFunctionCall1(uuid_out,
															   UUIDPGetDatum(&cmd.run.run_id))));
	WfJbText(&b, "step", sd->name);
	WfJbInt(&b, "visit", cmd.visit);
	WfJbBool(&b, "reissue", true);
	if (expires_at != 0)
		WfJbTimestamp(&b, "expires_at", expires_at);
	WfScheduleStep(&cmd.tr, cmd.idx, last_attempt + 1, cmd.tr.now, WfJbEnd(&b));
	result = Int64GetDatum(cmd.tr.task.task_id);
	WfTransitionWrite(&cmd.tr);
	WfApiEnd();
	PG_RETURN_DATUM(result);
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
	WfJsonBuilder b;
	Datum		values[7];
	char		nulls[7];
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *elem_nulls;
	int			nelems;
	char	  **names;
	char	  **removed;
	char	  **added;
	uint64		nr;
	uint64		na;
	uint64		i;
	bool		isnull;
	Datum		d;
	bool		ended;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("approvers must not be null")));
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
	names = palloc(sizeof(char *) * nelems);
	{
		int			j = 0;
		int			k;

		for (i = 0; i < (uint64) nelems; i++)
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
				if (strcmp(names[k], name) == 0)
					dup = true;
			if (!dup)
				names[j++] = name;
		}
		nelems = j;
		for (k = 0; k < j; k++)
			elems[k] = CStringGetTextDatum(names[k]);
		arr = construct_array(elems, nelems, TEXTOID, -1, false, TYPALIGN_INT);
	}

	WfApiBegin();
	begin_command(fcinfo, 3, &cmd);

	values[0] = UUIDPGetDatum(&cmd.run.run_id);
	values[1] = CStringGetTextDatum(cmd.step);
	values[2] = Int32GetDatum(cmd.visit);
	values[3] = PointerGetDatum(arr);
	nr = WfExecPlan(WF_PLAN_APPROVALS_REMOVE, values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	removed = palloc(sizeof(char *) * Max(nr, 1));
	for (i = 0; i < nr; i++)
		removed[i] = WfGetTextOrNull(i, 1);

	WfExecPlan(WF_PLAN_APPROVAL_EXPIRES, values, NULL, false, 1, SPI_OK_SELECT);
	d = WfGetDatum(0, 1, &isnull);

	memset(nulls, ' ', sizeof(nulls));
	values[0] = CStringGetTextDatum(cmd.run.tenant_id);
	values[1] = UUIDPGetDatum(&cmd.run.run_id);
	values[2] = CStringGetTextDatum(cmd.step);
	values[3] = Int32GetDatum(cmd.visit);
	values[4] = PointerGetDatum(arr);
	if (!isnull)
		values[5] = d;
	else
		nulls[5] = 'n';
	values[6] = TimestampTzGetDatum(cmd.tr.now);
	na = WfExecPlan(WF_PLAN_APPROVALS_ADD, values, nulls, false, 0, SPI_OK_INSERT_RETURNING);
	added = palloc(sizeof(char *) * Max(na, 1));
	for (i = 0; i < na; i++)
		added[i] = WfGetTextOrNull(i, 1);

	WfJbBegin(&b);
	WfJbInt(&b, "visit", cmd.visit);
	WfJbJsonb(&b, "approvers", WfJsonbTextArray(names, nelems));
	WfJbJsonb(&b, "removed", WfJsonbTextArray(removed, (int) nr));
	WfJbJsonb(&b, "added", WfJsonbTextArray(added, (int) na));
	WfJbText(&b, "reason", cmd.reason);
	WfAppendEvent(&cmd.tr, WF_EV_APPROVERS_CHANGED, cmd.step, 0, WfJbEnd(&b));
	/* the policy counts the new approvers at once: the step may end here */
	ended = WfEvaluateApprovalPolicy(&cmd.tr, cmd.idx, cmd.visit, NULL) != NULL;
	WfTransitionWrite(&cmd.tr);
	if (ended)
		WfNoteRunChange(cmd.run.tenant_id, &cmd.run.run_id,
						cmd.run.status == WF_RUN_RUNNING ? "step_done" :
						WfRunStatusName(cmd.run.status));
	WfApiEnd();
	PG_RETURN_VOID();
}
