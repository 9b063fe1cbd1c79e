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
 * last event (so a removed tail is noticed), the run's immutable columns
 * (definition, version, input, idempotency key, input digest, start
 * time) must be the ones run_started recorded, and wf.tasks must hold
 * exactly the attempts the history scheduled, each in the state and with
 * the result the history gives it; the only live attempt is the current
 * one.  The first discrepancy is reported as a WARNING (the run id in its
 * context line) and the function returns false.
 *
 * wf.history reads the same events in the same order.  The hash covers
 * each payload as stored; since 0.3.0 a task_scheduled event stores only
 * what the run's definition and the event do not give (transition.c,
 * WfScheduleTask), and wf.history puts the rest back (WfHistoryFillEvent):
 * the definition in force (run_started, run_migrated) gives the queue and
 * activity, the run's input as it stands (run_started, context_updated)
 * the input, the event its time and, with the run and visit, the default
 * idempotency key.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/replay.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sodium.h>

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "crypto.h"
#include "definition.h"
#include "jsonutil.h"
#include "replay.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "tenant.h"
#include "transition.h"
#include "version.h"

PG_FUNCTION_INFO_V1(wfengine_verify_run);
PG_FUNCTION_INFO_V1(wfengine_verify_run_anchor);
PG_FUNCTION_INFO_V1(wfengine_chain_heads);

/* the statements of replay.c (registered by _PG_init: WfReplayPlans) */
enum
{
	PLAN_TASKS_OF_RUN = 0,
	PLAN_RUN_IDENTITY,
	PLAN_EVENTS_GET,
	PLAN_EVENTS_GET_02,
	PLAN_CHAIN_HEADS,
	PLAN_HISTORY_RUN,
	PLAN_HISTORY_EVENTS
};

static const WfPlanSpec replay_plan_specs[] = {
	/*
	 * Sorted by an expression, not by task_id itself: ordered by task_id the
	 * planner walked tasks_pkey from end to end filtering on run_id whenever
	 * it took wf.tasks for small, and since completed attempts are deleted
	 * that index holds a dead entry per step until vacuum (and for as long
	 * as any snapshot is held): 54 ms a run on a shard of a million runs
	 * (wf.verify_partition of a move, 15 hours), 0.4 ms through
	 * tasks_attempt_key and a sort of the run's few rows.  The per-run
	 * statements are lookups (spi_util.c): a kept plan made while wf.tasks
	 * was tiny read the whole table for every run, 4 ms a run once the
	 * table had grown (regress 401_lookup_plans).
	 */
	[PLAN_TASKS_OF_RUN] = {
		"tasks_of_run",
		"SELECT t.task_id, t.step, t.attempt, t.status, t.fence, t.output, t.error "
		"FROM wf.tasks t WHERE t.run_id OPERATOR(pg_catalog.=) $1 "
		"ORDER BY t.task_id OPERATOR(pg_catalog.+) 0",
		1, {UUIDOID}, false, true
	},
	[PLAN_RUN_IDENTITY] = {
		"run_identity",
		"SELECT r.definition_name, r.definition_version, r.input, r.idempotency_key, r.created_at,"
		" pg_catalog.encode(r.input_digest, 'hex') "
		"FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		1, {UUIDOID}, false, true
	},
	[PLAN_EVENTS_GET] = {
		"events_get",
		"SELECT e.seq, e.type, e.step, e.attempt, e.payload, e.actor, e.created_at,"
		" e.hash, e.tenant_id, e.more FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 ORDER BY e.seq",
		1, {UUIDOID}, false, true
	},
	/* the same on a schema not yet updated to 0.3.0: no column more */
	[PLAN_EVENTS_GET_02] = {
		"events_get_02",
		"SELECT e.seq, e.type, e.step, e.attempt, e.payload, e.actor, e.created_at,"
		" e.hash, e.tenant_id, NULL::pg_catalog.jsonb FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 ORDER BY e.seq",
		1, {UUIDOID}, false, true
	},
	[PLAN_CHAIN_HEADS] = {
		"chain_heads",
		/*
		 * the hash of the run's last event is that of its last row, which
		 * holds it (column more) when it rides along with the one before
		 */
		"SELECT r.run_id, r.seq, e.hash FROM wf.runs r CROSS JOIN LATERAL"
		" (SELECT x.hash FROM wf.events x WHERE x.run_id OPERATOR(pg_catalog.=) r.run_id"
		"  AND x.seq OPERATOR(pg_catalog.<=) r.seq ORDER BY x.seq DESC LIMIT 1) e"
		" WHERE r.tenant_id OPERATOR(pg_catalog.=) $1 ORDER BY r.run_id",
		1, {TEXTOID}
	},
	[PLAN_HISTORY_RUN] = {
		"history_run",
		"SELECT 1 FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) $1"
		" AND r.tenant_id OPERATOR(pg_catalog.=) $2",
		2, {UUIDOID, TEXTOID}, false, true
	},
	[PLAN_HISTORY_EVENTS] = {
		"history_events",
		"SELECT e.seq, e.type, e.step, e.attempt, e.payload, e.actor, e.created_at,"
		" e.hash, e.more FROM wf.events e "
		"WHERE e.run_id OPERATOR(pg_catalog.=) $1 AND e.tenant_id OPERATOR(pg_catalog.=) $2"
		" ORDER BY e.seq",
		2, {UUIDOID, TEXTOID}, false, true
	},
};

WfPlanTable WfReplayPlans = WF_PLAN_TABLE("replay", replay_plan_specs);

/* the columns of chain_heads */
enum
{
	CHAIN_HEADS_COL_RUN_ID = 1,
	CHAIN_HEADS_COL_SEQ,
	CHAIN_HEADS_COL_HASH
};

/* the columns of tasks_of_run */
enum
{
	TASKS_OF_RUN_COL_TASK_ID = 1,
	TASKS_OF_RUN_COL_STEP,
	TASKS_OF_RUN_COL_ATTEMPT,
	TASKS_OF_RUN_COL_STATUS,
	TASKS_OF_RUN_COL_FENCE,
	TASKS_OF_RUN_COL_OUTPUT,
	TASKS_OF_RUN_COL_ERROR
};

