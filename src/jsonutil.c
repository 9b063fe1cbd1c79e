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

/* ----------------------------------------------------------------
 *		setting one member of an object without taking it apart
 *
 * jsonb_set decodes the whole document into JsonbValues and encodes it
 * again, so a run context that holds the outputs of twenty steps costs
 * twenty outputs' work on every step.  WfJsonbSetKey builds the new
 * object from the old one's binary form instead: its members' bytes are
 * copied as they are, and only the object's own header and entries are
 * written anew.  The layout is the one convertToJsonb writes (jsonb.h):
 * the keys' entries in key order (length, then bytes), then the values'
 * in the same order; every JB_OFFSET_STRIDE'th entry holds an offset,
 * the others a length; a numeric or a container starts at a 4-byte
 * boundary of the datum, its padding counted in its length.  Since every
 * container begins at such a boundary, a member copied to a boundary of
 * the new datum keeps the alignment of everything inside it.
 * ----------------------------------------------------------------
 */

/* a member's type (JENTRY_IS*) and its bytes, without its alignment padding */
typedef struct JbChild
{
	uint32		type;
	const char *data;
	uint32		len;
} JbChild;

/*
 * container_child returns child index of container jc (nchildren entries).
 */
static JbChild
container_child(const JsonbContainer *jc, int index, int nchildren)
{
	const char *base = (const char *) &jc->children[nchildren];
	JbChild		c;

	c.type = jc->children[index] & JENTRY_TYPEMASK;
	c.data = base + getJsonbOffset(jc, index);
	c.len = getJsonbLength(jc, index);
	if (c.type == JENTRY_ISNUMERIC || c.type == JENTRY_ISCONTAINER)
	{
		const char *aligned = (const char *) TYPEALIGN(sizeof(uint32), (uintptr_t) c.data);

		c.len -= aligned - c.data;
		c.data = aligned;
	}
	return c;
}

/*
 * jsonb_as_child returns a whole jsonb value as a member: a scalar as
 * itself, an object or array as its container.
 */
static JbChild
jsonb_as_child(const Jsonb *value)
{
	JbChild		c;

	if (JB_ROOT_IS_SCALAR(value))
		return container_child(&value->root, 0, 1);
	c.type = JENTRY_ISCONTAINER;
	c.data = (const char *) &value->root;
	c.len = VARSIZE(value) - VARHDRSZ;
	return c;
}

/*
 * append_child appends c's bytes to buf (padded first where its type
 * wants alignment) and returns its entry, with its length.
 */
static JEntry
append_child(StringInfo buf, const JbChild *c)
{
	int			start = buf->len;

	if (c->type == JENTRY_ISNUMERIC || c->type == JENTRY_ISCONTAINER)
		while (buf->len % sizeof(uint32) != 0)
			appendStringInfoChar(buf, '\0');
	appendBinaryStringInfo(buf, c->data, c->len);
	if (buf->len - start > JENTRY_OFFLENMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("total size of jsonb object elements exceeds the maximum of %u bytes",
						JENTRY_OFFLENMASK)));
	return c->type | (buf->len - start);
}

/* the order of an object's keys: by length, then by bytes */
static int
key_cmp(const char *a, uint32 alen, const char *b, uint32 blen)
{
	if (alen != blen)
		return alen < blen ? -1 : 1;
	return memcmp(a, b, alen);
}

/*
 * object_set returns, as a jsonb of its own, the object container jc (NULL:
 * {}) with member key set to value, or without member key when value is
 * NULL.
 */
