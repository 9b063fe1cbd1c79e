/*-------------------------------------------------------------------------
 *
 * run.c
 *	  Starting runs and reading their status.
 *
 * wf.start_run pins the run to one definition version (the latest, or the
 * one asked for) and writes the run row, its first two events
 * (run_started, task_scheduled) and the first task attempt in a single
 * statement.  With an idempotency key, the run row is inserted with
 * ON CONFLICT DO NOTHING on (tenant, key): a second start with the same
 * key writes nothing and returns the first run, after checking that it
 * asked for the same definition, input and (when given) version.  Two concurrent starts with
 * one key are decided by the unique index: the second waits for the
 * first to commit and then finds its run.  The input check never opens a
 * sealed value: a keyed start records a keyed digest of its plain input
 * (input_digest), which a repeated start by a member of wfengine_sensitive
 * compares; anyone else's repeated start compares the input without its
 * sealed values, so that no answer depends on a value the caller may not
 * read (see same_input).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/run.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sodium.h>

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "argcheck.h"
#include "correlate.h"
#include "crypto.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "notify.h"
#include "quota.h"
#include "runstore.h"
#include "sensitive.h"
#include "spi_util.h"
#include "state.h"
#include "step_wait.h"
#include "transition.h"
#include "wfengine.h"

PG_FUNCTION_INFO_V1(wfengine_start_run);
PG_FUNCTION_INFO_V1(wfengine_run_status);
PG_FUNCTION_INFO_V1(wfengine_terminate_run);
PG_FUNCTION_INFO_V1(wfengine_update_context);
PG_FUNCTION_INFO_V1(wfengine_signal);



/*
 * same_input tells whether input is the input that run run_id (of
 * definition definition_id) was started with, as far as the caller may
 * know: a member of wfengine_sensitive compares the keyed digest of input
 * with the one recorded at the start (stored_digest); anyone else compares
 * input with the stored input, both without the values that are sealed
 * (WfMaskSealed), so that the answer never depends on a sealed value the
 * caller may not read.  No sealed value is opened.
 */
static bool
same_input(const char *tenant, pg_uuid_t *run_id, int64 definition_id,
		   Jsonb *stored, bytea *stored_digest, Jsonb *input)
{
	WfDefinition *def;

	if (stored_digest != NULL && WfMaySeeSensitive(WfApiCaller()))
	{
		bytea	   *digest = WfInputDigest(tenant, run_id, input);

		return VARSIZE_ANY_EXHDR(stored_digest) == VARSIZE_ANY_EXHDR(digest) &&
			sodium_memcmp(VARDATA_ANY(stored_digest), VARDATA_ANY(digest),
						  VARSIZE_ANY_EXHDR(digest)) == 0;
	}
	def = WfDefinitionGet(definition_id);
	stored = WfMaskSealed(stored, def->sensitive_input, def->n_sensitive_input);
	input = WfMaskSealed(input, def->sensitive_input, def->n_sensitive_input);
	return compareJsonbContainers(&stored->root, &input->root) == 0;
}

/*
 * existing_run returns the run started earlier with key, after checking
 * that it was started for the same definition, input (see same_input)
 * and (when given) version.  NULL when there is none and !must_exist.
 */
static pg_uuid_t *
existing_run(const char *tenant, const char *defname, const char *key,
			 Jsonb *input, int32 version, bool version_given, bool must_exist)
{
	Datum		values[2];
	pg_uuid_t  *run_id;
	char	   *old_def;
	Jsonb	   *old_input;
	int32		old_version;
	int64		old_definition_id;
	bytea	   *old_digest = NULL;
	bool		isnull;
	Datum		d;
	bool		def_differs;
	bool		version_differs;
	bool		input_differs;

	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(key);
	if (WfExecPlan(WF_PLAN_RUN_BY_KEY, values, NULL, false, 1, SPI_OK_SELECT) != 1 &&
		!must_exist)
		return NULL;
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not find the run started with idempotency key \"%s\"", key),
				 errhint("The run was started by a concurrent transaction that is not visible to this snapshot; retry the transaction.")));

	old_def = WfGetTextOrNull(0, 2);
	old_input = DatumGetJsonbPCopy(WfGetDatumNotNull(0, 3));
	old_version = DatumGetInt32(WfGetDatumNotNull(0, 4));
	old_definition_id = DatumGetInt64(WfGetDatumNotNull(0, 5));
	d = WfGetDatum(0, 6, &isnull);
	if (!isnull)
		old_digest = DatumGetByteaPCopy(d);
	run_id = palloc(sizeof(pg_uuid_t));
	memcpy(run_id, DatumGetUUIDP(WfGetDatumNotNull(0, 1)), sizeof(pg_uuid_t));

	def_differs = strcmp(old_def, defname) != 0;
	version_differs = version_given && old_version != version;
	input_differs = !def_differs &&
		!same_input(tenant, run_id, old_definition_id, old_input, old_digest, input);
	if (def_differs || version_differs || input_differs)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("idempotency key \"%s\" was already used for a different run", key),
				 errdetail("The key started a run of version %d of definition \"%s\"%s.",
						   old_version, old_def,
						   input_differs ? " with a different input" : ""),
				 errhint("Use a new idempotency key for a different request.")));
	return run_id;
}

