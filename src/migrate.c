/*-------------------------------------------------------------------------
 *
 * migrate.c
 *	  wf.migrate_run: move a live run to another version of its definition.
 *
 * A run is pinned to the definition version it started with; an operator
 * may move it to another version of the same definition when the run's
 * position exists there and its context fits (wf._migration_problem, in
 * the install script, says why not; it follows the target's step graph as
 * the compiled definition has it, wf._step_edges).  run_migrated records
 * both versions; from then on the run follows the target.  The attempt of
 * the old version is withdrawn, so a worker of the old version reports a
 * stale result, and the step's next attempt is scheduled under the target
 * (its queue, input mapping, retry policy and timeouts).  A retry backoff
 * is cut short the same way.  Sleeps, waits and approvals keep waiting:
 * their timers and tokens belong to the visit, which does not change.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/migrate.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "command.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "migrate.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "transition.h"

PG_FUNCTION_INFO_V1(wfengine_migrate_run);

/* the statements of migrate.c (registered by _PG_init: WfMigratePlans) */
enum
{
	PLAN_MIGRATION_PROBLEM = 0,
	PLAN_RUN_SET_VERSION
};

static const WfPlanSpec migrate_plan_specs[] = {
	[PLAN_MIGRATION_PROBLEM] = {
		"migration_problem",
		"SELECT wf._migration_problem($1, $2)",
		2, {UUIDOID, INT8OID}
	},
	[PLAN_RUN_SET_VERSION] = {
		"run_set_version",
		"UPDATE wf.runs r SET definition_id = $2, definition_version = $3 "
		"WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		3, {UUIDOID, INT8OID, INT4OID}
	},
};

WfPlanTable WfMigratePlans = WF_PLAN_TABLE("migrate", migrate_plan_specs);


static const WfRunCommandSpec migrate_spec = {
	.what = "migrate",
	.applies_to = WF_ST(RUNNING) | WF_ST(PAUSED),
	.hint = "Only running and paused runs can be migrated.",
	.quota_hint = "The run takes no more migrations.",
};

/*
 * migration_target returns the definition id of version to_version of the
 * run's definition (from), refusing a version that does not exist, the
 * run's own, and one the run cannot move to (wf._migration_problem).
 */
static int64
migration_target(WfRunCommand *cmd, int32 to_version)
{
	const WfDefinition *from = cmd->def;
	Datum		values[2];
	int64		target;
	char	   *problem;

	if (!WfDefinitionVersion(cmd->run.tenant_id, from->name, to_version, &target))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("version %d of definition \"%s\" does not exist", to_version, from->name)));
	if (target == cmd->run.definition_id)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("run %s is at version %d of \"%s\" already",
						WfRunIdText(cmd->run_id), to_version, from->name)));

	values[0] = UUIDPGetDatum(cmd->run_id);
	values[1] = Int64GetDatum(target);
	WfPlanExec(&WfMigratePlans, PLAN_MIGRATION_PROBLEM, values, NULL, false, 1, SPI_OK_SELECT);
	problem = WfGetTextOrNull(0, 1);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot migrate run %s to version %d of \"%s\"",
						WfRunIdText(cmd->run_id), to_version, from->name),
				 errdetail("%s", problem),
				 errhint("The run stays at version %d.", from->version)));
	return target;
}

/*
 * wfengine_migrate_run is wf.migrate_run(run, to_version, reason).
 * Returns the step the run is at afterwards.
 */
Datum
wfengine_migrate_run(PG_FUNCTION_ARGS)
{
	int32		to_version;
	WfRunCommand cmd;
	WfDefinition *from;
	WfDefinition *to;
	Datum		values[3];
	const WfStepDef *sd;
	int			idx;
	bool		reschedule;
	WfJsonBuilder b;

	WfRequireArgs(fcinfo, 2, "run and to_version");
	to_version = PG_GETARG_INT32(1);
	WfRunCommandBeginCall(&cmd, fcinfo, 2, &migrate_spec);
	from = cmd.def;
	to = WfDefinitionGet(migration_target(&cmd, to_version));
	/* from here on the run follows the target */
	WfTransitionInit(&cmd.tr, &cmd.run, to, cmd.tr.now);
	sd = WfTaskStepDef(to, cmd.run.current_step, &idx);

	/* a task step's attempt of the old version gives way to one of the new */
	reschedule = sd->type == WF_STEP_TASK &&
		(cmd.run.current_task != 0 || cmd.run.wait_generation != 0);
	WfWithdrawCurrentTask(&cmd.tr, "migrated");

	WfJbBegin(&b);
	WfJbText(&b, "reason", cmd.reason);
	WfJbInt(&b, "from_version", from->version);
	WfJbInt(&b, "to_version", to->version);
	WfJbInt(&b, "from_definition_id", from->definition_id);
	WfJbInt(&b, "definition_id", to->definition_id);
	WfJbText(&b, "step", cmd.run.current_step);
	WfJbBool(&b, "reschedule", reschedule);
	WfAppendEvent(&cmd.tr, WF_EV_RUN_MIGRATED, NULL, 0, WfJbEnd(&b));

	if (reschedule && cmd.run.status == WF_RUN_RUNNING)
	{
		int32		visit = WfNextVisit(&cmd.run, sd->name);

		WfScheduleTask(&cmd.tr, sd, visit, WfNextAttempt(cmd.run_id, sd->name, visit),
					   cmd.tr.now, NULL);
	}

	/* the note is sent at commit: after the run row has the new version */
	WfRunCommandWrite(&cmd, "migrated");
	values[0] = UUIDPGetDatum(cmd.run_id);
	values[1] = Int64GetDatum(to->definition_id);
	values[2] = Int32GetDatum(to->version);
	WfPlanExec(&WfMigratePlans, PLAN_RUN_SET_VERSION, values, NULL, false, 0, SPI_OK_UPDATE);
	PG_RETURN_DATUM(WfApiReturn(CStringGetTextDatum(cmd.run.current_step), false, -1));
}