/* the columns of run_identity */
enum
{
	RUN_IDENTITY_COL_DEFINITION_NAME = 1,
	RUN_IDENTITY_COL_DEFINITION_VERSION,
	RUN_IDENTITY_COL_INPUT,
	RUN_IDENTITY_COL_IDEMPOTENCY_KEY,
	RUN_IDENTITY_COL_CREATED_AT,
	RUN_IDENTITY_COL_INPUT_DIGEST
};

/* the columns of events_get */
enum
{
	EVENTS_GET_COL_SEQ = 1,
	EVENTS_GET_COL_TYPE,
	EVENTS_GET_COL_STEP,
	EVENTS_GET_COL_ATTEMPT,
	EVENTS_GET_COL_PAYLOAD,
	EVENTS_GET_COL_ACTOR,
	EVENTS_GET_COL_CREATED_AT,
	EVENTS_GET_COL_HASH,
	EVENTS_GET_COL_TENANT_ID,
	EVENTS_GET_COL_MORE
};


/* an exported head of the run's chain the history must still extend */
typedef struct Anchor
{
	int32		seq;
	uint8		hash[WF_HASH_LEN];
	bool		signed_ok;		/* its signature was checked and is good */
	const char *problem;		/* set when its signature is bad */
} Anchor;

/* what the history says about one task attempt */
typedef struct ExpectedTask
{
	int64		task_id;
	char	   *step;
	int32		attempt;
	char		outcome;		/* 'l' live, 'c' completed, 'f' failed, 'x' cancelled */
	bool		held;			/* the result is held for a paused run: still live */
	bool		rowless;		/* completed by task_completed: its row may be gone */
	int64		fence;			/* of the accepted result */
	Jsonb	   *result;			/* output or error of the accepted result */
} ExpectedTask;

/* what replay collects besides the snapshot */
typedef struct ReplayLog
{
	Jsonb	   *started;		/* payload of run_started */
	int32		version;		/* of run_started, or of the last run_migrated */
	TimestampTz started_at;
	int			ntasks;
	int			maxtasks;
	ExpectedTask *tasks;
	/* the output each event records for its step, by seq (NULL: none) */
	Jsonb	  **outputs;
	int32		maxseq;
} ReplayLog;

/* forward declarations */
static const char *replay_events(WfRunState *state, const WfRunState *stored,
								 ReplayLog *log, const Anchor *anchor);
static void log_event(ReplayLog *log, const WfEvent *ev);
static Jsonb **repalloc0_outputs(Jsonb **outputs, int32 oldmax, int32 newmax);
static const char *check_identity(const WfRunState *stored, ReplayLog *log);
static const char *check_tasks(const WfRunState *stored, ReplayLog *log);
static const char *whole_context(Jsonb *context, const ReplayLog *log,
								 Jsonb **whole);
static const char *compare_snapshots(const WfRunState *rebuilt,
									 const WfRunState *stored, const ReplayLog *log);
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
/*
 * log_event records what an event says about the run's identity and its
 * task attempts.
 */
static void
log_event(ReplayLog *log, const WfEvent *ev)
{
	ExpectedTask *t = NULL;
	int64		task_id;
	int			i;

	/* a step output, which a snapshot's context may refer to (state.c) */
	if (ev->seq > log->maxseq)
	{
		int32		newmax = Max(ev->seq, Max(64, log->maxseq * 2));

		log->outputs = log->outputs ?
			repalloc0_outputs(log->outputs, log->maxseq, newmax) :
			palloc0(sizeof(Jsonb *) * (newmax + 1));
		log->maxseq = newmax;
	}
	log->outputs[ev->seq] = WfEventOutput(ev);

	if (ev->type == WF_EV_RUN_STARTED)
	{
		log->started = ev->payload;
		log->started_at = ev->created_at;
		log->version = (int32) WfJsonbGetInt(ev->payload, "version", 0);
		return;
	}
	if (ev->type == WF_EV_RUN_MIGRATED)
	{
		log->version = (int32) WfJsonbGetInt(ev->payload, "to_version", 0);
		return;
	}
	if (ev->type != WF_EV_TASK_SCHEDULED && ev->type != WF_EV_TASK_COMPLETED &&
		ev->type != WF_EV_TASK_FAILED && ev->type != WF_EV_TASK_CANCELLED &&
		ev->type != WF_EV_APPROVAL_NOTIFIED && ev->type != WF_EV_RESULT_HELD)
		return;

	task_id = WfJsonbGetInt(ev->payload, "task_id", 0);
	if (ev->type == WF_EV_TASK_SCHEDULED)
	{
		if (log->ntasks >= log->maxtasks)
		{
			log->maxtasks = Max(16, log->maxtasks * 2);
			log->tasks = log->tasks ?
				repalloc(log->tasks, sizeof(ExpectedTask) * log->maxtasks) :
				palloc(sizeof(ExpectedTask) * log->maxtasks);
		}
		t = &log->tasks[log->ntasks++];
		memset(t, 0, sizeof(ExpectedTask));
		t->task_id = task_id;
		t->step = pstrdup(ev->step);
		t->attempt = ev->attempt;
		t->outcome = 'l';
		return;
	}
	for (i = 0; i < log->ntasks; i++)
		if (log->tasks[i].task_id == task_id)
			t = &log->tasks[i];
	if (t == NULL)
		return;					/* the reducer has already refused it */
	if (ev->type == WF_EV_TASK_CANCELLED)
	{
		/*
		 * A result held for a paused run that a terminate or cancel then
		 * withdrew is never applied to the run, but the attempt keeps the
		 * report it was accepted with (wf.tasks says what the worker
		 * reported): completed or failed, no longer live.
		 */
		if (t->held)
			t->held = false;
		else
			t->outcome = 'x';
		return;
	}
	if (ev->type == WF_EV_RESULT_HELD)
	{
		char	   *report = WfJsonbGetText(ev->payload, "report");

		t->held = true;
		t->outcome = (report != NULL && strcmp(report, "failure") == 0) ? 'f' : 'c';
	}
	else
	{
		/* a held result applied on resume keeps its row; others do not */
		t->rowless = ev->type == WF_EV_TASK_COMPLETED && !t->held;
		t->held = false;
		t->outcome = (ev->type == WF_EV_TASK_FAILED) ? 'f' : 'c';
	}
	t->fence = WfJsonbGetInt(ev->payload, "fence", 0);
	t->result = WfJsonbGetJsonb(ev->payload, t->outcome == 'f' ? "error" : "output");
}

