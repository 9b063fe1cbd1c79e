/*-------------------------------------------------------------------------
 *
 * explain.c
 *	  wf.explain(run): where a run is, what it waits for, and which
 *	  commands apply to it now.
 *
 * The run as a whole is answered here: a run that has ended (how and
 * where), a paused one (who paused it, its held result and timers), a
 * timer that the tenant's max_timers_per_run refused, a due timer or
 * deadline that another transaction's lock holds up, a live run that
 * waits for nothing the engine tracks (it needs an operator), the
 * commands each status allows.  What a live run waits for at its step is
 * the step kind's answer (WfStepKindOps.explain): a task attempt, a
 * timer, approvers, a signal, child runs; waits.c holds the parts several
 * kinds share.  A run at no known step gets those shared parts only.
 *
 * The answer is an object {run_id, definition, version, status, step,
 * waiting_for, details, commands}; docs/reference.md lists every
 * waiting_for and its details.  Every object is built by a statement, so
 * that values come out as PostgreSQL's JSON functions write them.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/explain.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"

#include "api.h"
#include "defcompile.h"
#include "definition.h"
#include "explain.h"
#include "jsonutil.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "stepkind.h"
#include "tenant.h"
#include "waits.h"
#include "version.h"

PG_FUNCTION_INFO_V1(wfengine_explain);

/* the statements of explain.c (registered by _PG_init: WfExplainPlans) */
enum
{
	PLAN_EXPLAIN_FINISHED = 0,
	PLAN_EXPLAIN_FINISHED_02,
	PLAN_EXPLAIN_PAUSED,
	PLAN_EXPLAIN_QUOTA_REFUSED,
	PLAN_EXPLAIN_HELD,
	PLAN_EXPLAIN_ANSWER
};

