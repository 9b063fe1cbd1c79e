/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The per-database engine worker: fires due timers and deadlines and
 *	  sends the notifications relayed to it.
 *
 * Processes.  The launcher (launcher.c) starts one worker per database,
 * with the slot number of WfShmem->workers[] in bgw_main_arg and the
 * database's OID in bgw_extra.  The worker claims its slot before it even
 * connects and frees it however it exits (launcher.c tells the slot
 * protocol).  A worker that finds no wfengine extension in its database
 * exits at once and leaves a note so that the launcher does not start it
 * again until CREATE EXTENSION.
 *
 * Waking.  A worker sleeps on its latch until the earliest pending timer
 * (as WfTimerTick reports it) or wfengine.naptime, whichever comes first,
 * and publishes that moment in its slot's next_due; see notify.c for the
 * protocol that lets a committer wake it only when it wrote something
 * sooner.  While it ticks, next_due holds a promise instead: the next tick
 * starts by the earliest due time the previous tick found, or by naptime
 * from now; a tick never sleeps past its promise.  So a steady stream of
 * leases that expire later than the leases already out (every claim
 * writes one) does not wake the worker at all.  A committer that wants a
 * tick sets the slot's tick_wanted before the latch; a latch set without
 * it only hands over notifications, which the worker sends in a short
 * transaction of their own (at most one every WF_RELAY_INTERVAL_MS, see
 * worker_relay_paced) and goes back to sleep until the same moment.
 * A tick that fired a full batch is followed at once by another.
 *
 * An older schema.  A database whose installed extension is older than
 * this library needs (WF_MIN_SCHEMA_VERSION, version.c) gets no timers
 * fired: the worker says so once in the log, keeps its slot and goes on
 * ticking at wfengine.naptime, doing nothing, until ALTER EXTENSION
 * wfengine UPDATE (which wakes it, ddlguard.c) brings the schema up to
 * date; it logs that it resumes.  It never exits or fails for it, so the
 * launcher does not restart it over and over.
 *
 * Errors.  Each tick is one short transaction.  An error in it is logged
 * (rate-limited), the transaction is aborted and the worker retries after
 * a growing delay of 1 to 10 s; one bad tick never kills the worker.
 * WfTimerTick isolates individual timers in subtransactions.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "notify.h"
#include "shmem.h"
#include "timer.h"
#include "version.h"
#include "worker.h"

/* constants */
#define WF_ERROR_DELAY_MAX_MS		10000	/* longest sleep after a failed
											 * tick */
#define WF_STUCK_DELAY_MS			1000	/* sleep when something is due
											 * but nothing could be fired */
#define WF_LOG_INTERVAL_MS			60000	/* rate limit of repeated
											 * error reports */
#define WF_RELAY_INTERVAL_MS		2		/* shortest time between two
											 * relay transactions */

/* worker-local state */
static bool worker_found_no_extension = false;
static uint64 worker_creations_seen = 0;	/* WfWorkers->creations before
											 * the last tick's snapshot */
static char *worker_dbname = NULL;
static int	worker_failed_ticks = 0;
static int	worker_unlogged_errors = 0;
static TimestampTz worker_last_error_log = 0;
static bool worker_schema_refused = false;	/* the schema was too old at
											 * the last tick (logged) */
static TimestampTz worker_last_relay = 0;	/* when the last relay
											 * transaction began */
static bool worker_relay_failed = false;	/* the last relay transaction
											 * failed */


/*
 * worker_detach frees the worker's slot however the worker exits; an
 * on_shmem_exit callback, run after the transaction machinery has been
 * shut down.  A worker that found no extension leaves a note so that the
 * launcher does not start it again until CREATE EXTENSION, unless a CREATE
 * EXTENSION committed since its tick began: its snapshot may have missed
 * just that one, and the launcher must probe the database again.
 */