/*
 * repalloc0_outputs grows the outputs array of a ReplayLog from seqs
 * 0..oldmax to 0..newmax, the new entries NULL.
 */
static Jsonb **
repalloc0_outputs(Jsonb **outputs, int32 oldmax, int32 newmax)
{
	outputs = repalloc(outputs, sizeof(Jsonb *) * (newmax + 1));
	memset(&outputs[oldmax + 1], 0, sizeof(Jsonb *) * (newmax - oldmax));
	return outputs;
}

static const char *
replay_events(WfRunState *state, const WfRunState *stored, ReplayLog *log,
			  const Anchor *anchor)
{
	Datum		values[1];
	uint64		n;
	uint64		i;

	memset(state, 0, sizeof(WfRunState));
	memcpy(&state->run_id, &stored->run_id, sizeof(pg_uuid_t));
	state->tenant_id = stored->tenant_id;
	/* compared with their outputs put back (whole_context): either way */
	state->output_refs = stored->output_refs;

	values[0] = UUIDPGetDatum(&stored->run_id);
	n = WfPlanExec(&WfReplayPlans,
				   WfSchemaVersionAtLeast("0.3.0", NULL) ? PLAN_EVENTS_GET : PLAN_EVENTS_GET_02,
				   values, NULL, true, 0, SPI_OK_SELECT);
	if (n == 0)
		return "The run has no events";

	for (i = 0; i < n; i++)
	{
		WfEvent		head;
		WfEvent    *evs;
		bool		isnull;
		Datum		d;
		char	   *type;
		char	   *tenant;
		bytea	   *stored_hash;
		text	   *more;
		int			nevs;
		int			k;

		memset(&head, 0, sizeof(head));
		head.seq = DatumGetInt32(WfGetDatumNotNull(i, EVENTS_GET_COL_SEQ));
		type = WfGetTextOrNull(i, EVENTS_GET_COL_TYPE);
		head.type = WfEventTypeFromName(type);
		head.step = WfGetTextOrNull(i, EVENTS_GET_COL_STEP);
		d = WfGetDatum(i, EVENTS_GET_COL_ATTEMPT, &isnull);
		head.attempt = isnull ? 0 : DatumGetInt32(d);
		head.payload = DatumGetJsonbP(WfGetDatumNotNull(i, EVENTS_GET_COL_PAYLOAD));
		head.actor = WfGetTextOrNull(i, EVENTS_GET_COL_ACTOR);
		head.created_at = DatumGetTimestampTz(WfGetDatumNotNull(i, EVENTS_GET_COL_CREATED_AT));
		stored_hash = DatumGetByteaPP(WfGetDatumNotNull(i, EVENTS_GET_COL_HASH));
		tenant = WfGetTextOrNull(i, EVENTS_GET_COL_TENANT_ID);
		d = WfGetDatum(i, EVENTS_GET_COL_MORE, &isnull);
		more = isnull ? NULL : DatumGetTextPP(d);

		if (head.seq != state->seq + 1)
			return psprintf("Event %d follows event %d: the history has a gap",
							head.seq, state->seq);
		if (strcmp(tenant, stored->tenant_id) != 0)
			return psprintf("Event %d belongs to another tenant", head.seq);

		/*
		 * The row's events (the events that ride along with its first, in
		 * more: state.c), each hashed onto the chain; the row's hash is
		 * that of its last.
		 */
		evs = WfUnpackEvents(&head, more, &nevs);
		for (k = 0; k < nevs; k++)
			if (evs[k].type == 0)
				return k == 0 ?
					psprintf("Event %d has unknown type \"%s\"", head.seq, type) :
					psprintf("Event %d, held by the row of event %d, is not an event of a known type",
							 evs[k].seq, head.seq);
		WfHashEventsFrom(state, state->last_hash, evs, nevs);
		if (VARSIZE_ANY_EXHDR(stored_hash) != WF_HASH_LEN ||
			memcmp(VARDATA_ANY(stored_hash), evs[nevs - 1].hash, WF_HASH_LEN) != 0)
			return nevs == 1 ?
				psprintf("Event %d does not match its hash: the event or one before it was changed",
						 head.seq) :
				psprintf("Event %d, whose row holds events %d to %d, does not match its hash: the row or one before it was changed",
						 head.seq, head.seq, evs[nevs - 1].seq);

		for (k = 0; k < nevs; k++)
		{
			WfEvent    *ev = &evs[k];
			const char *problem;

			/* the chain holds up to here: is this the head that was exported? */
			if (anchor != NULL && ev->seq == anchor->seq &&
				memcmp(ev->hash, anchor->hash, WF_HASH_LEN) != 0)
				return psprintf("Event %d does not have the anchor's hash: the history was rolled back or rewritten after the anchor was exported",
								ev->seq);

			problem = WfApplyEvent(state, ev);
			if (problem != NULL)
				return psprintf("Event %d cannot be replayed: %s", ev->seq, problem);
			log_event(log, ev);
		}
	}
	if (anchor != NULL && state->seq < anchor->seq)
		return psprintf("The history ends at event %d, before the anchor's event %d: its tail was removed after the anchor was exported",
						state->seq, anchor->seq);
	return NULL;
}

/*
 * check_identity compares the run's immutable columns with run_started.
 */
