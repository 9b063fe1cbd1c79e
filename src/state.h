/*-------------------------------------------------------------------------
 *
 * state.h
 *	  The run state: its snapshot, its events, their names, and the reducer
 *	  that applies one event to a snapshot (live and in replay).
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

#include "crypto.h"
#include "jsonutil.h"

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
	Jsonb	   *input;			/* wf.runs.input as read (NULL: not read);
								 * the stored context leaves out an equal
								 * input (runstore.c) */
	Jsonb	   *output;			/* NULL until the run completes */
	uint8		last_hash[WF_HASH_LEN];
	TimestampTz updated_at;
	bool		finished;		/* finished_at is set */
	TimestampTz finished_at;
	bool		output_refs;	/* a large step output is kept in the
								 * history only (WF_OUTPUT_SEQ_KEY) */
} WfRunState;

/*
 * A step output of this many bytes (its jsonb) or more is not copied into
 * the context: $.steps.<step> keeps, instead of "output", the seq of the
 * event that holds it (WF_OUTPUT_SEQ_KEY), so that a step does not write
 * again every large output before it.  Readers of outputs resolve it
 * (WfContextOutputSeqs, WfContextWithOutputs).
 */
#define WF_OUTPUT_REF_MIN 256
#define WF_OUTPUT_SEQ_KEY "output_seq"
/* the same for the branch outputs of $.children.<step>.outputs: an array
 * of the seqs of the child_finished events that hold them (null: none) */
#define WF_OUTPUT_SEQS_KEY "output_seqs"

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

/* naming */
extern const char *WfRunStatusName(WfRunStatus status);
extern WfRunStatus WfRunStatusFromName(const char *name);
extern const char *WfEventTypeName(WfEventType type);
extern WfEventType WfEventTypeFromName(const char *name);
extern const char *WfTimerKindName(WfTimerKind kind);
extern WfTimerKind WfTimerKindFromName(const char *name);

/* the reducer, shared by live transitions and replay */
extern const char *WfApplyEvent(WfRunState *run, const WfEvent *ev);
extern void WfHashEventFor(const WfRunState *run, WfEvent *ev);

/* events that share a row of wf.events (its column "more") */
extern bool WfEventRidesAlong(WfEventType type);
extern text *WfPackEvents(const WfEvent *evs, int n);
extern WfEvent *WfUnpackEvents(const WfEvent *head, text *more, int *n);
extern void WfHashEventsFrom(const WfRunState *run, const uint8 *last_hash,
							 WfEvent *evs, int n);
extern Jsonb *WfMergeInput(Jsonb *context, Jsonb *patch);
struct WfStepsRead;
extern bool WfContextMayReferToOutputs(Jsonb *context);
extern int	WfContextOutputSeqs(Jsonb *context, const struct WfStepsRead *wanted,
								int32 **seqs);
extern Jsonb *WfContextWithOutputs(Jsonb *context, int n, const int32 *seqs,
								   Jsonb **outputs);
extern Jsonb *WfEventOutput(const WfEvent *ev);
extern WfRunStatus WfUndoingStatus(const WfRunState *run);

#endif							/* WF_STATE_H */