static void
worker_detach(int code, Datum arg)
{
	int			slotno = DatumGetInt32(arg);
	WfDbWorkerSlot *slot = &WfShmem->workers[slotno];
	Oid			dboid = InvalidOid;

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid)
	{
		dboid = slot->dboid;
		WfClearSlot(slot);
		if (worker_found_no_extension &&
			pg_atomic_read_u64(&WfWorkers->creations) == worker_creations_seen)
		{
			WfDbNote   *note = WfNoteGet(dboid);

			if (note != NULL)
			{
				note->absent = true;
				note->absent_since = GetCurrentTimestamp();
			}
		}
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * worker_error_context adds the database to every error of a tick.
 */
static void
worker_error_context(void *arg)
{
	errcontext("wfengine worker tick in database \"%s\"",
			   worker_dbname ? worker_dbname : "?");
}

/*
 * worker_schema_usable tells whether this library may fire timers in the
 * database: its schema is at WF_MIN_SCHEMA_VERSION or newer.  The first
 * tick that finds it older logs it, and the first that finds it usable
 * again logs that; the ticks in between are silent.  Called in the tick's
 * transaction, with the extension locked.
 */
static bool
worker_schema_usable(void)
{
	const char *installed;
	const char *dbname = worker_dbname ? worker_dbname : "?";

	if (!WfSchemaVersionAtLeast(WF_MIN_SCHEMA_VERSION, &installed))
	{
		if (!worker_schema_refused)
			ereport(LOG,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("wfengine schema version %s is older than the loaded library %s",
							installed ? installed : "?", WFENGINE_VERSION),
					 errdetail("The engine worker of database \"%s\" fires no timers until the schema is at version %s or later.",
							   dbname, WF_MIN_SCHEMA_VERSION),
					 errhint("Run ALTER EXTENSION wfengine UPDATE.")));
		worker_schema_refused = true;
		return false;
	}
	if (worker_schema_refused)
		ereport(LOG,
				(errmsg("wfengine worker for database \"%s\" resumes: schema version %s",
						dbname, installed)));
	worker_schema_refused = false;
	return true;
}

/*
 * worker_tick runs one tick in its own transaction: it checks that the
 * extension is installed and keeps it so until commit (else it sets
 * *absent and fires nothing), that its schema is not older than this
 * library needs (else it fires nothing) and,
 * when wfengine.enabled, fires up to wfengine.timer_batch due timers.
 * *fired is how many were fired, *next_due the earliest pending due time
 * (0: none).  Errors propagate to the caller.
 */
static void
worker_tick(int *fired, TimestampTz *next_due, bool *absent)
{
	WfTickStats stats = {false, 0, 0};
	ErrorContextCallback errcallback;
	Oid			extoid;

	*fired = 0;
	*next_due = 0;
	*absent = false;

	/* read before the snapshot is taken; see worker_detach */
	worker_creations_seen = pg_atomic_read_u64(&WfWorkers->creations);
	pg_memory_barrier();

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "wfengine: firing due timers");

	errcallback.callback = worker_error_context;
	errcallback.arg = NULL;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	extoid = get_extension_oid("wfengine", true);
	if (OidIsValid(extoid))
	{
		/*
		 * Hold DROP EXTENSION off until the tick commits (it takes this lock
		 * in AccessExclusiveLock mode), and look again once we have the lock
		 * in case it was dropped while we waited.
		 */
		LockDatabaseObject(ExtensionRelationId, extoid, 0, AccessShareLock);
		if (get_extension_oid("wfengine", true) != extoid)
			extoid = InvalidOid;
	}

	if (!OidIsValid(extoid))
		*absent = true;
	/* a schema too old for this library: idle until it is updated */
	else if (worker_schema_usable() && wf_enabled)
	{
		WfDbWorkerSlot *slot = WfWorkerSlotFor(MyDatabaseId);

		*fired = WfTimerTick(wf_timer_batch, next_due, &stats);
		/* what the tick left for a lock, for wf.worker_status() */
		if (slot != NULL && stats.known)
		{
			pg_atomic_write_u64(&slot->due_locked, (uint64) stats.locked);
			pg_atomic_write_u64(&slot->due_locked_since, (uint64) stats.locked_since);
		}
		/* notifications that committed transactions handed to us */
		(void) WfRelaySend(slot);
	}

	error_context_stack = errcallback.previous;

	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * worker_tick_guarded runs worker_tick and survives its errors: the error
 * is logged (the first three in a row, then at most once a minute), the
 * transaction aborted at every level, and false returned.
 */
