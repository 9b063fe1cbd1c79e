/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Schedules: recurring runs started by pg_cron, and the cron expression
 *	  matcher that makes each start idempotent per scheduled instant.
 *
 * wf.schedule() stores a schedule in wf.schedules and creates a pg_cron
 * job whose command is "SELECT wf.fire_schedule('<schedule id>')".  Their
 * bodies, wf._schedule and wf._fire_schedule, are PL/pgSQL in the install
 * script: pg_cron is optional, and its schema exists only in the database
 * where pg_cron is installed (cron.database_name), so its functions are
 * resolved when a schedule is made, not when the extension is created.
 * This file holds what SQL cannot do well: parsing and matching cron
 * expressions; and wf.schedule's argument checks, which call the engine's
 * checks directly, so that the role that schedules needs EXECUTE on no
 * internal function (api.c, WfCallInternal).
 *
 * Idempotency.  pg_cron may run a job late, or twice for one minute (after
 * a clock jump, a restart, or with two schedulers).  wf.fire_schedule()
 * therefore does not trust the tick: it computes the scheduled instant as
 * the latest time at or before now() that matches the expression
 * (WfCronPrev) and starts the run with the idempotency key
 * "schedule:<name>:<instant in UTC, ISO 8601>".  Every tick that belongs
 * to one instant computes the same key, and wf.start_run() starts at most
 * one run per key.
 *
 * The expression language is pg_cron's (Vixie cron's): five fields,
 * minute (0-59), hour (0-23), day of month (1-31), month (1-12 or
 * jan-dec) and day of week (0-7 or sun-sat, 0 and 7 both Sunday); each a
 * comma-separated list of "*", a value or a range "a-b", each of "*" and
 * ranges optionally with a step "/n".  A step needs "*" or a range, as in
 * pg_cron.  As in Vixie cron, when both day fields are restricted (neither
 * begins with "*") a day matches if either matches; otherwise both must.
 * The shorthands @yearly, @annually, @monthly, @weekly, @daily, @midnight
 * and @hourly stand for the usual five-field forms; @reboot is refused (it
 * has no instants).  pg_cron 1.5's interval form "N seconds" (N from 1 to
 * 59) is accepted too: its instants are the multiples of N seconds since
 * the Unix epoch.  Fields are matched in the time zone pg_cron uses, which
 * the callers pass in (cron.timezone where pg_cron has it, else GMT).
 *
 * Search.  WfCronPrev and WfCronNext walk minute by minute in real time
 * but skip ahead a whole local day or hour when the day or hour does not
 * match, and to the next matching minute within an hour.  Every skip is
 * checked by converting its landing point back to local time; when a UTC
 * offset change makes the check fail (daylight saving time), the walk
 * falls back to smaller steps, so no matching minute is ever skipped.
 * The search covers WF_CRON_HORIZON_DAYS, enough for "0 0 29 2 *" across
 * the eight-year gap between leap days around 2100.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/schedule.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "api.h"
#include "argcheck.h"
#include "schedule.h"
#include "sensitive.h"

PG_FUNCTION_INFO_V1(wfengine_cron_check);
PG_FUNCTION_INFO_V1(wfengine_cron_prev);
PG_FUNCTION_INFO_V1(wfengine_cron_next);
PG_FUNCTION_INFO_V1(wfengine_cron_next_fire);
PG_FUNCTION_INFO_V1(wfengine_schedule);

/* what every error about an expression suggests */
#define WF_CRON_HINT \
	"A cron expression has five fields, minute hour day-of-month month day-of-week " \
	"(for example \"0 3 * * mon-fri\"), or is \"N seconds\" with N from 1 to 59."

/* microseconds from the Unix epoch to the PostgreSQL epoch */
#define WF_UNIX_TO_PG_US \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* one field of a five-field expression */
typedef struct WfCronField
{
	const char *name;			/* as named in error messages */
	int			lo;				/* smallest value */
	int			hi;				/* largest value */
	const char *const *names;	/* three-letter names, or NULL */
	int			name_base;		/* value of names[0] */
} WfCronField;

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec", NULL
};

