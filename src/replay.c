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

/* what the history says about one task attempt */
typedef struct ExpectedTask
{
	int64		task_id;
	char	   *step;
	int32		attempt;
	char		outcome;		/* 'l' live, 'c' completed, 'f' failed, 'x' cancelled */
	bool		held;			/* the result is held for a paused run: still live */
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
} ReplayLog;

/* forward declarations */
static const char *replay_events(WfRunState *state, const WfRunState *stored,
								 ReplayLog *log);
static void log_event(ReplayLog *log, const WfEvent *ev);
static const char *check_identity(const WfRunState *stored, ReplayLog *log);
static const char *check_tasks(const WfRunState *stored, ReplayLog *log);
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
		t->held = false;
		t->outcome = (ev->type == WF_EV_TASK_FAILED) ? 'f' : 'c';
	}
	t->fence = WfJsonbGetInt(ev->payload, "fence", 0);
	t->result = WfJsonbGetJsonb(ev->payload, t->outcome == 'f' ? "error" : "output");
}

static const char *
replay_events(WfRunState *state, const WfRunState *stored, ReplayLog *log)
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
		return "The run has no events";

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
			return psprintf("Event %d follows event %d: the history has a gap",
							ev.seq, state->seq);
		if (ev.type == 0)
			return psprintf("Event %d has unknown type \"%s\"", ev.seq, type);
		if (strcmp(tenant, stored->tenant_id) != 0)
			return psprintf("Event %d belongs to another tenant", ev.seq);

		WfHashEventFor(state, &ev);
		if (VARSIZE_ANY_EXHDR(stored_hash) != WF_HASH_LEN ||
			memcmp(VARDATA_ANY(stored_hash), ev.hash, WF_HASH_LEN) != 0)
			return psprintf("Event %d does not match its hash: the event or one before it was changed",
							ev.seq);

		problem = WfApplyEvent(state, &ev);
		if (problem != NULL)
			return psprintf("Event %d cannot be replayed: %s", ev.seq, problem);
		log_event(log, &ev);
	}
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
	if (WfExecPlan(WF_PLAN_RUN_IDENTITY, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		return "The run row vanished";
	defname = WfGetTextOrNull(0, 1);
	version = DatumGetInt32(WfGetDatumNotNull(0, 2));
	input = DatumGetJsonbP(WfGetDatumNotNull(0, 3));
	key = WfGetTextOrNull(0, 4);
	created_at = DatumGetTimestampTz(WfGetDatumNotNull(0, 5));
	digest = WfGetTextOrNull(0, 6);

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
 * check_tasks compares wf.tasks with the attempts the history scheduled.
 */
static const char *
check_tasks(const WfRunState *stored, ReplayLog *log)
{
	Datum		values[1];
	uint64		n;
	uint64		i;
	int			live PG_USED_FOR_ASSERTS_ONLY = 0;

	values[0] = UUIDPGetDatum(&stored->run_id);
	n = WfExecPlan(WF_PLAN_TASKS_OF_RUN, values, NULL, true, 0, SPI_OK_SELECT);
	if (n != (uint64) log->ntasks)
		return psprintf("The history scheduled %d attempts of the run, wf.tasks holds %d",
						log->ntasks, (int) n);

	/* both lists are in task_id order: ids come from a sequence */
	for (i = 0; i < n; i++)
	{
		ExpectedTask *t = &log->tasks[i];
		int64		task_id = DatumGetInt64(WfGetDatumNotNull(i, 1));
		char	   *step = WfGetTextOrNull(i, 2);
		int32		attempt = DatumGetInt32(WfGetDatumNotNull(i, 3));
		char	   *status = WfGetTextOrNull(i, 4);
		int64		fence = DatumGetInt64(WfGetDatumNotNull(i, 5));
		bool		isnull;
		Datum		d;
		Jsonb	   *result = NULL;

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
		d = WfGetDatum(i, t->outcome == 'c' ? 6 : 7, &isnull);
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
	/* compare_snapshots has matched current_task with the history */
	Assert(live == (stored->current_task != 0 ? 1 : 0));
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
	if (!jsonb_equal(rebuilt->context, stored->context))
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
	ReplayLog	log;

	WfApiBegin();
	values[0] = UUIDPGetDatum(run_id);
	values[1] = CStringGetTextDatum(WfCurrentTenant());
	if (WfExecPlan(WF_PLAN_RUN_GET, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		WfUnknownRun(run_id);
	WfRunStateFromTuple(&stored, 0);

	memset(&log, 0, sizeof(log));
	problem = replay_events(&rebuilt, &stored, &log);
	if (problem == NULL)
		problem = compare_snapshots(&rebuilt, &stored);
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

	WfApiEnd();
	PG_RETURN_BOOL(problem == NULL);
}
