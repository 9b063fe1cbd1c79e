/*-------------------------------------------------------------------------
 *
 * api.c
 *	  What every SQL-callable run command shares: its run and reason
 *	  arguments, its other required arguments, its refusals, and the
 *	  answer it returns out of SPI at the end of its API call; and the
 *	  entry points of the API functions written in SQL or PL/pgSQL.
 *
 * An API function whose work is written in SQL or PL/pgSQL (wf.send_event,
 * the batch commands, the graphs, wf.fire_schedule, wf.schedule) is a C
 * entry point that calls its body, an internal function wf._<name> that no
 * job role may execute (issue 29): PostgreSQL checks EXECUTE on the entry
 * point only, and WfCallInternal calls the body through fmgr, which checks
 * nothing.  The body runs as an API call (as the extension's owner, so
 * that the internal helpers it uses in turn, wf._buffer_event,
 * wf._check_arg, wf._graph_render, ..., need no grant either) with the
 * caller still the actor of what it records and the role whose tenant it
 * acts for (tenant.c); wf.schedule's body runs as the caller, whose
 * pg_cron job it makes.  A SECURITY DEFINER body would not do: its calls
 * of the C functions would record the owner as the actor.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/api.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "argcheck.h"
#include "crypto.h"
#include "sensitive.h"
#include "spi_util.h"

PG_FUNCTION_INFO_V1(wfengine_send_event);
PG_FUNCTION_INFO_V1(wfengine_cancel_runs);
PG_FUNCTION_INFO_V1(wfengine_retry_runs);
PG_FUNCTION_INFO_V1(wfengine_resume_runs);
PG_FUNCTION_INFO_V1(wfengine_definition_graph);
PG_FUNCTION_INFO_V1(wfengine_list_runs);
PG_FUNCTION_INFO_V1(wfengine_run_graph);
PG_FUNCTION_INFO_V1(wfengine_fire_schedule);
PG_FUNCTION_INFO_V1(wfengine_unschedule);

/* the body an entry point calls, looked up once per call site (fn_extra) */
typedef struct WfInternalFn
{
	FmgrInfo	flinfo;
	int16		typlen;			/* of its result */
	bool		typbyval;
} WfInternalFn;

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

/*
 * internal_fn returns the body wf.<name>(argtypes) of the entry point
 * called by fcinfo, found in the catalog by its exact schema, name and
 * argument types (no search_path, no privilege check) the first time the
 * call site calls it, and kept in fn_extra.
 */
static WfInternalFn *
internal_fn(FunctionCallInfo fcinfo, const char *name, int nargs, const Oid *argtypes)
{
	WfInternalFn *fn = (WfInternalFn *) fcinfo->flinfo->fn_extra;
	Oid			nsp;
	Oid			fnoid;

	if (fn != NULL)
		return fn;
	nsp = get_namespace_oid("wf", false);
	fnoid = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum(name),
							PointerGetDatum(buildoidvector(argtypes, nargs)),
							ObjectIdGetDatum(nsp));
	if (!OidIsValid(fnoid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function wf.%s of extension \"wfengine\" does not exist", name),
				 errhint("Update the extension: ALTER EXTENSION wfengine UPDATE.")));
	fn = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(WfInternalFn));
	fmgr_info_cxt(fnoid, &fn->flinfo, fcinfo->flinfo->fn_mcxt);
	if (fn->flinfo.fn_retset != fcinfo->flinfo->fn_retset)
		elog(ERROR, "wf.%s and its entry point disagree on returning a set", name);
	get_typlenbyval(get_func_rettype(fnoid), &fn->typlen, &fn->typbyval);
	fcinfo->flinfo->fn_extra = fn;
	return fn;
}

/*
 * WfCallInternal is the whole of an entry point written in SQL or
 * PL/pgSQL: it calls its body wf.<name>(argtypes, nargs of them) with the
 * nprefix arguments of prefix (never null) followed by the entry point's
 * own arguments, and answers what the body answers: a value, or a set,
 * which the body returns through the entry point's ReturnSetInfo.  With
 * as_owner the call is an API call (WfApiBegin ... WfApiEnd), as the
 * extension's owner; without, it runs as the caller.  A strict body given
 * a null argument is not called, as the executor would not call it.
 */
Datum
WfCallInternal(FunctionCallInfo fcinfo, const char *name, int nargs, const Oid *argtypes,
			   int nprefix, const Datum *prefix, bool as_owner)
{
	LOCAL_FCINFO(call, FUNC_MAX_ARGS);
	WfInternalFn *fn;
	Datum		result;
	int			i;

	if (nprefix + PG_NARGS() != nargs)
		elog(ERROR, "wf.%s takes %d arguments, not %d", name, nargs, nprefix + PG_NARGS());
	if (as_owner)
		WfApiBegin();
	fn = internal_fn(fcinfo, name, nargs, argtypes);

	InitFunctionCallInfoData(*call, &fn->flinfo, nargs, fcinfo->fncollation,
							 fcinfo->context, fcinfo->resultinfo);
	for (i = 0; i < nprefix; i++)
	{
		call->args[i].value = prefix[i];
		call->args[i].isnull = false;
	}
	for (i = 0; i < PG_NARGS(); i++)
	{
		call->args[nprefix + i] = fcinfo->args[i];
		if (fn->flinfo.fn_strict && fcinfo->args[i].isnull)
		{
			if (fn->flinfo.fn_retset)
			{
				ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

				rsinfo->returnMode = SFRM_ValuePerCall;
				rsinfo->isDone = ExprEndResult;
			}
			if (as_owner)
				WfApiEnd();
			PG_RETURN_NULL();
		}
	}

	result = FunctionCallInvoke(call);
	fcinfo->isnull = call->isnull;
	if (!as_owner)
		return result;
	if (fcinfo->isnull || fn->flinfo.fn_retset)
	{
		WfApiEnd();
		return result;
	}
	return WfApiReturn(result, fn->typbyval, fn->typlen);
}

