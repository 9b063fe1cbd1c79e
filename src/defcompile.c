/*-------------------------------------------------------------------------
 *
 * defcompile.c
 *	  Workflow definitions: validation of a spec and its compiled form.
 *
 * A definition is a JSON document with a list of steps.  It is validated
 * here, in one pass that also compiles it: every field is checked for
 * type and range, step names must be unique, durations must parse and
 * every JSONPath must compile with PostgreSQL's own jsonpath parser.  The
 * graph the steps make (every "next" names a step, every step is reachable
 * and can reach the end) is checked by defmodel.c.  Every error names the
 * definition, the step and the field (WfDefError).
 *
 * Nothing here reads or writes a table: the children of subworkflow and
 * parallel steps are resolved by definition.c, the limits across branches
 * and the tenant's quota are checked by publish.c.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/defcompile.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <math.h>

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/jsonpath.h"

#include "argcheck.h"
#include "defcompile.h"
#include "duration.h"
#include "guc.h"
#include "spi_util.h"

#define WF_MAX_NAME_LEN 128
#define WF_MAX_STEP_NAME_LEN 63
#define WF_MAX_ATTEMPTS_LIMIT 1000

/* defaults of the retry policy (documented in docs/definitions.md) */
#define WF_DEFAULT_MAX_ATTEMPTS 3
#define WF_DEFAULT_INITIAL_INTERVAL USECS_PER_SEC
#define WF_DEFAULT_BACKOFF 2.0
#define WF_DEFAULT_MAX_INTERVAL (60 * USECS_PER_SEC)
#define WF_DEFAULT_JITTER 0.2


static const char *const top_fields[] = {
	"correlation", "description", "on_failure", "output", "sensitive", "steps",
	"timeout", NULL
};
static const char *const task_fields[] = {
	"activity", "compensate", "description", "end", "input", "name", "next",
	"priority", "queue", "retry", "sensitive", "skippable", "timeout", "type", NULL
};
static const char *const subworkflow_fields[] = {
	"definition", "description", "end", "input", "name", "next", "skippable",
	"type", "version", NULL
};
static const char *const parallel_fields[] = {
	"branches", "description", "end", "input", "join", "name", "next",
	"on_branch_failure", "skippable", "type", NULL
};
static const char *const branch_fields[] = {"output", "steps", NULL};
static const char *const compensate_fields[] = {
	"activity", "input", "queue", "retry", "timeout", NULL
};
static const char *const sleep_fields[] = {
	"description", "duration", "end", "name", "next", "skippable", "type",
	"until", NULL
};
static const char *const approval_fields[] = {
	"approvers", "description", "end", "expires", "name", "next",
	"notify_queue", "on_expiry", "policy", "rejections", "retry", "skippable",
	"timeout", "type", NULL
};
static const char *const choice_fields[] = {
	"choices", "default", "description", "name", "type", NULL
};
static const char *const choice_item_fields[] = {"next", "when", NULL};
static const char *const wait_event_fields[] = {
	"description", "end", "event", "name", "next", "on_timeout", "skippable",
	"timeout", "type", NULL
};
static const char *const retry_fields[] = {
	"backoff_coefficient", "initial_interval", "jitter", "max_attempts",
	"max_interval", "non_retryable_errors", NULL
};
static const char *const timeout_fields[] = {
	"heartbeat", "schedule_to_start", "start_to_close", "total", NULL
};

/* forward declarations */
static bool jsonpath_has_variable(Datum path);
static JsonbValue *obj_get(JsonbContainer *obj, const char *key);
static bool is_object(const JsonbValue *v);
static bool is_array(const JsonbValue *v);
static char *value_cstring(const JsonbValue *v);
static void check_fields(const ValidateCtx *cx, const char *prefix,
						 JsonbContainer *obj, const char *const *allowed);
static char *get_string(const ValidateCtx *cx, JsonbContainer *obj,
						const char *key, const char *field, bool required);

static int64 get_duration(const ValidateCtx *cx, JsonbContainer *obj,
						  const char *key, const char *field);
static double get_number(const ValidateCtx *cx, JsonbContainer *obj,
						 const char *key, const char *field,
						 double min, double max, double dflt, bool integral);
static bool valid_identifier(const char *s, int maxlen, bool allow_punct);
static void check_approver(const ValidateCtx *cx, char **approvers, int i);
static void check_activity_size(const ValidateCtx *cx, const char *field,
								const char *activity);
static Datum compile_jsonpath(const ValidateCtx *cx, const char *field,
							  const char *text);
static WfMapping *compile_mapping(const ValidateCtx *cx, const char *field,
								  JsonbValue *v, int *n);
static void compile_retry(const ValidateCtx *cx, JsonbContainer *step,
						  WfRetryPolicy *retry);
static void compile_timeouts(const ValidateCtx *cx, JsonbContainer *step,
							 WfTimeouts *timeout);
