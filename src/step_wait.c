/*-------------------------------------------------------------------------
 *
 * step_wait.c
 *	  The wait_event step kind, and signals delivered to runs.
 *
 * A wait_event step waits for a signal of its "event" name: from
 * wf.signal to the run, or from wf.send_event through a correlation key
 * (correlate.c).  A signal that comes while the run waits there is
 * consumed at once; one that comes earlier is kept in wf.signals and
 * consumed when the run enters the step (oldest first).  Each signal is
 * recorded as signal_received, its consumption as event_received (the
 * step's output: the event's name, id and payload).  With a "total"
 * timeout the wait ends by itself: the step's "on_timeout" step takes
 * over (wait_timed_out), or the run fails.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/step_wait.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "notify.h"
#include "quota.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "step_wait.h"
#include "stepkind.h"
#include "transition.h"
#include "waits.h"

/* the statements of step_wait.c (registered by _PG_init: WfStepWaitPlans) */
enum
{
	PLAN_SIGNAL_INSERT = 0,
	PLAN_SIGNAL_TAKE,
	PLAN_EXPLAIN_WAIT
};

static const WfPlanSpec step_wait_plan_specs[] = {
	[PLAN_SIGNAL_INSERT] = {
		"signal_insert",
		"INSERT INTO wf.signals (tenant_id, run_id, name, event_id, payload, received_at) "
		"VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, event_id) DO NOTHING "
		"RETURNING signal_id",
		6, {TEXTOID, UUIDOID, TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID}
	},
	[PLAN_SIGNAL_TAKE] = {
		"signal_take",
		"UPDATE wf.signals sg SET consumed_at = $3, consumed_by = $4 "
		"WHERE sg.signal_id OPERATOR(pg_catalog.=) (SELECT s.signal_id FROM wf.signals s"
		" WHERE s.run_id OPERATOR(pg_catalog.=) $1 AND s.name OPERATOR(pg_catalog.=) $2"
		" AND s.consumed_at IS NULL ORDER BY s.received_at, s.signal_id LIMIT 1) "
		"RETURNING sg.signal_id, sg.event_id, sg.payload",
		4, {UUIDOID, TEXTOID, TIMESTAMPTZOID, TEXTOID}
	},
	[PLAN_EXPLAIN_WAIT] = {
		"explain_wait",
		/* the visit that began at event $2 waits for the event it names */
		"SELECT pg_catalog.jsonb_build_object('event', e.payload OPERATOR(pg_catalog.->) 'event',"
		" 'since', e.created_at,"
		" 'timeout_at', (SELECT x.fire_at FROM wf.timers x WHERE x.run_id OPERATOR(pg_catalog.=) $1"
		"  AND x.kind OPERATOR(pg_catalog.=) 'step_timeout' AND x.status OPERATOR(pg_catalog.=) 'pending'"
		"  AND x.generation OPERATOR(pg_catalog.=) $2)) "
		"FROM wf.events e WHERE e.run_id OPERATOR(pg_catalog.=) $1 AND e.seq OPERATOR(pg_catalog.=) $2"
		" AND e.type OPERATOR(pg_catalog.=) 'wait_started'",
		2, {UUIDOID, INT4OID}
	},
};

WfPlanTable WfStepWaitPlans = WF_PLAN_TABLE("step_wait", step_wait_plan_specs);

/* the columns of signal_take */
enum
{
	SIGNAL_TAKE_COL_SIGNAL_ID = 1,
	SIGNAL_TAKE_COL_EVENT_ID,
	SIGNAL_TAKE_COL_PAYLOAD
};


static bool take_signal(WfTransition *tr, int step_index);

/*
 * take_signal consumes the oldest kept signal the wait_event step at
 * step_index waits for, records event_received and moves the run on.
 * Returns false when there is none (the run goes on waiting).
 */
