/*-------------------------------------------------------------------------
 *
 * state.h
 *	  The run state machine: snapshot, events, the reducer and transitions.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/state.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STATE_H
#define WF_STATE_H

#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "definition.h"
#include "jsonutil.h"
#include "wfengine.h"

/* run states, as stored in wf.runs.status */
typedef enum WfRunStatus
{
	WF_RUN_NONE = 0,			/* before run_started has been applied */
	WF_RUN_RUNNING = 1,
	WF_RUN_COMPLETED = 2,
	WF_RUN_FAILED = 3,
	WF_RUN_PAUSED = 4,
	WF_RUN_TERMINATED = 5,
	WF_RUN_CANCELLING = 6,		/* wf.cancel_run: compensating */
	WF_RUN_CANCELLED = 7,
	WF_RUN_COMPENSATION_FAILED = 8,
	WF_RUN_COMPENSATING = 9,	/* on_failure "compensate": undoing a failure */
	WF_RUN_COMPENSATED = 10		/* failed, and its compensations all ran */
} WfRunStatus;

#define WF_RUN_LAST WF_RUN_COMPENSATED

/* the run is undoing its steps: after wf.cancel_run, or a failure (saga) */
#define WF_RUN_UNDOING(s) ((s) == WF_RUN_CANCELLING || (s) == WF_RUN_COMPENSATING)

/* event types, as stored in wf.events.type */
typedef enum WfEventType
{
	WF_EV_RUN_STARTED = 1,
	WF_EV_TASK_SCHEDULED = 2,
	WF_EV_TASK_COMPLETED = 3,
	WF_EV_TASK_FAILED = 4,
	WF_EV_RESULT_DUPLICATE = 5,
	WF_EV_RESULT_STALE = 6,
	WF_EV_RUN_COMPLETED = 7,
	WF_EV_RUN_FAILED = 8,
	WF_EV_TIMER_SET = 9,
	WF_EV_TIMER_FIRED = 10,
	WF_EV_SLEEP_STARTED = 11,
	WF_EV_SLEEP_FINISHED = 12,
	WF_EV_LEASE_EXPIRED = 13,
	WF_EV_TASK_CANCELLED = 14,
	WF_EV_RUN_PAUSED = 15,
	WF_EV_APPROVAL_REQUESTED = 16,
	WF_EV_APPROVAL_NOTIFIED = 17,
	WF_EV_APPROVAL_TOKENS_ISSUED = 18,
	WF_EV_APPROVAL_DECIDED = 19,
	WF_EV_DECISION_REFUSED = 20,
	WF_EV_APPROVAL_COMPLETED = 21,
	WF_EV_APPROVAL_TOKENS_REVOKED = 22,
	WF_EV_APPROVERS_CHANGED = 23,
	WF_EV_CHOICE_MADE = 24,
	WF_EV_RUN_TERMINATED = 25,
	WF_EV_CONTEXT_UPDATED = 26,
	WF_EV_WAIT_STARTED = 27,
	WF_EV_SIGNAL_RECEIVED = 28,
	WF_EV_EVENT_RECEIVED = 29,
	WF_EV_RUN_RESUMED = 30,
	WF_EV_RESULT_HELD = 31,
	WF_EV_STEP_RETRIED = 32,
	WF_EV_STEP_SKIPPED = 33,
	WF_EV_CANCEL_REQUESTED = 34,
	WF_EV_COMPENSATION_STARTED = 35,
	WF_EV_RUN_CANCELLED = 36,
	WF_EV_COMPENSATION_FAILED = 37,
	WF_EV_WAIT_TIMED_OUT = 38,
	WF_EV_RUN_MIGRATED = 39,
	WF_EV_CHILDREN_STARTED = 40,
	WF_EV_CHILD_FINISHED = 41,
	WF_EV_CHILDREN_JOINED = 42,
	WF_EV_LEGAL_HOLD_SET = 43,
	WF_EV_COMPENSATION_REQUESTED = 44,	/* a saga's failure: undo, not fail */
	WF_EV_RUN_COMPENSATED = 45
} WfEventType;

#define WF_EV_LAST WF_EV_RUN_COMPENSATED

/* kinds of timers, as stored in wf.timers.kind */
typedef enum WfTimerKind
{
	WF_TIMER_RETRY = 1,
	WF_TIMER_SLEEP = 2,
	WF_TIMER_STEP_TIMEOUT = 3,
	WF_TIMER_RUN_TIMEOUT = 4,
	WF_TIMER_APPROVAL_EXPIRY = 5,
	WF_TIMER_CHILD_DONE = 6		/* a child run ended: tells its parent */
} WfTimerKind;

/* what a transition does to the run's live child runs once written */
#define WF_STOP_NONE 0
#define WF_STOP_CANCEL 1
#define WF_STOP_TERMINATE 2