static const WfPlanSpec explain_plan_specs[] = {
	[PLAN_EXPLAIN_FINISHED] = {
		"explain_finished",
		/*
		 * how the run ended: its last ending event (wf.event_log: a
		 * run_completed rides in the row of the event before it, state.c)
		 */
		"SELECT pg_catalog.jsonb_build_object('finished_at', r.finished_at,"
		" 'reason', e.payload OPERATOR(pg_catalog.->) 'reason',"
		" 'at_step', e.payload OPERATOR(pg_catalog.->) 'step') "
		"FROM wf.runs r LEFT JOIN LATERAL (SELECT v.payload FROM wf.event_log v"
		" WHERE v.run_id OPERATOR(pg_catalog.=) r.run_id"
		"  AND v.type OPERATOR(pg_catalog.=) ANY (ARRAY['run_completed', 'run_failed',"
		"   'run_terminated', 'run_cancelled', 'compensation_failed', 'run_compensated'])"
		" ORDER BY v.seq DESC LIMIT 1) e ON true "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		1, {UUIDOID}
	},
	/* the same on a schema not yet updated to 0.3.0: a row per event */
	[PLAN_EXPLAIN_FINISHED_02] = {
		"explain_finished_02",
		"SELECT pg_catalog.jsonb_build_object('finished_at', r.finished_at,"
		" 'reason', e.payload OPERATOR(pg_catalog.->) 'reason',"
		" 'at_step', e.payload OPERATOR(pg_catalog.->) 'step') "
		"FROM wf.runs r LEFT JOIN LATERAL (SELECT x.payload FROM wf.events x"
		" WHERE x.run_id OPERATOR(pg_catalog.=) r.run_id"
		"  AND x.type OPERATOR(pg_catalog.=) ANY (ARRAY['run_completed', 'run_failed',"
		"   'run_terminated', 'run_cancelled', 'compensation_failed', 'run_compensated'])"
		" ORDER BY x.seq DESC LIMIT 1) e ON true "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		1, {UUIDOID}
	},
	[PLAN_EXPLAIN_PAUSED] = {
		"explain_paused",
		/* who paused the run, and why; its attempt in flight $2; held timers */
		"SELECT pg_catalog.jsonb_build_object('paused_by', e.actor, 'since', e.created_at,"
		"  'reason', e.payload OPERATOR(pg_catalog.->) 'reason')"
		" OPERATOR(pg_catalog.||) CASE WHEN $2::pg_catalog.int8 IS NULL THEN '{}'::pg_catalog.jsonb"
		"  ELSE pg_catalog.jsonb_build_object('in_flight_task', t.task_id, 'worker', t.worker,"
		"   'result_held', t.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed'])) END"
		" OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('held_timers',"
		"  (SELECT pg_catalog.count(*) FROM wf.timers x WHERE x.run_id OPERATOR(pg_catalog.=) $1"
		"   AND x.status OPERATOR(pg_catalog.=) 'pending' AND x.outcome OPERATOR(pg_catalog.=) 'held')) "
		"FROM (SELECT 1) one"
		" LEFT JOIN LATERAL (SELECT x.actor, x.created_at, x.payload FROM wf.events x"
		"  WHERE x.run_id OPERATOR(pg_catalog.=) $1 AND x.type OPERATOR(pg_catalog.=) 'run_paused'"
		"  ORDER BY x.seq DESC LIMIT 1) e ON true"
		" LEFT JOIN wf.tasks t ON t.task_id OPERATOR(pg_catalog.=) $2",
		2, {UUIDOID, INT8OID}
	},
	[PLAN_EXPLAIN_QUOTA_REFUSED] = {
		"explain_quota_refused",
		/*
		 * A timer whose transition max_timers_per_run refused (timer.c): it
		 * stays pending, tried again every 10 seconds, and the run cannot
		 * move on until there is room.
		 */
		"SELECT pg_catalog.jsonb_build_object("
		" 'quota', 'max_timers_per_run',"
		" 'max_timers_per_run', p.lim,"
		" 'pending_timers', (SELECT pg_catalog.count(*) FROM wf.timers x"
		"  WHERE x.run_id OPERATOR(pg_catalog.=) $1 AND x.status OPERATOR(pg_catalog.=) 'pending'"
		"   AND x.kind OPERATOR(pg_catalog.<>) 'child_done'),"
		" 'timer', pg_catalog.jsonb_build_object('timer_id', tm.timer_id, 'kind', tm.kind,"
		"  'step', tm.step, 'due_at', tm.due_at, 'next_try_at', tm.fire_at, 'tries', tm.errors,"
		"  'error', tm.last_error),"
		" 'reason', pg_catalog.format('the %s timer%s fired, but what it does would set a timer"
		" beyond the tenant''s max_timers_per_run of %s', tm.kind,"
		"  COALESCE(pg_catalog.format(' of step \"%s\"', tm.step), ''),"
		"  COALESCE(p.lim::pg_catalog.text, 'none (raised since: the next try applies it)')),"
		" 'way_out', 'raise max_timers_per_run (wf.set_tenant_policy; the next try, within 10"
		" seconds, applies it), or wf.migrate_run the run to a version published under the"
		" limit, or wf.terminate_run it') "
		"FROM (SELECT x.timer_id, x.kind, x.step, x.due_at, x.fire_at, x.errors, x.last_error"
		"  FROM wf.timers x WHERE x.run_id OPERATOR(pg_catalog.=) $1"
		"  AND x.status OPERATOR(pg_catalog.=) 'pending'"
		"  AND x.outcome OPERATOR(pg_catalog.=) 'quota_refused'"
		"  ORDER BY x.due_at, x.timer_id LIMIT 1) tm"
		" LEFT JOIN LATERAL (SELECT q.max_timers_per_run AS lim FROM wf.tenant_policies q"
		"  WHERE q.tenant_id OPERATOR(pg_catalog.=) $2) p ON true",
		2, {UUIDOID, TEXTOID}
	},
	[PLAN_EXPLAIN_HELD] = {
		"explain_held",
		/*
		 * Something of the run is due (a timer, or a deadline of its live
		 * attempt $2) and another transaction holds a row the engine worker
		 * must lock to act on it: the run, its live task or a pending timer
		 * (the row's xmax is a transaction that still holds its lock in
		 * pg_locks).  The engine worker passes such items over and tries
		 * again (timer.c).  Who holds it, and since when, goes to the caller
		 * in C (superusers only).
		 */
		"SELECT pg_catalog.jsonb_build_object('due', d.what, 'due_at', d.due_at,"
		"  'pid', l.pid, 'xact_start', a.xact_start,"
		"  'held_for', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) a.xact_start) "
		"FROM (SELECT 'timer' AS what, pg_catalog.min(tm.due_at) AS due_at FROM wf.timers tm"
		"  WHERE tm.run_id OPERATOR(pg_catalog.=) $1 AND tm.status OPERATOR(pg_catalog.=) 'pending'"
		"  AND tm.fire_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()"
		"  HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 0"
		" UNION ALL SELECT 'deadline', t.deadline_at FROM wf.tasks t"
		"  WHERE t.task_id OPERATOR(pg_catalog.=) $2"
		"  AND t.status OPERATOR(pg_catalog.=) ANY (ARRAY['ready', 'leased'])"
		"  AND t.deadline_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()"
		" ORDER BY 2 LIMIT 1) d"
		" JOIN LATERAL (SELECT k.pid FROM"
		"  (SELECT r.xmax AS x FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) $1"
		"   UNION ALL SELECT t.xmax FROM wf.tasks t WHERE t.task_id OPERATOR(pg_catalog.=) $2"
		"   UNION ALL SELECT tm.xmax FROM wf.timers tm WHERE tm.run_id OPERATOR(pg_catalog.=) $1"
		"    AND tm.status OPERATOR(pg_catalog.=) 'pending') x"
		"  JOIN pg_catalog.pg_locks k ON k.locktype OPERATOR(pg_catalog.=) 'transactionid'"
		"   AND k.transactionid OPERATOR(pg_catalog.=) x.x AND k.granted"
		"   AND k.mode OPERATOR(pg_catalog.=) 'ExclusiveLock'"
		"   AND k.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()"
		"  LIMIT 1) l ON true"
		" LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid",
		2, {UUIDOID, INT8OID}
	},
	[PLAN_EXPLAIN_ANSWER] = {
		"explain_answer",
		"SELECT pg_catalog.jsonb_build_object('run_id', $1, 'definition', $2, 'version', $3,"
		" 'status', $4, 'step', $5, 'waiting_for', $6, 'details', $7,"
		" 'commands', pg_catalog.to_jsonb($8))",
		8, {UUIDOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTARRAYOID}
	},
};