static bool
take_signal(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	Datum		values[4];
	WfJsonBuilder b;
	WfJsonBuilder ob;

	values[0] = UUIDPGetDatum(&tr->run->run_id);
	values[1] = CStringGetTextDatum(sd->event_name);
	values[2] = TimestampTzGetDatum(tr->now);
	values[3] = CStringGetTextDatum(tr->actor);
	if (WfPlanExec(&WfStepWaitPlans, PLAN_SIGNAL_TAKE, values, NULL, false, 0, SPI_OK_UPDATE_RETURNING) != 1)
		return false;

	WfJbBegin(&ob);
	WfJbText(&ob, "event", sd->event_name);
	WfJbText(&ob, "event_id", WfGetTextOrNull(0, SIGNAL_TAKE_COL_EVENT_ID));
	WfJbJsonb(&ob, "payload", DatumGetJsonbPCopy(WfGetDatumNotNull(0, SIGNAL_TAKE_COL_PAYLOAD)));
	WfJbBegin(&b);
	WfJbInt(&b, "visit", WfNextVisit(tr->run, sd->name));
	WfJbInt(&b, "signal_id", DatumGetInt64(WfGetDatumNotNull(0, SIGNAL_TAKE_COL_SIGNAL_ID)));
	WfJbJsonb(&b, "output", WfJbEnd(&ob));
	WfAppendEvent(tr, WF_EV_EVENT_RECEIVED, sd->name, 0, WfJbEnd(&b));
	WfAdvance(tr, step_index);
	return true;
}

/*
 * WfDeliverSignal delivers a named signal to a run of the session's tenant,
 * inside an API call: when the run waits at a wait_event step for that
 * name, the signal is consumed at once and the run goes on ("consumed");
 * otherwise it is kept for when the run gets there ("stored").  A second
 * signal with the same event id is recorded and ignored ("duplicate").
 * Every call is a signal_received event, but for a run at
 * max_events_per_run: a new signal is refused, and a duplicate only
 * counted in wf.suppressed_events (quota.c).  buffered, when not NULL,
 * describes the wf.buffered_events row the signal comes from (key and
 * buffered_at, recorded in signal_received); such a delivery to a run at
 * its event limit is not made: NULL is returned instead of an error, and
 * the caller leaves the event buffered.
 */
const char *
WfDeliverSignal(pg_uuid_t *run_id, const char *name, Jsonb *payload,
				const char *event_id, const char *buffered_key,
				TimestampTz buffered_at)
{
	WfRunState	run;
	WfTransition tr;
	WfDefinition *def;
	WfJsonBuilder b;
	Datum		values[6];
	const char *outcome;
	bool		consume = false;
	int			idx = -1;

	WfLockLiveRun(run_id, &run, "run %s has ended", NULL);
	if (buffered_key != NULL && WfEventsAtLimit(&run))
		return NULL;
	def = WfDefinitionGet(run.definition_id);
	WfTransitionInit(&tr, &run, def, GetCurrentTimestamp());

	values[0] = CStringGetTextDatum(run.tenant_id);
	values[1] = UUIDPGetDatum(run_id);
	values[2] = CStringGetTextDatum(name);
	values[3] = CStringGetTextDatum(event_id);
	values[4] = JsonbPGetDatum(payload);
	values[5] = TimestampTzGetDatum(tr.now);
	if (WfPlanExec(&WfStepWaitPlans, PLAN_SIGNAL_INSERT, values, NULL, false, 0, SPI_OK_INSERT_RETURNING) != 1)
	{
		/* a repeat only records that it was ignored: counted at the limit */
		outcome = "duplicate";
		if (WfSuppressAuditEvent(tr.run, WF_EV_SIGNAL_RECEIVED, tr.now))
			return outcome;
	}
	else
	{
		/* a new signal at the limit is refused (the error undoes the insert) */
		WfCheckEventQuota(&run, "The run takes no more signals.");
		/* does the run wait at a wait_event step for this name right now? */
		if (run.status == WF_RUN_RUNNING && run.current_step != NULL && run.current_task == 0)
			idx = WfDefinitionStepIndex(def, run.current_step);
		consume = idx >= 0 && def->steps[idx].type == WF_STEP_WAIT_EVENT &&
			strcmp(def->steps[idx].event_name, name) == 0;
		outcome = consume ? "consumed" : "stored";
	}

	WfJbBegin(&b);
	WfJbText(&b, "name", name);
	WfJbText(&b, "event_id", event_id);
	WfJbText(&b, "outcome", outcome);
	if (buffered_key != NULL)
	{
		/* sent before the run declared the key, kept in wf.buffered_events */
		WfJbText(&b, "buffered_key", buffered_key);
		WfJbText(&b, "buffered_at",
				 DatumGetCString(DirectFunctionCall1(timestamptz_out,
													 TimestampTzGetDatum(buffered_at))));
	}
	WfAppendEvent(&tr, WF_EV_SIGNAL_RECEIVED, NULL, 0, WfJbEnd(&b));
	if (consume && !take_signal(&tr, idx))
		elog(ERROR, "the signal just stored could not be consumed");
	WfTransitionWrite(&tr);
	if (consume)
		WfNoteRunChange(run.tenant_id, &run.run_id, run.status == WF_RUN_RUNNING ? "step_done" :
						WfRunStatusName(run.status));
	return outcome;
}