static bool
worker_tick_guarded(MemoryContext loopcxt, int *fired, TimestampTz *next_due,
					bool *absent)
{
	volatile bool ok = true;

	PG_TRY();
	{
		worker_tick(fired, next_due, absent);
		/* the commit left us in TopMemoryContext */
		MemoryContextSwitchTo(loopcxt);
	}
	PG_CATCH();
	{
		TimestampTz now = GetCurrentTimestamp();

		HOLD_INTERRUPTS();
		worker_failed_ticks++;
		if (worker_failed_ticks <= 3 || worker_last_error_log == 0 ||
			TimestampDifferenceExceeds(worker_last_error_log, now, WF_LOG_INTERVAL_MS))
		{
			EmitErrorReport();
			if (worker_unlogged_errors > 0)
				ereport(LOG,
						(errmsg("wfengine worker: %d more failed ticks were not logged",
								worker_unlogged_errors)));
			worker_unlogged_errors = 0;
			worker_last_error_log = now;
		}
		else
			worker_unlogged_errors++;

		/* a subtransaction may still be open: abort everything */
		AbortOutOfAnyTransaction();
		FlushErrorState();
		MemoryContextSwitchTo(loopcxt);
		RESUME_INTERRUPTS();
		pgstat_report_activity(STATE_IDLE, NULL);
		ok = false;
	}
	PG_END_TRY();

	return ok;
}

/*
 * worker_claim_slot claims slot slotno for this worker and arranges for
 * worker_detach to free it however the worker exits.  Claiming happens
 * before connecting, so that the slot is freed even when the connection
 * fails.  The worker gives up (exits) when another worker of this
 * database has the slot, or when DDL on the database paused it meanwhile.
 */
static WfDbWorkerSlot *
worker_claim_slot(int slotno, Oid dboid)
{
	WfDbWorkerSlot *slot = &WfShmem->workers[slotno];
	WfDbNote   *note;
	bool		claimed = false;

	on_shmem_exit(worker_detach, Int32GetDatum(slotno));
	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	note = WfNoteFind(dboid);
	if (slot->dboid == dboid && slot->pid == 0)
	{
		/* when paused, worker_detach frees the slot again at once */
		slot->pid = MyProcPid;
		if (note == NULL || note->paused_until <= GetCurrentTimestamp())
		{
			slot->latch = MyLatch;
			slot->started_at = GetCurrentTimestamp();
			pg_atomic_write_u64(&slot->next_due, 0);
			claimed = true;
		}
	}
	LWLockRelease(WfShmem->lock);
	if (!claimed)
	{
		elog(DEBUG1, "wfengine worker for database %u is not needed, exiting", dboid);
		proc_exit(0);
	}
	return slot;
}

/*
 * worker_connect connects to the database, pins search_path and keeps the
 * database's name for messages.
 */
static void
worker_connect(Oid dboid)
{
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("wfengine worker");

	/*
	 * The worker runs as the bootstrap superuser: whatever search_path the
	 * database or role settings give it, its statements resolve nothing
	 * outside pg_catalog (and pg_temp, last), as API calls do (tenant.c).
	 */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	StartTransactionCommand();
	worker_dbname = get_database_name(MyDatabaseId);
	if (worker_dbname != NULL)
		worker_dbname = MemoryContextStrdup(TopMemoryContext, worker_dbname);
	CommitTransactionCommand();
}

/*
 * worker_after_tick records a tick that succeeded (log lines, counters)
 * and returns how long to sleep, setting *wake to when the sleep ends:
 * until the earliest pending due time or wfengine.naptime, at once after
 * a full batch, WF_STUCK_DELAY_MS when something is due but nothing could
 * be fired.
 */