static const char *const dow_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

static const WfCronField cron_fields[5] = {
	{"minute", 0, 59, NULL, 0},
	{"hour", 0, 23, NULL, 0},
	{"day-of-month", 1, 31, NULL, 0},
	{"month", 1, 12, month_names, 1},
	{"day-of-week", 0, 7, dow_names, 0},
};

/* the shorthands and the five-field forms they stand for */
static const struct
{
	const char *name;
	const char *fields;
}			cron_shorthands[] = {
	{"@yearly", "0 0 1 1 *"},
	{"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"},
	{"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

/* forward declarations */
static uint64 parse_field(const char *expr, const WfCronField *f,
						  const char *text, bool *star);
static int	parse_value(const char *expr, const WfCronField *f,
						const char *text, const char *s, int len);
static void parse_fields(const char *expr, const char *fields, WfCronSpec *spec);
static bool parse_interval(const char *s, int *secs);
static void local_tm(TimestampTz t, pg_tz *tz, struct pg_tm *tm);
static bool same_date(const struct pg_tm *a, const struct pg_tm *b);
static bool day_matches(const WfCronSpec *spec, const struct pg_tm *tm);
static TimestampTz back_before_hour(TimestampTz t, const struct pg_tm *tm, pg_tz *tz);
static TimestampTz back_before_day(TimestampTz t, const struct pg_tm *tm, pg_tz *tz);
static TimestampTz on_to_next_hour(TimestampTz t, const struct pg_tm *tm, pg_tz *tz);
static TimestampTz on_to_next_day(TimestampTz t, const struct pg_tm *tm, pg_tz *tz);
static int64 floor_div(int64 a, int64 b);
static pg_tz *lookup_tz(text *name);
static char *pg_cron_version(void);
static bool version_at_least(const char *version, int major, int minor);

/* ----------------------------------------------------------------
 *		parsing
 * ----------------------------------------------------------------
 */

/*
 * is_blank tells whether c separates fields: pg_cron (Vixie cron) takes
 * only spaces and tabs, not every isspace() character.
 */
static inline bool
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * parse_value reads one value of field f (a number or a name) from the len
 * bytes at s, which are part of the field text.
 */
static int
parse_value(const char *expr, const WfCronField *f, const char *text,
			const char *s, int len)
{
	int			i;
	int			v = 0;
	bool		digits = len > 0;

	for (i = 0; i < len; i++)
		if (!isdigit((unsigned char) s[i]))
			digits = false;
	if (digits)
	{
		/* leading zeros are allowed (pg_cron reads the number with atoi) */
		while (len > 1 && s[0] == '0')
			s++, len--;
		/* more than 4 digits is out of range anyway; avoid overflow */
		if (len > 4)
			v = 9999;
		else
			for (i = 0; i < len; i++)
				v = v * 10 + (s[i] - '0');
		if (v < f->lo || v > f->hi)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid cron expression \"%s\"", expr),
					 errdetail("The %s field \"%s\" has the value %.*s, outside the range %d-%d.",
							   f->name, text, len, s, f->lo, f->hi),
					 errhint(WF_CRON_HINT)));
		return v;
	}
	if (f->names != NULL && len == 3)
	{
		for (i = 0; f->names[i] != NULL; i++)
			if (pg_strncasecmp(f->names[i], s, 3) == 0)
				return f->name_base + i;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid cron expression \"%s\"", expr),
			 errdetail("The %s field \"%s\" contains \"%.*s\", which is not a %s.",
					   f->name, text, len, s,
					   f->names != NULL ? "number or a three-letter name" : "number"),
			 errhint(WF_CRON_HINT)));
	return 0;					/* keep the compiler quiet */
}

/*
 * parse_field returns the set of values that the text of field f allows,
 * as a bitmap (bit v for value v), and sets *star when the field begins
 * with '*'.
 */