static void compile_step(const ValidateCtx *cx, JsonbValue *v, WfStepDef *sd);
static void compile_sleep(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
static void compile_wait_event(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
static void compile_task(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
static void compile_approval(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
static void compile_choice(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
static void compile_compensation(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
static void compile_priority(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
static int	compile_sensitive(const ValidateCtx *cx, JsonbContainer *obj, const char *what,
							  char ***keys);
static void compile_subworkflow(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
static void compile_parallel(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);


/*
 * obj_get returns the value of key in a jsonb object, or NULL.
 */
static JsonbValue *
obj_get(JsonbContainer *obj, const char *key)
{
	return getKeyJsonValueFromContainer(obj, key, strlen(key), NULL);
}

static bool
is_object(const JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

static bool
is_array(const JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data);
}

/*
 * value_cstring returns a jsonb string as a palloc'd C string.
 */
static char *
value_cstring(const JsonbValue *v)
{
	Assert(v->type == jbvString);
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * check_fields refuses any key of obj that is not in allowed.
 */
static void
check_fields(const ValidateCtx *cx, const char *prefix, JsonbContainer *obj,
			 const char *const *allowed)
{
	JsonbIterator *it = JsonbIteratorInit(obj);
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		const char *const *a;
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		key = value_cstring(&v);
		for (a = allowed; *a != NULL; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (*a == NULL)
		{
			StringInfoData hint;

			initStringInfo(&hint);
			appendStringInfoString(&hint, "Valid fields are:");
			for (a = allowed; *a != NULL; a++)
				appendStringInfo(&hint, "%s %s", a == allowed ? "" : ",", *a);
			appendStringInfoChar(&hint, '.');
			WfDefError(cx, prefix ? psprintf("%s.%s", prefix, key) : key,
					  ERRCODE_INVALID_PARAMETER_VALUE, hint.data,
					  "unknown field");
		}
	}
}

/*
 * get_string returns the string at key, or NULL when absent and optional.
 */
static char *
get_string(const ValidateCtx *cx, JsonbContainer *obj, const char *key,
		   const char *field, bool required)
{
	JsonbValue *v = obj_get(obj, key);

	if (v == NULL)
	{
		if (required)
			WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE, NULL,
					  "is required");
		return NULL;
	}
	if (v->type != jbvString || v->val.string.len == 0)
		WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "must be a non-empty string");
	return value_cstring(v);
}

/*
 * check_activity_size refuses an activity name longer than the name limit
 * of API arguments (argcheck.h): every task row of the step stores it.
 */
static void
check_activity_size(const ValidateCtx *cx, const char *field, const char *activity)
{
	if (activity != NULL && strlen(activity) > WF_ARG_MAX_NAME)
		WfDefError(cx, field, ERRCODE_PROGRAM_LIMIT_EXCEEDED, NULL,
				  "is %zu bytes, more than the limit of %d bytes",
				  strlen(activity), WF_ARG_MAX_NAME);
}

/*
 * get_duration returns the duration at key in microseconds, 0 when
 * absent.  A duration is a string such as "30s" or "1h30m", or a number
 * of seconds; it must be positive and at most 366 days.
 */
static int64
get_duration(const ValidateCtx *cx, JsonbContainer *obj, const char *key,
			 const char *field)
{
	JsonbValue *v = obj_get(obj, key);
	int64		usec = 0;
	bool		ok = false;

	if (v == NULL)
		return 0;
	if (v->type == jbvString)
	{
		char	   *s = value_cstring(v);

		ok = WfParseDuration(s, &usec);
	}
	else if (v->type == jbvNumeric)
	{
		double		secs = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
															  NumericGetDatum(v->val.numeric)));

		if (secs >= 0 && secs * USECS_PER_SEC <= (double) WF_MAX_DURATION)
		{
			usec = (int64) (secs * USECS_PER_SEC);
			ok = true;
		}
	}
	if (!ok || usec <= 0)
		WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE,
				  "Write a duration as a number of seconds or as a string such as \"500ms\", \"30s\", \"5m\", \"1h30m\" or \"7d\".",
				  "must be a positive duration of at most 366 days");
	return usec;
}

/*
 * get_number returns the number at key, checked against [min, max], or
 * dflt when absent.
 */
static double
get_number(const ValidateCtx *cx, JsonbContainer *obj, const char *key,
		   const char *field, double min, double max, double dflt,
		   bool integral)
{
	JsonbValue *v = obj_get(obj, key);
	double		d;

	if (v == NULL)
		return dflt;
	if (v->type != jbvNumeric)
		d = NAN;
	else
		d = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
											   NumericGetDatum(v->val.numeric)));
	if (isnan(d) || d < min || d > max || (integral && d != floor(d)))
	{
		if (integral)
			WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE, NULL,
					  "must be an integer from %.0f to %.0f", min, max);
		else
			WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE, NULL,
					  "must be a number from %g to %g", min, max);
	}
	return d;
}

/*
 * valid_identifier accepts names made of letters, digits and '_' that
 * start with a letter or '_'; with allow_punct also '-', '.' and ':'.
 */
static bool
valid_identifier(const char *s, int maxlen, bool allow_punct)
{
	int			len = strlen(s);
	int			i;

	if (len == 0 || len > maxlen)
		return false;
	if (!isalpha((unsigned char) s[0]) && s[0] != '_')
		return false;
	for (i = 1; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (isalnum(c) || c == '_')
			continue;
		if (allow_punct && (c == '-' || c == '.' || c == ':'))
			continue;
		return false;
	}
	return true;
}

/*
 * jsonpath_has_variable tells whether a compiled jsonpath refers to a
 * variable.  The canonical text of a jsonpath writes a variable as $"name"
 * and the root as a bare $; string literals are double-quoted with
 * backslash escapes, so a $ followed by a quote outside a literal is a
 * variable.
 */
static bool
jsonpath_has_variable(Datum path)
{
	char	   *canon = DatumGetCString(DirectFunctionCall1(jsonpath_out, path));
	bool		in_string = false;
	char	   *p;

	for (p = canon; *p != '\0'; p++)
	{
		if (in_string)
		{
			if (*p == '\\' && p[1] != '\0')
				p++;
			else if (*p == '"')
				in_string = false;
		}
		else if (*p == '"')
			in_string = true;
		else if (*p == '$' && p[1] == '"')
			return true;
	}
	return false;
}

/* argument of parse_jsonpath */
typedef struct ParseJsonpathArg
{
	const char *text;
	Datum		result;
	bool		uses_variable;
} ParseJsonpathArg;

static void
parse_jsonpath(void *arg)
{
	ParseJsonpathArg *a = (ParseJsonpathArg *) arg;

	a->result = DirectFunctionCall1(jsonpath_in, CStringGetDatum(a->text));
	a->uses_variable = jsonpath_has_variable(a->result);
}

/*
 * compile_jsonpath parses text with PostgreSQL's jsonpath parser inside
 * a subtransaction, so a syntax error becomes an error that names the
 * step and the field.
 */
static Datum
compile_jsonpath(const ValidateCtx *cx, const char *field, const char *text)
{
	ParseJsonpathArg a = {text, (Datum) 0, false};
	char	   *failure = NULL;

	if (!WfTryInSubxact(parse_jsonpath, &a, &failure))
		WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE,
				  "Paths are PostgreSQL jsonpath expressions over the run context, such as \"$.input.order.id\" or \"$.steps.charge.output\".",
				  "invalid JSONPath \"%s\" (%s)", text, failure);
	if (a.uses_variable)
		WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE,
				  "Refer to the run context through $, as in \"$.input.limit\".",
				  "JSONPath \"%s\" uses a variable, and paths are evaluated without variables",
				  text);
	return a.result;
}

/*
 * compile_mapping compiles an input or output mapping: an object whose
 * values are JSONPath strings (starting with "$") or literals.  A string
 * starting with "$$" is the literal string without its first "$".
 */