WfPlanTable WfExplainPlans = WF_PLAN_TABLE("explain", explain_plan_specs);


/*
 * one_object runs statement id of this file, which returns one jsonb
 * object (or no row: NULL).
 */
static Jsonb *
one_object(int id, Datum *values, const char *nulls)
{
	if (WfPlanExec(&WfExplainPlans, id, values, nulls, true, 1, SPI_OK_SELECT) != 1)
		return NULL;
	return DatumGetJsonbPCopy(WfGetDatumNotNull(0, 1));
}

/*
 * object1 returns {key: value}.
 */
static Jsonb *
object1(const char *key, Jsonb *value)
{
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbJsonb(&b, key, value);
	return WfJbEnd(&b);
}

/*
 * nest returns {key: details || {"waiting_for": waiting}}: what the run
 * waited for before a wait that comes first.
 */
static Jsonb *
nest(const char *key, const WfExplanation *ex)
{
	WfJsonBuilder b;

	WfJbBegin(&b);
	WfJbText(&b, "waiting_for", ex->waiting);
	return object1(key, WfJsonbConcat(ex->details, WfJbEnd(&b)));
}

/*
 * explain_step asks the kind of the run's step what the live run waits
 * for; a step the definition does not know gets the shared answers.
 */
static void
explain_step(const WfRunState *run, WfExplanation *ex)
{
	const WfStepDef *sd = NULL;
	int			index;

	if (run->current_step != NULL)
		sd = WfTaskStepDef(WfDefinitionGet(run->definition_id), run->current_step, &index);
	if (sd != NULL)
	{
		const WfStepKindOps *ops = WfStepKindFor(sd);

		if (ops->explain != NULL)
			ops->explain(run, sd, ex);
	}
	else
		WfExplainAttempt(run, NULL, ex);
}

/*
 * explain_quota_refused: a refused timer comes before what the run would
 * otherwise wait for.
 */