static uint64
parse_field(const char *expr, const WfCronField *f, const char *text, bool *star)
{
	uint64		bits = 0;
	const char *item = text;

	*star = (text[0] == '*');
	for (;;)
	{
		const char *end = strchr(item, ',');
		int			len = end ? (int) (end - item) : (int) strlen(item);
		const char *slash = memchr(item, '/', len);
		int			range_len = slash ? (int) (slash - item) : len;
		const char *dash = memchr(item, '-', range_len);
		int			from;
		int			to;
		int			step = 1;
		int			v;

		if (len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid cron expression \"%s\"", expr),
					 errdetail("The %s field \"%s\" has an empty list item.", f->name, text),
					 errhint(WF_CRON_HINT)));

		if (range_len == 1 && item[0] == '*')
		{
			from = f->lo;
			to = f->hi;
		}
		else if (dash != NULL)
		{
			from = parse_value(expr, f, text, item, (int) (dash - item));
			to = parse_value(expr, f, text, dash + 1, range_len - (int) (dash - item) - 1);
			if (from > to)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid cron expression \"%s\"", expr),
						 errdetail("The %s field \"%s\" has the range %d-%d, which runs backwards.",
								   f->name, text, from, to),
						 errhint(WF_CRON_HINT)));
		}
		else
		{
			from = to = parse_value(expr, f, text, item, range_len);
			if (slash != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid cron expression \"%s\"", expr),
						 errdetail("The %s field \"%s\" has a step after a single value; a step needs \"*\" or a range.",
								   f->name, text),
						 errhint("Write \"*/15\" or \"5-59/15\" rather than \"5/15\".")));
		}

		if (slash != NULL)
		{
			int			slen = len - range_len - 1;
			int			i;

			step = 0;
			for (i = 0; i < slen; i++)
			{
				if (!isdigit((unsigned char) slash[1 + i]) || step > f->hi)
				{
					step = -1;
					break;
				}
				step = step * 10 + (slash[1 + i] - '0');
			}
			if (slen == 0 || step < 1 || step > f->hi)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid cron expression \"%s\"", expr),
						 errdetail("The %s field \"%s\" has the step \"%.*s\"; a step is a number from 1 to %d.",
								   f->name, text, slen, slash + 1, f->hi),
						 errhint(WF_CRON_HINT)));
		}

		for (v = from; v <= to; v += step)
			bits |= (uint64) 1 << v;

		if (end == NULL)
			break;
		item = end + 1;
	}
	return bits;
}

/*
 * parse_interval recognises pg_cron's "N seconds" form (also "N second",
 * any case, spaces optional before the unit) and sets *secs.
 */
static bool
parse_interval(const char *s, int *secs)
{
	int			n = 0;
	int			digits = 0;

	while (isdigit((unsigned char) *s))
	{
		/* saturate: leading zeros are allowed, as with sscanf's %u */
		n = Min(n * 10 + (*s - '0'), 1000000);
		digits++;
		s++;
	}
	if (digits == 0)
		return false;
	while (isspace((unsigned char) *s))
		s++;
	if (pg_strncasecmp(s, "second", 6) != 0)
		return false;
	s += 6;
	if (*s == 's' || *s == 'S')
		s++;
	if (*s != '\0')
		return false;
	*secs = n;
	return true;
}

/*
 * parse_fields parses the five whitespace-separated fields in fields into
 * spec; expr is the expression as given, for messages.
 */