static WfMapping *
compile_mapping(const ValidateCtx *cx, const char *field, JsonbValue *v, int *n)
{
	JsonbIterator *it;
	JsonbValue	kv;
	JsonbIteratorToken tok;
	WfMapping  *map;
	int			count = 0;
	int			i = 0;
	char	   *key = NULL;

	if (!is_object(v))
		WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE,
				  "A mapping is an object such as {\"amount\": \"$.input.amount\"}.",
				  "must be an object");

	count = JsonContainerSize(v->val.binary.data);
	map = palloc0(sizeof(WfMapping) * Max(count, 1));

	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &kv, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = value_cstring(&kv);
		else if (tok == WJB_VALUE)
		{
			WfMapping  *m = &map[i++];
			char	   *subfield = psprintf("%s.%s", field, key);

			m->key = key;
			if (kv.type == jbvString && kv.val.string.len > 0 &&
				kv.val.string.val[0] == '$' &&
				!(kv.val.string.len > 1 && kv.val.string.val[1] == '$'))
				m->path = compile_jsonpath(cx, subfield, value_cstring(&kv));
			else if (kv.type == jbvString && kv.val.string.len > 1 &&
					 kv.val.string.val[0] == '$')
			{
				JsonbValue	lit;

				lit.type = jbvString;
				lit.val.string.val = kv.val.string.val + 1;
				lit.val.string.len = kv.val.string.len - 1;
				m->literal = JsonbValueToJsonb(&lit);
			}
			else
				m->literal = JsonbValueToJsonb(&kv);
		}
	}
	*n = i;
	return map;
}

/*
 * compile_retry reads the retry policy of a step, applying defaults.
 */
static void
compile_retry(const ValidateCtx *cx, JsonbContainer *step, WfRetryPolicy *retry)
{
	JsonbValue *v = obj_get(step, "retry");
	JsonbContainer *r;
	JsonbValue *nre;
	int64		d;

	retry->max_attempts = WF_DEFAULT_MAX_ATTEMPTS;
	retry->initial_interval = WF_DEFAULT_INITIAL_INTERVAL;
	retry->backoff_coefficient = WF_DEFAULT_BACKOFF;
	retry->max_interval = WF_DEFAULT_MAX_INTERVAL;
	retry->jitter = WF_DEFAULT_JITTER;
	retry->n_non_retryable = 0;
	retry->non_retryable = NULL;

	if (v == NULL)
		return;
	if (!is_object(v))
		WfDefError(cx, "retry", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "must be an object");
	r = v->val.binary.data;
	check_fields(cx, "retry", r, retry_fields);

	retry->max_attempts = (int32) get_number(cx, r, "max_attempts", "retry.max_attempts",
											 1, WF_MAX_ATTEMPTS_LIMIT,
											 WF_DEFAULT_MAX_ATTEMPTS, true);
	if ((d = get_duration(cx, r, "initial_interval", "retry.initial_interval")) > 0)
		retry->initial_interval = d;
	retry->backoff_coefficient = get_number(cx, r, "backoff_coefficient",
											"retry.backoff_coefficient",
											1, 100, WF_DEFAULT_BACKOFF, false);
	if ((d = get_duration(cx, r, "max_interval", "retry.max_interval")) > 0)
		retry->max_interval = d;
	else
		retry->max_interval = Max(WF_DEFAULT_MAX_INTERVAL, retry->initial_interval);
	if (retry->max_interval < retry->initial_interval)
		WfDefError(cx, "retry.max_interval", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "must not be shorter than retry.initial_interval");
	retry->jitter = get_number(cx, r, "jitter", "retry.jitter", 0, 1,
							   WF_DEFAULT_JITTER, false);

	nre = obj_get(r, "non_retryable_errors");
	if (nre != NULL)
	{
		JsonbIterator *it;
		JsonbValue	ev;
		JsonbIteratorToken tok;
		int			i = 0;

		if (!is_array(nre))
			WfDefError(cx, "retry.non_retryable_errors", ERRCODE_INVALID_PARAMETER_VALUE,
					  NULL, "must be an array of error codes");
		retry->non_retryable = palloc0(sizeof(char *) *
									   Max(JsonContainerSize(nre->val.binary.data), 1));
		it = JsonbIteratorInit(nre->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &ev, true)) != WJB_DONE)
		{
			if (tok != WJB_ELEM)
				continue;
			if (ev.type != jbvString || ev.val.string.len == 0)
				WfDefError(cx, "retry.non_retryable_errors", ERRCODE_INVALID_PARAMETER_VALUE,
						  NULL, "must be an array of non-empty strings");
			retry->non_retryable[i++] = value_cstring(&ev);
		}
		retry->n_non_retryable = i;
	}
}

/*
 * compile_timeouts reads the timeouts of a step.  They are validated and
 * stored now; the timer subsystem enforces them.
 */
static void
compile_timeouts(const ValidateCtx *cx, JsonbContainer *step, WfTimeouts *timeout)
{
	JsonbValue *v = obj_get(step, "timeout");
	JsonbContainer *t;

	memset(timeout, 0, sizeof(WfTimeouts));
	if (v == NULL)
		return;
	if (!is_object(v))
		WfDefError(cx, "timeout", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Valid fields are: heartbeat, schedule_to_start, start_to_close, total.",
				  "must be an object");
	t = v->val.binary.data;
	check_fields(cx, "timeout", t, timeout_fields);
	timeout->schedule_to_start = get_duration(cx, t, "schedule_to_start", "timeout.schedule_to_start");
	timeout->start_to_close = get_duration(cx, t, "start_to_close", "timeout.start_to_close");
	timeout->heartbeat = get_duration(cx, t, "heartbeat", "timeout.heartbeat");
	timeout->total = get_duration(cx, t, "total", "timeout.total");
	if (timeout->heartbeat > 0 && timeout->start_to_close > 0 &&
		timeout->heartbeat > timeout->start_to_close)
		WfDefError(cx, "timeout.heartbeat", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "must not be longer than timeout.start_to_close");
}

/*
 * check_approver refuses, at publish, approver i of a step's list when it
 * is longer than wf.decide() takes (WF_ARG_MAX_KEY bytes: that approver
 * could never decide) or when the list already has it: each approver
 * decides once and a visit drops repeats, so a repeat would count towards
 * a quorum or "rejections" that the step can never reach.  Versions
 * published before these checks load as they were.
 */
static void
check_approver(const ValidateCtx *cx, char **approvers, int i)
{
	char	   *field = psprintf("approvers[%d]", i);
	size_t		len = strlen(approvers[i]);
	int			j;

	if (len > WF_ARG_MAX_KEY)
		WfDefError(cx, field, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
				  "wf.decide() takes approver names of at most 255 bytes.",
				  "is %zu bytes, more than the limit of %d bytes",
				  len, WF_ARG_MAX_KEY);
	for (j = 0; j < i; j++)
		if (strcmp(approvers[j], approvers[i]) == 0)
			WfDefError(cx, field, ERRCODE_DUPLICATE_OBJECT,
					  "Each approver decides once: list each name once.",
					  "approver \"%s\" is listed twice", approvers[i]);
}

/*
 * compile_approval validates and compiles an approval step: who may
 * decide (a list, or a JSONPath into the run context), the policy, the
 * expiry, and the queue of the task that delivers the tokens.
 */
