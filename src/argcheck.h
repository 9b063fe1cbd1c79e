/*-------------------------------------------------------------------------
 *
 * argcheck.h
 *	  Size limits of the text and JSON arguments the engine stores.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/argcheck.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_ARGCHECK_H
#define WF_ARGCHECK_H

#include "fmgr.h"
#include "utils/jsonb.h"

/*
 * The kinds of text argument, each with its limit in bytes.  A name never
 * refuses what a valid definition can contain (definition names have at
 * most 128 bytes, step, queue and event names 63, see definition.c).
 */
typedef enum WfArgKind
{
	WF_ARG_NAME = 0,			/* definition, step, queue, worker, schedule,
								 * activity names, cron expressions, decisions */
	WF_ARG_KEY = 1,				/* idempotency keys, event ids, correlation
								 * keys, approver names */
	WF_ARG_REASON = 2,			/* reasons of operator commands, comments */
	WF_ARG_SIGNAL = 3			/* signal names (= event names of a
								 * definition) */
} WfArgKind;

#define WF_ARG_MAX_NAME 200
#define WF_ARG_MAX_KEY 255
#define WF_ARG_MAX_REASON 2000
#define WF_ARG_MAX_SIGNAL 63

extern int	WfArgLimit(WfArgKind kind);
extern void WfCheckPayloadSize(Jsonb *payload, const char *what, const char *owner);
extern void WfCheckTextArg(text *value, const char *argname, WfArgKind kind);
extern void WfCheckCStringArg(const char *value, const char *argname, WfArgKind kind);
extern char *WfTextArg(FunctionCallInfo fcinfo, int argno, const char *argname,
					   WfArgKind kind);
extern void WfCheckRunInput(Jsonb *input, const char *argname);

#endif							/* WF_ARGCHECK_H */
