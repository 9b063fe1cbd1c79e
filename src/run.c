/*-------------------------------------------------------------------------
 *
 * run.c
 *	  Starting runs and reading their status; the run commands
 *	  wf.terminate_run and wf.update_context, and wf.signal.
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
#include "command.h"
#include "correlate.h"
#include "crypto.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "notify.h"
#include "quota.h"
#include "run.h"
#include "runstore.h"
#include "sensitive.h"
#include "spi_util.h"
#include "state.h"
#include "step_wait.h"
#include "tenant.h"
#include "transition.h"

PG_FUNCTION_INFO_V1(wfengine_start_run);
PG_FUNCTION_INFO_V1(wfengine_run_status);
PG_FUNCTION_INFO_V1(wfengine_run_context);
PG_FUNCTION_INFO_V1(wfengine_terminate_run);
PG_FUNCTION_INFO_V1(wfengine_update_context);
PG_FUNCTION_INFO_V1(wfengine_signal);

/* the statements of run.c (registered by _PG_init: WfRunPlans) */
enum
{
	PLAN_RUN_BY_KEY = 0,
	PLAN_RUN_STATUS
};

static const WfPlanSpec run_plan_specs[] = {
	[PLAN_RUN_BY_KEY] = {
		"run_by_key",
		"SELECT r.run_id, r.definition_name, r.input, r.definition_version, r.definition_id,"
		" r.input_digest FROM wf.runs r "
		"WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 "
		"AND r.idempotency_key OPERATOR(pg_catalog.=) $2",
		2, {TEXTOID, TEXTOID}
	},
	[PLAN_RUN_STATUS] = {
		"run_status",
		"SELECT r.status FROM wf.runs r "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND r.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {UUIDOID, TEXTOID}
	},
};

WfPlanTable WfRunPlans = WF_PLAN_TABLE("run", run_plan_specs);

/* the columns of run_by_key */
enum
{
	RUN_BY_KEY_COL_RUN_ID = 1,
	RUN_BY_KEY_COL_DEFINITION_NAME,
	RUN_BY_KEY_COL_INPUT,
	RUN_BY_KEY_COL_DEFINITION_VERSION,
	RUN_BY_KEY_COL_DEFINITION_ID,
	RUN_BY_KEY_COL_INPUT_DIGEST
};




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
	if (WfPlanExec(&WfRunPlans, PLAN_RUN_BY_KEY, values, NULL, false, 1, SPI_OK_SELECT) != 1 &&
		!must_exist)
		return NULL;
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not find the run started with idempotency key \"%s\"", key),
				 errhint("The run was started by a concurrent transaction that is not visible to this snapshot; retry the transaction.")));

	old_def = WfGetTextOrNull(0, RUN_BY_KEY_COL_DEFINITION_NAME);
	old_input = DatumGetJsonbPCopy(WfGetDatumNotNull(0, RUN_BY_KEY_COL_INPUT));
	old_version = DatumGetInt32(WfGetDatumNotNull(0, RUN_BY_KEY_COL_DEFINITION_VERSION));
	old_definition_id = DatumGetInt64(WfGetDatumNotNull(0, RUN_BY_KEY_COL_DEFINITION_ID));
	d = WfGetDatum(0, RUN_BY_KEY_COL_INPUT_DIGEST, &isnull);
	if (!isnull)
		old_digest = DatumGetByteaPCopy(d);
	run_id = palloc(sizeof(pg_uuid_t));
	memcpy(run_id, DatumGetUUIDP(WfGetDatumNotNull(0, RUN_BY_KEY_COL_RUN_ID)), sizeof(pg_uuid_t));

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

/* what wf.start_run was asked for */
typedef struct StartRequest
{
	char	   *defname;
	Jsonb	   *input;			/* as given: plain */
	char	   *key;			/* idempotency key, or NULL */
	bool		version_given;
	int32		version;		/* the version asked for, when given */
	char	   *traceparent;	/* W3C trace context, or NULL */
} StartRequest;

/*
 * check_traceparent refuses a traceparent that is not exactly a W3C
 * version 00 one: "00-<32 hex>-<16 hex>-<2 hex>", lower case, with
 * neither the trace id nor the parent id all zeros.
 */