static void
compile_approval(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	JsonbValue *v;

	if (obj_get(s, "timeout") != NULL && is_object(obj_get(s, "timeout")) &&
		obj_get(obj_get(s, "timeout")->val.binary.data, "total") != NULL)
		WfDefError(cx, "timeout.total", ERRCODE_INVALID_PARAMETER_VALUE,
				  "An approval step ends by \"expires\"; its \"timeout\" applies to the notification task.",
				  "is not allowed on an approval step");
	(void) get_string(cx, s, "description", "description", false);

	sd->queue = get_string(cx, s, "notify_queue", "notify_queue", true);
	if (!valid_identifier(sd->queue, WF_MAX_STEP_NAME_LEN, true))
		WfDefError(cx, "notify_queue", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A queue name has 1 to 63 letters, digits, '_', '-', '.' or ':' and starts with a letter or '_'.",
				  "invalid queue name \"%s\"", sd->queue);

	v = obj_get(s, "approvers");
	if (v != NULL && v->type == jbvString && v->val.string.len > 0 &&
		v->val.string.val[0] == '$')
		sd->approvers_path = compile_jsonpath(cx, "approvers", value_cstring(v));
	else if (v != NULL && is_array(v) && JsonContainerSize(v->val.binary.data) > 0)
	{
		JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
		JsonbValue	ev;
		JsonbIteratorToken tok;
		int			n = JsonContainerSize(v->val.binary.data);
		int			i = 0;

		/* before the names: check_approver compares each with those before */
		if (n > 100)
			WfDefError(cx, "approvers", ERRCODE_PROGRAM_LIMIT_EXCEEDED, NULL,
					  "lists %d approvers, more than the limit of 100", n);
		sd->approvers = palloc0(sizeof(char *) * n);
		while ((tok = JsonbIteratorNext(&it, &ev, true)) != WJB_DONE)
		{
			if (tok != WJB_ELEM)
				continue;
			if (ev.type != jbvString || ev.val.string.len == 0)
				WfDefError(cx, "approvers", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
						  "must be an array of non-empty strings");
			sd->approvers[i] = value_cstring(&ev);
			if (cx->enforce_limits)
				check_approver(cx, sd->approvers, i);
			i++;
		}
		sd->n_approvers = i;
	}
	else
		WfDefError(cx, "approvers", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Give the approvers as an array such as [\"alice\", \"bob\"], or as a JSONPath such as \"$.input.approvers\" that finds one.",
				  "must be a non-empty array of approvers or a JSONPath");

	sd->policy = WF_POLICY_ANY;
	sd->quorum = 1;
	v = obj_get(s, "policy");
	if (v != NULL && v->type == jbvString && strncmp(v->val.string.val, "all", v->val.string.len) == 0 &&
		v->val.string.len == 3)
		sd->policy = WF_POLICY_ALL;
	else if (v != NULL && v->type == jbvString && v->val.string.len == 3 &&
			 strncmp(v->val.string.val, "any", 3) == 0)
		sd->policy = WF_POLICY_ANY;
	else if (v != NULL && is_object(v))
	{
		check_fields(cx, "policy", v->val.binary.data, (const char *const[]) {"quorum", NULL});
		if (cx->enforce_limits && obj_get(v->val.binary.data, "quorum") == NULL)
			WfDefError(cx, "policy.quorum", ERRCODE_INVALID_PARAMETER_VALUE,
					  "Use \"any\", \"all\" or {\"quorum\": N}.",
					  "is required");
		sd->policy = WF_POLICY_QUORUM;
		sd->quorum = (int32) get_number(cx, v->val.binary.data, "quorum", "policy.quorum",
										1, 1000, 1, true);
		if (sd->n_approvers > 0 && sd->quorum > sd->n_approvers)
			WfDefError(cx, "policy.quorum", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
					  "needs %d approvals, but the step names only %d approvers",
					  sd->quorum, sd->n_approvers);
	}
	else if (v != NULL)
		WfDefError(cx, "policy", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Use \"any\", \"all\" or {\"quorum\": N}.",
				  "must be \"any\", \"all\" or a quorum");

	sd->rejections = (int32) get_number(cx, s, "rejections", "rejections", 1, 1000, 1, true);
	if (sd->n_approvers > 0 && sd->rejections > sd->n_approvers)
		WfDefError(cx, "rejections", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "needs %d rejections, but the step names only %d approvers",
				  sd->rejections, sd->n_approvers);
	sd->expires = get_duration(cx, s, "expires", "expires");
	sd->expiry_next = WF_STEP_END;
	compile_retry(cx, s, &sd->retry);
	compile_timeouts(cx, s, &sd->timeout);
}

/*
 * compile_choice validates a choice step: conditions (PostgreSQL jsonpath
 * predicates over the run context, such as "$.input.amount > 100") tried
 * in order, each with the step to go to, and a default.  Step names are
 * resolved by WfDefCheckGraph.
 */
static void
compile_choice(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	JsonbValue *v;
	JsonbIterator *it;
	JsonbValue	cv;
	JsonbIteratorToken tok;
	int			i = 0;

	(void) get_string(cx, s, "description", "description", false);
	v = obj_get(s, "choices");
	if (v == NULL || !is_array(v) || JsonContainerSize(v->val.binary.data) == 0)
		WfDefError(cx, "choices", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Write the choices as [{\"when\": \"$.input.amount > 100\", \"next\": \"review\"}, ...].",
				  "must be a non-empty array of choices");
	sd->n_choices = JsonContainerSize(v->val.binary.data);
	if (sd->n_choices > WF_MAX_SUCCESSORS - 2)
		WfDefError(cx, "choices", ERRCODE_PROGRAM_LIMIT_EXCEEDED, NULL,
				  "has %d choices, more than the limit of %d", sd->n_choices,
				  WF_MAX_SUCCESSORS - 2);
	sd->choice_when = palloc0(sizeof(Datum) * sd->n_choices);
	sd->choice_when_text = palloc0(sizeof(char *) * sd->n_choices);
	sd->choice_next_names = palloc0(sizeof(char *) * sd->n_choices);
	sd->choice_next = palloc0(sizeof(int) * sd->n_choices);
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &cv, true)) != WJB_DONE)
	{
		char	   *field;
		char	   *when;

		if (tok != WJB_ELEM)
			continue;
		field = psprintf("choices[%d]", i);
		if (!is_object(&cv))
			WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE, NULL, "must be an object");
		check_fields(cx, field, cv.val.binary.data, choice_item_fields);
		when = get_string(cx, cv.val.binary.data, "when", psprintf("%s.when", field), true);
		sd->choice_when[i] = compile_jsonpath(cx, psprintf("%s.when", field), when);
		sd->choice_when_text[i] = when;
		sd->choice_next_names[i] = get_string(cx, cv.val.binary.data, "next",
											  psprintf("%s.next", field), true);
		i++;
	}
	if (obj_get(s, "default") == NULL)
		WfDefError(cx, "default", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Name the step to go to when no condition holds, or \"end\".",
				  "is required");
}

