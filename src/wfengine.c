/*-------------------------------------------------------------------------
 *
 * wfengine.c
 *	  Module entry point of wfengine, a durable workflow engine that runs
 *	  inside PostgreSQL.
 *
 * The engine is a state machine over extension-owned tables in schema wf.
 * Every change of a run happens in one transaction that appends events to
 * wf.events (hash-chained, gap-free per run) and rewrites the run's
 * snapshot in wf.runs, so the snapshot can always be rebuilt by replaying
 * the events (wf.verify_run does exactly that).  Workers claim task
 * attempts from wf.tasks with FOR UPDATE SKIP LOCKED; each claim hands out
 * a new fencing token, and a result is applied only when it carries the
 * fence of the current lease of the current attempt.  Everything else is
 * recorded in the history and ignored.
 *
 * _PG_init does no work of its own: it defines the GUCs and initialises
 * each subsystem.  Without shared_preload_libraries the SQL API still
 * works; only the background workers are missing.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/wfengine.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "approval_api.h"
#include "claim.h"
#include "correlate.h"
#include "crypto.h"
#include "ddlguard.h"
#include "defcompile.h"
#include "definition.h"
#include "events.h"
#include "explain.h"
#include "guc.h"
#include "launcher.h"
#include "migrate.h"
#include "notify.h"
#include "operator.h"
#include "publish.h"
#include "quota.h"
#include "replay.h"
#include "result.h"
#include "retention.h"
#include "run.h"
#include "rowwrite.h"
#include "runstore.h"
#include "sensitive.h"
#include "shard.h"
#include "shmem.h"
#include "spi_util.h"
#include "step_approval.h"
#include "step_children.h"
#include "step_choice.h"
#include "step_compensate.h"
#include "step_sleep.h"
#include "step_task.h"
#include "step_wait.h"
#include "stepkind.h"
#include "tenant.h"
#include "timer.h"
#include "transition.h"
#include "waits.h"
#include "version.h"

PG_MODULE_MAGIC;

/* true when the library was loaded by shared_preload_libraries */
static bool wf_preloaded = false;

void		_PG_init(void);

/*
 * The plan tables: each subsystem's statements, registered with the one
 * plan cache (spi_util.c).  A subsystem with statements of its own adds
 * its table here.
 */
static WfPlanTable *const plan_table_list[] =
{
	&WfApprovalApiPlans,
	&WfClaimPlans,
	&WfCorrelatePlans,
	&WfDefinitionPlans,
	&WfEventsPlans,
	&WfExplainPlans,
	&WfMigratePlans,
	&WfNotifyPlans,
	&WfOperatorPlans,
	&WfPublishPlans,
	&WfQuotaPlans,
	&WfReplayPlans,
	&WfResultPlans,
	&WfRetentionPlans,
	&WfRunPlans,
	&WfRunstorePlans,
	&WfSensitivePlans,
	&WfStepApprovalPlans,
	&WfStepChildrenPlans,
	&WfStepCompensatePlans,
	&WfStepWaitPlans,
	&WfTimerPlans,
	&WfTransitionPlans,
	&WfWaitsPlans,
};

/*
 * The step-kind table: which ops serve the steps of each type.  A new step
 * kind is one file (step_<kind>.c, exporting its WfStepKindOps) and one
 * line here.
 */
static const struct
{
	WfStepType	type;
	const WfStepKindOps *ops;
}			step_kind_table[] =
{
	{WF_STEP_TASK, &WfTaskStepKind},
	{WF_STEP_SLEEP, &WfSleepStepKind},
	{WF_STEP_APPROVAL, &WfApprovalStepKind},
	{WF_STEP_CHOICE, &WfChoiceStepKind},
	{WF_STEP_WAIT_EVENT, &WfWaitStepKind},
	{WF_STEP_SUBWORKFLOW, &WfChildrenStepKind},
	{WF_STEP_PARALLEL, &WfChildrenStepKind},
	{WF_STEP_COMPENSATION, &WfCompensationStepKind},
};

PG_FUNCTION_INFO_V1(wfengine_preloaded);

/*
 * _PG_init is called when the library is loaded, either from
 * shared_preload_libraries or on first use.  It initialises each
 * subsystem and nothing else.
 */
void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	wf_preloaded = process_shared_preload_libraries_in_progress;

	WfGucInit();
	for (int i = 0; i < lengthof(step_kind_table); i++)
		WfRegisterStepKind(step_kind_table[i].type, step_kind_table[i].ops);
	WfRegisterUndo(&WfCompensationUndo);
	for (int i = 0; i < lengthof(plan_table_list); i++)
		WfRegisterPlanTable(plan_table_list[i]);
	WfCryptoInit();
	WfQuotaInit();
	WfSensitiveInit();
	WfDefinitionInit();
	WfNotifyInit();
	WfTenantInit();
	WfShardInit();
	WfRegisterResetCallback(WfShardReset);
	WfRegisterResetCallback(WfRowWriteReset);
	WfVersionInit();
	if (wf_preloaded)
	{
		WfShmemInit();
		WfLauncherInit();
		WfDdlGuardInit();
	}
}

/*
 * wfengine_preloaded is wf.preloaded(): true when the library came from
 * shared_preload_libraries.
 */
Datum
wfengine_preloaded(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(wf_preloaded);
}