static void
check_traceparent(const char *tp)
{
	static const int field_len[4] = {2, 32, 16, 2};
	const char *p = tp;
	bool		ok = strlen(tp) == 55 && strncmp(tp, "00-", 3) == 0;
	int			f;

	for (f = 0; ok && f < 4; f++)
	{
		bool		nonzero = false;
		int			i;

		for (i = 0; i < field_len[f]; i++, p++)
		{
			if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
				ok = false;
			else if (*p != '0')
				nonzero = true;
		}
		if ((f == 1 || f == 2) && !nonzero)
			ok = false;
		if (f < 3 && *p++ != '-')
			ok = false;
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid traceparent \"%s\"", tp),
				 errdetail("A traceparent is \"00-\", 32 lower-case hex digits of trace id, \"-\", 16 of parent id, \"-\" and 2 of flags; neither id may be all zeros."),
				 errhint("Pass the traceparent header of the W3C Trace Context as the caller received or made it, or NULL.")));
}

/*
 * check_start_request refuses a start request that wf.start_run refuses
 * (its arguments' lengths were checked as they were read).
 */
static void
check_start_request(const StartRequest *req)
{
	if (req->key != NULL && req->key[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idempotency key must have 1 to %d bytes", WF_ARG_MAX_KEY)));
	if (req->traceparent != NULL)
		check_traceparent(req->traceparent);
	WfCheckPayloadSize(req->input, "input",
					   psprintf("a run of definition \"%s\"", req->defname));
	WfCheckRunInput(req->input, "input");
	WfRefuseSealedLookalikes(req->input, "input",
							 psprintf("a run of definition \"%s\"", req->defname));
}

/*
 * start_arguments reads and checks the arguments of wf.start_run.
 */
static void
start_arguments(FunctionCallInfo fcinfo, StartRequest *req)
{
	WfRequireArg(fcinfo, 0, "definition name", NULL);
	WfRequireArg(fcinfo, 1, "run input", "Pass '{}' for a run without input.");
	req->defname = WfTextArg(fcinfo, 0, "definition name", WF_ARG_NAME);
	req->input = PG_GETARG_JSONB_P(1);
	req->key = WfTextArg(fcinfo, 2, "idempotency key", WF_ARG_KEY);
	req->version_given = !PG_ARGISNULL(3);
	req->version = req->version_given ? PG_GETARG_INT32(3) : 0;
	/* the 0.1.0 definition of wf.start_run has no fifth argument */
	req->traceparent = PG_NARGS() > 4 ? WfTextArg(fcinfo, 4, "traceparent", WF_ARG_KEY) : NULL;
	check_start_request(req);
}

/*
 * pin_version finds the version of the definition a new run follows: the
 * latest, or the one asked for.  It returns its definition id and sets
 * *version.
 */
static int64
pin_version(const char *tenant, const StartRequest *req, int32 *version)
{
	int64		definition_id;

	if (!req->version_given)
	{
		if (!WfDefinitionLatest(tenant, req->defname, &definition_id, version))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("definition \"%s\" does not exist", req->defname),
					 errhint("Publish it first with wf.publish_definition().")));
		return definition_id;
	}
	if (!WfDefinitionVersion(tenant, req->defname, req->version, &definition_id))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("version %d of definition \"%s\" does not exist",
						req->version, req->defname)));
	*version = req->version;
	return definition_id;
}

/*
 * run_started_payload returns the payload of the new run's run_started
 * event.
 */
static Jsonb *
run_started_payload(const WfTransition *tr, const StartRequest *req,
					int64 definition_id, int32 version, Jsonb *input)
{
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbText(&b, "definition", req->defname);
	WfJbInt(&b, "version", version);
	WfJbInt(&b, "definition_id", definition_id);
	WfJbJsonb(&b, "input", input);
	WfJbText(&b, "idempotency_key", req->key);
	if (tr->input_digest != NULL)
	{
		char		hex[WF_HASH_LEN * 2 + 1];

		sodium_bin2hex(hex, sizeof(hex), (const uint8 *) VARDATA(tr->input_digest), WF_HASH_LEN);
		WfJbText(&b, "input_digest", pstrdup(hex));
	}
	if (req->traceparent != NULL)
		WfJbText(&b, "traceparent", req->traceparent);
	return WfJbEnd(&b);
}

/*
 * start_new_run builds the new run of definition_id in memory (run_started,
 * its run timeout, then entering the first step) and writes it: the run
 * row, its events, first task and timers, and then the correlation keys it
 * declares, taking the events buffered for them.  It returns the run's id,
 * or NULL when a run with the same idempotency key exists (and then wrote
 * nothing).
 */
