/*-------------------------------------------------------------------------
 *
 * timer.h
 *	  Durable timers and task deadlines, and the tick that fires them.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/timer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_TIMER_H
#define WF_TIMER_H

#include "spi_util.h"

#include "utils/timestamp.h"

/* what one tick found besides what it handled (WfTimerTick) */
typedef struct WfTickStats
{
	bool		known;			/* false after a full batch: what is still
								 * due may just not have fit, so the tick
								 * cannot tell how many are locked */
	int64		locked;			/* due items left because a transaction
								 * holds their run, task or timer (or a lock
								 * of their tenant): retried later */
	TimestampTz locked_since;	/* the due time of the oldest of them (0:
								 * none) */
} WfTickStats;

/*
 * WfTimerTick fires up to max_fire due timers and task deadlines of the
 * current database, each in its own subtransaction, and returns how many
 * it handled.  It never waits for a lock that another transaction holds:
 * a due item whose rows are locked is left for a later tick (see the
 * header of timer.c), and counted in *stats (when not NULL).  *next_due is
 * set to when the next tick should start: the earliest pending due time
 * ahead, or sooner when items were left for a lock; 0 when nothing is
 * pending.  The caller must be inside a transaction with an active
 * snapshot and must not be connected to SPI; it is what the per-database
 * worker calls in each of its short transactions, and what wf.tick()
 * calls.
 */
extern int	WfTimerTick(int max_fire, TimestampTz *next_due, WfTickStats *stats);
extern void WfTimerForgetHeld(void);


/* the statements of timer.c */
extern PGDLLIMPORT WfPlanTable WfTimerPlans;

#endif							/* WF_TIMER_H */
