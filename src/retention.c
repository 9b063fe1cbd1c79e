/*-------------------------------------------------------------------------
 *
 * retention.c
 *	  Legal hold and the purge of finished runs past their tenant's
 *	  retention.
 *
 * wf.purge_runs(max_runs) deletes, in one statement, at most max_runs runs
 * that finished (completed, failed, terminated or cancelled; never a run
 * that is live or waits for an operator after a compensation failed)
 * longer ago than the retention of their tenant (wf.tenant_policies), and
 * are not under legal hold, with everything that belongs to them.  Runs
 * another transaction holds are skipped (SKIP LOCKED), so purges and the
 * engine never wait for each other; so are the buffered events and
 * approver counters of every tenant that it deletes (a client holds such a
 * row while it delivers an event or counts a failed decision).  The rows of
 * a victim run are held by nobody else in practice (a client locks the run
 * row with them); should a client hold one anyway, the statement gives up
 * after WF_PURGE_LOCK_TIMEOUT_MS (lock_timeout) with an error, and the next
 * purge tries again: a purge never stalls on one tenant's transaction, and
 * never stalls the pg_cron job that runs it.  wf.events is append-only: its trigger
 * lets a DELETE through only while this module purges (wf._purging(),
 * which nothing else can switch on).  wf.schedule_purge() installs the
 * pg_cron job that calls it.  What belongs to a run includes its counts of
 * events not appended (wf.suppressed_events) and the wf.decide counters of
 * its tokens (wf.decide_failures); the same statement also deletes the
 * counters of approvers whose last failure is older than
 * wfengine.decide_failure_window and that kept nothing out of the audit.
 * Buffered events and the event ids of wf.send_event (wf.event_ids) past
 * their keep are deleted too, of every tenant.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/retention.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "command.h"
#include "guc.h"
#include "jsonutil.h"
#include "quota.h"
#include "retention.h"
#include "spi_util.h"
#include "state.h"
#include "transition.h"
#include "version.h"

PG_FUNCTION_INFO_V1(wfengine_purging);
PG_FUNCTION_INFO_V1(wfengine_purge_runs);
PG_FUNCTION_INFO_V1(wfengine_set_legal_hold);

/* the statements of retention.c (registered by _PG_init: WfRetentionPlans) */
enum
{
	PLAN_PURGE = 0,
	PLAN_PURGE_EVENT_IDS,
	PLAN_RUN_SET_HOLD
};