static Jsonb *
object_set(const JsonbContainer *jc, const char *key, uint32 keylen, const JbChild *value)
{
	int			count = jc != NULL ? JsonContainerSize(jc) : 0;
	int			pos = count;	/* where key goes among the members */
	bool		found = false;
	int			newcount;
	int			entries;
	uint32		totallen = 0;
	StringInfoData buf;
	uint32		header;
	int			i;

	for (i = 0; i < count; i++)
	{
		JbChild		k = container_child(jc, i, 2 * count);
		int			cmp = key_cmp(k.data, k.len, key, keylen);

		if (cmp >= 0)
		{
			pos = i;
			found = cmp == 0;
			break;
		}
	}
	if (value == NULL)
		newcount = found ? count - 1 : count;
	else
		newcount = found ? count : count + 1;

	initStringInfo(&buf);
	buf.len = VARHDRSZ;
	header = (uint32) newcount | JB_FOBJECT;
	appendBinaryStringInfo(&buf, (const char *) &header, sizeof(uint32));
	entries = buf.len;
	for (i = 0; i < 2 * newcount; i++)
		appendBinaryStringInfo(&buf, (const char *) &totallen, sizeof(JEntry));

	for (i = 0; i < 2 * newcount; i++)
	{
		bool		is_value = i >= newcount;
		int			member = is_value ? i - newcount : i;
		JbChild		c;
		JEntry		meta;

		if (member == pos && value != NULL)
		{
			if (is_value)
				c = *value;
			else
			{
				c.type = JENTRY_ISSTRING;
				c.data = key;
				c.len = keylen;
			}
		}
		else
		{
			/*
			 * the old member: after pos, shifted by the one inserted, or by
			 * the one deleted
			 */
			int			old = member;

			if (value == NULL && found && member >= pos)
				old = member + 1;
			else if (value != NULL && !found && member > pos)
				old = member - 1;

			c = container_child(jc, is_value ? old + count : old, 2 * count);
		}
		meta = append_child(&buf, &c);
		totallen += JBE_OFFLENFLD(meta);
		if (totallen > JENTRY_OFFLENMASK)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("total size of jsonb object elements exceeds the maximum of %u bytes",
							JENTRY_OFFLENMASK)));
		if (i % JB_OFFSET_STRIDE == 0)
			meta = (meta & JENTRY_TYPEMASK) | totallen | JENTRY_HAS_OFF;
		memcpy(buf.data + entries + i * sizeof(JEntry), &meta, sizeof(JEntry));
	}
	SET_VARSIZE(buf.data, buf.len);
	return (Jsonb *) buf.data;
}

/*
 * WfJsonbSetKey returns object obj with member key set to value (added, or
 * replaced), as jsonb_set(obj, {key}, value) does.
 */
Jsonb *
WfJsonbSetKey(Jsonb *obj, const char *key, Jsonb *value)
{
	JbChild		v = jsonb_as_child(value);

	if (!JB_ROOT_IS_OBJECT(obj))
		elog(ERROR, "wfengine sets a member of a jsonb value that is not an object");
	return object_set(&obj->root, key, strlen(key), &v);
}

/*
 * WfJsonbSetKeyIn returns object obj with member key of its member outer
 * set to value: jsonb_set(obj, {outer, key}, value), except that a missing
 * outer is added as {key: value}.  Outer must be an object where present.
 */
Jsonb *
WfJsonbSetKeyIn(Jsonb *obj, const char *outer, const char *key, Jsonb *value)
{
	JbChild		v = jsonb_as_child(value);
	JsonbValue *in;
	JsonbContainer *inner = NULL;
	Jsonb	   *updated;
	JbChild		u;

	if (!JB_ROOT_IS_OBJECT(obj))
		elog(ERROR, "wfengine sets a member of a jsonb value that is not an object");
	in = getKeyJsonValueFromContainer(&obj->root, outer, strlen(outer), NULL);
	if (in != NULL)
	{
		if (in->type != jbvBinary || !JsonContainerIsObject(in->val.binary.data))
			elog(ERROR, "wfengine sets a member of \"%s\", which is not an object", outer);
		inner = in->val.binary.data;
	}
	updated = object_set(inner, key, strlen(key), &v);
	u = jsonb_as_child(updated);
	return object_set(&obj->root, outer, strlen(outer), &u);
}

/*
 * WfJsonbDropKeyIfSame returns object obj without its member key when that
 * member's value is byte for byte value (as jsonb_delete(obj, key) would),
 * and obj itself otherwise (the member missing, or another value).  The
 * run's snapshot is written with it (runstore.c): its context leaves out
 * the input while that is the run's input as stored.
 */
Jsonb *
WfJsonbDropKeyIfSame(Jsonb *obj, const char *key, Jsonb *value)
{
	uint32		keylen = strlen(key);
	JbChild		v = jsonb_as_child(value);
	int			count;
	int			i;

	if (!JB_ROOT_IS_OBJECT(obj))
		elog(ERROR, "wfengine deletes a member of a jsonb value that is not an object");
	count = JsonContainerSize(&obj->root);
	for (i = 0; i < count; i++)
	{
		JbChild		k = container_child(&obj->root, i, 2 * count);
		int			cmp = key_cmp(k.data, k.len, key, keylen);

		if (cmp > 0)
			break;
		if (cmp == 0)
		{
			JbChild		m = container_child(&obj->root, i + count, 2 * count);

			if (m.type != v.type || m.len != v.len || memcmp(m.data, v.data, m.len) != 0)
				break;
			return object_set(&obj->root, key, keylen, NULL);
		}
	}
	return obj;
}