static long
worker_after_tick(WfDbWorkerSlot *slot, int fired, TimestampTz next_due,
				  bool *announced, TimestampTz *wake)
{
	TimestampTz now;
	long		timeout;

	if (!*announced)
	{
		ereport(LOG,
				(errmsg("wfengine worker started for database \"%s\"",
						worker_dbname ? worker_dbname : "?")));
		*announced = true;
	}
	if (worker_failed_ticks > 0)
		ereport(LOG,
				(errmsg("wfengine worker for database \"%s\" recovered after %d failed ticks",
						worker_dbname ? worker_dbname : "?",
						worker_failed_ticks)));
	worker_failed_ticks = 0;
	pg_atomic_fetch_add_u64(&slot->ticks, 1);
	if (fired > 0)
		pg_atomic_fetch_add_u64(&slot->fired, fired);
	elog(DEBUG2, "wfengine worker fired %d timers; next due %s", fired,
		 next_due ? timestamptz_to_str(next_due) : "never");

	now = GetCurrentTimestamp();
	*wake = TimestampTzPlusMilliseconds(now, (long) wf_naptime);
	if (next_due != 0 && next_due < *wake)
		*wake = next_due;
	timeout = TimestampDifferenceMilliseconds(now, *wake);

	/* a full batch: more may be due, go again at once */
	if (fired >= wf_timer_batch)
		timeout = 0;
	/* due, but nothing could be fired: do not spin */
	else if (timeout == 0 && fired == 0)
	{
		timeout = WF_STUCK_DELAY_MS;
		*wake = TimestampTzPlusMilliseconds(now, timeout);
	}
	return timeout;
}

/*
 * worker_sleep publishes wake as the moment of the next tick and sleeps on
 * the latch until then (or until the latch is set).  It does not sleep
 * while notifications of this database wait in the relay: the latch set
 * that handed them over may have been reset by a lock wait in the tick or
 * relay transaction just done (see WfRelayPending); the loop sends them.
 */
static void
worker_sleep(WfDbWorkerSlot *slot, TimestampTz wake)
{
	long		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), wake);

	pg_atomic_write_u64(&slot->next_due, (uint64) wake);
	if (timeout <= 0 ||
		(!worker_schema_refused && !worker_relay_failed && WfRelayPending()))
		return;
	(void) WaitLatch(MyLatch,
					 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 timeout, WfWaitEvent());
	ResetLatch(MyLatch);
}

/*
 * worker_relay_guarded sends the relayed notifications in a transaction of
 * their own (committed asynchronously), without a timer tick; an error is
 * logged and the notifications are lost (a notification is a hint, never
 * state).  On a
 * schema too old for this library (the last tick found it so) nothing is
 * sent: no API call there succeeded to hand any over.
 */
static void
worker_relay_guarded(MemoryContext loopcxt)
{
	if (worker_schema_refused)
		return;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		/*
		 * Nothing of this transaction needs to be durable: its NOTIFYs are
		 * lost in a crash anyway (the queue is not WAL-logged).  Committed
		 * without waiting for its commit record's flush, it neither waits
		 * itself nor asks for a flush of its own among the clients'.
		 */
		(void) set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		(void) WfRelaySend(WfWorkerSlotFor(MyDatabaseId));
		CommitTransactionCommand();
		MemoryContextSwitchTo(loopcxt);
		worker_relay_failed = false;
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		worker_relay_failed = true;
		EmitErrorReport();
		AbortOutOfAnyTransaction();
		FlushErrorState();
		MemoryContextSwitchTo(loopcxt);
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();
}

/*
 * worker_relay_paced sends the relayed notifications, but not sooner than
 * WF_RELAY_INTERVAL_MS after the previous relay transaction began: under a
 * steady stream of commits the worker then wakes and commits a few hundred
 * times a second at most, each time for all that came meanwhile, instead of
 * once per committing client (each wake-up a signal, a context switch and a
 * transaction on a machine the clients need).  The wait does not watch the
 * latch, so the commits that come meanwhile only set it (no signal: the
 * worker is not sleeping on it); the sleep that follows the send then
 * returns at once and the loop sends again.  A tick asked for meanwhile
 * waits the rest of the interval at most.
 */