static const char *
check_identity(const WfRunState *stored, ReplayLog *log)
{
	Datum		values[1];
	char	   *defname;
	int32		version;
	Jsonb	   *input;
	char	   *key;
	TimestampTz created_at;
	char	   *ev_def = WfJsonbGetText(log->started, "definition");
	char	   *ev_key = WfJsonbGetText(log->started, "idempotency_key");
	char	   *digest;
	char	   *ev_digest = WfJsonbGetText(log->started, "input_digest");

	values[0] = UUIDPGetDatum(&stored->run_id);
	if (WfPlanExec(&WfReplayPlans, PLAN_RUN_IDENTITY, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		return "The run row vanished";
	defname = WfGetTextOrNull(0, RUN_IDENTITY_COL_DEFINITION_NAME);
	version = DatumGetInt32(WfGetDatumNotNull(0, RUN_IDENTITY_COL_DEFINITION_VERSION));
	input = DatumGetJsonbP(WfGetDatumNotNull(0, RUN_IDENTITY_COL_INPUT));
	key = WfGetTextOrNull(0, RUN_IDENTITY_COL_IDEMPOTENCY_KEY);
	created_at = DatumGetTimestampTz(WfGetDatumNotNull(0, RUN_IDENTITY_COL_CREATED_AT));
	digest = WfGetTextOrNull(0, RUN_IDENTITY_COL_INPUT_DIGEST);

	if (!str_equal(defname, ev_def) || version != log->version)
		return "The run's definition or version differs from the one it was started or migrated with";
	if (!jsonb_equal(input, WfJsonbGetJsonb(log->started, "input")))
		return "The run's input differs from the one it was started with";
	if (!str_equal(key, ev_key))
		return "The run's idempotency key differs from the one it was started with";
	if (!str_equal(digest, ev_digest))
		return "The run's input digest differs from the one it was started with";
	if (created_at != log->started_at)
		return "The run's created_at differs from the time it was started";
	return NULL;
}

/*
 * expected_task_cmp orders the attempts of a history by task id.
 */
static int
expected_task_cmp(const void *a, const void *b)
{
	int64		x = (*(ExpectedTask *const *) a)->task_id;
	int64		y = (*(ExpectedTask *const *) b)->task_id;

	return (x > y) - (x < y);
}

/*
 * check_tasks compares wf.tasks with the attempts the history scheduled.
 */
static const char *
check_tasks(const WfRunState *stored, ReplayLog *log)
{
	Datum		values[1];
	uint64		n;
	uint64		i;
	int			j;
	int			live PG_USED_FOR_ASSERTS_ONLY = 0;
	ExpectedTask **byid;

	values[0] = UUIDPGetDatum(&stored->run_id);
	n = WfPlanExec(&WfReplayPlans, PLAN_TASKS_OF_RUN, values, NULL, true, 0, SPI_OK_SELECT);
	if (n > (uint64) log->ntasks)
		return psprintf("The history scheduled %d attempts of the run, wf.tasks holds %d",
						log->ntasks, (int) n);

	/*
	 * Both lists in task_id order.  Not the history's order: a run that
	 * moved between shards has ids of each shard's block, and a later
	 * attempt's id may be lower (docs/scale-out.md).  An attempt that
	 * task_completed completed has no row since 0.3.0 (runstore.c,
	 * end_attempt), or still its finished row (written by 0.2.0, or a result
	 * held for a paused run): a row that is there is checked.
	 */
	byid = palloc(sizeof(ExpectedTask *) * Max(log->ntasks, 1));
	for (j = 0; j < log->ntasks; j++)
		byid[j] = &log->tasks[j];
	if (log->ntasks > 1)
		qsort(byid, log->ntasks, sizeof(ExpectedTask *), expected_task_cmp);
	i = 0;
	for (j = 0; j < log->ntasks; j++)
	{
		ExpectedTask *t = byid[j];
		int64		task_id = i < n ?
			DatumGetInt64(WfGetDatumNotNull(i, TASKS_OF_RUN_COL_TASK_ID)) : 0;
		uint64		row = i;
		char	   *step;
		int32		attempt;
		char	   *status;
		int64		fence;
		bool		isnull;
		Datum		d;
		Jsonb	   *result = NULL;

		if (t->rowless && (i >= n || task_id != t->task_id))
			continue;			/* completed, its row deleted */
		if (i >= n)
			return psprintf("The history scheduled %d attempts of the run, wf.tasks holds %d",
							log->ntasks, (int) n);
		i++;
		step = WfGetTextOrNull(row, TASKS_OF_RUN_COL_STEP);
		attempt = DatumGetInt32(WfGetDatumNotNull(row, TASKS_OF_RUN_COL_ATTEMPT));
		status = WfGetTextOrNull(row, TASKS_OF_RUN_COL_STATUS);
		fence = DatumGetInt64(WfGetDatumNotNull(row, TASKS_OF_RUN_COL_FENCE));

		if (task_id != t->task_id || !str_equal(step, t->step) || attempt != t->attempt)
			return psprintf("Task %lld is not the attempt the history scheduled",
							(long long) task_id);
		if (t->outcome == 'l')
		{
			if (strcmp(status, "ready") != 0 && strcmp(status, "leased") != 0)
				return psprintf("Task %lld is \"%s\", but the history has no result for it",
								(long long) task_id, status);
			if (task_id != stored->current_task)
				return psprintf("Task %lld is live, but it is not the run's current task",
								(long long) task_id);
			live++;
			continue;
		}
		if (t->outcome == 'x')
		{
			if (strcmp(status, "cancelled") != 0)
				return psprintf("Task %lld is \"%s\", but the history cancelled it",
								(long long) task_id, status);
			continue;
		}
		d = WfGetDatum(row, t->outcome == 'c' ? 6 : 7, &isnull);
		if (!isnull)
			result = DatumGetJsonbP(d);
		if (strcmp(status, t->outcome == 'c' ? "completed" : "failed") != 0 ||
			fence != t->fence || !jsonb_equal(result, t->result))
			return psprintf("Task %lld does not hold the result the history accepted for it",
							(long long) task_id);
		if (t->held)
		{
			/* accepted while the run was paused, applied on resume */
			if (task_id != stored->current_task)
				return psprintf("Task %lld holds a result for a paused run, but it is not the run's current task",
								(long long) task_id);
			live++;
		}
	}
	if (i < n)
		return psprintf("Task %lld is not the attempt the history scheduled",
						(long long) DatumGetInt64(WfGetDatumNotNull(i, TASKS_OF_RUN_COL_TASK_ID)));
	/* compare_snapshots has matched current_task with the history */
	Assert(live == (stored->current_task != 0 ? 1 : 0));
	return NULL;
}

/*
 * whole_context sets *whole to context with the step outputs it refers to
 * put back from the replayed history (log), as the engine reads it
 * (run_context in runstore.c); returns what is wrong when it refers to an
 * event that recorded no output.
 */
static const char *
whole_context(Jsonb *context, const ReplayLog *log, Jsonb **whole)
{
	int32	   *seqs;
	int			n = WfContextOutputSeqs(context, NULL, &seqs);
	Jsonb	  **outputs;
	int			i;

	*whole = context;
	if (n == 0)
		return NULL;
	outputs = palloc(sizeof(Jsonb *) * n);
	for (i = 0; i < n; i++)
	{
		if (seqs[i] <= 0 || seqs[i] > log->maxseq || log->outputs[seqs[i]] == NULL)
			return psprintf("The snapshot's context refers to event %d for a step output, and that event records none",
							seqs[i]);
		outputs[i] = log->outputs[seqs[i]];
	}
	*whole = WfContextWithOutputs(context, n, seqs, outputs);
	return NULL;
}

/*
 * compare_snapshots returns NULL when the rebuilt state equals the stored
 * snapshot, or the first column that differs.  Contexts are compared with
 * their outputs put back: a step output is in the snapshot either itself
 * or as the seq of the event that holds it (state.c), and a run written
 * before 0.3.0 holds them itself.
 */
static const char *
compare_snapshots(const WfRunState *rebuilt, const WfRunState *stored, const ReplayLog *log)
{
	Jsonb	   *rebuilt_context;
	Jsonb	   *stored_context;
	const char *problem;

	if (rebuilt->seq != stored->seq)
		return psprintf("The snapshot is at seq %d, the history at seq %d",
						stored->seq, rebuilt->seq);
	if (memcmp(rebuilt->last_hash, stored->last_hash, WF_HASH_LEN) != 0)
		return "The snapshot's last_hash is not the hash of the last event";
	if (rebuilt->status != stored->status)
		return psprintf("The snapshot says status \"%s\", the history \"%s\"",
						WfRunStatusName(stored->status), WfRunStatusName(rebuilt->status));
	if (rebuilt->definition_id != stored->definition_id)
		return "The snapshot's definition differs from the history's";
	if (!str_equal(rebuilt->current_step, stored->current_step))
		return psprintf("The snapshot's current step is \"%s\", the history's \"%s\"",
						stored->current_step ? stored->current_step : "(none)",
						rebuilt->current_step ? rebuilt->current_step : "(none)");
	if (rebuilt->current_attempt != stored->current_attempt ||
		rebuilt->current_task != stored->current_task)
		return "The snapshot's current attempt or task differs from the history's";
	if (rebuilt->step_generation != stored->step_generation ||
		rebuilt->wait_generation != stored->wait_generation)
		return "The snapshot's step or wait generation differs from the history's";
	if ((problem = whole_context(stored->context, log, &stored_context)) != NULL ||
		(problem = whole_context(rebuilt->context, log, &rebuilt_context)) != NULL)
		return problem;
	if (!jsonb_equal(rebuilt_context, stored_context))
		return "The snapshot's context differs from the history's";
	if (!jsonb_equal(rebuilt->output, stored->output))
		return "The snapshot's output differs from the history's";
	if (rebuilt->finished != stored->finished ||
		rebuilt->finished_at != stored->finished_at)
		return "The snapshot's finished_at differs from the history's";
	if (rebuilt->updated_at != stored->updated_at)
		return "The snapshot's updated_at differs from the history's";
	return NULL;
}

/*
 * verify_run checks run_id of the session's tenant (see the top of this
 * file) and, when anchor is not NULL, that its history still extends the
 * anchor.  Inside an API call.  Reports the first problem as a WARNING and
 * returns false, or returns true.
 */
static bool
verify_run(pg_uuid_t *run_id, const Anchor *anchor)
{
	WfRunState	stored;
	WfRunState	rebuilt;
	const char *problem = NULL;
	ReplayLog	log;

	WfReadRun(run_id, &stored);

	memset(&log, 0, sizeof(log));
	if (anchor != NULL)
		problem = anchor->problem;
	if (problem == NULL)
		problem = replay_events(&rebuilt, &stored, &log, anchor);
	if (problem == NULL)
		problem = compare_snapshots(&rebuilt, &stored, &log);
	if (problem == NULL)
		problem = check_identity(&stored, &log);
	if (problem == NULL)
		problem = check_tasks(&stored, &log);

	if (problem != NULL)
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("run does not match its history"),
				 errdetail("%s.", problem),
				 errcontext("run %s",
							DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(run_id))))));
	return problem == NULL;
}

