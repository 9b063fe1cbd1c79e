/*-------------------------------------------------------------------------
 *
 * runstore.h
 *	  Locking, reading and writing runs, tasks and timers.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/runstore.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_RUNSTORE_H
#define WF_RUNSTORE_H

#include "spi_util.h"

#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "defcompile.h"
#include "definition.h"
#include "state.h"

/*
 * A transition as it is written: the events of one transaction on one
 * run, the task attempt and timers it adds (built by transition.c).
 */
/* what a transition does to the run's live child runs once written */
#define WF_STOP_NONE 0
#define WF_STOP_CANCEL 1
#define WF_STOP_TERMINATE 2

/*
 * An input that an input mapping made, of this many bytes (its jsonb) or
 * more, is kept in its task_scheduled event only, not copied into its
 * attempt's row too (WfTaskInputAt), as WF_OUTPUT_REF_MIN for outputs.
 */
#define WF_INPUT_REF_MIN 256

/* a task attempt to insert with the transition */
typedef struct WfNewTask
{
	int64		task_id;
	const char *step;
	int32		visit;
	int32		attempt;
	const char *queue;
	const char *activity;
	TimestampTz available_at;
	char	   *idempotency_key;
	Jsonb	   *input;
	bool		input_is_run;	/* input is the run's input as it stands:
								 * written NULL (see WfRunInputOf) */
	int32		input_seq;		/* > 0: input is held by the task_scheduled
								 * of this seq only, written NULL (see
								 * WfTaskInputAt) */
	int64		schedule_to_start;	/* timeouts of the step, microseconds */
	int64		start_to_close;
	int64		heartbeat;
	int32		priority;		/* claimed before lower ones of its queue */
} WfNewTask;

/*
 * A lease that a transition may write its new task attempt with (eager
 * dispatch, batch.c): the task is inserted already leased to worker, as
 * wf.claim_tasks would have leased it, when it goes to queue (NULL: any
 * queue, wf.start_and_claim), can be claimed now, and the tenant does not
 * limit its tasks in flight.
 */
typedef struct WfLeaseOffer
{
	const char *queue;
	const char *worker;
	Interval   *lease;
} WfLeaseOffer;

/* the lease a new task attempt was written with */
typedef struct WfTaskLease
{
	int64		fence;
	TimestampTz expires_at;		/* claimed_at + lease */
	TimestampTz timeout_at;		/* claimed_at + start_to_close; 0: none */
	TimestampTz deadline_at;	/* the earliest of them and the heartbeat's */
} WfTaskLease;

/*
 * The new task attempt of a written transition, for eager dispatch, in the
 * memory of the caller of the API call that wrote it (WfScheduledTaskOf).
 */
typedef struct WfScheduledTask
{
	int64		task_id;		/* 0: the transition scheduled none */
	bool		leased;			/* written leased under the offer; then: */
	pg_uuid_t	run_id;
	char	   *step;
	int32		attempt;
	char	   *idempotency_key;
	Jsonb	   *input;
	char	   *queue;			/* (set also when not leased) */
	char	   *activity;		/* NULL: none */
	WfTaskLease lease;
} WfScheduledTask;

/* a timer to insert with the transition */
typedef struct WfNewTimer
{
	int64		timer_id;
	WfTimerKind kind;
	const char *step;
	int32		generation;
	TimestampTz fire_at;
	Jsonb	   *payload;
} WfNewTimer;

#define WF_MAX_TRANSITION_TIMERS 4

#define WF_MAX_TRANSITION_EVENTS 8

/* the events and writes of one transaction on one run */
typedef struct WfTransition
{
	WfRunState *run;
	const WfDefinition *def;
	const char *actor;
	TimestampTz now;
	int			nevents;
	WfEvent		events[WF_MAX_TRANSITION_EVENTS];
	bool		has_task;
	WfNewTask	task;
	int			ntimers;
	WfNewTimer	timers[WF_MAX_TRANSITION_TIMERS];
	int64		withdraw_task;	/* live task to cancel, 0 = none */
	int32		withdraw_expirations;	/* its lease expirations, if counted */
	int			stop_children;	/* WF_STOP_*: live child runs to stop */
	bytea	   *input_digest;	/* a new keyed run: WfInputDigest, else NULL */
	/* the run's input before the transition's first context_updated (NULL: none) */
	Jsonb	   *input_before;
	/* rows a step kind writes after the run's (its WfStepKindOps.write) */
	void	   *kind_writes[WF_STEP_KIND_SLOTS];
	/* the live task whose result this transition records (0: none) */
	int64		finish_task;
	const char *finish_status;	/* "completed" or "failed" */
	Jsonb	   *finish_output;
	Jsonb	   *finish_error;
	/* eager dispatch: a lease for the new task (NULL: none), and its use */
	const WfLeaseOffer *offer;
	bool		task_leased;	/* the new task was written leased */
	WfTaskLease lease;			/* then: the lease it was written with */
	/* the run's context with its outputs put back (runstore.c), and the
	 * context it was made from */
	Jsonb	   *whole_context;
	Jsonb	   *whole_context_of;
} WfTransition;