/* the snapshot of one run: wf.runs, plus what the reducer tracks */
typedef struct WfRunState
{
	pg_uuid_t	run_id;
	char	   *tenant_id;
	int64		definition_id;
	WfRunStatus status;
	char	   *current_step;	/* NULL when no step is active */
	int32		current_attempt;	/* attempt of the live task, 0 = none */
	int64		current_task;	/* task_id of the live task, 0 = none */
	int32		step_generation;	/* seq that began the current step visit */
	int32		wait_generation;	/* seq that began the current wait, 0 = none */
	int32		seq;			/* seq of the last event */
	Jsonb	   *context;		/* {"input": ..., "steps": {...}} */
	Jsonb	   *output;			/* NULL until the run completes */
	uint8		last_hash[WF_HASH_LEN];
	TimestampTz updated_at;
	bool		finished;		/* finished_at is set */
	TimestampTz finished_at;
} WfRunState;

/* one event, as appended */
typedef struct WfEvent
{
	int32		seq;
	WfEventType type;
	const char *step;			/* NULL when none */
	int32		attempt;		/* 0 when none */
	Jsonb	   *payload;
	const char *actor;
	TimestampTz created_at;
	uint8		hash[WF_HASH_LEN];
} WfEvent;

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
	int64		schedule_to_start;	/* timeouts of the step, microseconds */
	int64		start_to_close;
	int64		heartbeat;
	int32		priority;		/* claimed before lower ones of its queue */
} WfNewTask;

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
	/* approvers to insert for a new approval step visit */
	int			n_approvers;
	char	  **approvers;
	const char *approval_step;
	int32		approval_visit;
	TimestampTz approval_expires;	/* 0 = never */
	bool		close_approvals;	/* close the current visit's tokens */
	int32		withdraw_expirations;	/* its lease expirations, if counted */
	int			stop_children;	/* WF_STOP_*: live child runs to stop */
	bytea	   *input_digest;	/* a new keyed run: WfInputDigest, else NULL */
} WfTransition;

/* naming */
extern const char *WfRunStatusName(WfRunStatus status);
extern WfRunStatus WfRunStatusFromName(const char *name);
extern const char *WfEventTypeName(WfEventType type);
extern WfEventType WfEventTypeFromName(const char *name);

/* the reducer, shared by live transitions and replay */
extern const char *WfApplyEvent(WfRunState *run, const WfEvent *ev);
extern void WfHashEventFor(const WfRunState *run, WfEvent *ev);

/* building transitions */
extern void WfTransitionInit(WfTransition *tr, WfRunState *run,
							 const WfDefinition *def, TimestampTz now);
extern void WfAppendEvent(WfTransition *tr, WfEventType type,
						  const char *step, int32 attempt, Jsonb *payload);
extern void WfScheduleStep(WfTransition *tr, int step_index, int32 attempt,
						   TimestampTz available_at, Jsonb *input);
extern void WfScheduleTask(WfTransition *tr, const WfStepDef *sd, int32 visit,
						   int32 attempt, TimestampTz available_at, Jsonb *input);
extern void WfAdvance(WfTransition *tr, int from_step);
extern void WfAdvanceTo(WfTransition *tr, int from_step, int next);
extern void WfEnterStep(WfTransition *tr, int step_index);
extern int64 WfSetTimer(WfTransition *tr, WfTimerKind kind, const char *step,
						int32 generation, TimestampTz fire_at, Jsonb *payload);
extern void WfFailAttempt(WfTransition *tr, const WfStepDef *sd, int64 task_id,
						  int64 fence, int32 attempt, int32 visit,
						  const char *worker, Jsonb *error, bool retryable,
						  Jsonb *input);
extern void WfFailRun(WfTransition *tr, const char *step, const char *reason,
					  Jsonb *error);
extern int64 WfRetryDelay(const WfRetryPolicy *rp, int32 attempt);
extern const char *WfTimerKindName(WfTimerKind kind);
extern void WfWithdrawCurrentTask(WfTransition *tr, const char *reason);
extern int32 WfNextVisit(WfRunState *run, const char *step);
extern bool WfTakeSignal(WfTransition *tr, int step_index);
extern Jsonb *WfMergeInput(Jsonb *context, Jsonb *patch);
extern void WfApplyResult(WfTransition *tr, int step_index, int64 task_id,
						  int64 fence, int32 visit, const char *worker,
						  bool is_failure, Jsonb *output, Jsonb *error,
						  bool retryable, Jsonb *input);
extern void WfFailDamagedTask(int64 task_id, int64 fence, const char *message);

/* children.c */
extern void WfEnterChildren(WfTransition *tr, int step_index);
extern void WfChildFinished(WfTransition *tr, int step_index, Jsonb *payload);
extern void WfNoteChildEnd(WfTransition *tr);
extern void WfStopChildren(WfRunState *run, int how);
extern List *WfWriteCorrelations(const WfDefinition *def, WfRunState *run,
								 Jsonb *input, TimestampTz now);

