/*-------------------------------------------------------------------------
 *
 * wf_fuzz.c
 *	  libFuzzer harness for the definition validator, durations, the cron
 *	  matcher and JSONPath mappings, run inside a PostgreSQL backend.
 *
 * The code under test needs a live backend (palloc, ereport, jsonb,
 * jsonpath, subtransactions), so libFuzzer runs inside one: wf_fuzz() is a
 * SQL-callable function that hands its arguments to LLVMFuzzerRunDriver()
 * with the callback of one target.  It is built into a shared library of
 * its own, fuzz/build/wfengine_fuzz.so, together with every C file of src/
 * compiled with -fsanitize=fuzzer-no-link (see fuzz/Makefile), and is
 * loaded by absolute path into a throw-away cluster in which wfengine is
 * not preloaded (test/scripts/fuzz.sh).  The library's _PG_init is
 * wfengine's own: without shared_preload_libraries it only defines the
 * wfengine.* settings and registers callbacks.
 *
 * Each input runs in an internal subtransaction and in a memory context
 * of its own.  An ERROR is an expected outcome for bad input: it is
 * flushed and the subtransaction rolled back.  A crash (SIGSEGV, SIGABRT,
 * SIGILL from an undefined-behaviour trap), an input that runs longer than
 * libFuzzer's -timeout, a FATAL, a failed invariant of the compiled result
 * and a leak are findings: libFuzzer prints them, with a stack trace from
 * __sanitizer_print_stack_trace below, and saves the input.
 *
 * Leaks are checked at the memory-context level: the per-input context is
 * reset after every input, so what the code under test allocates in a
 * long-lived context (TopMemoryContext, CacheMemoryContext, ...) is all
 * that can accumulate.  After a warm-up the total allocated under
 * TopMemoryContext is the baseline; if it grows by more than the leak
 * limit, the harness prints the memory context statistics and aborts.  A
 * WARNING about a leaked resource (the resource owner's check when a
 * subtransaction commits) is a finding too.
 *
 * libFuzzer ends a run by calling exit() itself, so wf_fuzz() does not
 * return: the session ends when the run does, and the caller reads the
 * outcome from the log file given as third argument (libFuzzer's stderr).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  fuzz/wf_fuzz.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "pgtime.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include <sodium.h>

#include "definition.h"
#include "jsonutil.h"
#include "duration.h"
#include "schedule.h"
#include "sensitive.h"

/* inputs before the memory baseline is taken */
#define WF_FUZZ_WARMUP 2000
/* the leak check runs every this many inputs */
#define WF_FUZZ_LEAK_CHECK_EVERY 64

/* libFuzzer's entry point when it is linked without its main() */
extern int	LLVMFuzzerRunDriver(int *argc, char ***argv,
								int (*cb) (const uint8_t *data, size_t size));

/*
 * libFuzzer looks these up as weak references; a sanitizer runtime would
 * provide them, and without one the harness does (see below).
 */
extern void __sanitizer_print_stack_trace(void);
extern int	__sanitizer_acquire_crash_state(void);
extern void __sanitizer_set_death_callback(void (*callback) (void));

PG_FUNCTION_INFO_V1(wf_fuzz);

/* one fuzz target: a name and the function run on each input */
typedef struct FuzzTarget
{
	const char *name;
	int			(*fn) (const char *data, size_t size);
} FuzzTarget;

/* forward declarations */
static void fuzz_fail(const char *fmt,...) pg_attribute_printf(1, 2) pg_attribute_noreturn();
static int	target_definition(const char *data, size_t size);
static int	target_duration(const char *data, size_t size);
static int	target_cron(const char *data, size_t size);
static int	target_mapping(const char *data, size_t size);
static int	target_envelope(const char *data, size_t size);
static int	target_jsonset(const char *data, size_t size);
static int	target_jsontext(const char *data, size_t size);

static const FuzzTarget targets[] = {
	{"definition", target_definition},
	{"duration", target_duration},
	{"cron", target_cron},
	{"mapping", target_mapping},
	{"envelope", target_envelope},
	{"jsonset", target_jsonset},
	{"jsontext", target_jsontext},
};

