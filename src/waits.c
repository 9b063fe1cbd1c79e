/*-------------------------------------------------------------------------
 *
 * waits.c
 *	  What a live run waits for, as wf.explain tells it: the reads shared
 *	  by the step kinds that wait on a task attempt or on a timer.
 *
 * A step kind's explain (WfStepKindOps.explain) answers for its own
 * waits; the two that several kinds share are here, in the run core,
 * since attempts and timers are the core's: WfExplainLiveTask (the run's
 * live attempt: a worker's result, a place in its queue, a quarantine or
 * the tenant's max_tasks_in_flight) and WfExplainWaitTimer (the timer of
 * the run's current wait: a retry's backoff, a sleep), with
 * WfExplainAttempt, the two in the order a step with a task asks them.
 * Each is one statement that builds its "details" object, so that
 * wf.explain shows values exactly as PostgreSQL's JSON functions write
 * them; WfExplainRow answers with such a statement of a step kind's own.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/waits.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "spi_util.h"
#include "state.h"
#include "stepkind.h"
#include "waits.h"

/* the statements of waits.c (registered by _PG_init: WfWaitsPlans) */
enum
{
	PLAN_EXPLAIN_TASK = 0,
	PLAN_EXPLAIN_TIMER
};

static const WfPlanSpec waits_plan_specs[] = {
	[PLAN_EXPLAIN_TASK] = {
		"explain_task",
		/*
		 * The live attempt $1: leased (a worker's result), not available yet
		 * (a quarantine), else waiting in its queue (how many are ahead of
		 * it; at the tenant's max_tasks_in_flight, waiting for room).
		 */
		"SELECT CASE WHEN t.status OPERATOR(pg_catalog.=) 'leased' THEN 'worker_result'"
		"  WHEN t.available_at OPERATOR(pg_catalog.>) c.now THEN 'quarantine'"
		"  WHEN q.lim IS NOT NULL AND q.in_flight OPERATOR(pg_catalog.>=) q.lim THEN 'tenant_quota'"
		"  ELSE 'worker' END,"
		" CASE WHEN t.status OPERATOR(pg_catalog.=) 'leased' THEN pg_catalog.jsonb_build_object("
		"   'queue', t.queue, 'task_id', t.task_id, 'attempt', t.attempt, 'worker', t.worker,"
		"   'since', t.claimed_at, 'lease_expires_at', t.lease_expires_at,"
		"   'last_heartbeat_at', t.last_heartbeat_at)"
		"  WHEN t.available_at OPERATOR(pg_catalog.>) c.now THEN pg_catalog.jsonb_build_object("
		"   'queue', t.queue, 'task_id', t.task_id, 'until', t.available_at,"
		"   'lease_expirations', t.lease_expirations)"
		"  ELSE pg_catalog.jsonb_build_object("
		"   'queue', t.queue, 'task_id', t.task_id, 'attempt', t.attempt, 'since', t.available_at,"
		"   'ahead', (SELECT pg_catalog.count(*) FROM wf.tasks a"
		"    WHERE a.tenant_id OPERATOR(pg_catalog.=) t.tenant_id"
		"     AND a.queue OPERATOR(pg_catalog.=) t.queue"
		"     AND a.status OPERATOR(pg_catalog.=) 'ready'"
		"     AND a.available_at OPERATOR(pg_catalog.<=) c.now"
		"     AND (a.priority OPERATOR(pg_catalog.>) t.priority"
		"      OR (a.priority OPERATOR(pg_catalog.=) t.priority"
		"       AND (a.available_at, a.task_id) OPERATOR(pg_catalog.<) (t.available_at, t.task_id)))),"
		"   'priority', t.priority)"
		"   OPERATOR(pg_catalog.||) CASE WHEN q.lim IS NULL THEN '{}'::pg_catalog.jsonb"
		"    ELSE pg_catalog.jsonb_build_object('max_tasks_in_flight', q.lim, 'in_flight', q.in_flight)"
		"     OPERATOR(pg_catalog.||) CASE WHEN q.in_flight OPERATOR(pg_catalog.>=) q.lim"
		"      THEN pg_catalog.jsonb_build_object('reason', pg_catalog.format("
		"       'the tenant has %s tasks of queue \"%s\" in flight, its max_tasks_in_flight',"
		"       q.lim, t.queue))"
		"      ELSE '{}'::pg_catalog.jsonb END END"
		"  END "
		"FROM wf.tasks t"
		" CROSS JOIN LATERAL (SELECT pg_catalog.clock_timestamp() AS now) c"
		" LEFT JOIN LATERAL (SELECT p.max_tasks_in_flight AS lim,"
		"   (SELECT pg_catalog.count(*) FROM wf.tasks a"
		"    WHERE a.tenant_id OPERATOR(pg_catalog.=) t.tenant_id"
		"     AND a.queue OPERATOR(pg_catalog.=) t.queue"
		"     AND a.status OPERATOR(pg_catalog.=) 'leased') AS in_flight"
		"  FROM wf.tenant_policies p WHERE p.tenant_id OPERATOR(pg_catalog.=) t.tenant_id) q ON true "
		"WHERE t.task_id OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
	[PLAN_EXPLAIN_TIMER] = {
		"explain_timer",
		/* the pending timer of the wait that began at event $2 */
		"SELECT CASE WHEN tm.kind OPERATOR(pg_catalog.=) 'retry' THEN 'retry_backoff' ELSE tm.kind END,"
		" pg_catalog.jsonb_build_object('until', tm.fire_at, 'timer_id', tm.timer_id,"
		"  'next_attempt', tm.payload OPERATOR(pg_catalog.->) 'attempt') "
		"FROM wf.timers tm WHERE tm.run_id OPERATOR(pg_catalog.=) $1"
		" AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		" AND tm.generation OPERATOR(pg_catalog.=) $2 "
		"LIMIT 1",
		2, {UUIDOID, INT4OID}
	},
};

WfPlanTable WfWaitsPlans = WF_PLAN_TABLE("waits", waits_plan_specs);

/* the columns of explain_task and explain_timer */
enum
{
	EXPLAIN_COL_WAITING = 1,
	EXPLAIN_COL_DETAILS
};

/*
 * answer sets ex from the one row of the statement just run.
 */
static void
answer(WfExplanation *ex)
{
	ex->waiting = WfGetTextOrNull(0, EXPLAIN_COL_WAITING);
	ex->details = DatumGetJsonbPCopy(WfGetDatumNotNull(0, EXPLAIN_COL_DETAILS));
}

/*
 * WfExplainLiveTask explains the run's live task attempt; false (and ex
 * untouched) when it has none.  A live attempt whose row is gone leaves
 * ex untouched: the run then says it needs an operator.
 */
bool
WfExplainLiveTask(const WfRunState *run, WfExplanation *ex)
{
	Datum		values[1];

	if (run->current_task == 0)
		return false;
	values[0] = Int64GetDatum(run->current_task);
	if (WfPlanExec(&WfWaitsPlans, PLAN_EXPLAIN_TASK, values, NULL, true, 1, SPI_OK_SELECT) == 1)
		answer(ex);
	return true;
}

/*
 * WfExplainAttempt explains a step that waits on a task attempt: its live
 * attempt, or the timer of the backoff before the next one.  It is the
 * explain of task and compensation steps (WfStepKindOps.explain), and
 * what approval steps and steps without a kind say first.
 */
void
WfExplainAttempt(const WfRunState *run, const WfStepDef *sd, WfExplanation *ex)
{
	if (!WfExplainLiveTask(run, ex))
		(void) WfExplainWaitTimer(run, ex);
}

/*
 * WfExplainRow runs statement id of table, whose one row holds the
 * "details" object of a step kind's own wait, and answers that the run
 * waits for "waiting" with those details; false (and ex untouched) when
 * the statement gives no row.
 */
bool
WfExplainRow(WfPlanTable *table, int id, Datum *values, const char *waiting,
			 WfExplanation *ex)
{
	if (WfPlanExec(table, id, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		return false;
	ex->waiting = waiting;
	ex->details = DatumGetJsonbPCopy(WfGetDatumNotNull(0, 1));
	return true;
}

/*
 * WfExplainWaitTimer explains the pending timer of the run's current wait
 * (a retry's backoff, a sleep); false when the run waits on no timer.
 */
bool
WfExplainWaitTimer(const WfRunState *run, WfExplanation *ex)
{
	Datum		values[2];

	if (run->wait_generation <= 0)
		return false;
	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = Int32GetDatum(run->wait_generation);
	if (WfPlanExec(&WfWaitsPlans, PLAN_EXPLAIN_TIMER, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		return true;			/* it waits, but its timer is gone: nothing to say */
	answer(ex);
	return true;
}