static void
parse_fields(const char *expr, const char *fields, WfCronSpec *spec)
{
	char	   *copy = pstrdup(fields);
	char	   *field[5];
	int			n = 0;
	char	   *p = copy;
	bool		star;

	for (;;)
	{
		while (is_blank(*p))
			p++;
		if (*p == '\0')
			break;
		if (n < 5)
			field[n] = p;
		n++;
		while (*p != '\0' && !is_blank(*p))
			p++;
		if (*p != '\0')
			*p++ = '\0';
	}
	if (n != 5)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cron expression \"%s\"", expr),
				 errdetail("The expression has %d field%s, not five.", n, n == 1 ? "" : "s"),
				 errhint(WF_CRON_HINT)));

	spec->minutes = parse_field(expr, &cron_fields[0], field[0], &star);
	spec->hours = (uint32) parse_field(expr, &cron_fields[1], field[1], &star);
	spec->doms = (uint32) parse_field(expr, &cron_fields[2], field[2], &spec->dom_star);
	spec->months = (uint32) parse_field(expr, &cron_fields[3], field[3], &star);
	spec->dows = (uint32) parse_field(expr, &cron_fields[4], field[4], &spec->dow_star);
	/* Sunday is 0 and 7 */
	if (spec->dows & ((uint32) 1 << 7))
		spec->dows = (spec->dows & ~((uint32) 1 << 7)) | 1;
	pfree(copy);
}

/*
 * WfCronParse parses a cron expression into spec, or reports an error
 * that names the offending field.
 */
void
WfCronParse(const char *expr, WfCronSpec *spec)
{
	const char *s = expr;
	char	   *trimmed;
	int			len;
	int			i;

	memset(spec, 0, sizeof(WfCronSpec));
	if (strlen(expr) >= WF_CRON_MAX_LENGTH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cron expression \"%.40s...\"", expr),
				 errdetail("The expression is %zu bytes long; pg_cron refuses %d bytes or more.",
						   strlen(expr), WF_CRON_MAX_LENGTH),
				 errhint(WF_CRON_HINT)));
	/* pg_cron skips blanks and empty lines before the expression */
	while (is_blank(*s) || *s == '\n')
		s++;
	/* and ignores whatever follows it; wfengine allows only white space */
	len = strlen(s);
	while (len > 0 && isspace((unsigned char) s[len - 1]))
		len--;
	trimmed = pnstrdup(s, len);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cron expression \"%s\"", expr),
				 errdetail("The expression is empty."),
				 errhint(WF_CRON_HINT)));

	/*
	 * A shorthand is matched case-sensitively and must be followed by a
	 * blank, a newline or the end, as pg_cron reads it.
	 */
	if (trimmed[0] == '@')
	{
		for (i = 0; i < lengthof(cron_shorthands); i++)
			if (strcmp(trimmed, cron_shorthands[i].name) == 0 &&
				(s[len] == '\0' || is_blank(s[len]) || s[len] == '\n'))
			{
				parse_fields(expr, cron_shorthands[i].fields, spec);
				pfree(trimmed);
				return;
			}
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cron expression \"%s\"", expr),
				 strcmp(trimmed, "@reboot") == 0 || strcmp(trimmed, "@restart") == 0 ?
				 errdetail("%s has no scheduled instants.", trimmed) :
				 errdetail("\"%s\" is not a known shorthand.", trimmed),
				 errhint("The shorthands are @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly, in lower case.")));
	}

	if (parse_interval(trimmed, &spec->interval_secs))
	{
		if (spec->interval_secs < 1 || spec->interval_secs > 59)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid cron expression \"%s\"", expr),
					 errdetail("An interval is 1 to 59 seconds."),
					 errhint("Use the five-field form for a minute or more.")));
		pfree(trimmed);
		return;
	}

	parse_fields(expr, trimmed, spec);
	pfree(trimmed);
}

/* ----------------------------------------------------------------
 *		matching
 * ----------------------------------------------------------------
 */

/*
 * floor_div divides rounding towards minus infinity (b > 0).
 */
static int64
floor_div(int64 a, int64 b)
{
	int64		q = a / b;

	if (a % b != 0 && a < 0)
		q--;
	return q;
}

/*
 * local_tm converts t to broken-down time in tz.
 */