/* compensate.c */
extern void WfRequestCancel(WfTransition *tr, const char *reason);
extern void WfStartCompensation(WfTransition *tr, const char *settled_step,
								int32 settled_visit);
extern void WfNextCompensation(WfTransition *tr);
extern void WfScheduleCompensation(WfTransition *tr, int32 attempt);
extern void WfCompensationFailed(WfTransition *tr, const char *reason, Jsonb *error);
extern WfRunStatus WfUndoingStatus(const WfRunState *run);
extern void WfCompensateFailure(WfTransition *tr, const char *step, int32 attempt,
								const char *reason, Jsonb *error);

/* approval.c */
extern void WfEnterApproval(WfTransition *tr, int step_index);
extern void WfApprovalNotified(WfTransition *tr, int step_index, int64 task_id,
							   int64 fence, const char *worker, Jsonb *output);
extern void WfApprovalExpired(WfTransition *tr, int step_index);
extern void WfWriteApprovals(WfTransition *tr);
extern bool WfLockRunAndTask(pg_uuid_t *run_id, const char *tenant, WfRunState *run);
extern WfTimerKind WfTimerKindFromName(const char *name);
extern void WfTransitionWrite(WfTransition *tr);
extern bool WfTransitionWriteNew(WfTransition *tr, const char *defname,
								 int32 version, Jsonb *input, const char *key);

/* reading the snapshot: the number of columns of WF_RUN_COLUMNS */
#define WF_RUN_NCOLUMNS 15
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
	Jsonb	   *input;
} WfLockedTask;

extern bool WfLockTaskAndRun(int64 task_id, const char *tenant, WfRunState *run,
							 WfLockedTask *task);




/* parameter helpers for the statements that write transitions */
extern void WfEventArrays(WfTransition *tr, Datum *values);
extern void WfTaskValues(WfTransition *tr, Datum *values, char *nulls);
extern Datum WfHashDatum(const uint8 *hash);
extern void WfRunValues(const WfRunState *run, Datum *values, char *nulls);

/* parameter counts of the statements that write transitions */
#define WF_TASK_NVALUES 12
#define WF_RUN_NVALUES 11
#define WF_TRANSITION_NARGS (10 + WF_TASK_NVALUES + WF_RUN_NVALUES + 1)
#define WF_RUN_INSERT_NARGS (WF_TRANSITION_NARGS + 6)

/* spi_util.c, for timers and timestamps */
extern Oid	WfTimerIdSequence(void);
extern bool WfParseTimestamp(const char *text, TimestampTz *result);

/* run.c */
extern void WfUnknownRun(pg_uuid_t *run_id) pg_attribute_noreturn();
extern pg_uuid_t *WfRunArgument(FunctionCallInfo fcinfo);
extern char *WfRequireReason(FunctionCallInfo fcinfo, int argno);
extern void WfLockRun(pg_uuid_t *run_id, WfRunState *run);
extern const char *WfDeliverSignal(pg_uuid_t *run_id, const char *name, Jsonb *payload,
								   const char *event_id, const char *buffered_key,
								   TimestampTz buffered_at);
extern void WfSignalPayloadAndId(FunctionCallInfo fcinfo, int argno, const char *name,
								 Jsonb **payload, char **event_id);

/* events.c */
extern void WfLockCorrelationKey(const char *tenant, const char *key);
extern void WfDeliverBufferedEvents(const WfDefinition *def, pg_uuid_t *run_id,
									const char *tenant, List *keys);

/* quota.c */
extern bool WfStartQuotaSet(const char *tenant);
extern void WfCheckStartQuota(const char *tenant);
extern void WfCheckDefinitionQuota(const char *tenant, const char *name, int steps, Size bytes,
								   int depth, int timers);
extern bool WfClaimLimited(const char *tenant);
extern int32 WfClaimRoom(const char *tenant, const char *queue, int32 want, bool wait);
extern bool WfTakeTimerRefusal(void);
extern void WfTimerRoom(const char *tenant, pg_uuid_t *run_id, const char *kind,
						const char *step, int32 generation, TimestampTz now);
extern void WfQuotaReset(void);
extern bool WfEventsAtLimit(const WfRunState *run);
extern void WfCheckEventQuota(WfRunState *run, const char *hint);
extern bool WfSuppressAuditEvent(WfTransition *tr, WfEventType type);
extern int32 WfCheckBufferQuota(const char *tenant, TimestampTz now);

/* operator.c */
extern void WfRefuseRun(pg_uuid_t *run_id, const WfRunState *run, const char *what,
						const char *hint) pg_attribute_noreturn();
extern int32 WfNextAttempt(pg_uuid_t *run_id, const char *step, int32 visit);
extern char *WfRunIdText(pg_uuid_t *run_id);

#endif							/* WF_STATE_H */