/*
 * SQL fragments of the statements that read and write runs and tasks,
 * for the plan tables of the files that run them.
 */

/* the snapshot columns, in the order WfRunStateFromTuple reads them */
#define WF_RUN_COLUMNS \
	"r.run_id, r.tenant_id, r.definition_id, r.status, r.current_step, " \
	"r.seq, r.context, r.output, r.last_hash, r.updated_at, r.finished_at, " \
	"r.current_attempt, r.current_task, r.step_generation, r.wait_generation, r.input "

/*
 * A new fence of the task row t: the next value of wf.fence_seq on top of
 * the timeline bits base (a parameter, from WfFenceBase()), and never
 * below the task's last fence plus one.  See WfFenceBase.
 */
#define WF_NEW_FENCE(base) \
	"GREATEST(" base " OPERATOR(pg_catalog.+)" \
	" pg_catalog.nextval('wf.fence_seq'::pg_catalog.regclass)," \
	" t.fence OPERATOR(pg_catalog.+) 1)"

/* the columns of WF_RUN_COLUMNS, as WfRunStateFromTuple reads them */
typedef enum WfRunColumn
{
	WF_RUN_COL_RUN_ID = 1,
	WF_RUN_COL_TENANT_ID,
	WF_RUN_COL_DEFINITION_ID,
	WF_RUN_COL_STATUS,
	WF_RUN_COL_CURRENT_STEP,
	WF_RUN_COL_SEQ,
	WF_RUN_COL_CONTEXT,
	WF_RUN_COL_OUTPUT,
	WF_RUN_COL_LAST_HASH,
	WF_RUN_COL_UPDATED_AT,
	WF_RUN_COL_FINISHED_AT,
	WF_RUN_COL_CURRENT_ATTEMPT,
	WF_RUN_COL_CURRENT_TASK,
	WF_RUN_COL_STEP_GENERATION,
	WF_RUN_COL_WAIT_GENERATION,
	WF_RUN_COL_INPUT			/* read only: put back into the context */
} WfRunColumn;

/* reading the snapshot: the number of columns of WF_RUN_COLUMNS */
#define WF_RUN_NCOLUMNS 16

/* the columns of run_read (WfReadRun) after the run's */
typedef enum WfRunReadColumn
{
	WF_RUN_READ_COL_DEFINITION_NAME = WF_RUN_NCOLUMNS + 1,
	WF_RUN_READ_COL_DEFINITION_VERSION
} WfRunReadColumn;

/* the columns of last_task_of_step */
typedef enum WfLastTaskColumn
{
	WF_LAST_TASK_COL_STATUS = 1,
	WF_LAST_TASK_COL_VISIT,
	WF_LAST_TASK_COL_ATTEMPT,
	WF_LAST_TASK_COL_INPUT
} WfLastTaskColumn;
extern void WfRunStateFromTuple(WfRunState *run, int row);

/* the task row WfLockTaskAndRun reads with its run */
typedef struct WfLockedTask
{
	char	   *status;
	int64		fence;			/* the current fence */
	char	   *step;
	int32		visit;
	int32		attempt;
	char	   *worker;
	Jsonb	   *input;			/* NULL when input_seq is set */
	int32		input_seq;		/* > 0: the input is in the history, in
								 * that event (WfTaskInputAt); a retry's
								 * timer names it */
} WfLockedTask;

/* the deadlines of a live attempt (0: none), read by WfLockTaskAndRun */
typedef struct WfTaskTimes
{
	TimestampTz deadline;		/* the earliest of them: deadline_at */
	TimestampTz lease_end;
	TimestampTz close_at;
	TimestampTz heartbeat_at;
	TimestampTz start_at;
	int32		expirations;
} WfTaskTimes;