/*
 * wfengine_verify_run is wf.verify_run(run): true when the history is an
 * intact hash chain that replays to exactly the stored snapshot.
 */
Datum
wfengine_verify_run(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(0);
	bool		ok;

	WfApiBegin();
	ok = verify_run(run_id, NULL);
	WfApiEnd();
	PG_RETURN_BOOL(ok);
}

PG_FUNCTION_INFO_V1(wfengine_verify_moved_run);

/*
 * wfengine_verify_moved_run is wf._verify_moved_run(tenant, run), for
 * superusers: wf.verify_run(run) as the tenant would call it, which
 * wf.import_partition runs on every run it brought in (a superuser's own
 * tenant is "default", so wf.verify_run would not find them).  The tenant
 * is acted for as the engine acts for a run's tenant (WfActForTenant), and
 * restored however the check ends.
 */
Datum
wfengine_verify_moved_run(PG_FUNCTION_ARGS)
{
	char	   *tenant = text_to_cstring(PG_GETARG_TEXT_PP(0));
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(1);
	const char *old;
	bool		ok = false;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for function wf._verify_moved_run"),
				 errhint("Only a superuser verifies the runs of another tenant; a tenant calls wf.verify_run(run).")));
	old = WfActForTenant(tenant);
	PG_TRY();
	{
		WfApiBegin();
		ok = verify_run(run_id, NULL);
		WfApiEnd();
	}
	PG_FINALLY();
	{
		(void) WfActForTenant(old);
	}
	PG_END_TRY();
	PG_RETURN_BOOL(ok);
}