static void
local_tm(TimestampTz t, pg_tz *tz, struct pg_tm *tm)
{
	int			tzoff;
	fsec_t		fsec;

	if (timestamp2tm(t, &tzoff, tm, &fsec, NULL, tz) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
}

/*
 * same_date tells whether a and b fall on the same local date.
 */
static bool
same_date(const struct pg_tm *a, const struct pg_tm *b)
{
	return a->tm_year == b->tm_year && a->tm_mon == b->tm_mon &&
		a->tm_mday == b->tm_mday;
}

/*
 * day_matches tells whether the local date of tm matches the month and
 * day fields, with Vixie cron's rule for the two day fields.
 */
static bool
day_matches(const WfCronSpec *spec, const struct pg_tm *tm)
{
	int			wday = j2day(date2j(tm->tm_year, tm->tm_mon, tm->tm_mday));
	bool		dom;
	bool		dow;

	if ((spec->months & ((uint32) 1 << tm->tm_mon)) == 0)
		return false;
	dom = (spec->doms & ((uint32) 1 << tm->tm_mday)) != 0;
	dow = (spec->dows & ((uint32) 1 << wday)) != 0;
	if (spec->dom_star || spec->dow_star)
		return dom && dow;
	return dom || dow;
}

/*
 * back_before_hour returns the last minute before the local hour of t
 * (broken down in tm) began, or t minus one minute if the UTC offset
 * changed within the hour.
 */
static TimestampTz
back_before_hour(TimestampTz t, const struct pg_tm *tm, pg_tz *tz)
{
	TimestampTz start = t - (int64) tm->tm_min * USECS_PER_MINUTE;
	struct pg_tm s;

	local_tm(start, tz, &s);
	if (same_date(&s, tm) && s.tm_hour == tm->tm_hour && s.tm_min == 0)
		return start - USECS_PER_MINUTE;
	return t - USECS_PER_MINUTE;
}

/*
 * back_before_day returns the last minute before the local date of t
 * began, or steps back by hours if the UTC offset changed that day.
 */
static TimestampTz
back_before_day(TimestampTz t, const struct pg_tm *tm, pg_tz *tz)
{
	TimestampTz start = t - ((int64) tm->tm_hour * MINS_PER_HOUR + tm->tm_min) *
		USECS_PER_MINUTE;
	struct pg_tm s;

	local_tm(start, tz, &s);
	if (same_date(&s, tm) && s.tm_hour == 0 && s.tm_min == 0)
		return start - USECS_PER_MINUTE;
	return back_before_hour(t, tm, tz);
}

/*
 * on_to_next_hour returns the first minute of the local hour after that
 * of t, or t plus one minute if the UTC offset changes before then.
 */
static TimestampTz
on_to_next_hour(TimestampTz t, const struct pg_tm *tm, pg_tz *tz)
{
	TimestampTz next = t + (int64) (MINS_PER_HOUR - tm->tm_min) * USECS_PER_MINUTE;
	struct pg_tm s;

	local_tm(next, tz, &s);
	if (s.tm_min == 0 && s.tm_hour == (tm->tm_hour + 1) % HOURS_PER_DAY &&
		(tm->tm_hour < HOURS_PER_DAY - 1 ? same_date(&s, tm) :
		 date2j(s.tm_year, s.tm_mon, s.tm_mday) ==
		 date2j(tm->tm_year, tm->tm_mon, tm->tm_mday) + 1))
		return next;
	return t + USECS_PER_MINUTE;
}

/*
 * on_to_next_day returns the first minute of the local date after that of
 * t, or steps on by hours if the UTC offset changes before then.
 */
static TimestampTz
on_to_next_day(TimestampTz t, const struct pg_tm *tm, pg_tz *tz)
{
	TimestampTz next = t + ((int64) (HOURS_PER_DAY - 1 - tm->tm_hour) * MINS_PER_HOUR +
							(MINS_PER_HOUR - tm->tm_min)) * USECS_PER_MINUTE;
	struct pg_tm s;

	local_tm(next, tz, &s);
	if (s.tm_hour == 0 && s.tm_min == 0 &&
		date2j(s.tm_year, s.tm_mon, s.tm_mday) ==
		date2j(tm->tm_year, tm->tm_mon, tm->tm_mday) + 1)
		return next;
	return on_to_next_hour(t, tm, tz);
}

/*
 * leave_hour returns the next instant to look at after the local hour of t
 * (broken down in tm) in direction dir (1: forwards, -1: backwards);
 * leave_day, after its local date.
 */
static TimestampTz
leave_hour(TimestampTz t, const struct pg_tm *tm, pg_tz *tz, int dir)
{
	return dir > 0 ? on_to_next_hour(t, tm, tz) : back_before_hour(t, tm, tz);
}

static TimestampTz
leave_day(TimestampTz t, const struct pg_tm *tm, pg_tz *tz, int dir)
{
	return dir > 0 ? on_to_next_day(t, tm, tz) : back_before_day(t, tm, tz);
}

/*
 * cron_search finds the first instant that matches spec in time zone tz,
 * going from "from" in direction dir: the latest at or before it (dir -1)
 * or the earliest after it (dir 1).  An interval spec is a matter of
 * arithmetic; otherwise it walks minute by minute from the start of a
 * minute, passing over whole days and hours that cannot match, and
 * returns false when it reaches WF_CRON_HORIZON_DAYS first.  It is
 * WfCronPrev and WfCronNext, one direction each.
 */
static bool
cron_search(const WfCronSpec *spec, TimestampTz from, int dir, pg_tz *tz,
			TimestampTz *result)
{
	int64		ahead = dir > 0 ? 1 : 0;	/* "after" excludes from itself */
	TimestampTz t;
	TimestampTz limit;

	if (TIMESTAMP_NOT_FINITE(from))
		return false;
	if (spec->interval_secs > 0)
	{
		int64		step = (int64) spec->interval_secs * USECS_PER_SEC;

		*result = (floor_div(from + WF_UNIX_TO_PG_US, step) + ahead) * step -
			WF_UNIX_TO_PG_US;
		return true;
	}

	t = (floor_div(from, USECS_PER_MINUTE) + ahead) * USECS_PER_MINUTE;
	limit = from + (int64) dir * WF_CRON_HORIZON_DAYS * USECS_PER_DAY;
	while (dir > 0 ? t <= limit : t >= limit)
	{
		struct pg_tm tm;
		int			m;

		CHECK_FOR_INTERRUPTS();
		local_tm(t, tz, &tm);
		if (!day_matches(spec, &tm))
		{
			t = leave_day(t, &tm, tz, dir);
			continue;
		}
		if ((spec->hours & ((uint32) 1 << tm.tm_hour)) == 0)
		{
			t = leave_hour(t, &tm, tz, dir);
			continue;
		}
		/* the first minute of the hour, from this one on in dir, that matches */
		for (m = tm.tm_min; m >= 0 && m < MINS_PER_HOUR; m += dir)
			if (spec->minutes & ((uint64) 1 << m))
				break;
		if (m < 0 || m == MINS_PER_HOUR)
			t = leave_hour(t, &tm, tz, dir);
		else if (m == tm.tm_min)
		{
			*result = t;
			return true;
		}
		else
		{
			TimestampTz cand = t + (int64) (m - tm.tm_min) * USECS_PER_MINUTE;
			struct pg_tm c;

			local_tm(cand, tz, &c);
			t = (same_date(&c, &tm) && c.tm_hour == tm.tm_hour && c.tm_min == m) ?
				cand : t + (int64) dir * USECS_PER_MINUTE;
		}
	}
	return false;
}

/*
 * WfCronPrev finds the latest instant at or before at that matches spec,
 * with the fields taken in time zone tz.  It returns false when none lies
 * within WF_CRON_HORIZON_DAYS.
 */
bool
WfCronPrev(const WfCronSpec *spec, TimestampTz at, pg_tz *tz, TimestampTz *result)
{
	return cron_search(spec, at, -1, tz, result);
}

/*
 * WfCronNext finds the earliest instant after "after" that matches spec,
 * with the fields taken in time zone tz.  It returns false when none lies
 * within WF_CRON_HORIZON_DAYS.
 */
bool
WfCronNext(const WfCronSpec *spec, TimestampTz after, pg_tz *tz, TimestampTz *result)
{
	return cron_search(spec, after, 1, tz, result);
}

/* ----------------------------------------------------------------
 *		SQL-callable functions
 * ----------------------------------------------------------------
 */

/*
 * lookup_tz returns the time zone called name, or reports an error.
 */
static pg_tz *
lookup_tz(text *name)
{
	char	   *s = text_to_cstring(name);
	pg_tz	   *tz = pg_tzset(s);

	if (tz == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" not recognized", s),
				 errhint("Use a full time zone name such as \"UTC\" or \"Europe/Berlin\".")));
	return tz;
}

