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

#include "duration.h"

/* the units of a duration, "ms" before "m" and "s" */
static const struct duration_unit
{
	const char *suffix;
	double		usecs;
}			units[] =
{
	{"ms", 1000.0},
	{"s", (double) USECS_PER_SEC},
	{"m", (double) USECS_PER_MINUTE},
	{"h", (double) USECS_PER_HOUR},
	{"d", (double) USECS_PER_DAY},
};

/*
 * WfParseDuration parses "90s", "1h30m", "250ms", "2d" into
 * microseconds.  Units: ms, s, m, h, d; each part a non-negative decimal.
 */
bool
WfParseDuration(const char *s, int64 *usec)
{
	double		total = 0;
	bool		any = false;

	while (*s != '\0')
	{
		char	   *end;
		double		n;
		double		unit;
		const struct duration_unit *u;

		/* digits with an optional fraction: no sign, exponent or hex */
		end = (char *) s;
		while (isdigit((unsigned char) *end))
			end++;
		if (*end == '.')
		{
			end++;
			while (isdigit((unsigned char) *end))
				end++;
		}
		if (end == s || (end == s + 1 && *s == '.'))
			return false;
		n = strtod(s, NULL);
		s = end;
		for (u = units; u < units + lengthof(units); u++)
			if (strncmp(s, u->suffix, strlen(u->suffix)) == 0)
				break;
		if (u == units + lengthof(units))
			return false;
		unit = u->usecs;
		s += strlen(u->suffix);
		total += n * unit;
		any = true;
		if (total > (double) WF_MAX_DURATION)
			return false;
	}
	if (!any)
		return false;
	*usec = (int64) total;
	return true;
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
