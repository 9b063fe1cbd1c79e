/*-------------------------------------------------------------------------
 *
 * timer.c
 *	  Durable timers and task deadlines.
 *
 * (Being written; see issue 3.)
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/timer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "timer.h"

/*
 * WfTimerTick: see timer.h.
 */
int
WfTimerTick(int max_fire, TimestampTz *next_due)
{
	*next_due = 0;
	return 0;
}
