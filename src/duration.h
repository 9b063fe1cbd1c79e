/*-------------------------------------------------------------------------
 *
 * duration.h
 *	  Durations as definitions and settings write them ("90s", "1h30m").
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/duration.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_DURATION_H
#define WF_DURATION_H

#include "datatype/timestamp.h"

/* the longest duration a definition or a setting may give */
#define WF_MAX_DURATION ((int64) 366 * USECS_PER_DAY)

extern bool WfParseDuration(const char *s, int64 *usec);
extern int	WfParseDurationList(const char *list, int64 *out, int max);

#endif							/* WF_DURATION_H */