/* the time zones a cron input chooses from (loaded before the baseline) */
static const char *const cron_zones[] = {
	"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
	"Asia/Kathmandu", "Pacific/Chatham", "America/Sao_Paulo", "Africa/Casablanca"
};

/* state of the running fuzz session */
static const FuzzTarget *current_target = NULL;
static MemoryContext input_cxt = NULL;	/* reset after every input */
static pg_tz *cron_tz[lengthof(cron_zones)];
static uint64 inputs_run = 0;
static uint64 inputs_rejected = 0;	/* a NUL byte, or too short */
static uint64 inputs_failed = 0;	/* ended with an ERROR */
static Size mem_baseline = 0;
static Size leak_limit = 0;
static emit_log_hook_type prev_emit_log_hook = NULL;

/* the last input after which long-lived memory grew, for a leak report */
static char *last_growth = NULL;
static size_t last_growth_len = 0;

/*
 * WF_FUZZ_CHECK reports a failed invariant of a result as a finding: it
 * prints the condition and aborts, and libFuzzer saves the input.
 */
#define WF_FUZZ_CHECK(cond) \
	do { \
		if (!(cond)) \
			fuzz_fail("invariant failed: %s (%s:%d)", #cond, __FILE__, __LINE__); \
	} while (0)

/*
 * fuzz_fail prints a finding to stderr and aborts the backend; libFuzzer's
 * SIGABRT handler prints the stack and saves the input.
 */
static void
fuzz_fail(const char *fmt,...)
{
	va_list		args;

	fprintf(stderr, "wf_fuzz: FINDING in target \"%s\": ",
			current_target ? current_target->name : "?");
	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fputc('\n', stderr);
	fflush(stderr);
	abort();
}

/*
 * __sanitizer_print_stack_trace prints the current stack to stderr, one
 * frame a line as "#n 0xADDR in SYMBOL (OBJECT+0xOFFSET)", so that
 * test/scripts/fuzz.sh can resolve file and line with addr2line.
 * libFuzzer calls it on a crash, a timeout and an unexpected exit; it
 * is only used when no sanitizer runtime provides it.
 */
void
__sanitizer_print_stack_trace(void)
{
	void	   *frames[64];
	int			n = backtrace(frames, lengthof(frames));
	int			i;

	for (i = 0; i < n; i++)
	{
		Dl_info		info;

		if (dladdr(frames[i], &info) != 0 && info.dli_fname != NULL)
			fprintf(stderr, "    #%d %p in %s (%s+0x%lx)\n", i, frames[i],
					info.dli_sname ? info.dli_sname : "??", info.dli_fname,
					(unsigned long) ((char *) frames[i] - (char *) info.dli_fbase));
		else
			fprintf(stderr, "    #%d %p\n", i, frames[i]);
	}
	fflush(stderr);
}

/*
 * __sanitizer_acquire_crash_state lets only the first of several crashing
 * threads report (libFuzzer's RSS thread can report too).
 */
int
__sanitizer_acquire_crash_state(void)
{
	static volatile int in_crash = 0;

	return __sync_lock_test_and_set(&in_crash, 1) == 0;
}

/*
 * __sanitizer_set_death_callback: without a sanitizer runtime nothing
 * dies on its own, so there is nothing to call back.
 */
void
__sanitizer_set_death_callback(void (*callback) (void))
{
}

/*
 * fuzz_emit_log_hook turns a WARNING about a leaked resource (buffer pin,
 * relcache or catalog cache reference, snapshot, ...), which the resource
 * owner prints when an input's subtransaction commits, into a finding.
 */
static void
fuzz_emit_log_hook(ErrorData *edata)
{
	if (edata->elevel == WARNING && edata->message != NULL &&
		strstr(edata->message, "leak") != NULL)
		fuzz_fail("resource leak: %s", edata->message);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * input_cstring returns the input as a NUL-terminated string in the
 * current memory context, or NULL when it holds a NUL byte (the text
 * targets reject such inputs).
 */
static char *
input_cstring(const char *data, size_t size)
{
	if (memchr(data, '\0', size) != NULL)
		return NULL;
	return pnstrdup(data, size);
}

/* ----------------------------------------------------------------
 *		definition: text -> jsonb -> the validator
 * ----------------------------------------------------------------
 */

/*
 * check_mapping checks a compiled mapping: every entry has a key and
 * either a path or a literal.
 */
static void
check_mapping(const WfMapping *map, int n)
{
	int			i;

	WF_FUZZ_CHECK(n >= 0);
	WF_FUZZ_CHECK(n == 0 || map != NULL);
	for (i = 0; i < n; i++)
	{
		WF_FUZZ_CHECK(map[i].key != NULL);
		WF_FUZZ_CHECK((map[i].path != (Datum) 0) != (map[i].literal != NULL));
	}
}

/*
 * check_step_index checks that a resolved successor is a step or the end.
 */
static void
check_step_index(const WfDefinition *def, int next)
{
	WF_FUZZ_CHECK(next == WF_STEP_END || (next >= 0 && next < def->nsteps));
}

/*
 * check_definition checks what every consumer of a compiled definition
 * relies on, then compiles each parallel branch the way publishing does
 * (recursively, without the children's SPI lookups).
 */
static void
check_definition(const WfDefinition *def, bool enforce_limits)
{
	int			i;

	check_stack_depth();
	WF_FUZZ_CHECK(def != NULL && def->name != NULL);
	WF_FUZZ_CHECK(def->nsteps > 0 && def->steps != NULL);
	WF_FUZZ_CHECK(!def->has_output || def->n_output >= 0);
	check_mapping(def->output, def->n_output);
	check_mapping(def->correlation, def->n_correlation);
	WF_FUZZ_CHECK(def->n_correlation <= WF_MAX_CORRELATION_KEYS);
	for (i = 0; i < def->n_correlation; i++)
		WF_FUZZ_CHECK(def->correlation[i].path != (Datum) 0);
	for (i = 0; i < def->n_sensitive_input; i++)
		WF_FUZZ_CHECK(def->sensitive_input[i] != NULL);

	for (i = 0; i < def->nsteps; i++)
	{
		const WfStepDef *sd = &def->steps[i];
		int			c;

		WF_FUZZ_CHECK(sd->name != NULL);
		WF_FUZZ_CHECK(WfDefinitionStepIndex(def, sd->name) == i);
		WF_FUZZ_CHECK(sd->type >= WF_STEP_TASK && sd->type <= WF_STEP_PARALLEL);
		check_step_index(def, sd->next);
		check_mapping(sd->input, sd->n_input);
		WF_FUZZ_CHECK(sd->retry.max_attempts >= 1);
		WF_FUZZ_CHECK(sd->retry.max_interval >= sd->retry.initial_interval);
		WF_FUZZ_CHECK(sd->timeout.schedule_to_start >= 0 && sd->timeout.start_to_close >= 0 &&
				   sd->timeout.heartbeat >= 0 && sd->timeout.total >= 0);
		for (c = 0; c < sd->n_choices; c++)
		{
			WF_FUZZ_CHECK(sd->choice_when[c] != (Datum) 0);
			check_step_index(def, sd->choice_next[c]);
		}
		switch (sd->type)
		{
			case WF_STEP_TASK:
				WF_FUZZ_CHECK(sd->queue != NULL);
				WF_FUZZ_CHECK(sd->priority >= -WF_MAX_PRIORITY && sd->priority <= WF_MAX_PRIORITY);
				if (sd->compensate != NULL)
				{
					WF_FUZZ_CHECK(sd->compensate->type == WF_STEP_COMPENSATION);
					WF_FUZZ_CHECK(sd->compensate->queue != NULL);
					WF_FUZZ_CHECK(WfIsCompensation(sd->compensate->name));
					check_mapping(sd->compensate->input, sd->compensate->n_input);
				}
				break;
			case WF_STEP_SLEEP:
				WF_FUZZ_CHECK((sd->sleep_duration > 0) != (sd->sleep_until != (Datum) 0));
				break;
			case WF_STEP_APPROVAL:
				WF_FUZZ_CHECK(sd->queue != NULL);
				WF_FUZZ_CHECK((sd->n_approvers > 0) != (sd->approvers_path != (Datum) 0));
				WF_FUZZ_CHECK(sd->quorum >= 1 && sd->rejections >= 1);
				check_step_index(def, sd->expiry_next);
				break;
			case WF_STEP_CHOICE:
				WF_FUZZ_CHECK(sd->n_choices > 0);
				break;
			case WF_STEP_WAIT_EVENT:
				WF_FUZZ_CHECK(sd->event_name != NULL);
				check_step_index(def, sd->expiry_next);
				break;
			case WF_STEP_SUBWORKFLOW:
				WF_FUZZ_CHECK(sd->sub_name != NULL && sd->sub_version >= 1);
				break;
			case WF_STEP_COMPENSATION:
				/* only ever a task step's compensate, never a step of its own */
				WF_FUZZ_CHECK(sd->type != WF_STEP_COMPENSATION);
				break;
			case WF_STEP_PARALLEL:
				WF_FUZZ_CHECK(sd->n_branches >= 2);
				WF_FUZZ_CHECK(sd->join_count >= 1 && sd->join_count <= sd->n_branches);
				for (c = 0; c < sd->n_branches; c++)
				{
					WfDefinition *branch;

					WF_FUZZ_CHECK(sd->branch_names[c] != NULL && sd->branch_specs[c] != NULL);
					branch = WfCompileDefinition(sd->branch_names[c],
												 sd->branch_specs[c],
												 enforce_limits);
					check_definition(branch, enforce_limits);
				}
				break;
		}
	}

#ifdef WF_FUZZ_SELFTEST

	/*
	 * Planted bug: a NULL dereference for a valid definition with a step
	 * whose name begins with "selftest" (in no seed and no dictionary: the
	 * fuzzer learns it from the comparison, see cmp_hooks.c).
	 */
	for (i = 0; i < def->nsteps; i++)
		if (strncmp(def->steps[i].name, "selftest", 8) == 0)
			*(volatile int *) NULL = 1;
#endif
}

/*
 * target_definition parses the input as JSON and validates it as a
 * definition, with the configurable limits and without (as a published
 * version is loaded again).
 */
static int
target_definition(const char *data, size_t size)
{
	char	   *text = input_cstring(data, size);
	Jsonb	   *spec;

	if (text == NULL)
		return -1;
	spec = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	check_definition(WfCompileDefinition("fuzz", spec, false), false);
	check_definition(WfCompileDefinition("fuzz", spec, true), true);
	return 0;
}

/* ----------------------------------------------------------------
 *		duration: WfParseDuration and WfParseDurationList
 * ----------------------------------------------------------------
 */

/*
 * target_duration parses the input as one duration and as a list of up
 * to 8 durations.
 */
static int
target_duration(const char *data, size_t size)
{
	char	   *text = input_cstring(data, size);
	int64		usec = -1;
	int64		list[8];
	int			n;
	int			i;

	if (text == NULL)
		return -1;
	if (WfParseDuration(text, &usec))
		WF_FUZZ_CHECK(usec >= 0 && usec <= (int64) 366 * USECS_PER_DAY);
	n = WfParseDurationList(text, list, lengthof(list));
	WF_FUZZ_CHECK(n >= -1 && n <= (int) lengthof(list));
	for (i = 0; i < n; i++)
		WF_FUZZ_CHECK(list[i] > 0 && list[i] <= (int64) 366 * USECS_PER_DAY);

#ifdef WF_FUZZ_SELFTEST
	/* planted leak: 7 minutes, written any way, leaks into TopMemoryContext */
	if (n == 1 && list[0] == 7 * USECS_PER_MINUTE)
		(void) MemoryContextAlloc(TopMemoryContext, 256);
#endif
	return 0;
}

/* ----------------------------------------------------------------
 *		cron: WfCronParse, WfCronNext, WfCronPrev
 * ----------------------------------------------------------------
 */

/*
 * target_cron reads a 6-byte header (time zone, minute offset from
 * 2000-01-01 as a 32-bit value around 0, second) and parses the rest as a
 * cron expression, then looks for the next and previous instants.
 */
static int
target_cron(const char *data, size_t size)
{
	const uint8 *h = (const uint8 *) data;
	char	   *expr;
	pg_tz	   *tz;
	int64		minutes;
	TimestampTz at;
	TimestampTz result;
	WfCronSpec	spec;

	if (size < 6)
		return -1;
	tz = cron_tz[h[0] % lengthof(cron_zones)];
	minutes = (int64) ((uint32) h[1] << 24 | (uint32) h[2] << 16 |
					   (uint32) h[3] << 8 | h[4]) - ((int64) 1 << 31);
	at = minutes * USECS_PER_MINUTE + (h[5] % 60) * USECS_PER_SEC;
	expr = input_cstring(data + 6, size - 6);
	if (expr == NULL)
		return -1;

	WfCronParse(expr, &spec);
	if (spec.interval_secs == 0)
		WF_FUZZ_CHECK(spec.minutes != 0 && spec.hours != 0 && spec.doms != 0 &&
				   spec.months != 0 && spec.dows != 0);
	if (WfCronNext(&spec, at, tz, &result))
		WF_FUZZ_CHECK(result > at);
	if (WfCronPrev(&spec, at, tz, &result))
		WF_FUZZ_CHECK(result <= at);
	return 0;
}

/* ----------------------------------------------------------------
 *		mapping: compiled mappings and JSONPaths over a context
 * ----------------------------------------------------------------
 */

/*
 * target_mapping reads a mapping object (the first line) and a run
 * context (the rest), compiles the mapping as a task's input and as the
 * definition's output, and evaluates it and each of its paths against the
 * context.
 */
static int
target_mapping(const char *data, size_t size)
{
	char	   *text = input_cstring(data, size);
	char	   *nl;
	char	   *spec_text;
	Jsonb	   *context;
	WfDefinition *def;
	const WfStepDef *sd;
	int			i;

	if (text == NULL)
		return -1;
	nl = strchr(text, '\n');
	if (nl == NULL)
		return -1;
	*nl = '\0';
	context = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(nl + 1)));
	spec_text = psprintf("{\"steps\": [{\"name\": \"s\", \"queue\": \"q\", \"input\": %s}], \"output\": %s}",
						 text, text);
	def = WfCompileDefinition("fuzz",
							  DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																 CStringGetDatum(spec_text))),
							  true);
	sd = &def->steps[0];
	check_mapping(sd->input, sd->n_input);
	WF_FUZZ_CHECK(WfEvaluateMapping(sd->input, sd->n_input, context) != NULL);
	WF_FUZZ_CHECK(WfEvaluateMapping(def->output, def->n_output, context) != NULL);
	for (i = 0; i < sd->n_input; i++)
	{
		if (sd->input[i].path == (Datum) 0)
			continue;
		(void) WfEvaluatePath(sd->input[i].path, context);
		WF_FUZZ_CHECK(WfEvaluatePathAll(sd->input[i].path, context) != NULL);
		(void) WfPathMatches(sd->input[i].path, context);
	}
	return 0;
}

