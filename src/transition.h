/*-------------------------------------------------------------------------
 *
 * transition.h
 *	  One transaction's transition of one run: its events, the task
 *	  attempt and timers it adds, and the functions that build it.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/transition.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_TRANSITION_H
#define WF_TRANSITION_H

#include "spi_util.h"

#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "definition.h"
#include "runstore.h"
#include "jsonutil.h"
#include "state.h"

/* a task attempt's result, as a worker reported it (or as it was held) */
typedef struct WfTaskResult
{
	int64		task_id;
	int64		fence;
	int32		visit;
	const char *worker;
	bool		is_failure;
	Jsonb	   *output;			/* a completion's */
	Jsonb	   *error;			/* a failure's */
	bool		retryable;		/* a failure's */
	Jsonb	   *input;			/* the attempt's input, for a retry */
	int32		input_seq;		/* > 0: instead, the seq of the event that
								 * holds it (WfTaskInputAt), input NULL */
} WfTaskResult;

/* how wf.tick's firing of one timer ended */
typedef enum WfTimerOutcome
{
	WF_TIMER_APPLIED,
	WF_TIMER_HELD,				/* the run is paused: due again on resume */
	WF_TIMER_STALE
} WfTimerOutcome;

/* a live attempt whose deadline passed, as the engine worker found it */
typedef struct WfTaskDeadline
{
	int64		task_id;
	const char *step;
	int32		visit;
	int32		attempt;
	int64		fence;
	const char *worker;
	Jsonb	   *input;
	int32		input_seq;		/* as WfTaskResult's */
	bool		leased;			/* false: still ready (never claimed) */
	const char *timeout;		/* the timeout that passed, or NULL */
	bool		lease_expired;	/* its lease ended (and no timeout passed) */
	int32		expirations;	/* its lease expirations so far */
} WfTaskDeadline;

/* building a transition */
extern void WfTransitionInit(WfTransition *tr, WfRunState *run,
							 const WfDefinition *def, TimestampTz now);
extern void WfAppendEvent(WfTransition *tr, WfEventType type,
						  const char *step, int32 attempt, Jsonb *payload);
extern int32 WfNextVisit(WfRunState *run, const char *step);
extern char *WfTaskIdempotencyKey(const char *run_id, const char *step, int32 visit);
extern int64 WfSetTimer(WfTransition *tr, WfTimerKind kind, const char *step,
						int32 generation, TimestampTz fire_at, Jsonb *payload);
extern void WfScheduleStep(WfTransition *tr, int step_index, int32 attempt,
						   TimestampTz available_at, Jsonb *input);
extern void WfScheduleTask(WfTransition *tr, const WfStepDef *sd, int32 visit,
						   int32 attempt, TimestampTz available_at, Jsonb *input);
extern void WfEnterStep(WfTransition *tr, int step_index);
extern void WfFinishVisit(WfTransition *tr, int step_index, WfEventType type, int32 visit,
						  Jsonb *output, int next, bool name_next);
extern void WfAdvance(WfTransition *tr, int from_step);
extern void WfAdvanceTo(WfTransition *tr, int from_step, int next);
extern void WfWithdrawCurrentTask(WfTransition *tr, const char *reason);
extern void WfFailRun(WfTransition *tr, const char *step, const char *reason,
					  Jsonb *error);
extern void WfTerminateRun(WfTransition *tr, const char *reason);
extern int64 WfRetryDelay(const WfRetryPolicy *rp, int32 attempt);

/* what happens to a run: results, timers, deadlines, commands */
extern void WfJbTaskResult(WfJsonBuilder *b, const WfTaskResult *res);
extern void WfTaskCompleted(WfTransition *tr, const WfStepDef *sd, const WfTaskResult *res);
extern void WfApplyResult(WfTransition *tr, int step_index, const WfTaskResult *res);
extern void WfApplyHeldResult(WfTransition *tr, int step_index, const char *task_status);
extern WfTimerOutcome WfApplyTimer(WfTransition *tr, int64 timer_id, WfTimerKind kind,
								   const char *step, int32 generation,
								   Jsonb *payload, TimestampTz due_at);
extern void WfApplyDeadline(WfTransition *tr, WfTaskDeadline *dl);
extern void WfLeaveStep(WfTransition *tr, int step_index, const char *reason);
extern void WfResumeStep(WfTransition *tr, int step_index);
extern void WfRescheduleWithdrawn(WfTransition *tr, int step_index);
extern void WfRescheduleWithdrawnAsBefore(WfTransition *tr, int step_index);


/* the statements of transition.c */
extern PGDLLIMPORT WfPlanTable WfTransitionPlans;

#endif							/* WF_TRANSITION_H */
