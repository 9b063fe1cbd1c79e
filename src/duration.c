/*-------------------------------------------------------------------------
 *
 * duration.c
 *	  Durations as definitions and settings write them: "90s", "1h30m",
 *	  "250ms", "2d", and comma-separated lists of them.
 *
 * Infrastructure: definitions (defcompile.c) and settings (guc.c, the
 * quarantine delays that timer.c reads) parse their durations here, so
 * that neither depends on the other.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/duration.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "duration.h"

PG_FUNCTION_INFO_V1(wfengine_duration);

/* the units of a duration, "ms" before "m" and "s" */
static const struct duration_unit
{
	const char *suffix;
	int64		usecs;
}			units[] =
{
	{"ms", 1000},
	{"s", USECS_PER_SEC},
	{"m", USECS_PER_MINUTE},
	{"h", USECS_PER_HOUR},
	{"d", USECS_PER_DAY},
};

/*
 * part_usecs returns the microseconds of one part: whole units plus the
 * fraction frac (0 <= frac < 1) of a unit, rounded to the microsecond as
 * PostgreSQL 15's interval input rounds it (frac * unit, truncated, then
 * one more microsecond when what was cut off is more than a half).  The
 * caller has checked that whole * unit is in range.
 */
static int64
part_usecs(int64 whole, double frac, int64 unit)
{
	double		x = frac * (double) unit;
	int64		usec = (int64) x;

	if (x - (double) usec > 0.5)
		usec++;
	return whole * unit + usec;
}

/*
 * WfParseDuration parses "90s", "1h30m", "250ms", "2d" into
 * microseconds.  Units: ms, s, m, h, d; each part a non-negative decimal.
 * Each part means what PostgreSQL's interval input makes of it
 * ("1.5h"::interval, rounded to the microsecond the same way), and the
 * parts are added up; sql/146_duration_agreement.sql compares the two.
 * The parser stays by hand rather than calling interval_in(): the
 * settings' check hook (guc.c) runs in the postmaster too, outside any
 * transaction, where interval_in's errors cannot be caught, and PostgreSQL
 * 15 has no soft input errors; interval_in would also accept much more
 * (months, signs, "1 day 2 hours", ISO 8601) than definitions allow.
 */
bool
WfParseDuration(const char *s, int64 *usec)
{
	int64		total = 0;
	bool		any = false;

	while (*s != '\0')
	{
		const char *digits = s;
		const char *end;
		int64		whole = 0;
		double		frac = 0;
		const struct duration_unit *u;

		/* digits with an optional fraction: no sign, exponent or hex */
		end = s;
		while (isdigit((unsigned char) *end))
		{
			/* saturate: anything past the limit is refused below */
			if (whole <= WF_MAX_DURATION / 1000)
				whole = whole * 10 + (*end - '0');
			end++;
		}
		if (*end == '.')
		{
			const char *dot = end;

			end++;
			while (isdigit((unsigned char) *end))
				end++;
			if (end == dot + 1 && dot == digits)
				return false;	/* a lone "." */
			frac = strtod(dot, NULL);	/* ".", ".5": the C locale's point */
			if (end == dot + 1)
				frac = 0;
		}
		else if (end == digits)
			return false;
		s = end;
		for (u = units; u < units + lengthof(units); u++)
			if (strncmp(s, u->suffix, strlen(u->suffix)) == 0)
				break;
		if (u == units + lengthof(units))
			return false;
		s += strlen(u->suffix);
		if (whole > WF_MAX_DURATION / u->usecs)
			return false;
		total += part_usecs(whole, frac, u->usecs);
		any = true;
		if (total > WF_MAX_DURATION)
			return false;
	}
	if (!any)
		return false;
	*usec = total;
	return true;
}

/*
 * wfengine_duration is wf._duration(text): the duration text means as
 * WfParseDuration reads it, as an interval of microseconds (no days or
 * months), or NULL when it is not a duration.  For tests that compare it
 * with PostgreSQL's interval input.
 */
Datum
wfengine_duration(PG_FUNCTION_ARGS)
{
	char	   *s = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		usec;
	Interval   *result;

	if (!WfParseDuration(s, &usec))
		PG_RETURN_NULL();
	result = (Interval *) palloc0(sizeof(Interval));
	result->time = usec;
	PG_RETURN_INTERVAL_P(result);
}

/*
 * WfParseDurationList parses a comma-separated list of durations (as in
 * definitions, e.g. "1m, 5m, 30m") into out[0..max-1] and returns how many
 * it found, or -1 when an item is not a positive duration or there are
 * more than max.
 */
int
WfParseDurationList(const char *list, int64 *out, int max)
{
	char	   *copy = pstrdup(list ? list : "");
	char	   *item;
	char	   *save = NULL;
	int			n = 0;

	for (item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save))
	{
		char	   *end;
		int64		usec;

		while (isspace((unsigned char) *item))
			item++;
		end = item + strlen(item);
		while (end > item && isspace((unsigned char) end[-1]))
			*--end = '\0';
		if (*item == '\0')
			continue;
		if (n >= max || !WfParseDuration(item, &usec) || usec <= 0)
		{
			pfree(copy);
			return -1;
		}
		out[n++] = usec;
	}
	pfree(copy);
	return n;
}