/*
 * wfengine_start_run is wf.start_run(definition, input, idempotency_key,
 * version): it starts a run of the latest (or the given) version and
 * returns its id.
 */
Datum
wfengine_start_run(PG_FUNCTION_ARGS)
{
	const char *tenant = WfCurrentTenant();
	char	   *defname;
	Jsonb	   *input;
	Jsonb	   *plain_input;
	char	   *key = NULL;
	Datum		values[3];
	int64		definition_id;
	int32		version;
	WfDefinition *def;
	WfRunState	run;
	WfTransition tr;
	WfJsonBuilder b;
	pg_uuid_t  *result;
	TimestampTz now = GetCurrentTimestamp();

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("definition name must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("run input must not be null"),
				 errhint("Pass '{}' for a run without input.")));
	defname = WfTextArg(fcinfo, 0, "definition name", WF_ARG_NAME);
	input = PG_GETARG_JSONB_P(1);
	key = WfTextArg(fcinfo, 2, "idempotency key", WF_ARG_KEY);
	if (key != NULL && key[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idempotency key must have 1 to %d bytes", WF_ARG_MAX_KEY)));
	WfCheckPayloadSize(input, "input", psprintf("a run of definition \"%s\"", defname));
	WfCheckRunInput(input, "input");
	WfRefuseSealedLookalikes(input, "input", psprintf("a run of definition \"%s\"", defname));

	WfApiBegin();

	/* pin the version */
	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(defname);
	if (PG_ARGISNULL(3))
	{
		if (WfExecPlan(WF_PLAN_DEF_LATEST, values, NULL, false, 1, SPI_OK_SELECT) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("definition \"%s\" does not exist", defname),
					 errhint("Publish it first with wf.publish_definition().")));
	}
	else
	{
		values[2] = Int32GetDatum(PG_GETARG_INT32(3));
		if (WfPlanExec(&WfDefinitionPlans, WF_DEFINITION_DEF_VERSION, values, NULL, false, 1, SPI_OK_SELECT) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("version %d of definition \"%s\" does not exist",
							PG_GETARG_INT32(3), defname)));
	}
	definition_id = DatumGetInt64(WfGetDatumNotNull(0, 1));
	version = DatumGetInt32(WfGetDatumNotNull(0, 2));

	/*
	 * A start quota applies to new runs: a repeated start of a run that
	 * exists returns it, even at the limit.
	 */
	if (key != NULL && WfStartQuotaSet(tenant) &&
		(result = existing_run(tenant, defname, key, input,
							   PG_ARGISNULL(3) ? 0 : PG_GETARG_INT32(3), !PG_ARGISNULL(3),
							   false)) != NULL)
		goto done;
	WfCheckStartQuota(tenant);
	def = WfDefinitionGet(definition_id);
	plain_input = input;
	if (def->n_sensitive_input > 0)
		input = WfSealKeys(tenant, input, def->sensitive_input, def->n_sensitive_input);

	/* build the run in memory: run_started, then the first step */
	memset(&run, 0, sizeof(run));
	WfNewRunId(&run.run_id);
	run.tenant_id = (char *) tenant;
	WfTransitionInit(&tr, &run, def, now);
	/* what a repeated start compares with, without opening sealed values */
	if (key != NULL)
		tr.input_digest = WfInputDigest(tenant, &run.run_id, plain_input);

	WfJbBegin(&b);
	WfJbText(&b, "definition", defname);
	WfJbInt(&b, "version", version);
	WfJbInt(&b, "definition_id", definition_id);
	WfJbJsonb(&b, "input", input);
	WfJbText(&b, "idempotency_key", key);
	if (tr.input_digest != NULL)
	{
		char		hex[WF_HASH_LEN * 2 + 1];

		sodium_bin2hex(hex, sizeof(hex), (const uint8 *) VARDATA(tr.input_digest), WF_HASH_LEN);
		WfJbText(&b, "input_digest", pstrdup(hex));
	}
	WfAppendEvent(&tr, WF_EV_RUN_STARTED, NULL, 0, WfJbEnd(&b));
	if (def->run_timeout > 0)
		WfSetTimer(&tr, WF_TIMER_RUN_TIMEOUT, NULL, 1, now + def->run_timeout, NULL);
	WfAdvance(&tr, -1);

	/* write run row, events, first task and timers */
	if (WfTransitionWriteNew(&tr, defname, version, input, key))
	{
		result = palloc(sizeof(pg_uuid_t));
		memcpy(result, &run.run_id, sizeof(pg_uuid_t));
		WfNoteRunChange(run.tenant_id, &run.run_id, "started");
		/* the events sent to its keys before it declared them (events.c) */
		if (def->n_correlation > 0)
			WfDeliverBufferedEvents(def, &run.run_id, tenant,
									WfWriteCorrelations(def, &run, input, now));
	}
	else
		result = existing_run(tenant, defname, key, plain_input,
							  PG_ARGISNULL(3) ? 0 : PG_GETARG_INT32(3), !PG_ARGISNULL(3), true);

