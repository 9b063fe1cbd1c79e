/*-------------------------------------------------------------------------
 *
 * schedule.h
 *	  Schedules: the cron expression matcher behind wf.schedule().
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/schedule.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_SCHEDULE_H
#define WF_SCHEDULE_H

#include "pgtime.h"
#include "utils/timestamp.h"

/* a parsed cron expression */
typedef struct WfCronSpec
{
	int			interval_secs;	/* > 0 for "N seconds"; the fields are unused */
	uint64		minutes;		/* bit m: minute m, 0-59 */
	uint32		hours;			/* bit h: hour h, 0-23 */
	uint32		doms;			/* bit d: day of month d, 1-31 */
	uint32		months;			/* bit m: month m, 1-12 */
	uint32		dows;			/* bit d: day of week d, 0-6, Sunday = 0 */
	bool		dom_star;		/* the day-of-month field began with '*' */
	bool		dow_star;		/* the day-of-week field began with '*' */
} WfCronSpec;

/* pg_cron refuses a schedule of this many bytes or more */
#define WF_CRON_MAX_LENGTH 1000

/* how far the matcher searches for an instant */
#define WF_CRON_HORIZON_DAYS (8 * 366 + 2)

extern void WfCronParse(const char *expr, WfCronSpec *spec);
extern bool WfCronPrev(const WfCronSpec *spec, TimestampTz at, pg_tz *tz,
					   TimestampTz *result);
extern bool WfCronNext(const WfCronSpec *spec, TimestampTz after, pg_tz *tz,
					   TimestampTz *result);

#endif							/* WF_SCHEDULE_H */