/* ----------------------------------------------------------------
 *		the text of a jsonb, as jsonb's output function writes it
 *
 * The hash chain hashes each event's payload as text (state.c), so every
 * event of every transition is printed.  JsonbToCString walks the value
 * with a JsonbIterator, which decodes each member into a JsonbValue, and
 * escapes strings a character at a time.  WfJsonbToText walks the binary
 * form directly and copies runs of characters that need no escape; the
 * text is byte for byte JsonbToCString's (no indentation: ", " between
 * members, ": " after a key; numerics through numeric_out), which the
 * fuzz target "jsontext" checks.
 * ----------------------------------------------------------------
 */

static void text_container(StringInfo out, const JsonbContainer *jc);

/*
 * text_string appends the JSON string of the len bytes at s, as
 * escape_json does.
 */
static void
text_string(StringInfo out, const char *s, uint32 len)
{
	uint32		i;
	uint32		run = 0;

	appendStringInfoCharMacro(out, '"');
	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];
		const char *esc;

		if (c >= ' ' && c != '"' && c != '\\')
			continue;
		if (i > run)
			appendBinaryStringInfo(out, s + run, i - run);
		run = i + 1;
		switch (c)
		{
			case '\b':
				esc = "\\b";
				break;
			case '\f':
				esc = "\\f";
				break;
			case '\n':
				esc = "\\n";
				break;
			case '\r':
				esc = "\\r";
				break;
			case '\t':
				esc = "\\t";
				break;
			case '"':
				esc = "\\\"";
				break;
			case '\\':
				esc = "\\\\";
				break;
			default:
				appendStringInfo(out, "\\u%04x", (int) c);
				continue;
		}
		appendBinaryStringInfo(out, esc, 2);
	}
	if (len > run)
		appendBinaryStringInfo(out, s + run, len - run);
	appendStringInfoCharMacro(out, '"');
}

/*
 * text_child appends the text of a member.
 */
static void
text_child(StringInfo out, const JbChild *c)
{
	switch (c->type)
	{
		case JENTRY_ISNULL:
			appendBinaryStringInfo(out, "null", 4);
			break;
		case JENTRY_ISBOOL_TRUE:
			appendBinaryStringInfo(out, "true", 4);
			break;
		case JENTRY_ISBOOL_FALSE:
			appendBinaryStringInfo(out, "false", 5);
			break;
		case JENTRY_ISSTRING:
			text_string(out, c->data, c->len);
			break;
		case JENTRY_ISNUMERIC:
			appendStringInfoString(out,
								   DatumGetCString(DirectFunctionCall1(numeric_out,
																	   PointerGetDatum(c->data))));
			break;
		case JENTRY_ISCONTAINER:
			text_container(out, (const JsonbContainer *) c->data);
			break;
		default:
			elog(ERROR, "unknown jsonb entry type 0x%08x", c->type);
	}
}

/*
 * text_container appends the text of an object or an array (a raw
 * scalar's pseudo-array as the scalar alone).
 */
static void
text_container(StringInfo out, const JsonbContainer *jc)
{
	int			count = JsonContainerSize(jc);
	int			i;

	check_stack_depth();
	if (JsonContainerIsScalar(jc))
	{
		JbChild		c = container_child(jc, 0, 1);

		text_child(out, &c);
		return;
	}
	if (JsonContainerIsObject(jc))
	{
		appendStringInfoCharMacro(out, '{');
		for (i = 0; i < count; i++)
		{
			JbChild		key = container_child(jc, i, count * 2);
			JbChild		value = container_child(jc, i + count, count * 2);

			if (i > 0)
				appendBinaryStringInfo(out, ", ", 2);
			text_string(out, key.data, key.len);
			appendBinaryStringInfo(out, ": ", 2);
			text_child(out, &value);
		}
		appendStringInfoCharMacro(out, '}');
		return;
	}
	appendStringInfoCharMacro(out, '[');
	for (i = 0; i < count; i++)
	{
		JbChild		elem = container_child(jc, i, count);

		if (i > 0)
			appendBinaryStringInfo(out, ", ", 2);
		text_child(out, &elem);
	}
	appendStringInfoCharMacro(out, ']');
}

/*
 * WfJsonbToText returns the text of value, as JsonbToCString(NULL,
 * &value->root, VARSIZE(value)) does; *len (when not NULL) its length.
 */
char *
WfJsonbToText(const Jsonb *value, int *len)
{
	StringInfoData out;

	initStringInfo(&out);
	text_container(&out, &value->root);
	if (len != NULL)
		*len = out.len;
	return out.data;
}
