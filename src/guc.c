/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Configuration variables of wfengine, kept in alphabetical order.
 *
 * Limits that protect the server from one tenant (definition size, step
 * count, payload size) are PGC_SUSET: a superuser may change them for a
 * session, an ordinary role may not raise its own limits.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/guc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"

#include "duration.h"
#include "guc.h"

/* forward declarations */
static bool check_quarantine_delays(char **newval, void **extra, GucSource source);

/*
 * check_quarantine_delays accepts a list of positive durations.
 */
static bool
check_quarantine_delays(char **newval, void **extra, GucSource source)
{
	int64		delays[WF_MAX_QUARANTINE_DELAYS];

	if (WfParseDurationList(*newval, delays, WF_MAX_QUARANTINE_DELAYS) < 0)
	{
		GUC_check_errdetail("Give up to %d positive durations such as \"1m\", \"30s\" or \"1h30m\", separated by commas.",
							WF_MAX_QUARANTINE_DELAYS);
		return false;
	}
	return true;
}

/* GUC variables */
char	   *wf_anchor_key = NULL;
char	   *wf_approval_key = NULL;
char	   *wf_master_keys = NULL;
char	   *wf_databases = NULL;
int			wf_decide_failure_limit = 10;
int			wf_decide_failure_window = 60;
bool		wf_enabled = true;
int			wf_launcher_naptime = 30;
int			wf_metrics_databases = 64;
int			wf_max_claim_batch = 1000;
int			wf_max_definition_size = 64 * 1024;
int			wf_max_payload_size = 256 * 1024;
int			wf_max_steps = 20;
int			wf_naptime = 60000;
int			wf_poison_threshold = 3;
char	   *wf_quarantine_delays = NULL;
int			wf_timer_batch = 100;

/*
 * WfGucInit defines every wfengine.* setting and reserves the prefix.
 */
void
WfGucInit(void)
{
	DefineCustomStringVariable("wfengine.anchor_key",
							   gettext_noop("Sets the key that wf.chain_heads() signs the heads of the hash chains with."),
							   gettext_noop("32 to 64 random bytes written in hex; empty: the heads are not signed. wf.verify_run(run, anchor) checks a signed anchor with it."),
							   &wf_anchor_key,
							   "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("wfengine.approval_key",
							   gettext_noop("Sets the key that approval tokens are hashed with."),
							   gettext_noop("32 to 64 random bytes written in hex. Only keyed hashes of tokens are stored; changing the key invalidates every outstanding token."),
							   &wf_approval_key,
							   "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("wfengine.master_keys",
							   gettext_noop("Sets the master keys that wrap the tenants' data keys."),
							   gettext_noop("A comma-separated list of id:key, each key 32 bytes in hex; the first wraps new data keys, the others only unwrap."),
							   &wf_master_keys,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("wfengine.databases",
							   gettext_noop("Sets the databases the engine workers serve."),
							   gettext_noop("A comma-separated list of database names; empty means every database in which the extension is installed."),
							   &wf_databases,
							   "",
							   PGC_SIGHUP, GUC_LIST_INPUT,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.decide_failure_limit",
							gettext_noop("Sets how many failed wf.decide calls per token and per approver are recorded in a window."),
							gettext_noop("Beyond it, failures are only counted in wf.decide_failures, and the approver's further calls in the window answer \"throttled\". Range 1 to 1000000."),
							&wf_decide_failure_limit,
							10, 1, 1000000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.decide_failure_window",
							gettext_noop("Sets the window in which wfengine.decide_failure_limit counts failed wf.decide calls."),
							gettext_noop("A window starts with the first failure after the previous one ended. Range 1s to 1d."),
							&wf_decide_failure_window,
							60, 1, 86400,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("wfengine.enabled",
							 gettext_noop("Enables the engine workers, which fire timers and expire leases."),
							 NULL,
							 &wf_enabled,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.launcher_naptime",
							gettext_noop("Sets how often the launcher looks for databases that need a worker."),
							gettext_noop("The launcher is also woken by CREATE EXTENSION. Range 1s to 1h."),
							&wf_launcher_naptime,
							30, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	/*
	 * Sizes shared memory, so it exists only when the library is preloaded
	 * (a PGC_POSTMASTER variable cannot be created later, and without
	 * preload there are no counters to size).
	 */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("wfengine.metrics_databases",
								gettext_noop("Sets how many databases the engine counters are kept for at once."),
								gettext_noop("An entry is taken by a database the first time it counts and given back once the database is dropped. Range 1 to 4096; takes effect at server start."),
								&wf_metrics_databases,
								64, 1, 4096,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.max_claim_batch",
							gettext_noop("Sets the largest number of tasks one claim may return."),
							gettext_noop("Range 1 to 100000."),
							&wf_max_claim_batch,
							1000, 1, 100000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.max_definition_size",
							gettext_noop("Sets the largest accepted workflow definition, in bytes."),
							gettext_noop("Measured on the jsonb form of the spec. Range 1kB to 16MB."),
							&wf_max_definition_size,
							64 * 1024, 1024, 16 * 1024 * 1024,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.max_payload_size",
							gettext_noop("Sets the largest accepted run input, task output or error, in bytes."),
							gettext_noop("Measured on the jsonb form. Range 1kB to 64MB."),
							&wf_max_payload_size,
							256 * 1024, 1024, 64 * 1024 * 1024,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.max_steps",
							gettext_noop("Sets the largest number of steps a workflow definition may have."),
							gettext_noop("Checked when a definition is published. Range 1 to 1000."),
							&wf_max_steps,
							20, 1, 1000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.naptime",
							gettext_noop("Sets the longest time an engine worker sleeps when nothing is due."),
							gettext_noop("Workers sleep until the earliest due timer and are woken early by commits; this only bounds the sleep. Range 100ms to 1h."),
							&wf_naptime,
							60000, 100, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.poison_threshold",
							gettext_noop("Sets after how many expired leases without a result a task attempt is quarantined."),
							gettext_noop("0 disables quarantine. Range 0 to 1000."),
							&wf_poison_threshold,
							3, 0, 1000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("wfengine.quarantine_delays",
							   gettext_noop("Sets the growing delays of a quarantined task attempt."),
							   gettext_noop("A comma-separated list of up to 16 durations such as \"1m\", \"30s\" or \"1h30m\"; after the last one the run is paused for an operator."),
							   &wf_quarantine_delays,
							   "1m, 5m, 30m",
							   PGC_SUSET, GUC_LIST_INPUT,
							   check_quarantine_delays, NULL, NULL);

	DefineCustomIntVariable("wfengine.timer_batch",
							gettext_noop("Sets how many due timers an engine worker fires per transaction round."),
							gettext_noop("Range 1 to 10000."),
							&wf_timer_batch,
							100, 1, 10000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("wfengine");
}