static pg_uuid_t *
start_new_run(const char *tenant, const StartRequest *req, int64 definition_id,
			  int32 version, const WfLeaseOffer *offer, WfScheduledTask *first)
{
	WfDefinition *def = WfDefinitionGet(definition_id);
	Jsonb	   *input = req->input;
	TimestampTz now = GetCurrentTimestamp();
	WfRunState	run;
	WfTransition tr;
	pg_uuid_t  *result;

	if (def->n_sensitive_input > 0)
		input = WfSealKeys(tenant, input, def->sensitive_input, def->n_sensitive_input);

	/* build the run in memory: run_started, then the first step */
	memset(&run, 0, sizeof(run));
	WfNewRunId(&run.run_id);
	run.tenant_id = (char *) tenant;
	WfTransitionInit(&tr, &run, def, now);
	tr.offer = offer;
	/* what a repeated start compares with, without opening sealed values */
	if (req->key != NULL)
		tr.input_digest = WfInputDigest(tenant, &run.run_id, req->input);
	WfAppendEvent(&tr, WF_EV_RUN_STARTED, NULL, 0,
				  run_started_payload(&tr, req, definition_id, version, input));
	if (def->run_timeout > 0)
		WfSetTimer(&tr, WF_TIMER_RUN_TIMEOUT, NULL, 1, now + def->run_timeout, NULL);
	WfAdvance(&tr, -1);

	/* write run row, events, first task and timers */
	if (!WfTransitionWriteNew(&tr, req->defname, version, input, req->key))
		return NULL;
	if (first != NULL)
		WfScheduledTaskOf(&tr, first);
	result = palloc(sizeof(pg_uuid_t));
	memcpy(result, &run.run_id, sizeof(pg_uuid_t));
	WfNoteRunChange(run.tenant_id, &run.run_id, "started");
	/* the events sent to its keys before it declared them (events.c) */
	if (def->n_correlation > 0)
		WfDeliverBufferedEvents(def, &run.run_id, tenant,
								WfWriteCorrelations(def, &run, input, now));
	return result;
}

/*
 * start_run starts a run of req (or finds the one its idempotency key
 * started) and returns its id; with an offer (eager start), the new run's
 * first task attempt is written leased under it where it can be, and
 * *first tells which attempt the start scheduled (task_id 0: none, also
 * when the run existed).  Runs inside the caller's API call.
 */
static pg_uuid_t *
start_run(const char *tenant, const StartRequest *req, const WfLeaseOffer *offer,
		  WfScheduledTask *first)
{
	int64		definition_id;
	int32		version;
	pg_uuid_t  *result = NULL;

	if (first != NULL)
		memset(first, 0, sizeof(WfScheduledTask));
	definition_id = pin_version(tenant, req, &version);

	/*
	 * A start quota applies to new runs: a repeated start of a run that
	 * exists returns it, even at the limit.
	 */
	if (req->key != NULL && WfStartQuotaSet(tenant))
		result = existing_run(tenant, req->defname, req->key, req->input, req->version,
							  req->version_given, false);
	if (result == NULL)
	{
		WfCheckStartQuota(tenant);
		result = start_new_run(tenant, req, definition_id, version, offer, first);
	}
	if (result == NULL)
		result = existing_run(tenant, req->defname, req->key, req->input, req->version,
							  req->version_given, true);
	return result;
}

/*
 * wfengine_start_run is wf.start_run(definition, input, idempotency_key,
 * version): it starts a run of the latest (or the given) version and
 * returns its id.
 */
Datum
wfengine_start_run(PG_FUNCTION_ARGS)
{
	StartRequest req;
	pg_uuid_t  *result;

	start_arguments(fcinfo, &req);
	WfApiBegin();
	result = start_run(WfCurrentTenant(), &req, NULL, NULL);
	PG_RETURN_DATUM(WfApiReturn(UUIDPGetDatum(result), false, UUID_LEN));
}

/*
 * WfStartRunEager is the start of wf.start_and_claim (batch.c): a run of
 * the latest version of defname with input and key (NULL: none), as
 * wf.start_run starts it, its first task attempt written leased under
 * offer when it can be (runstore.c: a task claimable now, for a tenant
 * that does not limit its tasks in flight; offer->queue NULL: of any
 * queue).  Sets *first to the attempt the start scheduled (task_id 0:
 * none, also when the key found an existing run) in the caller's memory,
 * and returns the run's id there.  An API call of its own.
 */