static void
explain_quota_refused(const WfRunState *run, WfExplanation *ex)
{
	Datum		values[2];
	Jsonb	   *quota;

	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(run->tenant_id);
	quota = one_object(PLAN_EXPLAIN_QUOTA_REFUSED, values, NULL);
	if (quota == NULL)
		return;
	if (ex->waiting != NULL)
		ex->details = nest("refused_wait", ex);
	ex->waiting = "tenant_quota";
	ex->details = WfJsonbConcat(ex->details, quota);
	ex->commands = lappend(ex->commands, "wf.set_tenant_policy");
	ex->commands = lappend(ex->commands, "wf.migrate_run");
}

/*
 * explain_held: a due timer or deadline that the engine worker cannot act
 * on because another transaction holds the run's rows comes before what
 * the run would otherwise wait for.  The holding session (pid, when its
 * transaction began, how long it has held it) is shown to superusers only.
 */
static void
explain_held(const WfRunState *run, WfExplanation *ex)
{
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	Jsonb	   *held;
	JsonbValue *v;
	WfJsonBuilder b;

	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = Int64GetDatum(run->current_task);
	if (run->current_task == 0)
		nulls[1] = 'n';
	held = one_object(PLAN_EXPLAIN_HELD, values, nulls);
	if (held == NULL)
		return;

	WfJbBegin(&b);
	if ((v = WfJsonbGet(held, "due")) != NULL)
		WfJbJsonb(&b, "due", JsonbValueToJsonb(v));
	if ((v = WfJsonbGet(held, "due_at")) != NULL)
		WfJbJsonb(&b, "due_at", JsonbValueToJsonb(v));
	WfJbText(&b, "reason", "another transaction holds the run (or its live task or timer) locked: "
			 "the engine does not wait for it, and acts on what is due when that transaction ends");
	WfJbText(&b, "way_out", "end that transaction (COMMIT or ROLLBACK): a session of the tenant "
			 "left idle in a transaction after an API call holds the run until it ends");
	if (superuser_arg(WfApiCaller()))
	{
		const char *keys[] = {"pid", "xact_start", "held_for"};
		int			i;

		for (i = 0; i < lengthof(keys); i++)
			if ((v = WfJsonbGet(held, keys[i])) != NULL)
				WfJbJsonb(&b, keys[i], JsonbValueToJsonb(v));
	}
	if (ex->waiting != NULL)
		ex->details = nest("held_wait", ex);
	ex->waiting = "transaction";
	ex->details = WfJsonbConcat(ex->details, WfJbEnd(&b));
}

/*
 * status_commands appends the commands the run's status allows, and
 * those its step allows (wf.retry_step of a failed task step, wf.skip_step
 * of a skippable one; a step the definition does not name counts as a
 * task step).
 */
static List *
status_commands(const WfRunState *run, List *commands)
{
	WfRunStatus st = run->status;

	if (st == WF_RUN_RUNNING || st == WF_RUN_PAUSED)
		commands = list_concat(commands, list_make4("wf.signal", "wf.terminate_run",
													 "wf.update_context", "wf.cancel_run"));
	else if (st == WF_RUN_CANCELLING || st == WF_RUN_COMPENSATING ||
			 st == WF_RUN_COMPENSATION_FAILED)
		commands = lappend(commands, "wf.terminate_run");
	else if (st == WF_RUN_FAILED)
		commands = lappend(commands, "wf.cancel_run");
	if (st == WF_RUN_RUNNING)
		commands = lappend(commands, "wf.pause_run");
	else if (st == WF_RUN_PAUSED)
		commands = lappend(commands, "wf.resume_run");
	else if (st == WF_RUN_COMPENSATION_FAILED)
		commands = list_concat(commands, list_make2("wf.retry_step", "wf.skip_step"));
	if ((st == WF_RUN_RUNNING || st == WF_RUN_FAILED) && run->current_step != NULL)
	{
		const WfDefinition *def = WfDefinitionGet(run->definition_id);
		int			i = WfDefinitionStepIndex(def, run->current_step);
		const WfStepDef *sd = i >= 0 ? &def->steps[i] : NULL;

		if (st == WF_RUN_FAILED && (sd == NULL || sd->type == WF_STEP_TASK))
			commands = lappend(commands, "wf.retry_step");
		if (sd == NULL || sd->skippable)
			commands = lappend(commands, "wf.skip_step");
	}
	return commands;
}