/*
 * compile_sleep validates a sleep step: a fixed "duration", or "until" a
 * timestamp found in the run context.
 */
static void
compile_sleep(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	char	   *until;

	(void) get_string(cx, s, "description", "description", false);
	sd->sleep_duration = get_duration(cx, s, "duration", "duration");
	until = get_string(cx, s, "until", "until", false);
	if ((sd->sleep_duration > 0) == (until != NULL))
		WfDefError(cx, "duration", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A sleep step waits for a \"duration\" such as \"10m\", or \"until\" a timestamp found by a JSONPath such as \"$.input.ship_at\".",
				  "a sleep step needs exactly one of \"duration\" and \"until\"");
	if (until != NULL)
	{
		if (until[0] != '$')
			WfDefError(cx, "until", ERRCODE_INVALID_PARAMETER_VALUE,
					  "Give a JSONPath into the run context, such as \"$.input.ship_at\", that finds a timestamp.",
					  "must be a JSONPath");
		sd->sleep_until = compile_jsonpath(cx, "until", until);
	}
}

/*
 * compile_wait_event validates a wait_event step: the signal's name, and
 * at most a total timeout.
 */
static void
compile_wait_event(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	sd->expiry_next = WF_STEP_END;	/* "on_timeout", set by WfDefCheckGraph */
	(void) get_string(cx, s, "description", "description", false);
	sd->event_name = get_string(cx, s, "event", "event", true);
	if (!valid_identifier(sd->event_name, WF_MAX_STEP_NAME_LEN, true))
		WfDefError(cx, "event", ERRCODE_INVALID_PARAMETER_VALUE,
				  "An event name has 1 to 63 letters, digits, '_', '-', '.' or ':' and starts with a letter or '_'.",
				  "invalid event name \"%s\"", sd->event_name);
	compile_timeouts(cx, s, &sd->timeout);
	if (sd->timeout.schedule_to_start > 0 || sd->timeout.start_to_close > 0 ||
		sd->timeout.heartbeat > 0)
		WfDefError(cx, "timeout", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A wait_event step runs no task: give it {\"total\": <duration>} to bound the wait.",
				  "only \"total\" applies to a wait_event step");
}

/*
 * compile_task validates a task step: its queue and activity, the mapping
 * of its input, retry policy, timeouts, priority, compensation and
 * sensitive keys.
 */
static void
compile_task(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	JsonbValue *input;

	sd->queue = get_string(cx, s, "queue", "queue", true);
	if (!valid_identifier(sd->queue, WF_MAX_STEP_NAME_LEN, true))
		WfDefError(cx, "queue", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A queue name has 1 to 63 letters, digits, '_', '-', '.' or ':' and starts with a letter or '_'.",
				  "invalid queue name \"%s\"", sd->queue);
	sd->activity = get_string(cx, s, "activity", "activity", false);
	check_activity_size(cx, "activity", sd->activity);
	(void) get_string(cx, s, "description", "description", false);

	input = obj_get(s, "input");
	sd->has_input = (input != NULL);
	if (input != NULL)
		sd->input = compile_mapping(cx, "input", input, &sd->n_input);

	compile_retry(cx, s, &sd->retry);
	compile_timeouts(cx, s, &sd->timeout);
	compile_priority(cx, s, sd);
	compile_compensation(cx, s, sd);
	sd->n_sensitive_input = compile_sensitive(cx, s, "input", &sd->sensitive_input);
	sd->n_sensitive_output = compile_sensitive(cx, s, "output", &sd->sensitive_output);
}


/*
 * The compiler of each step type ("type"; a task when it is not given),
 * with the type's fields.  compile_step sets the type, checks the fields
 * and gives the step one attempt (compile_retry reads the retry policy of
 * the types that have one) before it calls the compiler.
 */
static const struct
{
	const char *name;
	WfStepType	type;
	const char *const *fields;
	void		(*compile) (const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd);
}			step_compilers[] =
{
	{"task", WF_STEP_TASK, task_fields, compile_task},
	{"sleep", WF_STEP_SLEEP, sleep_fields, compile_sleep},
	{"approval", WF_STEP_APPROVAL, approval_fields, compile_approval},
	{"choice", WF_STEP_CHOICE, choice_fields, compile_choice},
	{"wait_event", WF_STEP_WAIT_EVENT, wait_event_fields, compile_wait_event},
	{"subworkflow", WF_STEP_SUBWORKFLOW, subworkflow_fields, compile_subworkflow},
	{"parallel", WF_STEP_PARALLEL, parallel_fields, compile_parallel},
};

/*
 * compile_step validates and compiles one step; its "next" is resolved
 * later by WfDefCheckGraph.
 */
static void
compile_step(const ValidateCtx *cx, JsonbValue *v, WfStepDef *sd)
{
	JsonbContainer *s = v->val.binary.data;
	char	   *type;
	int			i;

	type = get_string(cx, s, "type", "type", false);
	for (i = 0; i < lengthof(step_compilers); i++)
	{
		if (strcmp(type != NULL ? type : "task", step_compilers[i].name) == 0)
		{
			sd->type = step_compilers[i].type;
			sd->retry.max_attempts = 1;
			check_fields(cx, NULL, s, step_compilers[i].fields);
			step_compilers[i].compile(cx, s, sd);
			return;
		}
	}
	WfDefError(cx, "type", ERRCODE_FEATURE_NOT_SUPPORTED,
			  "Supported step types: task, sleep, approval, choice, wait_event, subworkflow, parallel.",
			  "unsupported step type \"%s\"", type);
}

/*
 * compile_sensitive reads "sensitive": {"<what>": ["key", ...]} of obj (the
 * definition, or a task step): the keys whose values are sealed of the run
 * input (the definition's "input"), or of a task's input or output (a
 * step's "input" and "output").  Returns how many keys; *keys receives
 * them.
 */
static int
compile_sensitive(const ValidateCtx *cx, JsonbContainer *obj, const char *what, char ***keys)
{
	JsonbValue *v = obj_get(obj, "sensitive");
	JsonbValue *list;
	JsonbIterator *it;
	JsonbValue	kv;
	JsonbIteratorToken tok;
	static const char *const def_fields[] = {"input", NULL};
	static const char *const step_fields[] = {"input", "output", NULL};
	char	   *field = psprintf("sensitive.%s", what);
	int			n = 0;

	*keys = NULL;
	if (v == NULL)
		return 0;
	if (!is_object(v))
		WfDefError(cx, "sensitive", ERRCODE_INVALID_PARAMETER_VALUE,
				  psprintf("Give the keys to seal as {\"%s\": [\"card_number\", ...]}.", what),
				  "must be an object");
	check_fields(cx, "sensitive", v->val.binary.data,
				 cx->step == NULL ? def_fields : step_fields);
	list = obj_get(v->val.binary.data, what);
	if (list == NULL)
		return 0;
	if (!is_array(list) || JsonContainerSize(list->val.binary.data) == 0)
		WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "must be a non-empty array of keys");
	*keys = palloc0(sizeof(char *) * JsonContainerSize(list->val.binary.data));
	it = JsonbIteratorInit(list->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &kv, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (kv.type != jbvString || kv.val.string.len == 0)
			WfDefError(cx, field, ERRCODE_INVALID_PARAMETER_VALUE, NULL,
					  "must be an array of non-empty key names");
		(*keys)[n++] = value_cstring(&kv);
	}
	return n;
}