pg_uuid_t *
WfStartRunEager(char *defname, Jsonb *input, char *key, const WfLeaseOffer *offer,
				WfScheduledTask *first)
{
	StartRequest req;
	pg_uuid_t  *result;
	pg_uuid_t  *copy;

	memset(&req, 0, sizeof(req));
	req.defname = defname;
	req.input = input;
	req.key = key;
	check_start_request(&req);
	WfApiBegin();
	result = start_run(WfCurrentTenant(), &req, offer, first);
	copy = SPI_palloc(sizeof(pg_uuid_t));
	memcpy(copy, result, sizeof(pg_uuid_t));
	WfApiEnd();
	return copy;
}

/*
 * wfengine_run_status is wf.run_status(run): the status of the run.
 */
Datum
wfengine_run_status(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(0);
	Datum		values[2];

	WfApiBegin();
	values[0] = UUIDPGetDatum(run_id);
	values[1] = CStringGetTextDatum(WfCurrentTenant());
	if (WfPlanExec(&WfRunPlans, PLAN_RUN_STATUS, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		WfUnknownRun(run_id);
	PG_RETURN_DATUM(WfApiReturn(WfGetDatumNotNull(0, 1), false, -1));
}

/*
 * wfengine_run_context is wf.run_context(run): the run's context whole, as
 * the definition's paths read it: with the run's input where the stored
 * context leaves it out, and the step outputs kept in the history only
 * (WF_OUTPUT_REF_MIN bytes or more) put back.
 */
Datum
wfengine_run_context(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(0);
	WfRunState	run;

	WfApiBegin();
	WfReadRun(run_id, &run);
	PG_RETURN_DATUM(WfApiReturn(JsonbPGetDatum(WfRunContextWhole(&run)), false, -1));
}

/* the commands of this file: the statuses each applies to, its refusals */
static const WfRunCommandSpec terminate_spec = {
	.what = "terminate",
	.applies_to = WF_ST(RUNNING) | WF_ST(PAUSED) | WF_ST(CANCELLING) |
	WF_ST(COMPENSATING) | WF_ST(COMPENSATION_FAILED),
	.hint = "Only running, paused, cancelling, compensating and compensation_failed runs can be terminated.",
};
static const WfRunCommandSpec update_context_spec = {
	.what = "update the context of",
	.applies_to = WF_ST(RUNNING) | WF_ST(PAUSED) | WF_ST(FAILED),
	.hint = "Only running, paused and failed runs can be changed (a failed run to be retried with wf.retry_step()).",
	.quota_hint = "The run takes no more context updates.",
};

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
	WfRunCommand cmd;

	WfRunCommandBeginCall(&cmd, fcinfo, 1, &terminate_spec);
	WfTerminateRun(&cmd.tr, cmd.reason);
	WfRunCommandWrite(&cmd, "terminated");
	PG_RETURN_DATUM(WfApiReturn(CStringGetTextDatum(cmd.old_status), false, -1));
}

/*
 * old_values returns the values the keys of patch have in input (a null
 * for a key input does not have).
 */
static Jsonb *
old_values(Jsonb *input, Jsonb *patch)
{
	WfJsonBuilder ob;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

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
	return WfJbEnd(&ob);
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
	WfRunCommand cmd;
	WfJsonBuilder b;
	Jsonb	   *old;

	WfRequireArgs(fcinfo, 2, "run and patch");
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

	WfRunCommandBegin(&cmd, run_id, reason, &update_context_spec);
	/* new values of sensitive input keys are sealed like the input was */
	if (cmd.def->n_sensitive_input > 0)
		patch = WfSealKeys(cmd.run.tenant_id, patch, cmd.def->sensitive_input,
						   cmd.def->n_sensitive_input);

	old = old_values(WfJsonbGetJsonb(cmd.run.context, "input"), patch);
	WfJbBegin(&b);
	WfJbText(&b, "reason", reason);
	WfJbJsonb(&b, "patch", patch);
	WfJbJsonb(&b, "old", old);
	WfAppendEvent(&cmd.tr, WF_EV_CONTEXT_UPDATED, NULL, 0, WfJbEnd(&b));
	WfRunCommandWrite(&cmd, NULL);
	PG_RETURN_DATUM(WfApiReturn(JsonbPGetDatum(WfJsonbGetJsonb(cmd.run.context, "input")),
								false, -1));
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

	WfRequireArgs(fcinfo, 2, "run and name");
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