/*
 * wait_enter starts a visit of the wait_event step at step_index.
 */
static void
wait_enter(WfTransition *tr, int step_index)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbInt(&b, "visit", WfNextVisit(tr->run, sd->name));
	WfJbText(&b, "event", sd->event_name);
	WfAppendEvent(tr, WF_EV_WAIT_STARTED, sd->name, 0, WfJbEnd(&b));
	/* a signal that came before the run got here is consumed now */
	if (!take_signal(tr, step_index) && sd->timeout.total > 0)
		WfSetTimer(tr, WF_TIMER_STEP_TIMEOUT, sd->name, tr->run->step_generation,
				   tr->now + sd->timeout.total, NULL);
}

/*
 * wait_timer_fired: the wait's total timeout passed.  Its "on_timeout"
 * step takes over; without one the core fails the run (false).
 */
static bool
wait_timer_fired(WfTransition *tr, int step_index, WfTimerKind kind,
				 Jsonb *payload, TimestampTz due_at)
{
	const WfStepDef *sd = &tr->def->steps[step_index];
	WfJsonBuilder ob;

	if (kind != WF_TIMER_STEP_TIMEOUT || sd->expiry_next == WF_STEP_END)
		return false;
	WfJbBegin(&ob);
	WfJbBool(&ob, "timed_out", true);
	WfFinishVisit(tr, step_index, WF_EV_WAIT_TIMED_OUT, WfNextVisit(tr->run, sd->name),
				  WfJbEnd(&ob), sd->expiry_next, true);
	return true;
}

/*
 * wait_resume: a signal that came while the run was paused is taken now.
 */
static void
wait_resume(WfTransition *tr, int step_index)
{
	(void) take_signal(tr, step_index);
}

/*
 * wait_explain: the step waits for the event its visit names (and its
 * timeout), unless a task or a timer of the run is live.
 */
static void
wait_explain(const WfRunState *run, const WfStepDef *sd, WfExplanation *ex)
{
	Datum		values[2];

	if (WfExplainLiveTask(run, ex) || WfExplainWaitTimer(run, ex))
		return;
	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = Int32GetDatum(run->step_generation);
	(void) WfExplainRow(&WfStepWaitPlans, PLAN_EXPLAIN_WAIT, values, "event", ex);
}

const WfStepKindOps WfWaitStepKind = {
	.name = "wait_event",
	.explain = wait_explain,
	.enter = wait_enter,
	.timer_fired = wait_timer_fired,
	.resume = wait_resume,
};