done:
	/* copy the result out of SPI memory before disconnecting */
	{
		pg_uuid_t  *out = SPI_palloc(sizeof(pg_uuid_t));

		memcpy(out, result, sizeof(pg_uuid_t));
		result = out;
	}
	WfApiEnd();
	PG_RETURN_UUID_P(result);
}

/*
 * wfengine_run_status is wf.run_status(run): the status of the run.
 */
Datum
wfengine_run_status(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(0);
	Datum		values[2];
	text	   *result;

	WfApiBegin();
	values[0] = UUIDPGetDatum(run_id);
	values[1] = CStringGetTextDatum(WfCurrentTenant());
	if (WfExecPlan(WF_PLAN_RUN_STATUS, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		WfUnknownRun(run_id);
	result = (text *) SPI_palloc(VARSIZE_ANY(DatumGetPointer(WfGetDatumNotNull(0, 1))));
	memcpy(result, DatumGetPointer(WfGetDatumNotNull(0, 1)),
		   VARSIZE_ANY(DatumGetPointer(WfGetDatumNotNull(0, 1))));
	WfApiEnd();
	PG_RETURN_TEXT_P(result);
}

/*
 * wfengine_terminate_run is wf.terminate_run(run, reason): it ends a
 * running or paused run at once, without compensation.  Its live task is
 * withdrawn (the worker's heartbeat answers cancel_requested and its
 * result is stale), its pending timers and approval tokens are cancelled,
 * and run_terminated records the actor, the reason and the state the run
 * had.  Returns that state.
 */
Datum
wfengine_terminate_run(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id;
	char	   *reason;
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	const char *old_status;
	text	   *result;

	run_id = WfRunArgument(fcinfo);
	reason = WfRequireReason(fcinfo, 1);

	WfApiBegin();
	WfLockRun(run_id, &run);
	if (run.status != WF_RUN_RUNNING && run.status != WF_RUN_PAUSED &&
		!WF_RUN_UNDOING(run.status) && run.status != WF_RUN_COMPENSATION_FAILED)
		WfRefuseRun(run_id, WfRunStatusName(run.status), "terminate",
					"Only running, paused, cancelling, compensating and compensation_failed runs can be terminated.");
	old_status = WfRunStatusName(run.status);
	def = WfDefinitionGet(run.definition_id);
	WfTransitionInit(&tr, &run, def, GetCurrentTimestamp());
	WfTerminateRun(&tr, reason);
	WfTransitionWrite(&tr);
	WfNoteRunChange(run.tenant_id, &run.run_id, "terminated");
	result = (text *) SPI_palloc(VARHDRSZ + strlen(old_status));
	SET_VARSIZE(result, VARHDRSZ + strlen(old_status));
	memcpy(VARDATA(result), old_status, strlen(old_status));
	WfApiEnd();
	PG_RETURN_TEXT_P(result);
}

/*
 * wfengine_update_context is wf.update_context(run, patch, reason): it
 * merges patch into the input of a running or paused run ($.input of its
 * context; a null value removes a key), so that steps scheduled from now
 * on map the new values.  context_updated records the actor, the reason,
 * the patch and the old values of the keys it touched.  Returns the new
 * input.
 */
Datum
wfengine_update_context(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id;
	Jsonb	   *patch;
	char	   *reason;
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	WfJsonBuilder b;
	WfJsonBuilder ob;
	Jsonb	   *input;
	Jsonb	   *result;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("run and patch must not be null")));
	reason = WfRequireReason(fcinfo, 2);
	run_id = PG_GETARG_UUID_P(0);
	patch = PG_GETARG_JSONB_P(1);
	if (!JB_ROOT_IS_OBJECT(patch) || JB_ROOT_IS_SCALAR(patch) || JB_ROOT_COUNT(patch) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a context patch must be a non-empty JSON object"),
				 errhint("Give the input keys to set, e.g. '{\"address\": \"...\"}'; a null value removes a key.")));
	WfCheckPayloadSize(patch, "context patch", "a run");
	WfRefuseSealedLookalikes(patch, "context patch", "a run");

	WfApiBegin();
	WfLockRun(run_id, &run);
	if (run.status != WF_RUN_RUNNING && run.status != WF_RUN_PAUSED &&
		run.status != WF_RUN_FAILED)
		WfRefuseRun(run_id, WfRunStatusName(run.status), "update the context of",
					"Only running, paused and failed runs can be changed (a failed run to be retried with wf.retry_step()).");
	WfCheckEventQuota(&run, "The run takes no more context updates.");
	def = WfDefinitionGet(run.definition_id);
	WfTransitionInit(&tr, &run, def, GetCurrentTimestamp());
	/* new values of sensitive input keys are sealed like the input was */
	if (def->n_sensitive_input > 0)
		patch = WfSealKeys(run.tenant_id, patch, def->sensitive_input, def->n_sensitive_input);

	/* the old values of the keys the patch touches (null: absent) */
	input = WfJsonbGetJsonb(run.context, "input");
	WfJbBegin(&ob);
	it = JsonbIteratorInit(&patch->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			char	   *key = pnstrdup(v.val.string.val, v.val.string.len);

			WfJbJsonb(&ob, key, input && JB_ROOT_IS_OBJECT(input) ?
					  WfJsonbGetJsonb(input, key) : NULL);
		}
	}
	WfJbBegin(&b);
	WfJbText(&b, "reason", reason);
	WfJbJsonb(&b, "patch", patch);
	WfJbJsonb(&b, "old", WfJbEnd(&ob));
	WfAppendEvent(&tr, WF_EV_CONTEXT_UPDATED, NULL, 0, WfJbEnd(&b));
	WfTransitionWrite(&tr);

	result = WfJsonbGetJsonb(run.context, "input");
	{
		Jsonb	   *out = (Jsonb *) SPI_palloc(VARSIZE(result));

		memcpy(out, result, VARSIZE(result));
		result = out;
	}
	WfApiEnd();
	PG_RETURN_JSONB_P(result);
}

/*
 * wfengine_signal is wf.signal(run, name, payload, event_id): it delivers
 * a named signal to a run (WfDeliverSignal) and returns the outcome.
 */
Datum
wfengine_signal(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id;
	char	   *name;
	Jsonb	   *payload;
	char	   *event_id;
	const char *outcome;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("run and name must not be null")));
	run_id = PG_GETARG_UUID_P(0);
	name = WfTextArg(fcinfo, 1, "signal name", WF_ARG_SIGNAL);
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a signal name must have 1 to %d bytes", WF_ARG_MAX_SIGNAL)));
	WfSignalPayloadAndId(fcinfo, 2, name, &payload, &event_id);

	WfApiBegin();
	outcome = WfDeliverSignal(run_id, name, payload, event_id, NULL, 0);
	WfApiEnd();
	PG_RETURN_TEXT_P(cstring_to_text(outcome));
}