/* ----------------------------------------------------------------
 *		envelope: WfParseEnvelope, WfOpenBox
 * ----------------------------------------------------------------
 */

/*
 * target_envelope seals the input under a fixed test key, writes the
 * envelope the way the engine does and parses and opens it again (it must
 * give the input back, and must not open with another key id); then it
 * parses the input itself as an envelope and tries to open it.
 */
static int
target_envelope(const char *data, size_t size)
{
	uint8		key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES];
	const char *ad = "wfengine-value:fuzz:7";
	size_t		sealed_len = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES + size +
		crypto_aead_xchacha20poly1305_ietf_ABYTES;
	uint8	   *sealed = palloc(sealed_len);
	unsigned long long clen;
	size_t		b64len = sodium_base64_encoded_len(sealed_len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char	   *b64 = palloc(b64len);
	char	   *env;
	int32		key_id = 0;
	size_t		boxlen = 0;
	uint8	   *box;
	char	   *plain;

	memset(key, 0x42, sizeof(key));
	memset(sealed, 0x17, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
	crypto_aead_xchacha20poly1305_ietf_encrypt(sealed + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES,
											   &clen, (const uint8 *) data, size,
											   (const uint8 *) ad, strlen(ad), NULL, sealed, key);
	sodium_bin2base64(b64, b64len, sealed, sealed_len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	env = psprintf("wfenc:v1:7:%s", b64);
	box = WfParseEnvelope(env, strlen(env), &key_id, &boxlen);
	WF_FUZZ_CHECK(key_id == 7 && boxlen == sealed_len);
	plain = WfOpenBox(box, boxlen, key, ad, strlen(ad));
	WF_FUZZ_CHECK(plain != NULL && memcmp(plain, data, size) == 0 && plain[size] == '\0');
	WF_FUZZ_CHECK(WfOpenBox(box, boxlen, key, "wfengine-value:fuzz:8", 21) == NULL);

	/* the input as an envelope: damaged (an ERROR) or not opening */
	box = WfParseEnvelope(data, (int) Min(size, (size_t) PG_INT32_MAX), &key_id, &boxlen);
	WF_FUZZ_CHECK(key_id > 0 && boxlen >= crypto_aead_xchacha20poly1305_ietf_NPUBBYTES +
				  crypto_aead_xchacha20poly1305_ietf_ABYTES);
	plain = WfOpenBox(box, boxlen, key, ad, strlen(ad));
	if (plain != NULL)
		(void) DirectFunctionCall1(jsonb_in, CStringGetDatum(plain));
	return 0;
}

/* ----------------------------------------------------------------
 *		jsonset: WfJsonbSetKey, WfJsonbSetKeyIn against jsonb_set,
 *		WfJsonbDropKeyIfSame against jsonb_delete
 * ----------------------------------------------------------------
 */

/*
 * jsonb_set_path is jsonb_set(obj, path, value, true).
 */
static Jsonb *
jsonb_set_path(Jsonb *obj, const char *a, const char *b, Jsonb *value)
{
	Datum		path[2];
	int			n = 0;

	path[n++] = CStringGetTextDatum(a);
	if (b != NULL)
		path[n++] = CStringGetTextDatum(b);
	return DatumGetJsonbP(DirectFunctionCall4(jsonb_set, JsonbPGetDatum(obj),
											  PointerGetDatum(construct_array(path, n, TEXTOID, -1,
																			  false, TYPALIGN_INT)),
											  JsonbPGetDatum(value), BoolGetDatum(true)));
}

/*
 * jsonb_delete_key is jsonb_delete(obj, key).
 */
static Jsonb *
jsonb_delete_key(Jsonb *obj, const char *key)
{
	return DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(obj),
											  CStringGetTextDatum(key)));
}

