/*-------------------------------------------------------------------------
 *
 * command.c
 *	  The begin and finish of a run command, for the SQL-callable entry
 *	  points (run.c, operator.c, approval_api.c, migrate.c, retention.c).
 *
 * A run command is one call that changes one run of the session's tenant
 * by one transition, under the run lock.  Every one goes the same way:
 *
 *	WfRunCommandBegin	opens the API call (WfApiBegin), locks the run (its
 *						live task first, then the run row: WfLockRun),
 *						refuses a run in a status the command does not apply
 *						to (WfRefuseRun, with the command's hint), refuses a
 *						run at its event limit when the command is one a
 *						caller could repeat without bound (WfCheckEventQuota),
 *						and starts the transition on the run's definition;
 *	(the command)		appends its events to cmd->tr;
 *	WfRunCommandWrite	writes the transition (WfTransitionWrite) and tells
 *						subscribers of the change (WfNoteRunChange), if asked;
 *	WfRunCommandFinish	does that and returns the run's new status as text,
 *						copied out of SPI, and ends the API call.
 *
 * A command that answers something else than the status ends with
 * WfRunCommandWrite and WfApiReturn.  The caller checks its arguments
 * before WfRunCommandBegin.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/command.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "command.h"
#include "definition.h"
#include "notify.h"
#include "quota.h"
#include "runstore.h"
#include "spi_util.h"
#include "state.h"
#include "transition.h"

/*
 * refusal_hint returns the hint spec gives for a run in status.
 */
static const char *
refusal_hint(const WfRunCommandSpec *spec, WfRunStatus status)
{
	const WfStatusHint *h;

	for (h = spec->hints; h < spec->hints + lengthof(spec->hints) && h->hint != NULL; h++)
		if (h->status == status)
			return h->hint;
	return spec->hint;
}

/*
 * WfRunCommandBegin opens the API call of a run command on run run_id, for
 * reason, and locks the run; it refuses an unknown run, one the command
 * does not apply to in its status, and (when spec has a quota_hint) one at
 * its event limit; then it starts the transition (cmd->tr) on the run's
 * definition.
 */
void
WfRunCommandBegin(WfRunCommand *cmd, pg_uuid_t *run_id, char *reason,
				  const WfRunCommandSpec *spec)
{
	cmd->run_id = run_id;
	cmd->reason = reason;
	WfApiBegin();
	WfLockRun(run_id, &cmd->run);
	cmd->old_status = WfRunStatusName(cmd->run.status);
	if (spec->applies_to != 0 && (spec->applies_to & WF_STATUS_BIT(cmd->run.status)) == 0)
		WfRefuseRun(run_id, cmd->old_status, spec->what,
					refusal_hint(spec, cmd->run.status));
	if (spec->quota_hint != NULL)
		WfCheckEventQuota(&cmd->run, spec->quota_hint);
	cmd->def = WfDefinitionGet(cmd->run.definition_id);
	WfTransitionInit(&cmd->tr, &cmd->run, cmd->def, GetCurrentTimestamp());
}

/*
 * WfRunCommandBeginCall begins the run command of a call whose run is
 * argument 0 and whose reason is argument reason_arg, checking them in
 * that order first.
 */
void
WfRunCommandBeginCall(WfRunCommand *cmd, FunctionCallInfo fcinfo, int reason_arg,
					  const WfRunCommandSpec *spec)
{
	pg_uuid_t  *run_id = WfRunArgument(fcinfo);
	char	   *reason = WfRequireReason(fcinfo, reason_arg);

	WfRunCommandBegin(cmd, run_id, reason, spec);
}

/*
 * WfRunCommandWrite writes the command's transition and then, when note
 * is not NULL, tells the run's subscribers note.
 */
void
WfRunCommandWrite(WfRunCommand *cmd, const char *note)
{
	WfTransitionWrite(&cmd->tr);
	if (note != NULL)
		WfNoteRunChange(cmd->run.tenant_id, &cmd->run.run_id, note);
}

/*
 * WfRunCommandFinish writes the command's transition, tells subscribers
 * kind (the run's status instead when the command ended the run, or when
 * kind is NULL), ends the API call and returns the run's new status as
 * text.
 */
Datum
WfRunCommandFinish(WfRunCommand *cmd, const char *kind)
{
	const char *status = WfRunStatusName(cmd->run.status);

	WfRunCommandWrite(cmd, cmd->run.finished || kind == NULL ? status : kind);
	return WfApiReturn(CStringGetTextDatum(status), false, -1);
}
