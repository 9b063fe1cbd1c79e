/*-------------------------------------------------------------------------
 *
 * replay.c
 *	  Rebuilding a run from its history and checking it against the
 *	  stored snapshot.
 *
 * wf.verify_run reads the run's events in seq order and checks, for each
 * one, that seq is the next number, that the stored hash equals the hash
 * recomputed from the event's fields and the previous hash, and that the
 * reducer (WfApplyEvent, the same code the live transitions use) accepts
 * it.  The state it rebuilds must then equal the snapshot in wf.runs
 * column by column, the snapshot's last_hash must be the hash of the
 * last event (so a removed tail is noticed), and the live task rows must
 * be exactly the one task the state says is current.  The first
 * discrepancy is reported as a WARNING (the run id in its context line)
 * and the function returns false.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/replay.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "spi_util.h"
#include "state.h"
#include "wfengine.h"

PG_FUNCTION_INFO_V1(wfengine_verify_run);

/* forward declarations */
static const char *replay_events(WfRunState *state, const WfRunState *stored);
static const char *compare_snapshots(const WfRunState *rebuilt,
									 const WfRunState *stored);
static bool jsonb_equal(Jsonb *a, Jsonb *b);
static bool str_equal(const char *a, const char *b);

static bool
jsonb_equal(Jsonb *a, Jsonb *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return compareJsonbContainers(&a->root, &b->root) == 0;
}

static bool
str_equal(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * replay_events rebuilds state from the stored events of the run and
 * returns NULL, or the first problem found.
 */
static const char *
replay_events(WfRunState *state, const WfRunState *stored)
{
	Datum		values[1];
	uint64		n;
	uint64		i;

	memset(state, 0, sizeof(WfRunState));
	memcpy(&state->run_id, &stored->run_id, sizeof(pg_uuid_t));
	state->tenant_id = stored->tenant_id;

	values[0] = UUIDPGetDatum(&stored->run_id);
	n = WfExecPlan(WF_PLAN_EVENTS_GET, values, NULL, true, 0, SPI_OK_SELECT);
	if (n == 0)
		return "the run has no events";

	for (i = 0; i < n; i++)
	{
		WfEvent		ev;
		bool		isnull;
		Datum		d;
		char	   *type;
		char	   *tenant;
		bytea	   *stored_hash;
		const char *problem;

		memset(&ev, 0, sizeof(ev));
		ev.seq = DatumGetInt32(WfGetDatumNotNull(i, 1));
		type = WfGetTextOrNull(i, 2);
		ev.type = WfEventTypeFromName(type);
		ev.step = WfGetTextOrNull(i, 3);
		d = WfGetDatum(i, 4, &isnull);
		ev.attempt = isnull ? 0 : DatumGetInt32(d);
		ev.payload = DatumGetJsonbP(WfGetDatumNotNull(i, 5));
		ev.actor = WfGetTextOrNull(i, 6);
		ev.created_at = DatumGetTimestampTz(WfGetDatumNotNull(i, 7));
		stored_hash = DatumGetByteaPP(WfGetDatumNotNull(i, 8));
		tenant = WfGetTextOrNull(i, 9);

		if (ev.seq != state->seq + 1)
			return psprintf("event %d follows event %d: the history has a gap",
							ev.seq, state->seq);
		if (ev.type == 0)
			return psprintf("event %d has unknown type \"%s\"", ev.seq, type);
		if (strcmp(tenant, stored->tenant_id) != 0)
			return psprintf("event %d belongs to another tenant", ev.seq);

		WfHashEventFor(state, &ev);
		if (VARSIZE_ANY_EXHDR(stored_hash) != WF_HASH_LEN ||
			memcmp(VARDATA_ANY(stored_hash), ev.hash, WF_HASH_LEN) != 0)
			return psprintf("event %d does not match its hash: the event or one before it was changed",
							ev.seq);

		problem = WfApplyEvent(state, &ev);
		if (problem != NULL)
			return psprintf("event %d cannot be replayed: %s", ev.seq, problem);
	}
	return NULL;
}

/*
 * compare_snapshots returns NULL when the rebuilt state equals the stored
 * snapshot, or the first column that differs.
 */
static const char *
compare_snapshots(const WfRunState *rebuilt, const WfRunState *stored)
{
	if (rebuilt->seq != stored->seq)
		return psprintf("the snapshot is at seq %d, the history at seq %d",
						stored->seq, rebuilt->seq);
	if (memcmp(rebuilt->last_hash, stored->last_hash, WF_HASH_LEN) != 0)
		return "the snapshot's last_hash is not the hash of the last event";
	if (rebuilt->status != stored->status)
		return psprintf("the snapshot says status \"%s\", the history \"%s\"",
						WfRunStatusName(stored->status), WfRunStatusName(rebuilt->status));
	if (rebuilt->definition_id != stored->definition_id)
		return "the snapshot's definition differs from the history's";
	if (!str_equal(rebuilt->current_step, stored->current_step))
		return psprintf("the snapshot's current step is \"%s\", the history's \"%s\"",
						stored->current_step ? stored->current_step : "(none)",
						rebuilt->current_step ? rebuilt->current_step : "(none)");
	if (rebuilt->current_attempt != stored->current_attempt ||
		rebuilt->current_task != stored->current_task)
		return "the snapshot's current attempt or task differs from the history's";
	if (!jsonb_equal(rebuilt->context, stored->context))
		return "the snapshot's context differs from the history's";
	if (!jsonb_equal(rebuilt->output, stored->output))
		return "the snapshot's output differs from the history's";
	if (rebuilt->finished != stored->finished ||
		rebuilt->finished_at != stored->finished_at)
		return "the snapshot's finished_at differs from the history's";
	if (rebuilt->updated_at != stored->updated_at)
		return "the snapshot's updated_at differs from the history's";
	return NULL;
}

/*
 * wfengine_verify_run is wf.verify_run(run): true when the history is an
 * intact hash chain that replays to exactly the stored snapshot.
 */
Datum
wfengine_verify_run(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(0);
	Datum		values[2];
	WfRunState	stored;
	WfRunState	rebuilt;
	const char *problem;
	uint64		n;

	WfApiBegin();
	values[0] = UUIDPGetDatum(run_id);
	values[1] = CStringGetTextDatum(WfCurrentTenant());
	if (WfExecPlan(WF_PLAN_RUN_GET, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		WfUnknownRun(run_id);
	WfRunStateFromTuple(&stored, 0);

	problem = replay_events(&rebuilt, &stored);
	if (problem == NULL)
		problem = compare_snapshots(&rebuilt, &stored);
	if (problem == NULL)
	{
		/* the live task rows must be exactly the current task */
		values[0] = UUIDPGetDatum(run_id);
		n = WfExecPlan(WF_PLAN_TASK_LIVE, values, NULL, true, 0, SPI_OK_SELECT);
		if (n > 1)
			problem = psprintf("the run has %d live task attempts", (int) n);
		else if (n == 1 && DatumGetInt64(WfGetDatumNotNull(0, 1)) != rebuilt.current_task)
			problem = "the live task attempt is not the one the history scheduled last";
		else if (n == 0 && rebuilt.current_task != 0)
			problem = "the history has a live task attempt that wf.tasks does not";
	}

	if (problem != NULL)
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("run does not match its history"),
				 errdetail("%s.", problem),
				 errcontext("run %s",
							DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(run_id))))));

	WfApiEnd();
	PG_RETURN_BOOL(problem == NULL);
}
