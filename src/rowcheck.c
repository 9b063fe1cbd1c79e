/*-------------------------------------------------------------------------
 *
 * rowcheck.c
 *	  The functions behind the CHECK constraints on stored names:
 *	  wf._run_row_ok, wf._task_row_ok, wf._timer_status_ok and
 *	  wf._timer_kind_ok.
 *
 * PostgreSQL reads every CHECK constraint of a table back from its stored
 * node tree and prepares it again in each INSERT or UPDATE statement.  A
 * "status IN (ten strings)" check stores a text[] constant of about 2 kB of
 * node text, and reading it was a tenth of the instructions of a claim +
 * complete cycle (docs/benchmarks.md).  A call of one of these functions
 * on the column is a tiny tree and checks the same list: the names the
 * engine writes (state.c for run statuses and timer kinds; the task and
 * timer statuses are only ever written by the statements of the plan
 * tables).  A value outside the list still fails the constraint with
 * check_violation.
 *
 * Each statement prepares every check of its table again, so the hot
 * tables have one check each: wf._run_row_ok(status, seq) on wf.runs and
 * wf._task_row_ok(status, visit, attempt) on wf.tasks check all their
 * checked columns in one call (one node tree to read instead of two or
 * three).
 *
 * The functions are IMMUTABLE and STRICT; a NULL is left to the columns'
 * NOT NULL.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/rowcheck.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "state.h"

PG_FUNCTION_INFO_V1(wfengine_timer_status_ok);
PG_FUNCTION_INFO_V1(wfengine_timer_kind_ok);
PG_FUNCTION_INFO_V1(wfengine_run_row_ok);
PG_FUNCTION_INFO_V1(wfengine_task_row_ok);

/* what wf.tasks.status and wf.timers.status may hold */
static const char *const task_statuses[] = {
	"ready", "leased", "completed", "failed", "cancelled", NULL
};
static const char *const timer_statuses[] = {
	"pending", "fired", "cancelled", NULL
};

/*
 * listed: is the text argument one of names (NULL-terminated)?
 */
static bool
listed(text *value, const char *const *names)
{
	char	   *s = text_to_cstring(value);
	int			i;

	for (i = 0; names[i] != NULL; i++)
		if (strcmp(s, names[i]) == 0)
			return true;
	return false;
}

/*
 * wfengine_timer_status_ok is wf._timer_status_ok(status).
 */
Datum
wfengine_timer_status_ok(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(listed(PG_GETARG_TEXT_PP(0), timer_statuses));
}

/*
 * wfengine_timer_kind_ok is wf._timer_kind_ok(kind).
 */
Datum
wfengine_timer_kind_ok(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(WfTimerKindFromName(text_to_cstring(PG_GETARG_TEXT_PP(0))) != 0);
}

/*
 * wfengine_run_row_ok is wf._run_row_ok(status, seq), the check of
 * wf.runs: a status a run is stored with, and a positive seq.
 */
Datum
wfengine_run_row_ok(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(WfRunStatusFromName(text_to_cstring(PG_GETARG_TEXT_PP(0))) != 0 &&
				   PG_GETARG_INT32(1) > 0);
}

/*
 * wfengine_task_row_ok is wf._task_row_ok(status, visit, attempt), the
 * check of wf.tasks: a task status, and a positive visit and attempt.
 */
Datum
wfengine_task_row_ok(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(listed(PG_GETARG_TEXT_PP(0), task_statuses) &&
				   PG_GETARG_INT32(1) > 0 && PG_GETARG_INT32(2) > 0);
}
