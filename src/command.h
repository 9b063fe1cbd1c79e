/*-------------------------------------------------------------------------
 *
 * command.h
 *	  The begin and finish of a run command: one SQL-callable call that
 *	  locks one run and writes one transition of it.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/command.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_COMMAND_H
#define WF_COMMAND_H

#include "fmgr.h"
#include "utils/uuid.h"

#include "definition.h"
#include "state.h"
#include "transition.h"

/* a status in WfRunCommandSpec.applies_to: WF_STATUS_BIT(WF_RUN_PAUSED) */
#define WF_STATUS_BIT(s) (((uint32) 1) << (s))
/* ... by its name: WF_ST(PAUSED) */
#define WF_ST(name) WF_STATUS_BIT(WF_RUN_##name)

/* the refusal hint for a run in one particular status */
typedef struct WfStatusHint
{
	WfRunStatus status;
	const char *hint;			/* NULL: the end of the list */
} WfStatusHint;

/* what a run command applies to, and how it refuses the rest */
typedef struct WfRunCommandSpec
{
	const char *what;			/* "cannot <what> run <id>" */
	uint32		applies_to;		/* WF_STATUS_BITs; 0: a run in any status */
	const char *hint;			/* of the refusal, for any other status */
	WfStatusHint hints[3];		/* of the refusal, for particular statuses */
	const char *quota_hint;		/* not NULL: the command appends to the run
								 * without moving it on, and is refused at
								 * its event limit (WfCheckEventQuota) */
} WfRunCommandSpec;

/* a run command under way */
typedef struct WfRunCommand
{
	pg_uuid_t  *run_id;
	WfRunState	run;			/* the locked run, as the transition changes it */
	WfDefinition *def;			/* its definition */
	char	   *reason;			/* the operator's, recorded with the command */
	const char *old_status;		/* the run's status when it was locked */
	WfTransition tr;
} WfRunCommand;

extern void WfRunCommandBegin(WfRunCommand *cmd, pg_uuid_t *run_id, char *reason,
							  const WfRunCommandSpec *spec);
extern void WfRunCommandBeginCall(WfRunCommand *cmd, FunctionCallInfo fcinfo,
								  int reason_arg, const WfRunCommandSpec *spec);
extern void WfRunCommandWrite(WfRunCommand *cmd, const char *note);
extern Datum WfRunCommandFinish(WfRunCommand *cmd, const char *kind);

#endif							/* WF_COMMAND_H */
