/*-------------------------------------------------------------------------
 *
 * jsonutil.c
 *	  Reading members of jsonb objects and building small jsonb objects.
 *
 * Event payloads, task inputs and the run context are jsonb.  The engine
 * reads single members with getKeyJsonValueFromContainer and builds new
 * objects with pushJsonbValue; nested jsonb values are embedded as
 * binary containers, never printed and parsed again.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/jsonutil.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "jsonutil.h"

/*
 * WfJsonbGet returns the value of key in a jsonb object, or NULL.
 */
JsonbValue *
WfJsonbGet(Jsonb *obj, const char *key)
{
	if (obj == NULL || !JB_ROOT_IS_OBJECT(obj))
		return NULL;
	return getKeyJsonValueFromContainer(&obj->root, key, strlen(key), NULL);
}

/*
 * WfJsonbGetJsonb returns the value of key as a Jsonb of its own, or NULL.
 */
Jsonb *
WfJsonbGetJsonb(Jsonb *obj, const char *key)
{
	JsonbValue *v = WfJsonbGet(obj, key);

	return v == NULL ? NULL : JsonbValueToJsonb(v);
}

/*
 * WfJsonbGetText returns a string member as a C string, or NULL.
 */
char *
WfJsonbGetText(Jsonb *obj, const char *key)
{
	JsonbValue *v = WfJsonbGet(obj, key);

	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * WfJsonbGetInt returns an integer member, or missing.
 */
int64
WfJsonbGetInt(Jsonb *obj, const char *key, int64 missing)
{
	JsonbValue *v = WfJsonbGet(obj, key);

	if (v == NULL || v->type != jbvNumeric)
		return missing;
	return DatumGetInt64(DirectFunctionCall1(numeric_int8,
											 NumericGetDatum(v->val.numeric)));
}

static void
jb_key(WfJsonBuilder *b, const char *key)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	pushJsonbValue(&b->state, WJB_KEY, &k);
}

void
WfJbBegin(WfJsonBuilder *b)
{
	b->state = NULL;
	pushJsonbValue(&b->state, WJB_BEGIN_OBJECT, NULL);
}

void
WfJbText(WfJsonBuilder *b, const char *key, const char *value)
{
	JsonbValue	v = {.type = jbvNull};

	if (value != NULL)
	{
		v.type = jbvString;
		v.val.string.val = (char *) value;
		v.val.string.len = strlen(value);
	}
	jb_key(b, key);
	pushJsonbValue(&b->state, WJB_VALUE, &v);
}

void
WfJbInt(WfJsonBuilder *b, const char *key, int64 value)
{
	JsonbValue	v = {.type = jbvNumeric, .val.numeric = int64_to_numeric(value)};

	jb_key(b, key);
	pushJsonbValue(&b->state, WJB_VALUE, &v);
}

void
WfJbBool(WfJsonBuilder *b, const char *key, bool value)
{
	JsonbValue	v = {.type = jbvBool, .val.boolean = value};

	jb_key(b, key);
	pushJsonbValue(&b->state, WJB_VALUE, &v);
}

/*
 * WfJbTimestamp adds a timestamp in ISO 8601 form, always in UTC, so that
 * payloads (and so event hashes) do not depend on the session's TimeZone.
 */
void
WfJbTimestamp(WfJsonBuilder *b, const char *key, TimestampTz value)
{
	struct pg_tm tm;
	fsec_t		fsec;
	char		buf[MAXDATELEN + 1];

	if (timestamp2tm(value, NULL, &tm, &fsec, NULL, NULL) != 0)
		elog(ERROR, "timestamp out of range");
	tm.tm_isdst = 0;
	EncodeDateTime(&tm, fsec, true, 0, NULL, USE_XSD_DATES, buf);
	WfJbText(b, key, pstrdup(buf));
}

void
WfJbJsonb(WfJsonBuilder *b, const char *key, Jsonb *value)
{
	JsonbValue	v = {.type = jbvNull};

	jb_key(b, key);
	if (value != NULL)
	{
		v.type = jbvBinary;
		v.val.binary.data = &value->root;
		v.val.binary.len = VARSIZE(value) - VARHDRSZ;
	}
	pushJsonbValue(&b->state, WJB_VALUE, &v);
}

Jsonb *
WfJbEnd(WfJsonBuilder *b)
{
	return JsonbValueToJsonb(pushJsonbValue(&b->state, WJB_END_OBJECT, NULL));
}

/*
 * WfJsonbConcat returns a || b (jsonb concatenation); a NULL a is {}.
 */
Jsonb *
WfJsonbConcat(Jsonb *a, Jsonb *b)
{
	if (a == NULL)
		return b;
	return DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(a),
											  JsonbPGetDatum(b)));
}

/*
 * WfJsonbTextArray returns a jsonb array of n strings.
 */
Jsonb *
WfJsonbTextArray(char **items, int n)
{
	JsonbParseState *state = NULL;
	int			i;

	pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
	for (i = 0; i < n; i++)
	{
		JsonbValue	v;

		v.type = jbvString;
		v.val.string.val = items[i];
		v.val.string.len = strlen(items[i]);
		pushJsonbValue(&state, WJB_ELEM, &v);
	}
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_ARRAY, NULL));
}