/* the same jsonb, byte for byte */
static bool
same_jsonb(const Jsonb *a, const Jsonb *b)
{
	return VARSIZE(a) == VARSIZE(b) && memcmp(a, b, VARSIZE(a)) == 0;
}

/*
 * target_jsonset reads a key (the first line), a value (the second, JSON)
 * and an object (the rest, JSON), and checks that WfJsonbSetKey writes
 * the bytes jsonb_set writes, and WfJsonbSetKeyIn (the key's member "k",
 * or the object's own "k" under the key when the key is missing) too;
 * and that WfJsonbDropKeyIfSame leaves the object as it is unless the
 * key's member is the value (the run context's input: runstore.c), and
 * then writes the bytes jsonb_delete writes, from which WfJsonbSetKey
 * gives the object back.
 */
static int
target_jsonset(const char *data, size_t size)
{
	char	   *text = input_cstring(data, size);
	char	   *nl1;
	char	   *nl2;
	Jsonb	   *value;
	Jsonb	   *obj;
	JsonbValue *member;

	if (text == NULL || (nl1 = strchr(text, '\n')) == NULL ||
		(nl2 = strchr(nl1 + 1, '\n')) == NULL)
		return -1;
	*nl1 = *nl2 = '\0';
	value = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(nl1 + 1)));
	obj = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(nl2 + 1)));
	if (!JB_ROOT_IS_OBJECT(obj))
		return -1;
	WF_FUZZ_CHECK(same_jsonb(WfJsonbSetKey(obj, text, value), jsonb_set_path(obj, text, NULL, value)));

	member = getKeyJsonValueFromContainer(&obj->root, text, strlen(text), NULL);
	if (member != NULL)
	{
		Jsonb	   *own = JsonbValueToJsonb(member);
		Jsonb	   *dropped = WfJsonbDropKeyIfSame(obj, text, own);

		WF_FUZZ_CHECK(same_jsonb(dropped, jsonb_delete_key(obj, text)));
		WF_FUZZ_CHECK(same_jsonb(WfJsonbSetKey(dropped, text, own), obj));
		WF_FUZZ_CHECK(same_jsonb(WfJsonbDropKeyIfSame(obj, text, value),
								 same_jsonb(own, value) ? dropped : obj));
	}
	else
		WF_FUZZ_CHECK(same_jsonb(WfJsonbDropKeyIfSame(obj, text, value), obj));
	if (member == NULL)
	{
		Jsonb	   *inner = WfJsonbSetKey(DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																		   CStringGetDatum("{}"))),
										  "k", value);

		WF_FUZZ_CHECK(same_jsonb(WfJsonbSetKeyIn(obj, text, "k", value),
								 jsonb_set_path(obj, text, NULL, inner)));
	}
	else if (member->type == jbvBinary && JsonContainerIsObject(member->val.binary.data))
		WF_FUZZ_CHECK(same_jsonb(WfJsonbSetKeyIn(obj, text, "k", value),
								 jsonb_set_path(obj, text, "k", value)));
	return 0;
}

