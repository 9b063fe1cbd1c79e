/*-------------------------------------------------------------------------
 *
 * jsonutil.h
 *	  Reading members of jsonb objects and building small jsonb objects.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/jsonutil.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_JSONUTIL_H
#define WF_JSONUTIL_H

#include "utils/jsonb.h"
#include "utils/timestamp.h"

/* small jsonb helpers */
extern JsonbValue *WfJsonbGet(Jsonb *obj, const char *key);
extern Jsonb *WfJsonbGetJsonb(Jsonb *obj, const char *key);
extern char *WfJsonbGetText(Jsonb *obj, const char *key);
extern int64 WfJsonbGetInt(Jsonb *obj, const char *key, int64 missing);
extern Jsonb *WfJsonbTextArray(char **items, int n);
extern Jsonb *WfJsonbConcat(Jsonb *a, Jsonb *b);
extern Jsonb *WfJsonbSetKey(Jsonb *obj, const char *key, Jsonb *value);
extern Jsonb *WfJsonbSetKeyIn(Jsonb *obj, const char *outer, const char *key, Jsonb *value);
extern Jsonb *WfJsonbDropKeyIfSame(Jsonb *obj, const char *key, Jsonb *value);
extern char *WfJsonbToText(const Jsonb *value, int *len);

/* building small jsonb objects */
typedef struct WfJsonBuilder
{
	JsonbParseState *state;
} WfJsonBuilder;

extern void WfJbBegin(WfJsonBuilder *b);
extern void WfJbText(WfJsonBuilder *b, const char *key, const char *value);
extern void WfJbInt(WfJsonBuilder *b, const char *key, int64 value);
extern void WfJbBool(WfJsonBuilder *b, const char *key, bool value);
extern void WfJbTimestamp(WfJsonBuilder *b, const char *key, TimestampTz value);
extern void WfJbJsonb(WfJsonBuilder *b, const char *key, Jsonb *value);
extern Jsonb *WfJbEnd(WfJsonBuilder *b);

#endif							/* WF_JSONUTIL_H */