static void
worker_relay_paced(MemoryContext loopcxt, TimestampTz now, TimestampTz wake)
{
	TimestampTz ready = TimestampTzPlusMilliseconds(worker_last_relay, WF_RELAY_INTERVAL_MS);

	if (now < ready && ready < wake)
		(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 TimestampDifferenceMilliseconds(now, ready), WfWaitEvent());
	worker_last_relay = GetCurrentTimestamp();
	worker_relay_guarded(loopcxt);
}

/*
 * WfWorkerMain is the entry point of the worker of one database (OID in
 * bgw_extra, slot number in main_arg).  It claims its slot, connects, and
 * runs ticks until SIGTERM (through die()), postmaster death, or the
 * extension's disappearance.
 */
void
WfWorkerMain(Datum main_arg)
{
	int			slotno = DatumGetInt32(main_arg);
	Oid			dboid;
	WfDbWorkerSlot *slot;
	bool		announced = false;
	MemoryContext loopcxt;
	TimestampTz wake = 0;		/* when the current sleep ends; 0: none */
	TimestampTz last_due = 0;	/* the earliest due time the last tick saw */

	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	if (WfShmem == NULL || WfWorkers == NULL)
		elog(FATAL, "wfengine shared memory is not initialised");
	if (slotno < 0 || slotno >= WF_MAX_DB_WORKERS || !OidIsValid(dboid))
		elog(FATAL, "wfengine worker started with invalid arguments");

	slot = worker_claim_slot(slotno, dboid);
	worker_connect(dboid);

	loopcxt = AllocSetContextCreate(TopMemoryContext, "wfengine worker loop",
									ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(loopcxt);

	for (;;)
	{
		int			fired = 0;
		TimestampTz next_due = 0;
		bool		absent = false;
		TimestampTz now;
		TimestampTz promise;
		long		timeout;
		bool		reloaded = false;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			reloaded = true;
		}

		/*
		 * Woken before the time we published and nobody asked for a tick:
		 * the latch only means that committed transactions handed us
		 * notifications.  Send them and sleep on until the same moment.
		 * A reload ticks at once instead, so that new settings (a shorter
		 * wfengine.naptime, wfengine.enabled) apply from now, not from the
		 * end of a sleep chosen under the old ones.
		 */
		now = GetCurrentTimestamp();
		if (!reloaded && wake != 0 && now < wake &&
			pg_atomic_exchange_u32(&slot->tick_wanted, 0) == 0)
		{
			worker_relay_paced(loopcxt, now, wake);
			MemoryContextReset(loopcxt);
			worker_sleep(slot, wake);
			continue;
		}
		pg_atomic_write_u32(&slot->tick_wanted, 0);

		/*
		 * Awake: promise the next tick by the earliest due time the last tick
		 * found (if still ahead) or wfengine.naptime from now.  A committer
		 * wakes us only for something due sooner than that (see notify.c);
		 * whatever this tick's snapshot misses, the next tick, which starts
		 * by the promise, sees.
		 */
		promise = TimestampTzPlusMilliseconds(now, (long) wf_naptime);
		if (last_due > now && last_due < promise)
			promise = last_due;
		pg_atomic_write_u64(&slot->next_due, (uint64) promise);
		pg_memory_barrier();

		if (worker_tick_guarded(loopcxt, &fired, &next_due, &absent))
		{
			if (absent)
			{
				/* only a worker that has served the database says so */
				ereport(announced ? LOG : DEBUG1,
						(errmsg("wfengine worker for database \"%s\" is stopping: extension \"%s\" is not installed",
								worker_dbname ? worker_dbname : "?", "wfengine")));
				worker_found_no_extension = true;
				proc_exit(0);
			}
			timeout = worker_after_tick(slot, fired, next_due, &announced, &wake);
			last_due = next_due;
			if (timeout > 0 && wake > promise)
				wake = promise;
		}
		else
		{
			int			shift = Min(worker_failed_ticks - 1, 4);

			timeout = Min(1000L << shift, WF_ERROR_DELAY_MAX_MS);
			wake = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout);
			last_due = 0;
		}

		MemoryContextReset(loopcxt);

		if (timeout > 0)
			worker_sleep(slot, wake);
		else
			wake = 0;
	}
}