/* ----------------------------------------------------------------
 *		jsontext: WfJsonbToText against JsonbToCString
 * ----------------------------------------------------------------
 */

/*
 * target_jsontext reads a JSON document and checks that WfJsonbToText
 * prints its jsonb byte for byte as jsonb's output function does.
 */
static int
target_jsontext(const char *data, size_t size)
{
	char	   *text = input_cstring(data, size);
	Jsonb	   *value;
	char	   *ours;
	char	   *theirs;
	int			len;

	if (text == NULL)
		return -1;
	value = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	ours = WfJsonbToText(value, &len);
	theirs = JsonbToCString(NULL, &value->root, VARSIZE(value));
	WF_FUZZ_CHECK(len == (int) strlen(theirs) && memcmp(ours, theirs, len) == 0 &&
				  ours[len] == '\0');
	pfree(ours);
	pfree(theirs);
	return 0;
}

/* ----------------------------------------------------------------
 *		the driver
 * ----------------------------------------------------------------
 */

/*
 * check_leaks compares the memory allocated under TopMemoryContext with
 * the baseline taken after the warm-up, and reports growth beyond the
 * leak limit as a finding.
 */
static void
check_leaks(const uint8_t *data, size_t size)
{
	static Size last_total = 0;
	Size		total;

	inputs_run++;
	if (inputs_run < WF_FUZZ_WARMUP || inputs_run % WF_FUZZ_LEAK_CHECK_EVERY != 0)
		return;
	total = MemoryContextMemAllocated(TopMemoryContext, true);
	if (mem_baseline == 0)
	{
		mem_baseline = last_total = total;
		return;
	}
	if (total > last_total)
	{
		/* remember (a prefix of) an input after which memory grew */
		free(last_growth);
		last_growth_len = Min(size, 512);
		last_growth = malloc(last_growth_len + 1);
		if (last_growth != NULL)
			memcpy(last_growth, data, last_growth_len);
		last_total = total;
	}
	if (total > mem_baseline + leak_limit)
	{
		fprintf(stderr,
				"wf_fuzz: memory allocated under TopMemoryContext grew from %zu to %zu bytes "
				"after %llu inputs (limit %zu bytes of growth)\n",
				mem_baseline, total, (unsigned long long) inputs_run, leak_limit);
		if (last_growth != NULL)
		{
			size_t		i;

			fprintf(stderr, "wf_fuzz: one of the last %d inputs before the last growth began with: \"",
					WF_FUZZ_LEAK_CHECK_EVERY);
			for (i = 0; i < last_growth_len; i++)
			{
				unsigned char c = last_growth[i];

				if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
					fputc(c, stderr);
				else
					fprintf(stderr, "\\x%02x", c);
			}
			fprintf(stderr, "\"\n");
		}
		MemoryContextStatsDetail(TopMemoryContext, 10, true);
		fuzz_fail("memory leak into a long-lived memory context");
	}
}