/*
 * compile_priority reads the "priority" of a task step: an integer from
 * -100 to 100, or a JSONPath that finds it in the run context when an
 * attempt is scheduled.  Higher is claimed first within a queue.
 */
static void
compile_priority(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	JsonbValue *v = obj_get(s, "priority");

	if (v == NULL)
		return;
	if (v->type == jbvString && v->val.string.len > 0 && v->val.string.val[0] == '$')
	{
		sd->priority_path = compile_jsonpath(cx, "priority", value_cstring(v));
		return;
	}
	sd->priority = (int32) get_number(cx, s, "priority", "priority",
									  -WF_MAX_PRIORITY, WF_MAX_PRIORITY, 0, true);
}

/*
 * compile_compensation reads the "compensate" activity of a task step:
 * the task wf.cancel_run() schedules to undo the step's effect.  It is
 * compiled as a task step of its own, named "compensate:<step>", on the
 * step's queue unless it names another.
 */
static void
compile_compensation(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	JsonbValue *v = obj_get(s, "compensate");
	JsonbContainer *c;
	JsonbValue *input;
	WfStepDef  *comp;
	ValidateCtx ccx = *cx;

	if (v == NULL)
		return;
	if (!is_object(v))
		WfDefError(cx, "compensate", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Give the activity that undoes the step, e.g. {\"activity\": \"refund\", \"queue\": \"payments\"}.",
				  "must be an object");
	c = v->val.binary.data;
	ccx.field_prefix = "compensate";
	check_fields(&ccx, NULL, c, compensate_fields);

	comp = palloc0(sizeof(WfStepDef));
	comp->name = psprintf("%s%s", WF_COMPENSATE_PREFIX, sd->name);
	comp->type = WF_STEP_COMPENSATION;
	comp->queue = get_string(&ccx, c, "queue", "queue", false);
	if (comp->queue == NULL)
		comp->queue = sd->queue;
	else if (!valid_identifier(comp->queue, WF_MAX_STEP_NAME_LEN, true))
		WfDefError(&ccx, "queue", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A queue name has 1 to 63 letters, digits, '_', '-', '.' or ':' and starts with a letter or '_'.",
				  "invalid queue name \"%s\"", comp->queue);
	comp->activity = get_string(&ccx, c, "activity", "activity", false);
	check_activity_size(&ccx, "activity", comp->activity);
	input = obj_get(c, "input");
	comp->has_input = (input != NULL);
	if (input != NULL)
		comp->input = compile_mapping(&ccx, "input", input, &comp->n_input);
	compile_retry(&ccx, c, &comp->retry);
	compile_timeouts(&ccx, c, &comp->timeout);
	if (comp->timeout.total > 0)
		WfDefError(&ccx, "timeout.total", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A compensation is tried until its retry policy gives up; bound each attempt with start_to_close.",
				  "does not apply to a compensation");
	comp->next = WF_STEP_END;
	comp->skippable = true;
	sd->compensate = comp;
}

/*
 * compile_subworkflow validates a subworkflow step: the definition and
 * version of the child run (resolved by WfResolveChildren) and the
 * mapping of its input.
 */
static void
compile_subworkflow(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	JsonbValue *input;

	(void) get_string(cx, s, "description", "description", false);
	sd->sub_name = get_string(cx, s, "definition", "definition", true);
	if (!valid_identifier(sd->sub_name, WF_MAX_NAME_LEN, true))
		WfDefError(cx, "definition", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "invalid definition name \"%s\"", sd->sub_name);
	if (obj_get(s, "version") == NULL)
		WfDefError(cx, "version", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A child run is pinned to a version of its definition, as every run is.",
				  "is required");
	sd->sub_version = (int32) get_number(cx, s, "version", "version", 1, PG_INT32_MAX, 1, true);
	input = obj_get(s, "input");
	sd->has_input = (input != NULL);
	if (input != NULL)
		sd->input = compile_mapping(cx, "input", input, &sd->n_input);
	sd->child_ids = palloc0(sizeof(int64));
}

/*
 * compile_parallel validates a parallel step: each branch is a list of
 * steps (with an optional output mapping) compiled as a definition of its
 * own, "<definition>:<step>:<i>", that the step runs as a child run; the
 * join ("all" or {"first": n}) and the branch failure policy.
 */
static void
compile_parallel(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd)
{
	JsonbValue *branches = obj_get(s, "branches");
	JsonbValue *join = obj_get(s, "join");
	JsonbValue *input;
	char	   *policy;
	JsonbIterator *it;
	JsonbValue	bv;
	JsonbIteratorToken tok;
	int			n;
	int			i = 0;

	(void) get_string(cx, s, "description", "description", false);
	if (branches == NULL || !is_array(branches) ||
		(n = JsonContainerSize(branches->val.binary.data)) < 2)
		WfDefError(cx, "branches", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Give each branch as {\"steps\": [...]}; its steps run one after the other, the branches at once.",
				  "must be an array of at least 2 branches");
	sd->n_branches = n;
	sd->branch_names = palloc0(sizeof(char *) * n);
	sd->branch_specs = palloc0(sizeof(Jsonb *) * n);
	sd->child_ids = palloc0(sizeof(int64) * n);

	it = JsonbIteratorInit(branches->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &bv, true)) != WJB_DONE)
	{
		ValidateCtx bcx = *cx;

		if (tok != WJB_ELEM)
			continue;
		bcx.field_prefix = psprintf("branches[%d]", i);
		if (!is_object(&bv))
			WfDefError(&bcx, NULL, ERRCODE_INVALID_PARAMETER_VALUE,
					  "Give each branch as {\"steps\": [...]}.", "must be an object");
		check_fields(&bcx, NULL, bv.val.binary.data, branch_fields);
		sd->branch_names[i] = psprintf("%s:%s:%d", cx->defname, sd->name, i);
		if (strlen(sd->branch_names[i]) > WF_MAX_NAME_LEN)
			WfDefError(&bcx, NULL, ERRCODE_NAME_TOO_LONG,
					  "Branches are published as \"<definition>:<step>:<n>\"; shorten the names.",
					  "the branch definition name \"%s\" is longer than %d bytes",
					  sd->branch_names[i], WF_MAX_NAME_LEN);
		sd->branch_specs[i] = JsonbValueToJsonb(&bv);
		i++;
	}

	sd->join_count = n;
	if (join != NULL && !(join->type == jbvString && join->val.string.len == 3 &&
						  strncmp(join->val.string.val, "all", 3) == 0))
	{
		if (!is_object(join) || obj_get(join->val.binary.data, "first") == NULL ||
			JsonContainerSize(join->val.binary.data) != 1)
			WfDefError(cx, "join", ERRCODE_INVALID_PARAMETER_VALUE,
					  "Give \"all\" (the default) or {\"first\": n}.",
					  "must be \"all\" or {\"first\": n}");
		sd->join_count = (int32) get_number(cx, join->val.binary.data, "first", "join.first",
											1, n, n, true);
	}
	policy = get_string(cx, s, "on_branch_failure", "on_branch_failure", false);
	if (policy != NULL && strcmp(policy, "fail") != 0 && strcmp(policy, "ignore") != 0)
		WfDefError(cx, "on_branch_failure", ERRCODE_INVALID_PARAMETER_VALUE,
				  "\"fail\" (the default) fails the step when a branch fails; \"ignore\" lets the others join.",
				  "must be \"fail\" or \"ignore\"");
	sd->ignore_branch_failure = policy != NULL && strcmp(policy, "ignore") == 0;
	input = obj_get(s, "input");
	sd->has_input = (input != NULL);
	if (input != NULL)
		sd->input = compile_mapping(cx, "input", input, &sd->n_input);
}