/*
 * bad_anchor refuses an anchor that is not a row of wf.chain_heads().
 */
static void
bad_anchor(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid anchor"),
			 errdetail("%s", detail),
			 errhint("An anchor is a row of wf.chain_heads() as JSON, e.g. SELECT to_jsonb(h) FROM wf.chain_heads() h: {\"run_id\": ..., \"seq\": ..., \"head_hash\": \"<hex>\", \"signature\": \"<hex>\" or null}.")));
}

/*
 * anchor_seq returns the event number an anchor's "seq" holds.  A number
 * that is not one is an invalid anchor (bad_anchor) like any other: one
 * with a fraction, one below 1, and one above the largest event number
 * (events are numbered by int4), for which numeric_int4 would raise a bare
 * "integer out of range".
 */
static int32
anchor_seq(Numeric seq)
{
	Datum		d = NumericGetDatum(seq);

	if (!DatumGetBool(DirectFunctionCall2(numeric_eq, d,
										  DirectFunctionCall2(numeric_trunc, d, Int32GetDatum(0)))))
		bad_anchor("The anchor's \"seq\" is not an integer.");
	if (DatumGetBool(DirectFunctionCall2(numeric_lt, d, NumericGetDatum(int64_to_numeric(1)))))
		bad_anchor("The anchor's \"seq\" is not positive.");
	if (DatumGetBool(DirectFunctionCall2(numeric_gt, d, NumericGetDatum(int64_to_numeric(PG_INT32_MAX)))))
		bad_anchor(psprintf("The anchor's \"seq\" is out of range: an event number is at most %d.",
							PG_INT32_MAX));
	return DatumGetInt32(DirectFunctionCall1(numeric_int4, d));
}

/*
 * parse_anchor reads anchor (a row of wf.chain_heads() as JSON) for run
 * run_id of tenant into a, checking its signature when it has one.  A
 * malformed anchor, one of another run or tenant, and a signed anchor
 * without wfengine.anchor_key to check it are errors; a signature that
 * does not match is a problem verify_run reports (a forged anchor).
 */
static void
parse_anchor(Jsonb *anchor, pg_uuid_t *run_id, const char *tenant, Anchor *a)
{
	JsonbValue *v;
	char	   *text;
	char	   *sig;
	size_t		len = 0;
	uint8		given[WF_HASH_LEN];
	uint8		expected[WF_HASH_LEN];

	memset(a, 0, sizeof(Anchor));
	if (!JB_ROOT_IS_OBJECT(anchor) || JB_ROOT_IS_SCALAR(anchor))
		bad_anchor("The anchor is not a JSON object.");
	text = WfJsonbGetText(anchor, "run_id");
	if (text != NULL &&
		strcmp(text, WfRunIdText(run_id)) != 0)
		bad_anchor(psprintf("The anchor is of run %s, not of run %s.", text, WfRunIdText(run_id)));
	text = WfJsonbGetText(anchor, "tenant_id");
	if (text != NULL && strcmp(text, tenant) != 0)
		bad_anchor(psprintf("The anchor is of tenant \"%s\", not of the session's tenant \"%s\".",
							text, tenant));
	v = WfJsonbGet(anchor, "seq");
	if (v == NULL || v->type != jbvNumeric)
		bad_anchor("The anchor has no \"seq\" number.");
	a->seq = anchor_seq(v->val.numeric);
	text = WfJsonbGetText(anchor, "head_hash");
	if (text == NULL || strlen(text) != WF_HASH_LEN * 2 ||
		sodium_hex2bin(a->hash, WF_HASH_LEN, text, strlen(text), NULL, &len, NULL) != 0 ||
		len != WF_HASH_LEN)
		bad_anchor(psprintf("The anchor's \"head_hash\" is not %d bytes in hex.", WF_HASH_LEN));

	sig = WfJsonbGetText(anchor, "signature");
	if (sig == NULL)
		return;					/* unsigned: taken as it is */
	if (strlen(sig) != WF_HASH_LEN * 2 ||
		sodium_hex2bin(given, WF_HASH_LEN, sig, strlen(sig), NULL, &len, NULL) != 0 ||
		len != WF_HASH_LEN)
		bad_anchor(psprintf("The anchor's \"signature\" is not %d bytes in hex.", WF_HASH_LEN));
	if (!WfAnchorSign(tenant, run_id, a->seq, a->hash, expected))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot check the signature of an anchor without wfengine.anchor_key"),
				 errhint("A superuser sets wfengine.anchor_key to the key the anchor was signed with (32 to 64 bytes in hex).")));
	if (sodium_memcmp(given, expected, WF_HASH_LEN) != 0)
		a->problem = "The anchor's signature does not match: it was not signed with wfengine.anchor_key for this run, seq and hash (a forged or altered anchor)";
	else
		a->signed_ok = true;
}

/*
 * wfengine_verify_run_anchor is wf.verify_run(run, anchor): wf.verify_run
 * (run), and the history still extends what wf.chain_heads() exported
 * (anchor: one of its rows as JSON): the event at the anchor's seq has the
 * anchor's hash, and a signed anchor's signature matches
 * wfengine.anchor_key.  A removed or replaced tail, rolled back to before
 * the anchor, is found; one after it is not (docs/architecture.md).
 */
Datum
wfengine_verify_run_anchor(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(0);
	Jsonb	   *anchor = PG_GETARG_JSONB_P(1);
	const char *tenant = WfCurrentTenant();
	Anchor		a;
	bool		ok;

	parse_anchor(anchor, run_id, tenant, &a);
	WfApiBegin();
	ok = verify_run(run_id, &a);
	WfApiEnd();
	PG_RETURN_BOOL(ok);
}

/*
 * wfengine_chain_heads is wf.chain_heads(): for every run of the session's
 * tenant, its last seq and the hash of that event (hex), signed with
 * wfengine.anchor_key when it is set (else signature is null), in run id
 * order.
 */
