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

/*
 * WfTimerTick fires up to max_fire due timers and task deadlines of the
 * current database, each in its own subtransaction, and returns how many
 * it handled.  *next_due is set to the earliest pending due time, or to
 * 0 when nothing is pending.  The caller must be inside a transaction with
 * an active snapshot and must not be connected to SPI; it is what the
 * per-database worker calls in each of its short transactions, and what
 * wf.tick() calls.
 */
extern int	WfTimerTick(int max_fire, TimestampTz *next_due);


/* the statements of timer.c */
extern PGDLLIMPORT WfPlanTable WfTimerPlans;

#endif							/* WF_TIMER_H */
