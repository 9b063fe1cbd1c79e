/*-------------------------------------------------------------------------
 *
 * api.h
 *	  Arguments and refusals every SQL-callable run command shares.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/api.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_API_H
#define WF_API_H

#include "fmgr.h"
#include "datatype/timestamp.h"
#include "utils/jsonb.h"
#include "utils/uuid.h"

extern pg_uuid_t *WfRunArgument(FunctionCallInfo fcinfo);
extern char *WfRequireReason(FunctionCallInfo fcinfo, int argno);
extern void WfSignalPayloadAndId(FunctionCallInfo fcinfo, int argno, const char *name,
								 Jsonb **payload, char **event_id);
extern char *WfRunIdText(pg_uuid_t *run_id);
extern void WfUnknownRun(pg_uuid_t *run_id) pg_attribute_noreturn();
extern void WfRefuseRun(pg_uuid_t *run_id, const char *status, const char *what,
						const char *hint) pg_attribute_noreturn();
extern void WfRequireArg(FunctionCallInfo fcinfo, int argno, const char *name,
						 const char *hint);
extern void WfRequireArgs(FunctionCallInfo fcinfo, int nargs, const char *names);
extern double WfIntervalUsec(const Interval *iv);
extern double WfIntervalArg(FunctionCallInfo fcinfo, int argno, bool zero_ok,
							double max_us, const char *refusal, const char *hint);
extern Datum WfApiReturn(Datum result, bool byval, int typlen);
extern Datum WfCallInternal(FunctionCallInfo fcinfo, const char *name, int nargs,
							const Oid *argtypes, int nprefix, const Datum *prefix,
							bool as_owner);

#endif							/* WF_API_H */