/*
 * pg_cron_version returns the version of the pg_cron extension in this
 * database (pg_extension.extversion, e.g. "1.4-1"), or NULL when pg_cron
 * is not installed here.  It reads the catalog directly rather than
 * through SPI: one index lookup on pg_extension, as extension.c does,
 * with no statement to plan and no search_path to trust.
 */
static char *
pg_cron_version(void)
{
	Oid			extoid = get_extension_oid("pg_cron", true);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *result = NULL;

	if (!OidIsValid(extoid))
		return NULL;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			result = TextDatumGetCString(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * version_at_least tells whether an extension version such as "1.4-1" or
 * "1.10" is at least major.minor (numeric comparison, not textual).
 */
static bool
version_at_least(const char *version, int major, int minor)
{
	char	   *end;
	long		ma = strtol(version, &end, 10);
	long		mi = (*end == '.') ? strtol(end + 1, NULL, 10) : 0;

	return ma > major || (ma == major && mi >= minor);
}

/*
 * wfengine_cron_check is wf._cron_check(cron): it reports an error naming
 * the field if cron is not a valid expression, or if no instant in the
 * next eight years (UTC) matches it.  wf.schedule() and
 * wf.schedule_purge() call it before they hand cron to cron.schedule(),
 * so it accepts only expressions that pg_cron accepts too, with the same
 * meaning: WfCronParse's language is a subset of every pg_cron's from
 * 1.4 on, and the form "N seconds" (pg_cron 1.5) is accepted only when
 * the pg_cron installed in this database has it (or none is installed:
 * then nothing is scheduled anyway).  docs/schedules.md lists what pg_cron
 * accepts and this refuses; sql/145_cron_agreement.sql tests both.
 */
Datum
wfengine_cron_check(PG_FUNCTION_ARGS)
{
	char	   *expr = text_to_cstring(PG_GETARG_TEXT_PP(0));
	WfCronSpec	spec;
	TimestampTz next;
	char	   *cron_version;

	WfCronParse(expr, &spec);
	if (spec.interval_secs > 0 &&
		(cron_version = pg_cron_version()) != NULL &&
		!version_at_least(cron_version, 1, 5))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cron expression \"%s\"", expr),
				 errdetail("pg_cron %s, installed in this database, does not accept the form \"N seconds\"; pg_cron 1.5 does.",
						   cron_version),
				 errhint("Use the five-field form, or update pg_cron to 1.5 or later.")));
	if (!WfCronNext(&spec, GetCurrentTimestamp(), pg_tzset("UTC"), &next))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cron expression \"%s\" never matches", expr),
				 errdetail("No minute in the next eight years matches all of its fields."),
				 errhint("Check the day-of-month and month fields, e.g. \"31\" in a month with 30 days.")));
	PG_RETURN_VOID();
}