/*
 * wfengine_send_event is wf.send_event(correlation_key, name, payload,
 * event_id, keep); its body is wf._send_event.
 */
Datum
wfengine_send_event(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[] = {TEXTOID, TEXTOID, JSONBOID, TEXTOID, INTERVALOID};

	return WfCallInternal(fcinfo, "_send_event", lengthof(argtypes), argtypes, 0, NULL, true);
}

/*
 * batch_command calls wf._batch(batch, command, statuses, reason, filter,
 * max_runs, after) for the batch command batch: command over the runs of
 * the given statuses.
 */
static Datum
batch_command(FunctionCallInfo fcinfo, const char *batch, const char *command,
			  const char *const *statuses, int nstatuses)
{
	static const Oid argtypes[] = {TEXTOID, TEXTOID, TEXTARRAYOID, TEXTOID, JSONBOID,
	INT4OID, UUIDOID};
	Datum		prefix[3];
	Datum	   *elems = palloc(sizeof(Datum) * nstatuses);
	int			i;

	for (i = 0; i < nstatuses; i++)
		elems[i] = CStringGetTextDatum(statuses[i]);
	prefix[0] = CStringGetTextDatum(batch);
	prefix[1] = CStringGetTextDatum(command);
	prefix[2] = PointerGetDatum(construct_array(elems, nstatuses, TEXTOID, -1, false, TYPALIGN_INT));
	return WfCallInternal(fcinfo, "_batch", lengthof(argtypes), argtypes, 3, prefix, true);
}

/*
 * wfengine_cancel_runs is wf.cancel_runs(reason, filter, max_runs, after):
 * wf.cancel_run over running and paused runs.
 */
Datum
wfengine_cancel_runs(PG_FUNCTION_ARGS)
{
	static const char *const statuses[] = {"running", "paused"};

	return batch_command(fcinfo, "cancel_runs", "cancel_run", statuses, lengthof(statuses));
}

/*
 * wfengine_retry_runs is wf.retry_runs(reason, filter, max_runs, after):
 * wf.retry_step over failed and compensation_failed runs.
 */
Datum
wfengine_retry_runs(PG_FUNCTION_ARGS)
{
	static const char *const statuses[] = {"failed", "compensation_failed"};

	return batch_command(fcinfo, "retry_runs", "retry_step", statuses, lengthof(statuses));
}

/*
 * wfengine_resume_runs is wf.resume_runs(reason, filter, max_runs, after):
 * wf.resume_run over paused runs.
 */
Datum
wfengine_resume_runs(PG_FUNCTION_ARGS)
{
	static const char *const statuses[] = {"paused"};

	return batch_command(fcinfo, "resume_runs", "resume_run", statuses, lengthof(statuses));
}

/*
 * wfengine_definition_graph is wf.definition_graph(definition, version,
 * format); its body is wf._definition_graph.
 */
Datum
wfengine_definition_graph(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[] = {TEXTOID, INT4OID, TEXTOID};

	return WfCallInternal(fcinfo, "_definition_graph", lengthof(argtypes), argtypes, 0, NULL, true);
}

/*
 * wfengine_list_runs is wf.list_runs(filter, max_runs, after); its body is
 * wf._list_runs.  As an API call it is refused, like every other, on a
 * shard that does not own the caller's tenant (shard.c): after a move the
 * source still holds the partition's rows until its cleanup.
 */
Datum
wfengine_list_runs(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[] = {JSONBOID, INT4OID, UUIDOID};

	return WfCallInternal(fcinfo, "_list_runs", lengthof(argtypes), argtypes, 0, NULL, true);
}

/*
 * wfengine_run_graph is wf.run_graph(run, format); its body is
 * wf._run_graph.
 */
Datum
wfengine_run_graph(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[] = {UUIDOID, TEXTOID};

	return WfCallInternal(fcinfo, "_run_graph", lengthof(argtypes), argtypes, 0, NULL, true);
}

/*
 * wfengine_fire_schedule is wf.fire_schedule(schedule_id), the command of
 * a schedule's pg_cron job; its body is wf._fire_schedule.
 */
Datum
wfengine_fire_schedule(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[] = {INT8OID};

	return WfCallInternal(fcinfo, "_fire_schedule", lengthof(argtypes), argtypes, 0, NULL, true);
}

/*
 * wfengine_unschedule is wf.unschedule(name); its body, wf._unschedule,
 * runs as an API call (the extension's owner deletes the row and the
 * pg_cron job), given the calling role, whose schedule it must be.  No job
 * role has DELETE on wf.schedules: with it a tenant's admin could LOCK the
 * table and stall every tenant's schedules.
 */
Datum
wfengine_unschedule(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[] = {NAMEOID, TEXTOID};
	Datum		prefix[1];

	prefix[0] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	return WfCallInternal(fcinfo, "_unschedule", lengthof(argtypes), argtypes, 1, prefix, true);
}
