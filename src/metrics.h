/*-------------------------------------------------------------------------
 *
 * metrics.h
 *	  Cumulative engine counters and histograms in shared memory.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/metrics.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_METRICS_H
#define WF_METRICS_H

#include "utils/timestamp.h"

/*
 * claim waits are spread over this many condition variables (shmem.c);
 * the metrics keep the time of the last wake-up of each
 */
#define WF_QUEUE_WAIT_BUCKETS 256

/* the counters; their SQL names are in metrics.c (counter_names) */
typedef enum WfCounter
{
	WF_CNT_RUNS_STARTED = 0,
	WF_CNT_TRANSITIONS,
	WF_CNT_EVENTS,
	WF_CNT_CLAIM_CALLS,
	WF_CNT_TASKS_CLAIMED,
	WF_CNT_CLAIM_WAKEUPS,
	WF_CNT_RESULTS_ACCEPTED,
	WF_CNT_RESULTS_CANCEL_REQUESTED,
	WF_CNT_RESULTS_DUPLICATE,
	WF_CNT_RESULTS_STALE,
	WF_CNT_TIMERS_FIRED,
	WF_CNT_TIMERS_STALE,
	WF_CNT_DEADLINES_FIRED,
	WF_CNT_DUE_LOCK_SKIPS,
	WF_COUNTER_COUNT
} WfCounter;

/* the histograms */
typedef enum WfHistogram
{
	WF_HIST_TIMER_LAG = 0,		/* a timer fired: now - due_at */
	WF_HIST_WAKE_TO_CLAIM,		/* a woken claim got tasks: now - wake-up */
	WF_HIST_COUNT
} WfHistogram;

extern Size WfMetricsShmemSize(void);
extern void WfMetricsShmemStartup(void);

/* counted when the transaction commits (see metrics.c) */
extern void WfCount(WfCounter c, uint64 n);
extern void WfObserve(WfHistogram h, TimestampTz from, TimestampTz to);

/* claim wake-ups: when a commit woke wait bucket b (notify.c, claim.c) */
extern void WfMetricsNoteWake(uint32 bucket, TimestampTz at);
extern TimestampTz WfMetricsWokenAt(uint32 bucket);
extern void WfMetricsForgetDropped(const Oid *live, int nlive, TimestampTz read_at);

#endif							/* WF_METRICS_H */