/*
 * compile_on_failure reads what a failure does: end the run, or undo its
 * steps first (a saga).
 */
static void
compile_on_failure(const ValidateCtx *cx, JsonbContainer *root, WfDefinition *def)
{
	char	   *on_failure = get_string(cx, root, "on_failure", "on_failure", false);

	if (on_failure != NULL && strcmp(on_failure, "fail") != 0 &&
		strcmp(on_failure, "compensate") != 0)
		WfDefError(cx, "on_failure", ERRCODE_INVALID_PARAMETER_VALUE,
				  "\"fail\" (the default) ends a run that fails as failed; \"compensate\" runs the compensations of its completed steps, newest first, and ends it compensated.",
				  "must be \"fail\" or \"compensate\", not \"%s\"", on_failure);
	def->compensate_on_failure = on_failure != NULL && strcmp(on_failure, "compensate") == 0;
}

/*
 * compile_correlation reads the named JSONPaths whose values route
 * wf.send_event() to the run.
 */
static void
compile_correlation(const ValidateCtx *cx, JsonbValue *v, WfDefinition *def)
{
	int			c;

	def->correlation = compile_mapping(cx, "correlation", v, &def->n_correlation);
	if (def->n_correlation == 0 || def->n_correlation > WF_MAX_CORRELATION_KEYS)
		WfDefError(cx, "correlation", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Name each key and give the JSONPath of its value, e.g. {\"shipment\": \"$.input.shipment_id\"}.",
				  "must name 1 to %d keys", WF_MAX_CORRELATION_KEYS);
	for (c = 0; c < def->n_correlation; c++)
	{
		if (!valid_identifier(def->correlation[c].key, WF_MAX_STEP_NAME_LEN, false))
			WfDefError(cx, psprintf("correlation.%s", def->correlation[c].key),
					  ERRCODE_INVALID_PARAMETER_VALUE,
					  "A key name has 1 to 63 letters, digits or '_' and starts with a letter or '_'.",
					  "invalid correlation key name");
		if (def->correlation[c].path == 0)
			WfDefError(cx, psprintf("correlation.%s", def->correlation[c].key),
					  ERRCODE_INVALID_PARAMETER_VALUE,
					  "The value of a correlation key is found in the run, e.g. \"$.input.shipment_id\".",
					  "must be a JSONPath");
	}
}

/*
 * compile_top_level reads the fields of a definition outside its steps.
 */
static void
compile_top_level(const ValidateCtx *cx, Jsonb *spec, WfDefinition *def)
{
	JsonbValue *v;

	check_fields(cx, NULL, &spec->root, top_fields);

	(void) get_string(cx, &spec->root, "description", "description", false);
	def->run_timeout = get_duration(cx, &spec->root, "timeout", "timeout");
	compile_on_failure(cx, &spec->root, def);
	v = obj_get(&spec->root, "correlation");
	if (v != NULL)
		compile_correlation(cx, v, def);
	def->n_sensitive_input = compile_sensitive(cx, &spec->root, "input", &def->sensitive_input);
	v = obj_get(&spec->root, "output");
	def->has_output = (v != NULL);
	if (v != NULL)
		def->output = compile_mapping(cx, "output", v, &def->n_output);
}

/*
 * compile_step_name reads the name of step i and refuses an invalid one or
 * one an earlier step has.
 */
static char *
compile_step_name(const ValidateCtx *cx, const WfDefinition *def, int i, JsonbContainer *s)
{
	char	   *stepname = get_string(cx, s, "name", "name", true);
	int			j;

	if (!valid_identifier(stepname, WF_MAX_STEP_NAME_LEN, false))
		WfDefError(cx, "name", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A step name has 1 to 63 letters, digits or '_' and starts with a letter or '_', so that \"$.steps.<name>\" works in JSONPath.",
				  "invalid step name \"%s\"", stepname);
	for (j = 0; j < i; j++)
		if (strcmp(def->steps[j].name, stepname) == 0)
			WfDefError(cx, "name", ERRCODE_DUPLICATE_OBJECT, NULL,
					  "step name \"%s\" is used twice", stepname);
	return stepname;
}

/*
 * compile_routes reads where a step goes: its "next" (a choice's
 * "default") into *next_name, and where an approval that expired or a wait
 * that timed out goes into *expiry_name (NULL when it fails the run);
 * WfDefCheckGraph resolves the names.
 */
static void
compile_routes(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd,
			   char **next_name, char **expiry_name)
{
	if (sd->type == WF_STEP_CHOICE)
	{
		char	   *dflt = get_string(cx, s, "default", "default", true);

		/* the default is the choice's "next"; "end" ends the run */
		*next_name = strcmp(dflt, "end") == 0 ? NULL : dflt;
		if (*next_name == NULL)
			sd->next = WF_STEP_END;
	}
	else
		*next_name = get_string(cx, s, "next", "next", false);
	if (sd->type == WF_STEP_APPROVAL)
	{
		char	   *on_expiry = get_string(cx, s, "on_expiry", "on_expiry", false);

		if (on_expiry != NULL && strcmp(on_expiry, "fail") != 0)
			*expiry_name = on_expiry;
		if (on_expiry != NULL && sd->expires == 0)
			WfDefError(cx, "on_expiry", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
					  "needs \"expires\"");
	}
	if (sd->type == WF_STEP_WAIT_EVENT)
	{
		/* where a wait that timed out goes; the run fails without it */
		char	   *on_timeout = get_string(cx, s, "on_timeout", "on_timeout", false);

		if (on_timeout != NULL && strcmp(on_timeout, "fail") != 0)
			*expiry_name = on_timeout;
		if (on_timeout != NULL && sd->timeout.total == 0)
			WfDefError(cx, "on_timeout", ERRCODE_INVALID_PARAMETER_VALUE,
					  "Bound the wait with {\"timeout\": {\"total\": \"3d\"}}.",
					  "needs \"timeout\": {\"total\": ...}");
	}
}

/*
 * compile_step_end reads "skippable" and "end" of step i of n, and sets
 * its next unless a name does (next_name) or it is a choice.
 */
static void
compile_step_end(const ValidateCtx *cx, JsonbContainer *s, WfStepDef *sd, int i, int n,
				 const char *next_name)
{
	JsonbValue *endv;

	/* wf.skip_step: approvals are a control nobody skips unless allowed */
	endv = obj_get(s, "skippable");
	if (endv != NULL && endv->type != jbvBool)
		WfDefError(cx, "skippable", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "must be true or false");
	sd->skippable = endv != NULL ? endv->val.boolean :
		(sd->type != WF_STEP_APPROVAL && sd->type != WF_STEP_CHOICE);
	endv = obj_get(s, "end");
	if (endv != NULL && endv->type != jbvBool)
		WfDefError(cx, "end", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "must be true or false");
	if (endv != NULL && endv->val.boolean && next_name != NULL)
		WfDefError(cx, "next", ERRCODE_INVALID_PARAMETER_VALUE, NULL,
				  "cannot be combined with \"end\": true");
	if (sd->type == WF_STEP_CHOICE)
		;						/* the default, set above or by WfDefCheckGraph */
	else if (endv != NULL && endv->val.boolean)
		sd->next = WF_STEP_END;
	else
		sd->next = (i + 1 < n) ? i + 1 : WF_STEP_END;
}

/*
 * check_compensations refuses "on_failure": "compensate" when no step has
 * a compensation.
 */
static void
check_compensations(const ValidateCtx *cx, const WfDefinition *def)
{
	bool		any = false;
	int			i;

	if (!def->compensate_on_failure)
		return;
	for (i = 0; i < def->nsteps; i++)
		if (def->steps[i].compensate != NULL)
			any = true;
	if (!any)
		WfDefError(cx, "on_failure", ERRCODE_INVALID_PARAMETER_VALUE,
				  "Give the task steps that a failure must undo a \"compensate\" activity, e.g. {\"compensate\": {\"activity\": \"refund\"}}, or leave \"on_failure\" out.",
				  "is \"compensate\", but no step has a \"compensate\" activity");
}

/*
 * WfCompileDefinition validates spec and returns its compiled form,
 * allocated in CurrentMemoryContext.  With enforce_limits the
 * configurable limits (step count) apply; they do not apply when a
 * published version is loaded again.  The children of its subworkflow
 * and parallel steps are not resolved: that needs SPI
 * (WfResolveChildren).  The fuzz harness (test/fuzz/wf_fuzz.c) calls it too.
 */
WfDefinition *
WfCompileDefinition(const char *name, Jsonb *spec, bool enforce_limits)
{
	ValidateCtx cx = {name, NULL, 0, enforce_limits};
	WfDefinition *def = palloc0(sizeof(WfDefinition));
	JsonbValue *steps;
	JsonbIterator *it;
	JsonbValue	sv;
	JsonbIteratorToken tok;
	char	  **next_names;
	char	  **expiry_names;
	int			n;
	int			i;

	if (!JB_ROOT_IS_OBJECT(spec) || JB_ROOT_IS_SCALAR(spec))
		WfDefError(&cx, NULL, ERRCODE_INVALID_PARAMETER_VALUE,
				  "A definition is an object with a \"steps\" array.",
				  "the spec must be a JSON object");
	compile_top_level(&cx, spec, def);

	steps = obj_get(&spec->root, "steps");
	if (steps == NULL || !is_array(steps) ||
		JsonContainerSize(steps->val.binary.data) == 0)
		WfDefError(&cx, "steps", ERRCODE_INVALID_PARAMETER_VALUE,
				  "A definition is an object with a \"steps\" array.",
				  "must be a non-empty array of steps");
	n = JsonContainerSize(steps->val.binary.data);
	if (enforce_limits && n > wf_max_steps)
		WfDefError(&cx, "steps", ERRCODE_PROGRAM_LIMIT_EXCEEDED,
				  "The limit is set by wfengine.max_steps.",
				  "has %d steps, more than the limit of %d", n, wf_max_steps);

	def->name = pstrdup(name);
	def->nsteps = n;
	def->steps = palloc0(sizeof(WfStepDef) * n);
	next_names = palloc0(sizeof(char *) * n);
	expiry_names = palloc0(sizeof(char *) * n);

	it = JsonbIteratorInit(steps->val.binary.data);
	i = 0;
	while ((tok = JsonbIteratorNext(&it, &sv, true)) != WJB_DONE)
	{
		WfStepDef  *sd;

		if (tok != WJB_ELEM)
			continue;
		sd = &def->steps[i];
		cx.step = NULL;
		cx.step_pos = i + 1;
		if (!is_object(&sv))
			WfDefError(&cx, NULL, ERRCODE_INVALID_PARAMETER_VALUE, NULL,
					  "must be an object");

		sd->name = compile_step_name(&cx, def, i, sv.val.binary.data);
		cx.step = sd->name;

		compile_step(&cx, &sv, sd);
		if (sd->type == WF_STEP_APPROVAL)
			def->has_approvals = true;
		compile_routes(&cx, sv.val.binary.data, sd, &next_names[i], &expiry_names[i]);
		compile_step_end(&cx, sv.val.binary.data, sd, i, n, next_names[i]);
		i++;
	}

	cx.step = NULL;
	cx.step_pos = 0;
	check_compensations(&cx, def);
	WfDefCheckGraph(&cx, def, next_names, expiry_names);
	return def;
}

/*
 * WfValidDefinitionName accepts the name of a definition: 1 to 128
 * letters, digits, '_', '-', '.' or ':', starting with a letter or '_'.
 */
bool
WfValidDefinitionName(const char *name)
{
	return valid_identifier(name, WF_MAX_NAME_LEN, true);
}
