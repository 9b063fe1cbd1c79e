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

#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "state.h"
#include "transition.h"

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

/* locking, in the lock order: task row, then run row */
extern bool WfLockTaskAndRun(int64 task_id, const char *tenant, WfRunState *run,
							 WfLockedTask *task);
extern bool WfLockRunAndTask(pg_uuid_t *run_id, const char *tenant, WfRunState *run);
extern void WfLockRun(pg_uuid_t *run_id, WfRunState *run);
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

extern bool WfLockTimerAndRun(int64 timer_id, WfRunState *run, WfLockedTimer *timer);

/* the deadlines of a live attempt (0: none), after WfLockTaskAndRun */
typedef struct WfTaskTimes
{
	TimestampTz deadline;		/* the earliest of them: deadline_at */
	TimestampTz lease_end;
	TimestampTz close_at;
	TimestampTz heartbeat_at;
	TimestampTz start_at;
	int32		expirations;
} WfTaskTimes;

extern void WfTaskTimesFromTuple(WfTaskTimes *t);

/* reading tasks of a locked run */
extern bool WfReadTask(int64 task_id, WfLockedTask *task);
extern int32 WfNextAttempt(pg_uuid_t *run_id, const char *step, int32 visit);

/* writing a transition */
extern void WfTransitionWrite(WfTransition *tr);
extern bool WfTransitionWriteNew(WfTransition *tr, const char *defname,
								 int32 version, Jsonb *input, const char *key);
extern Datum WfHashDatum(const uint8 *hash);

#endif							/* WF_RUNSTORE_H */