/*
 * cron_call is wf._cron_prev and wf._cron_next (cron, at, timezone): the
 * instant cron_search finds for cron from at in timezone in direction
 * dir, or NULL.
 */
static Datum
cron_call(FunctionCallInfo fcinfo, int dir)
{
	char	   *expr = text_to_cstring(PG_GETARG_TEXT_PP(0));
	TimestampTz at = PG_GETARG_TIMESTAMPTZ(1);
	pg_tz	   *tz = lookup_tz(PG_GETARG_TEXT_PP(2));
	WfCronSpec	spec;
	TimestampTz result;

	WfCronParse(expr, &spec);
	if (!cron_search(&spec, at, dir, tz, &result))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(result);
}

/*
 * wfengine_cron_prev is wf._cron_prev(cron, at, timezone): the latest
 * instant at or before at that matches cron in timezone, or NULL.  This
 * is the scheduled instant of a pg_cron tick at time at.
 */
Datum
wfengine_cron_prev(PG_FUNCTION_ARGS)
{
	return cron_call(fcinfo, -1);
}

/*
 * wfengine_cron_next is wf._cron_next(cron, after, timezone): the
 * earliest instant after "after" that matches cron in timezone, or NULL.
 */
Datum
wfengine_cron_next(PG_FUNCTION_ARGS)
{
	return cron_call(fcinfo, 1);
}

