/*-------------------------------------------------------------------------
 *
 * argcheck.c
 *	  Size limits of the text and JSON arguments the engine stores.
 *
 * Every text argument that ends up in a table or an event (reasons,
 * names, keys, comments) is checked here, at the entry point, before
 * anything is read or written and before any message quotes it: a value
 * over its limit is refused with SQLSTATE 54000 (program_limit_exceeded)
 * and a message that names the argument and both sizes, e.g.
 *
 *	  reason is 10485760 bytes, more than the limit of 2000 bytes
 *
 * The limits are fixed (WF_ARG_MAX_*): they bound what one call can make
 * the engine store, and none refuses anything a valid definition can
 * contain.  JSON arguments are limited by wfengine.max_payload_size with
 * WfCheckPayloadSize; a run's input must moreover be a JSON object
 * (WfCheckRunInput, SQLSTATE 22023).  The PL/pgSQL entry points (wf.schedule,
 * wf.send_event, the batch commands) call the same checks through
 * wf._check_arg and wf._check_payload, so their messages are the same.
 *
 * Finer rules of a value (a schedule name's characters, a non-empty
 * reason) stay with their entry points; the size check comes first.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/argcheck.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "argcheck.h"
#include "guc.h"

PG_FUNCTION_INFO_V1(wfengine_check_arg);
PG_FUNCTION_INFO_V1(wfengine_check_payload);

/* forward declarations */
static void too_long(const char *argname, Size len, WfArgKind kind) pg_attribute_noreturn();

/*
 * WfArgLimit returns the limit in bytes of a kind of text argument.
 */
int
WfArgLimit(WfArgKind kind)
{
	switch (kind)
	{
		case WF_ARG_NAME:
			return WF_ARG_MAX_NAME;
		case WF_ARG_KEY:
			return WF_ARG_MAX_KEY;
		case WF_ARG_REASON:
			return WF_ARG_MAX_REASON;
		case WF_ARG_SIGNAL:
			return WF_ARG_MAX_SIGNAL;
	}
	elog(ERROR, "unknown argument kind %d", (int) kind);
	return 0;					/* keep the compiler quiet */
}

/*
 * WfCheckPayloadSize refuses a payload larger than wfengine.max_payload_size.
 */
void
WfCheckPayloadSize(Jsonb *payload, const char *what, const char *owner)
{
	if (payload != NULL && VARSIZE(payload) > (Size) wf_max_payload_size)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s of %s is %zu bytes, more than the limit of %d bytes",
						what, owner, (Size) VARSIZE(payload), wf_max_payload_size),
				 errhint("The limit is set by wfengine.max_payload_size. Store large data elsewhere and pass a reference.")));
}

/*
 * too_long reports a text argument over its limit.
 */
static void
too_long(const char *argname, Size len, WfArgKind kind)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("%s is %zu bytes, more than the limit of %d bytes",
					argname, len, WfArgLimit(kind)),
			 kind == WF_ARG_REASON ?
			 errhint("Give a short reason and refer to a ticket or document for the details.") : 0));
}

/*
 * WfCheckTextArg refuses a text argument longer than the limit of its
 * kind; NULL passes.  Called by the entry points before they use value.
 */
void
WfCheckTextArg(text *value, const char *argname, WfArgKind kind)
{
	if (value != NULL && VARSIZE_ANY_EXHDR(value) > (Size) WfArgLimit(kind))
		too_long(argname, VARSIZE_ANY_EXHDR(value), kind);
}

/*
 * WfCheckCStringArg is WfCheckTextArg for a value already in C form (an
 * element of an array, a key built from a run's input).
 */
void
WfCheckCStringArg(const char *value, const char *argname, WfArgKind kind)
{
	if (value != NULL && strlen(value) > (Size) WfArgLimit(kind))
		too_long(argname, strlen(value), kind);
}

/*
 * WfTextArg returns text argument argno of the calling function as a C
 * string after checking its size, or NULL when it is SQL NULL.
 */
char *
WfTextArg(FunctionCallInfo fcinfo, int argno, const char *argname, WfArgKind kind)
{
	text	   *value;

	if (PG_ARGISNULL(argno))
		return NULL;
	value = PG_GETARG_TEXT_PP(argno);
	WfCheckTextArg(value, argname, kind);
	return text_to_cstring(value);
}

/*
 * WfCheckRunInput refuses a run input that is not a JSON object (an
 * array, a string, a number, a boolean or JSON null) with SQLSTATE 22023.
 */
void
WfCheckRunInput(Jsonb *input, const char *argname)
{
	const char *what = "an array";

	if (JB_ROOT_IS_OBJECT(input) && !JB_ROOT_IS_SCALAR(input))
		return;
	if (JB_ROOT_IS_SCALAR(input))
	{
		JsonbValue	v;

		if (!JsonbExtractScalar(&input->root, &v))
			elog(ERROR, "could not read a scalar jsonb value");
		switch (v.type)
		{
			case jbvNull:
				what = "null";
				break;
			case jbvString:
				what = "a string";
				break;
			case jbvNumeric:
				what = "a number";
				break;
			case jbvBool:
				what = "a boolean";
				break;
			default:
				what = "a scalar";
				break;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be a JSON object, not %s", argname, what),
			 errhint("A run's input is an object such as '{\"order\": 42}' ('{}' for none); steps read it as $.input.")));
}

/*
 * wfengine_check_arg is wf._check_arg(argname, value, kind): the size check
 * of WfCheckTextArg for the PL/pgSQL entry points; kind is 'name', 'key',
 * 'reason' or 'signal'.  A NULL value passes.
 */
Datum
wfengine_check_arg(PG_FUNCTION_ARGS)
{
	char	   *kind;
	WfArgKind	k;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(2))
		elog(ERROR, "wf._check_arg needs an argument name and a kind");
	if (PG_ARGISNULL(1))
		PG_RETURN_VOID();
	kind = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (strcmp(kind, "name") == 0)
		k = WF_ARG_NAME;
	else if (strcmp(kind, "key") == 0)
		k = WF_ARG_KEY;
	else if (strcmp(kind, "reason") == 0)
		k = WF_ARG_REASON;
	else if (strcmp(kind, "signal") == 0)
		k = WF_ARG_SIGNAL;
	else
		elog(ERROR, "unknown argument kind \"%s\"", kind);
	WfCheckTextArg(PG_GETARG_TEXT_PP(1), text_to_cstring(PG_GETARG_TEXT_PP(0)), k);
	PG_RETURN_VOID();
}

/*
 * wfengine_check_payload is wf._check_payload(value, what, owner,
 * run_input): WfCheckPayloadSize for the PL/pgSQL entry points, and with
 * run_input true also WfCheckRunInput.  A NULL value passes.
 */
Datum
wfengine_check_payload(PG_FUNCTION_ARGS)
{
	Jsonb	   *value;
	char	   *what;

	if (PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		elog(ERROR, "wf._check_payload needs what, owner and run_input");
	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	value = PG_GETARG_JSONB_P(0);
	what = text_to_cstring(PG_GETARG_TEXT_PP(1));
	WfCheckPayloadSize(value, what, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	if (PG_GETARG_BOOL(3))
		WfCheckRunInput(value, what);
	PG_RETURN_VOID();
}
