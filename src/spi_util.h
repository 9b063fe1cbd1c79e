/*-------------------------------------------------------------------------
 *
 * spi_util.h
 *	  The plan cache: every statement wfengine sends through SPI.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/spi_util.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_SPI_UTIL_H
#define WF_SPI_UTIL_H

#include "executor/spi.h"

/* one entry per statement; the text lives in spi_util.c */
typedef enum WfPlanId
{
	WF_PLAN_DEF_LATEST = 0,
	WF_PLAN_DEF_VERSION,
	WF_PLAN_DEF_BY_ID,
	WF_PLAN_DEF_BY_DIGEST,
	WF_PLAN_DEF_INSERT,
	WF_PLAN_RUN_INSERT,
	WF_PLAN_RUN_BY_KEY,
	WF_PLAN_LOCK_TASK_AND_RUN,
	WF_PLAN_RUN_GET,
	WF_PLAN_RUN_STATUS,
	WF_PLAN_TASK_FINISH,
	WF_PLAN_TASKS_OF_RUN,
	WF_PLAN_RUN_IDENTITY,
	WF_PLAN_TRANSITION,
	WF_PLAN_CLAIM,
	WF_PLAN_EVENTS_GET,
	WF_PLAN_TIMER_INSERT,
	WF_PLAN_TASK_WITHDRAW,
	WF_PLAN_TIMERS_CANCEL,
	WF_PLAN_TIMERS_DUE,
	WF_PLAN_DEADLINES_DUE,
	WF_PLAN_NEXT_DUE,
	WF_PLAN_TIMER_PEEK,
	WF_PLAN_TASK_LOCK,
	WF_PLAN_LOCK_TIMER_AND_RUN,
	WF_PLAN_TIMER_DONE,
	WF_PLAN_TIMER_ERROR,
	WF_PLAN_TASK_SET_DEADLINE,
	WF_PLAN_TASK_REQUEUE,
	WF_PLAN_HEARTBEAT,
	WF_PLAN_TASK_TIME_OUT,
	WF_PLAN_APPROVALS_INSERT,
	WF_PLAN_APPROVALS_CLOSE,
	WF_PLAN_APPROVALS_PENDING,
	WF_PLAN_APPROVAL_SET_TOKEN,
	WF_PLAN_APPROVAL_BY_HASH,
	WF_PLAN_APPROVAL_CONSUME,
	WF_PLAN_APPROVAL_TALLY,
	WF_PLAN_RUN_LOCK,
	WF_PLAN_ATTEMPT_INSERT,
	WF_PLAN_DECIDE_LOCKED,
	WF_PLAN_DECIDE_THROTTLE,
	WF_PLAN_DECIDE_FAILURE,
	WF_PLAN_APPROVALS_REVOKE_TOKENS,
	WF_PLAN_APPROVALS_REMOVE,
	WF_PLAN_APPROVALS_ADD,
	WF_PLAN_APPROVAL_EXPIRES,
	WF_PLAN_RUN_CURRENT_TASK,
	WF_PLAN_APPROVALS_CLOSE_RUN,
	WF_PLAN_SIGNAL_INSERT,
	WF_PLAN_SIGNAL_TAKE,
	WF_PLAN_TASK_PEEK,
	WF_PLAN_TIMER_HOLD,
	WF_PLAN_TIMERS_UNHOLD,
	WF_PLAN_TASK_ROW,
	WF_PLAN_LAST_TASK_OF_STEP,
	WF_PLAN_LAST_HELD_RESULT,
	WF_PLAN_TASK_RESUME,
	WF_PLAN_COMPLETED_STEPS,
	WF_PLAN_CORRELATION_INSERT,
	WF_PLAN_MIGRATION_PROBLEM,
	WF_PLAN_RUN_SET_VERSION,
	WF_PLAN_RUN_SET_PARENT,
	WF_PLAN_STOP_CHILDREN,
	WF_PLAN_CHANNEL_KEY,
	WF_PLAN_CHANNEL_KEY_INSERT,
	WF_PLAN_PURGE,
	WF_PLAN_RUN_SET_HOLD,
	WF_PLAN_TENANT_POLICY,
	WF_PLAN_LIVE_RUNS,
	WF_PLAN_TASKS_IN_FLIGHT,
	WF_PLAN_TIMERS_PENDING,
	WF_PLAN_TIMERS_SUPERSEDE,
	WF_PLAN_SUPPRESSED_EVENT,
	WF_PLAN_TENANT_KEY,
	WF_PLAN_TENANT_KEY_INSERT,
	WF_PLAN_TENANT_KEY_REWRAP,
	WF_PLAN_TENANT_KEY_MAX,
	WF_PLAN_TENANT_KEY_CURRENT,
	WF_PLAN_TENANT_KEYS_LIVE,
	WF_PLAN_TENANT_KEYS_DESTROY,
	WF_PLAN_NEXT_AVAILABLE,
	WF_PLAN_COUNTED_ATTEMPTS,
	WF_PLAN_EVENT_RUNS,
	WF_PLAN_BUFFERED_COUNT,
	WF_PLAN_BUFFERED_EXISTS,
	WF_PLAN_BUFFERED_INSERT,
	WF_PLAN_BUFFERED_FOR_KEY,
	WF_PLAN_BUFFERED_DELIVER,
	WF_PLAN_CHAIN_HEADS,
	WF_PLAN_COUNT				/* must be last */
} WfPlanId;

extern const char *WfPlanSql(WfPlanId id);
extern void WfApiBegin(void);
extern void WfApiEnd(void);
extern Oid	WfTaskIdSequence(void);
extern Oid	WfTimerIdSequence(void);
extern bool WfParseTimestamp(const char *text, TimestampTz *result);

/* the low bits of a fence: a value of wf.fence_seq (see WfFenceBase) */
#define WF_FENCE_SEQ_BITS 44
extern int64 WfFenceBase(void);
extern uint64 WfExecPlan(WfPlanId id, Datum *values, const char *nulls,
						 bool read_only, long tcount, int expected_rc);
extern uint64 WfExecPlanFresh(WfPlanId id, Datum *values, const char *nulls, long tcount);
extern Datum WfGetDatum(int row, int col, bool *isnull);
extern Datum WfGetDatumNotNull(int row, int col);
extern char *WfGetTextOrNull(int row, int col);
extern void WfRegisterResetCallback(void (*callback) (void));
extern bool WfTryInSubxact(void (*fn) (void *arg), void *arg, char **failure);
extern bool WfTryInSubxactCatching(void (*fn) (void *arg), void *arg, int sqlerrcode);

#endif							/* WF_SPI_UTIL_H */