/*
 * wfengine_cron_next_fire is wf.cron_next(cron, after): the earliest
 * instant after "after" that matches cron in the time zone pg_cron reads
 * it in (cron.timezone where pg_cron defines it, else GMT), or NULL if
 * none within eight years.  An invalid expression is an error, as in
 * wf.schedule.  wf.schedule_list computes next_fire_at with it.
 */
Datum
wfengine_cron_next_fire(PG_FUNCTION_ARGS)
{
	text	   *expr = PG_GETARG_TEXT_PP(0);
	TimestampTz after = PG_GETARG_TIMESTAMPTZ(1);
	const char *zone = GetConfigOption("cron.timezone", true, false);
	WfCronSpec	spec;
	TimestampTz result;

	WfCheckTextArg(expr, "cron expression", WF_ARG_NAME);
	if (zone == NULL || zone[0] == '\0')
		zone = "GMT";
	WfCronParse(text_to_cstring(expr), &spec);
	if (!cron_search(&spec, after, 1, lookup_tz(cstring_to_text(zone)), &result))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(result);
}

/*
 * schedule_name_ok tells whether name is a valid schedule name: 1 to 128
 * ASCII letters, digits, '_', '-', '.' or ':', not beginning with a digit
 * or one of '-', '.', ':'.
 */
static bool
schedule_name_ok(const char *name)
{
	int			i;

	for (i = 0; name[i] != '\0'; i++)
	{
		char		c = name[i];
		bool		ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';

		if (i > 0)
			ok = ok || (c >= '0' && c <= '9') || c == '.' || c == ':' || c == '-';
		if (!ok || i >= 128)
			return false;
	}
	return i > 0;
}

/*
 * wfengine_schedule is wf.schedule(name, cron, definition, input,
 * version): it checks the arguments, then calls its body wf._schedule as
 * the caller (the pg_cron job it makes runs as the role that made it).
 */
Datum
wfengine_schedule(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, INT4OID};
	char	   *name;
	char	   *owner;
	Jsonb	   *input;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null",
						PG_ARGISNULL(0) ? "schedule name" : PG_ARGISNULL(1) ? "cron expression" :
						PG_ARGISNULL(2) ? "definition name" : "input")));
	WfCheckTextArg(PG_GETARG_TEXT_PP(0), "schedule name", WF_ARG_NAME);
	WfCheckTextArg(PG_GETARG_TEXT_PP(1), "cron expression", WF_ARG_NAME);
	WfCheckTextArg(PG_GETARG_TEXT_PP(2), "definition name", WF_ARG_NAME);
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	owner = psprintf("schedule \"%s\"", name);
	input = PG_GETARG_JSONB_P(3);
	WfCheckPayloadSize(input, "input", owner);
	WfCheckRunInput(input, "input");
	if (!schedule_name_ok(name))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid schedule name \"%s\"", name),
				 errhint("A schedule name has 1 to 128 letters, digits, '_', '-', '.' or ':' and starts with a letter or '_'.")));
	DirectFunctionCall1(wfengine_cron_check, PointerGetDatum(PG_GETARG_TEXT_PP(1)));
	WfRefuseSealedLookalikes(input, "input", owner);
	return WfCallInternal(fcinfo, "_schedule", lengthof(argtypes), argtypes, 0, NULL, false);
}