/*
 * fuzz_one is the callback libFuzzer calls for each input: it runs the
 * target in a subtransaction and in input_cxt, turns an ERROR into a
 * normal outcome, and resets everything the input allocated.
 */
static int
fuzz_one(const uint8_t *data, size_t size)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile int rc = 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(input_cxt);
	PG_TRY();
	{
		rc = current_target->fn((const char *) data, size);
		ReleaseCurrentSubTransaction();
		if (rc != 0)
			inputs_rejected++;
	}
	PG_CATCH();
	{
		/* bad input: the expected outcome of most inputs */
		MemoryContextSwitchTo(input_cxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		inputs_failed++;
		rc = 0;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	MemoryContextReset(input_cxt);
	check_leaks(data, size);
	return rc;
}

/*
 * print_counts prints, when the backend exits at the end of a run, how the
 * inputs ended.
 */
static void
print_counts(void)
{
	fprintf(stderr, "wf_fuzz: %llu inputs: %llu accepted, %llu rejected with an ERROR, "
			"%llu skipped (NUL byte or too short)\n",
			(unsigned long long) inputs_run,
			(unsigned long long) (inputs_run - inputs_failed - inputs_rejected),
			(unsigned long long) inputs_failed, (unsigned long long) inputs_rejected);
}

/*
 * wf_fuzz is wf_fuzz(target text, args text[], log_file text,
 * leak_limit_kb int): it runs libFuzzer with args (libFuzzer's flags, the
 * corpus directories or input files) on one target.  libFuzzer's output
 * goes to log_file when given.  It does not return: libFuzzer exits the
 * backend at the end of the run, with status 0 when nothing was found.
 */
Datum
wf_fuzz(PG_FUNCTION_ARGS)
{
	char	   *target;
	int			argc;
	char	  **argv;
	int			i;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fuzz target must not be null")));
	target = text_to_cstring(PG_GETARG_TEXT_PP(0));
	for (i = 0; i < lengthof(targets); i++)
		if (strcmp(targets[i].name, target) == 0)
			current_target = &targets[i];
	if (current_target == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown fuzz target \"%s\"", target),
				 errhint("The targets are definition, duration, cron and mapping.")));

	/* libFuzzer keeps argv for the whole run: malloc, never freed */
	argc = 1;
	argv = malloc(sizeof(char *) * 2);
	argv[0] = strdup(psprintf("wf_fuzz-%s", target));
	if (!PG_ARGISNULL(1))
	{
		ArrayType  *args = PG_GETARG_ARRAYTYPE_P(1);
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(args, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		argv = realloc(argv, sizeof(char *) * (n + 2));
		for (i = 0; i < n; i++)
			if (!nulls[i])
				argv[argc++] = strdup(TextDatumGetCString(elems[i]));
	}
	argv[argc] = NULL;

	if (!PG_ARGISNULL(2))
	{
		char	   *path = text_to_cstring(PG_GETARG_TEXT_PP(2));
		int			fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not open log file \"%s\": %m", path)));
		close(fd);
	}
	leak_limit = (Size) (PG_ARGISNULL(3) ? 1024 : Max(PG_GETARG_INT32(3), 1)) * 1024;

	input_cxt = AllocSetContextCreate(TopMemoryContext, "wf_fuzz input",
									  ALLOCSET_DEFAULT_SIZES);
	/* load what stays cached for the whole run before the baseline */
	for (i = 0; i < lengthof(cron_zones); i++)
		if ((cron_tz[i] = pg_tzset(cron_zones[i])) == NULL)
			elog(ERROR, "time zone \"%s\" is missing", cron_zones[i]);
	{
		void	   *frames[4];

		(void) backtrace(frames, lengthof(frames)); /* loads libgcc_s now */
	}
	atexit(print_counts);
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = fuzz_emit_log_hook;

	PG_RETURN_INT32(LLVMFuzzerRunDriver(&argc, &argv, fuzz_one));
}
