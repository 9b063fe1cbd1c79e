/*-------------------------------------------------------------------------
 *
 * api.c
 *	  What every SQL-callable run command shares: its run and reason
 *	  arguments, its other required arguments, its refusals, and the
 *	  answer it returns out of SPI at the end of its API call.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/api.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "argcheck.h"
#include "crypto.h"
#include "sensitive.h"
#include "spi_util.h"

/*
 * WfUnknownRun reports a run id that does not exist for this tenant.
 */
void
WfUnknownRun(pg_uuid_t *run_id)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("run %s does not exist",
					DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(run_id))))));
}

/*
 * WfRunArgument returns the run id of argument 0 of an operator command,
 * which must not be null.
 */
pg_uuid_t *
WfRunArgument(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("run must not be null")));
	return PG_GETARG_UUID_P(0);
}

/*
 * WfRequireReason returns the reason argument argno of an operator
 * command, refusing a missing or empty one, or one over WF_ARG_MAX_REASON.
 */
char *
WfRequireReason(FunctionCallInfo fcinfo, int argno)
{
	char	   *reason = WfTextArg(fcinfo, argno, "reason", WF_ARG_REASON);

	if (reason == NULL || reason[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an operator command needs a reason"),
				 errhint("The reason is recorded in the run's history with who gave the command.")));
	return reason;
}

/*
 * WfRunIdText returns the text form of a run id, for messages.
 */
char *
WfRunIdText(pg_uuid_t *run_id)
{
	return DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(run_id)));
}

/*
 * WfSignalPayloadAndId reads the payload (argument argno, '{}' when NULL)
 * and the event id (argument argno + 1, a fresh one when NULL: no
 * deduplication asked for) of wf.signal and wf.send_event, with the checks
 * of both: the payload's size and reserved strings, the event id's size.
 */
void
WfSignalPayloadAndId(FunctionCallInfo fcinfo, int argno, const char *name,
					 Jsonb **payload, char **event_id)
{
	char	   *owner = psprintf("signal \"%s\"", name);

	*payload = PG_ARGISNULL(argno) ?
		DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"))) :
		PG_GETARG_JSONB_P(argno);
	WfCheckPayloadSize(*payload, "signal payload", owner);
	WfRefuseSealedLookalikes(*payload, "signal payload", owner);
	if (PG_ARGISNULL(argno + 1))
	{
		pg_uuid_t	id;

		WfNewRunId(&id);
		*event_id = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&id)));
	}
	else
	{
		*event_id = WfTextArg(fcinfo, argno + 1, "event id", WF_ARG_KEY);
		if ((*event_id)[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("an event id must have 1 to %d bytes", WF_ARG_MAX_KEY)));
	}
}

/*
 * WfRefuseRun reports that an operator command ("pause", "resume", ...)
 * does not apply to the run in its present state (status, by name).
 */
void
WfRefuseRun(pg_uuid_t *run_id, const char *status, const char *what, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot %s run %s", what, WfRunIdText(run_id)),
			 errdetail("The run is \"%s\".", status),
			 hint != NULL ? errhint("%s", hint) : 0));
}

/*
 * WfRequireArg refuses a NULL argument argno: "<name> must not be null",
 * with hint when it is not NULL.
 */
void
WfRequireArg(FunctionCallInfo fcinfo, int argno, const char *name, const char *hint)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name),
				 hint != NULL ? errhint("%s", hint) : 0));
}

/*
 * WfRequireArgs refuses a NULL in the first nargs arguments, all named in
 * names ("run and step"): "<names> must not be null".
 */
void
WfRequireArgs(FunctionCallInfo fcinfo, int nargs, const char *names)
{
	int			i;

	for (i = 0; i < nargs; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be null", names)));
}

/*
 * WfIntervalUsec returns the length of an interval argument in
 * microseconds, as a double: in int64, the months and days of a huge
 * interval would overflow.  A month counts DAYS_PER_MONTH days.
 */
double
WfIntervalUsec(const Interval *iv)
{
	return (double) iv->time + (double) iv->day * USECS_PER_DAY +
		(double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;
}

/*
 * WfIntervalArg returns the optional interval argument argno in
 * microseconds, or 0 when it is NULL or not given; one not positive (or
 * negative, when zero_ok) or longer than max_us is refused with the
 * message refusal and hint.
 */
double
WfIntervalArg(FunctionCallInfo fcinfo, int argno, bool zero_ok, double max_us,
			  const char *refusal, const char *hint)
{
	double		us;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return 0;
	us = WfIntervalUsec(PG_GETARG_INTERVAL_P(argno));
	if (us < 0 || (us == 0 && !zero_ok) || us > max_us)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", refusal),
				 errhint("%s", hint)));
	return us;
}

/*
 * WfApiReturn ends an API call (WfApiEnd) that answers result: a value of
 * a type passed by reference (byval false; typlen -1 for a varlena) is
 * copied out of SPI's memory first.
 */
Datum
WfApiReturn(Datum result, bool byval, int typlen)
{
	if (!byval)
		result = SPI_datumTransfer(result, false, typlen);
	WfApiEnd();
	return result;
}