/* locking, in the lock order: task row, then run row */
extern bool WfLockTaskAndRun(int64 task_id, const char *tenant, WfRunState *run,
							 WfLockedTask *task, WfTaskTimes *times);
extern bool WfTakeTaskAndLockRun(int64 task_id, int64 fence, const char *tenant,
								 WfRunState *run, WfLockedTask *task);
extern void WfPutBackTask(void);
extern bool WfFindCompletedTask(int64 task_id, const char *tenant, WfLockedTask *task,
								pg_uuid_t *run_id);
extern bool WfLockCompletedTask(int64 task_id, const char *tenant, WfRunState *run,
								WfLockedTask *task);
extern bool WfLockRunAndTask(pg_uuid_t *run_id, const char *tenant, WfRunState *run);
extern void WfLockRun(pg_uuid_t *run_id, WfRunState *run);
extern void WfReadRun(pg_uuid_t *run_id, WfRunState *run);
extern void WfLockLiveRun(pg_uuid_t *run_id, WfRunState *run, const char *refusal,
						  const char *hint);

/* a timer row, as WfLockTimerAndRun reads it with its run */
typedef struct WfLockedTimer
{
	WfTimerKind kind;
	char	   *step;
	int32		generation;
	Jsonb	   *payload;
	char	   *status;
	TimestampTz due_at;
} WfLockedTimer;

extern bool WfLockTimerAndRun(int64 timer_id, const char *tenant, WfRunState *run,
							  WfLockedTimer *timer);


/* reading tasks of a locked run */
extern bool WfReadTask(int64 task_id, WfLockedTask *task);
extern int32 WfNextAttempt(pg_uuid_t *run_id, const char *step, int32 visit);

/* writing a transition */
extern void WfTransitionWrite(WfTransition *tr);
extern bool WfTransitionWriteNew(WfTransition *tr, const char *defname,
								 int32 version, Jsonb *input, const char *key);
extern void WfScheduledTaskOf(const WfTransition *tr, WfScheduledTask *out);

/* the run's context with the step outputs it refers to (state.c) */
extern Jsonb *WfRunContextForPath(WfTransition *tr, Datum path);
extern Jsonb *WfRunEvaluateMapping(WfTransition *tr, const WfMapping *map, int n);
extern Jsonb *WfRunContextForChildren(WfTransition *tr);
extern Jsonb *WfRunContextForStep(WfTransition *tr, const char *step);
extern Jsonb *WfRunContextWhole(const WfRunState *run);

/* a task attempt's input, for the attempts whose row holds none */
extern Jsonb *WfRunInputOf(Jsonb *context, Jsonb *stored);
extern Jsonb *WfTaskInputAt(pg_uuid_t *run_id, const char *tenant, int32 seq);
extern Datum WfHashDatum(const uint8 *hash);


/* the statements of runstore.c */
typedef enum WfRunstorePlan
{
	WF_RUNSTORE_TIMER_INSERT = 0,
	WF_RUNSTORE_TIMERS_CANCEL,
	WF_RUNSTORE_TIMER_PEEK,
	WF_RUNSTORE_TASK_LOCK,
	WF_RUNSTORE_LOCK_TIMER_AND_RUN,
	WF_RUNSTORE_RUN_LOCK,
	WF_RUNSTORE_RUN_CURRENT_TASK,
	WF_RUNSTORE_TASK_ROW,
	WF_RUNSTORE_LAST_TASK_OF_STEP,
	WF_RUNSTORE_TASK_RESUME,
	WF_RUNSTORE_RUN_READ,
	/* the locking statements above with NOWAIT (WfSetLockWait(false)) */
	WF_RUNSTORE_TASK_LOCK_NOWAIT,
	WF_RUNSTORE_LOCK_TIMER_AND_RUN_NOWAIT,
	WF_RUNSTORE_RUN_LOCK_NOWAIT,
	WF_RUNSTORE_KEEP_TASK_INPUTS,
	WF_RUNSTORE_COMPLETED_TASK,
	WF_RUNSTORE_EVENT_OUTPUTS,
	WF_RUNSTORE_EVENT_ROW
} WfRunstorePlan;

extern PGDLLIMPORT WfPlanTable WfRunstorePlans;

#endif							/* WF_RUNSTORE_H */