static const WfPlanSpec retention_plan_specs[] = {
	[PLAN_PURGE] = {
		"purge",
		"WITH victims AS ("
		" SELECT r.run_id FROM wf.runs r JOIN wf.tenant_policies p"
		" ON p.tenant_id OPERATOR(pg_catalog.=) r.tenant_id"
		" WHERE r.finished_at IS NOT NULL AND p.retention IS NOT NULL"
		" AND r.finished_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) p.retention)"
		" AND r.status OPERATOR(pg_catalog.=) ANY (ARRAY['completed', 'failed', 'terminated', 'cancelled', 'compensated'])"
		" AND NOT r.legal_hold"
		" ORDER BY r.finished_at LIMIT $2 FOR UPDATE OF r SKIP LOCKED),"
		" e AS (DELETE FROM wf.events x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" t AS (DELETE FROM wf.tasks x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" tm AS (DELETE FROM wf.timers x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" a AS (DELETE FROM wf.approvals x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" aa AS (DELETE FROM wf.approval_attempts x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" s AS (DELETE FROM wf.signals x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" c AS (DELETE FROM wf.correlations x WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		/* buffered events past their retention, of every tenant (events.c) */
		" be AS (DELETE FROM wf.buffered_events x WHERE x.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
		"  SELECT y.ctid FROM wf.buffered_events y WHERE y.expires_at OPERATOR(pg_catalog.<=) $1"
		"  FOR UPDATE OF y SKIP LOCKED))),"
		" se AS (DELETE FROM wf.suppressed_events x"
		"  WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		" df AS (DELETE FROM wf.decide_failures x"
		"  WHERE x.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v)),"
		/* approver counters of a past window that kept nothing from the audit */
		" dfa AS (DELETE FROM wf.decide_failures x WHERE x.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
		"  SELECT y.ctid FROM wf.decide_failures y WHERE y.run_id IS NULL"
		"  AND y.last_at OPERATOR(pg_catalog.<=) $3 AND y.suppressed OPERATOR(pg_catalog.=) 0"
		"  AND y.throttled OPERATOR(pg_catalog.=) 0 FOR UPDATE OF y SKIP LOCKED))) "
		"DELETE FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) ANY (SELECT v.run_id FROM victims v) RETURNING r.run_id",
		/*
		 * a lookup (spi_util.c): before ANALYZE has seen the tables (a
		 * restored or moved partition) the planner joined the victims to
		 * a sequential scan of wf.events, of wf.timers and of wf.runs for
		 * every batch
		 */
		3, {TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID}, false, true
	},
	[PLAN_PURGE_EVENT_IDS] = {
		"purge_event_ids",
		/*
		 * the event ids of wf.send_event past their keep, of every tenant
		 * (events.c); a row a transaction holds (a send re-using an expired
		 * id) is skipped, never waited for
		 */
		"DELETE FROM wf.event_ids x WHERE x.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
		"SELECT y.ctid FROM wf.event_ids y WHERE y.expires_at OPERATOR(pg_catalog.<=) $1"
		" FOR UPDATE OF y SKIP LOCKED))",
		1, {TIMESTAMPTZOID}
	},
	[PLAN_RUN_SET_HOLD] = {
		"run_set_hold",
		"UPDATE wf.runs r SET legal_hold = $2 FROM wf.runs o "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1 AND o.run_id OPERATOR(pg_catalog.=) r.run_id "
		"RETURNING o.legal_hold",
		2, {UUIDOID, BOOLOID}
	},
};

WfPlanTable WfRetentionPlans = WF_PLAN_TABLE("retention", retention_plan_specs);


/* how long the purge statement waits for a lock at most */
#define WF_PURGE_LOCK_TIMEOUT_MS 1000

/* true only inside wfengine_purge_runs's statement */
static bool purging = false;

/*
 * wfengine_purging is wf._purging(), for the trigger of wf.events.
 */
Datum
wfengine_purging(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(purging);
}

/*
 * wfengine_purge_runs is wf.purge_runs(max_runs).
 */
Datum
wfengine_purge_runs(PG_FUNCTION_ARGS)
{
	int32		max_runs = PG_ARGISNULL(0) ? 1000 : PG_GETARG_INT32(0);
	Datum		values[3];
	uint64		n;
	int			guc_level;
	char		timeout[32];

	if (max_runs < 1 || max_runs > 100000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_runs must be between 1 and 100000, not %d", max_runs)));

	WfApiBegin();
	values[0] = TimestampTzGetDatum(GetCurrentTimestamp());
	values[1] = Int32GetDatum(max_runs);
	values[2] = TimestampTzGetDatum(GetCurrentTimestamp() -
									(TimestampTz) wf_decide_failure_window * USECS_PER_SEC);
	guc_level = NewGUCNestLevel();
	snprintf(timeout, sizeof(timeout), "%d", WF_PURGE_LOCK_TIMEOUT_MS);
	(void) set_config_option("lock_timeout", timeout, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	purging = true;
	PG_TRY();
	{
		n = WfPlanExec(&WfRetentionPlans, PLAN_PURGE, values, NULL, false, 0, SPI_OK_DELETE_RETURNING);
		/* wf.event_ids came with 0.2.0 (a database not updated yet has none) */
		if (WfSchemaVersionAtLeast("0.2.0", NULL))
			(void) WfPlanExec(&WfRetentionPlans, PLAN_PURGE_EVENT_IDS, values, NULL, false, 0,
							  SPI_OK_DELETE);
	}
	PG_FINALLY();
	{
		purging = false;
	}
	PG_END_TRY();
	AtEOXact_GUC(true, guc_level);
	WfApiEnd();
	PG_RETURN_INT32((int32) n);
}

/* a hold is placed on or released from a run in any status */
static const WfRunCommandSpec legal_hold_spec = {
	.what = "set the legal hold of",
};

/*
 * wfengine_set_legal_hold is wf.set_legal_hold(run, hold, reason): an
 * operator command on a run in any state.  legal_hold_set records the
 * actor, the reason, and the hold before and after; the run row's
 * legal_hold column is what the purge reads.  Returns the old hold.
 */
Datum
wfengine_set_legal_hold(PG_FUNCTION_ARGS)
{
	bool		hold;
	WfRunCommand cmd;
	WfJsonBuilder b;
	Datum		values[2];
	bool		old;

	WfRequireArgs(fcinfo, 2, "run and hold");
	hold = PG_GETARG_BOOL(1);
	WfRunCommandBeginCall(&cmd, fcinfo, 2, &legal_hold_spec);
	values[0] = UUIDPGetDatum(cmd.run_id);
	values[1] = BoolGetDatum(hold);
	if (WfPlanExec(&WfRetentionPlans, PLAN_RUN_SET_HOLD, values, NULL, false, 0, SPI_OK_UPDATE_RETURNING) != 1)
		WfUnknownRun(cmd.run_id);
	old = DatumGetBool(WfGetDatumNotNull(0, 1));

	/*
	 * A run at its event limit can always be put under hold; a release, or
	 * a repeat, is refused (the error undoes the update): else the hold
	 * could be toggled without bound.
	 */
	if (!hold || old)
		WfCheckEventQuota(&cmd.run, "At this limit a hold can still be placed on the run, but not released or placed again.");
	WfJbBegin(&b);
	WfJbText(&b, "reason", cmd.reason);
	WfJbBool(&b, "old_hold", old);
	WfJbBool(&b, "hold", hold);
	WfAppendEvent(&cmd.tr, WF_EV_LEGAL_HOLD_SET, NULL, 0, WfJbEnd(&b));
	WfRunCommandWrite(&cmd, NULL);
	PG_RETURN_DATUM(WfApiReturn(BoolGetDatum(old), true, sizeof(bool)));
}