Datum
wfengine_chain_heads(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *tenant = WfCurrentTenant();
	Datum		values[5];
	bool		nulls[5];
	Datum		arg[1];
	uint64		n;
	uint64		i;

	InitMaterializedSRF(fcinfo, 0);
	WfApiBegin();
	arg[0] = CStringGetTextDatum(tenant);
	n = WfPlanExec(&WfReplayPlans, PLAN_CHAIN_HEADS, arg, NULL, true, 0, SPI_OK_SELECT);
	for (i = 0; i < n; i++)
	{
		pg_uuid_t  *run_id = DatumGetUUIDP(WfGetDatumNotNull(i, CHAIN_HEADS_COL_RUN_ID));
		int32		seq = DatumGetInt32(WfGetDatumNotNull(i, CHAIN_HEADS_COL_SEQ));
		bytea	   *hash = DatumGetByteaPP(WfGetDatumNotNull(i, CHAIN_HEADS_COL_HASH));
		char		hex[WF_HASH_LEN * 2 + 1];
		uint8		sig[WF_HASH_LEN];

		if (VARSIZE_ANY_EXHDR(hash) != WF_HASH_LEN)
			elog(ERROR, "event %d of run %s has a hash of %d bytes",
				 seq, WfRunIdText(run_id), (int) VARSIZE_ANY_EXHDR(hash));
		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(tenant);
		values[1] = UUIDPGetDatum(run_id);
		values[2] = Int32GetDatum(seq);
		sodium_bin2hex(hex, sizeof(hex), (const uint8 *) VARDATA_ANY(hash), WF_HASH_LEN);
		values[3] = CStringGetTextDatum(hex);
		if (WfAnchorSign(tenant, run_id, seq, (const uint8 *) VARDATA_ANY(hash), sig))
		{
			sodium_bin2hex(hex, sizeof(hex), sig, WF_HASH_LEN);
			values[4] = CStringGetTextDatum(hex);
		}
		else
			nulls[4] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	WfApiEnd();
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(wfengine_fence_base);

/*
 * wfengine_fence_base is wf._fence_base(): the high bits of the fences
 * this server hands out now (WfFenceBase), for wf.import_partition, which
 * sets wf.fence_seq so that every fence the target hands out for a moved
 * task is above the fences the source handed out for it.
 */
Datum
wfengine_fence_base(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(WfFenceBase());
}


/*
 * WfHistoryFillInit starts a reader of the history of run run_id, before
 * its first event.
 */
void
WfHistoryFillInit(WfHistoryFill *fill, pg_uuid_t *run_id)
{
	memset(fill, 0, sizeof(WfHistoryFill));
	fill->run_id = pstrdup(WfRunIdText(run_id));
}

/*
 * fill_task_scheduled returns the payload of task_scheduled event ev with
 * what it leaves out put back (transition.c, WfScheduleTask): queue and
 * activity from the step of the definition in force, the default
 * idempotency key, available_at the event's time, and input the run's
 * input as it stands.  A key the event has stays as it is; an event of
 * 0.2.0, which has them all, is returned unchanged.
 */
static Jsonb *
fill_task_scheduled(WfHistoryFill *fill, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;
	WfJsonBuilder b;
	bool		any = false;

	WfJbBegin(&b);
	if (WfJsonbGet(p, "queue") == NULL && fill->definition_id > 0 && ev->step != NULL)
	{
		const WfDefinition *def = WfDefinitionGet(fill->definition_id);
		int			idx;
		const WfStepDef *sd = WfTaskStepDef(def, ev->step, &idx);

		if (sd != NULL)
		{
			WfJbText(&b, "queue", sd->queue);
			if (WfJsonbGet(p, "activity") == NULL)
				WfJbText(&b, "activity", sd->activity);
			any = true;
		}
	}
	if (WfJsonbGet(p, "idempotency_key") == NULL && ev->step != NULL &&
		WfJsonbGet(p, "visit") != NULL)
	{
		WfJbText(&b, "idempotency_key",
				 WfTaskIdempotencyKey(fill->run_id, ev->step,
									  (int32) WfJsonbGetInt(p, "visit", 1)));
		any = true;
	}
	if (WfJsonbGet(p, "available_at") == NULL)
	{
		WfJbTimestamp(&b, "available_at", ev->created_at);
		any = true;
	}
	if (WfJsonbGet(p, "input") == NULL && fill->input != NULL)
	{
		WfJbJsonb(&b, "input", fill->input);
		any = true;
	}
	if (!any)
		return p;
	/* the event's own keys win */
	return WfJsonbConcat(WfJbEnd(&b), p);
}

/*
 * WfHistoryFillEvent returns the payload of ev, the run's next event, as
 * 0.2.0 wrote it (a task_scheduled event with what it leaves out put
 * back, fill_task_scheduled; every other event as it is), and takes in
 * what ev changes of what fill keeps: the definition in force and the
 * run's input.
 */
Jsonb *
WfHistoryFillEvent(WfHistoryFill *fill, const WfEvent *ev)
{
	Jsonb	   *p = ev->payload;

	switch (ev->type)
	{
		case WF_EV_RUN_STARTED:
			fill->definition_id = WfJsonbGetInt(p, "definition_id", 0);
			fill->input = WfJsonbGetJsonb(p, "input");
			return p;
		case WF_EV_RUN_MIGRATED:
			fill->definition_id = WfJsonbGetInt(p, "definition_id", 0);
			return p;
		case WF_EV_CONTEXT_UPDATED:
			{
				Jsonb	   *patch = WfJsonbGetJsonb(p, "patch");
				WfJsonBuilder b;

				if (patch == NULL || !JB_ROOT_IS_OBJECT(patch))
					return p;
				/* as the reducer merges it into the context's input */
				WfJbBegin(&b);
				WfJbJsonb(&b, "input", fill->input);
				fill->input = WfJsonbGetJsonb(WfMergeInput(WfJbEnd(&b), patch), "input");
				return p;
			}
		case WF_EV_TASK_SCHEDULED:
			return fill_task_scheduled(fill, ev);
		default:
			return p;
	}
}

PG_FUNCTION_INFO_V1(wfengine_history);

/* the columns of history_events */
enum
{
	HISTORY_COL_SEQ = 1,
	HISTORY_COL_TYPE,
	HISTORY_COL_STEP,
	HISTORY_COL_ATTEMPT,
	HISTORY_COL_PAYLOAD,
	HISTORY_COL_ACTOR,
	HISTORY_COL_CREATED_AT,
	HISTORY_COL_HASH,
	HISTORY_COL_MORE
};

/*
 * wfengine_history is wf.history(run): the events of a run of the
 * session's tenant in seq order, each as it was appended, except that a
 * task_scheduled event of 0.3.0 shows what it leaves out in wf.events
 * (WfHistoryFillEvent), so that wf.history answers as in 0.2.0.  The
 * events a row holds after its first (column more, state.c) are shown as
 * events of their own.  The hash is the stored one, over the payload as
 * stored (wf.verify_run checks it); a row that holds several events
 * stores its last event's hash, and the hashes of the events before it
 * are those the chain gives from the row before.
 */
Datum
wfengine_history(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		args[2];
	WfHistoryFill fill;
	WfRunState	run;			/* the run's id and tenant, for hashing */
	uint8		last_hash[WF_HASH_LEN];	/* the stored hash of the row before */
	SPITupleTable *tt;
	uint64		n;
	uint64		i;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	WfApiBegin();
	args[0] = UUIDPGetDatum(run_id);
	args[1] = CStringGetTextDatum(WfCurrentTenant());
	if (WfPlanExec(&WfReplayPlans, PLAN_HISTORY_RUN, args, NULL, true, 1, SPI_OK_SELECT) != 1)
		WfUnknownRun(run_id);
	WfHistoryFillInit(&fill, run_id);
	memset(&run, 0, sizeof(run));
	memcpy(&run.run_id, run_id, sizeof(pg_uuid_t));
	run.tenant_id = pstrdup(WfCurrentTenant());
	memset(last_hash, 0, sizeof(last_hash));
	n = WfPlanExec(&WfReplayPlans, PLAN_HISTORY_EVENTS, args, NULL, true, 0, SPI_OK_SELECT);
	/* kept: a definition loaded on the way runs a statement of its own */
	tt = SPI_tuptable;
	for (i = 0; i < n; i++)
	{
		WfEvent		head;
		WfEvent    *evs;
		Datum		values[HISTORY_COL_MORE];
		bool		nulls[HISTORY_COL_MORE];
		bytea	   *stored_hash;
		bool		hashed;
		int			nevs;
		int			c;
		int			k;

		for (c = 0; c < HISTORY_COL_MORE; c++)
			values[c] = SPI_getbinval(tt->vals[i], tt->tupdesc, c + 1, &nulls[c]);
		memset(&head, 0, sizeof(head));
		head.seq = DatumGetInt32(values[HISTORY_COL_SEQ - 1]);
		head.type = WfEventTypeFromName(TextDatumGetCString(values[HISTORY_COL_TYPE - 1]));
		head.step = nulls[HISTORY_COL_STEP - 1] ? NULL :
			TextDatumGetCString(values[HISTORY_COL_STEP - 1]);
		head.attempt = nulls[HISTORY_COL_ATTEMPT - 1] ? 0 :
			DatumGetInt32(values[HISTORY_COL_ATTEMPT - 1]);
		head.payload = DatumGetJsonbP(values[HISTORY_COL_PAYLOAD - 1]);
		head.actor = TextDatumGetCString(values[HISTORY_COL_ACTOR - 1]);
		head.created_at = DatumGetTimestampTz(values[HISTORY_COL_CREATED_AT - 1]);
		stored_hash = DatumGetByteaPP(values[HISTORY_COL_HASH - 1]);
		evs = WfUnpackEvents(&head,
							 nulls[HISTORY_COL_MORE - 1] ? NULL :
							 DatumGetTextPP(values[HISTORY_COL_MORE - 1]),
							 &nevs);

		/*
		 * the hashes of the events before the row's last, which it does not
		 * store; none for a row that holds what is not an event
		 * (wf.verify_run names it)
		 */
		hashed = nevs > 1;
		for (k = 0; k < nevs; k++)
			hashed = hashed && evs[k].type != 0;
		if (hashed)
			WfHashEventsFrom(&run, last_hash, evs, nevs);
		for (k = 0; k < nevs; k++)
		{
			WfEvent    *ev = &evs[k];
			Datum		hash = (Datum) 0;

			if (k == nevs - 1)
				hash = PointerGetDatum(stored_hash);
			else if (hashed)
				hash = WfHashDatum(ev->hash);
			values[HISTORY_COL_SEQ - 1] = Int32GetDatum(ev->seq);
			if (k > 0)
			{
				values[HISTORY_COL_TYPE - 1] = ev->type != 0 ?
					CStringGetTextDatum(WfEventTypeName(ev->type)) : (Datum) 0;
				nulls[HISTORY_COL_TYPE - 1] = ev->type == 0;
				nulls[HISTORY_COL_STEP - 1] = ev->step == NULL;
				values[HISTORY_COL_STEP - 1] = ev->step != NULL ?
					CStringGetTextDatum(ev->step) : (Datum) 0;
				nulls[HISTORY_COL_ATTEMPT - 1] = ev->attempt == 0;
				values[HISTORY_COL_ATTEMPT - 1] = Int32GetDatum(ev->attempt);
			}
			nulls[HISTORY_COL_PAYLOAD - 1] = ev->payload == NULL;
			values[HISTORY_COL_PAYLOAD - 1] = ev->payload == NULL ? (Datum) 0 :
				JsonbPGetDatum(WfHistoryFillEvent(&fill, ev));
			nulls[HISTORY_COL_HASH - 1] = hash == (Datum) 0;
			values[HISTORY_COL_HASH - 1] = hash == (Datum) 0 ? (Datum) 0 :
				DirectFunctionCall2(binary_encode, hash, CStringGetTextDatum("hex"));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		if (VARSIZE_ANY_EXHDR(stored_hash) == WF_HASH_LEN)
			memcpy(last_hash, VARDATA_ANY(stored_hash), WF_HASH_LEN);
	}
	WfApiEnd();
	return (Datum) 0;
}