/*
 * answer builds wf.explain's object.
 */
static Datum
answer(const WfRunState *run, const char *defname, int32 version, const WfExplanation *ex)
{
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			n = list_length(ex->commands);
	Datum	   *cmds = palloc(sizeof(Datum) * Max(n, 1));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, ex->commands)
		cmds[i++] = CStringGetTextDatum((char *) lfirst(lc));
	values[0] = UUIDPGetDatum(&run->run_id);
	values[1] = CStringGetTextDatum(defname);
	values[2] = Int32GetDatum(version);
	values[3] = CStringGetTextDatum(WfRunStatusName(run->status));
	WfSetTextOrNull(values, nulls, 4, run->current_step);
	WfSetTextOrNull(values, nulls, 5, ex->waiting);
	values[6] = JsonbPGetDatum(ex->details != NULL ? ex->details :
							   DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"))));
	values[7] = PointerGetDatum(construct_array(cmds, n, TEXTOID, -1, false, TYPALIGN_INT));
	WfPlanExec(&WfExplainPlans, PLAN_EXPLAIN_ANSWER, values, nulls, true, 1, SPI_OK_SELECT);
	return WfGetDatumNotNull(0, 1);
}

/*
 * wfengine_explain is wf.explain(run); see the file header.
 */
Datum
wfengine_explain(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *run_id = PG_GETARG_UUID_P(0);
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	WfRunState	run;
	char	   *defname;
	int32		version;
	WfExplanation ex = {NULL, NULL, NIL};
	List	   *commands;
	JsonbValue *v;

	WfApiBegin();
	WfReadRun(run_id, &run);
	defname = WfGetTextOrNull(0, WF_RUN_READ_COL_DEFINITION_NAME);
	version = DatumGetInt32(WfGetDatumNotNull(0, WF_RUN_READ_COL_DEFINITION_VERSION));
	commands = list_make2("wf.history", "wf.verify_run");

	switch (run.status)
	{
		case WF_RUN_PAUSED:
			values[0] = UUIDPGetDatum(&run.run_id);
			if (run.current_task != 0)
				values[1] = Int64GetDatum(run.current_task);
			else
				nulls[1] = 'n';
			ex.waiting = "operator";
			ex.details = one_object(PLAN_EXPLAIN_PAUSED, values, nulls);
			break;
		case WF_RUN_RUNNING:
		case WF_RUN_CANCELLING:
		case WF_RUN_COMPENSATING:
			explain_step(&run, &ex);
			commands = list_concat(commands, ex.commands);
			ex.commands = NIL;
			explain_quota_refused(&run, &ex);
			explain_held(&run, &ex);
			break;
		default:
			/* it has ended */
			values[0] = UUIDPGetDatum(&run.run_id);
			ex.details = one_object(WfSchemaVersionAtLeast("0.3.0", NULL) ?
									PLAN_EXPLAIN_FINISHED : PLAN_EXPLAIN_FINISHED_02,
									values, NULL);
			break;
	}
	commands = list_concat(commands, ex.commands);

	/* a live run always says what it waits for; waiting for nothing, an operator */
	if (ex.waiting == NULL && (run.status == WF_RUN_RUNNING || run.status == WF_RUN_PAUSED ||
							   WF_RUN_UNDOING(run.status)))
	{
		WfJsonBuilder b;

		WfJbBegin(&b);
		WfJbBool(&b, "stuck", true);
		WfJbText(&b, "reason", "the run has no live task, timer, approval, awaited signal or child run: nothing moves it on but an operator");
		ex.waiting = "operator";
		ex.details = WfJsonbConcat(ex.details, WfJbEnd(&b));
	}

	/* what the run undoes, and the failure its compensations undo */
	if ((v = WfJsonbGet(run.context, "compensation")) != NULL)
		ex.details = WfJsonbConcat(ex.details, object1("compensation", JsonbValueToJsonb(v)));
	if ((v = WfJsonbGet(run.context, "failure")) != NULL)
		ex.details = WfJsonbConcat(ex.details, object1("failure", JsonbValueToJsonb(v)));

	ex.commands = status_commands(&run, commands);
	PG_RETURN_DATUM(WfApiReturn(answer(&run, defname, version, &ex), false, -1));
}
