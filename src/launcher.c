/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: starts and stops one engine worker per database.
 *
 * Processes.  When wfengine is preloaded, _PG_init registers one static
 * background worker, the launcher ("wfengine launcher").  It starts only
 * once recovery has finished, so nothing runs on a hot standby and
 * everything starts after promotion.  It connects to no database and reads
 * pg_database, a shared catalog, every wfengine.launcher_naptime or when
 * its latch is set, and starts one dynamic worker ("wfengine worker",
 * worker.c) for every connectable, non-template database (or only those
 * named in wfengine.databases).  A worker that finds no wfengine extension
 * in its database exits at once; the launcher remembers that and does not
 * try that database again until CREATE EXTENSION wakes it (at commit,
 * through wf._wake_launcher() in the install script) or 10 launcher
 * naptimes have passed.  So the extension's presence is discovered by the
 * workers, which can read pg_extension, and not by the launcher, which
 * cannot.
 *
 * Worker slots.  WfShmem->workers[] (shmem.h) is the truth about which
 * database has a worker; WfShmem->lock protects it.  Only the launcher
 * takes a free slot: it writes the database OID (pid 0 = "registered, not
 * yet running", started_at = registration time) and registers the worker
 * with the slot number in bgw_main_arg and the OID in bgw_extra.  The
 * worker claims the slot, before it even connects, by writing its pid,
 * and an on_shmem_exit callback frees the slot again however the worker
 * ends (ERROR, FATAL, SIGTERM, extension gone).  A crash (kill -9) makes
 * the postmaster reinitialise shared memory, so no slot survives its
 * owner.  The launcher frees a slot itself only when the worker never
 * claimed it: its handle says the worker has stopped, or, for slots left
 * by a previous launcher process, after a minute.  A restarted launcher
 * therefore adopts the running workers of its predecessor.
 *
 * Errors.  An error in the launcher ends it, and the postmaster restarts
 * it after WF_LAUNCHER_RESTART_S seconds; that is safe because a new
 * launcher adopts the slots it finds.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/varlena.h"

#include "guc.h"
#include "launcher.h"
#include "metrics.h"
#include "notify.h"
#include "shmem.h"

/* constants */
#define WF_LAUNCHER_RESTART_S		5	/* bgw_restart_time of the launcher */
#define WF_WORKER_RESTART_DELAY_MS	2000	/* least time between two starts
											 * of one database's worker */
#define WF_PENDING_STALE_MS			60000	/* a slot never claimed by its
											 * worker is freed after this */
#define WF_ABSENT_RECHECK_NAPTIMES	10	/* re-probe a database without the
										 * extension after this many
										 * launcher naptimes */
#define WF_LOG_INTERVAL_MS			60000	/* rate limit of repeated
											 * warnings */

/* one connectable database, as the launcher sees it */
typedef struct WfDbEntry
{
	Oid			dboid;
	NameData	name;
} WfDbEntry;

/* launcher-local: when the worker of a database was last started */
typedef struct WfStartEntry
{
	Oid			dboid;			/* hash key */
	TimestampTz last_start;
} WfStartEntry;

/* launcher-local state */
static BackgroundWorkerHandle *launcher_handles[WF_MAX_DB_WORKERS];
static Oid	launcher_handle_db[WF_MAX_DB_WORKERS];
static HTAB *launcher_starts = NULL;
static TimestampTz launcher_last_warning = 0;
static char *launcher_bad_databases = NULL; /* last unparsable setting */

PG_FUNCTION_INFO_V1(wfengine_worker_status);
PG_FUNCTION_INFO_V1(wfengine_wake_launcher);


/*
 * launcher_describe fills in what the launcher and the engine workers have
 * in common: a background worker of this library with shared memory and a
 * database connection, started once recovery has finished.
 */
static void
launcher_describe(BackgroundWorker *worker, const char *function, int restart_time)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = restart_time;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "wfengine");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", function);
}

/*
 * WfLauncherInit registers the launcher.  _PG_init calls it only while the
 * library is being preloaded (and never in binary upgrade mode).
 */
void
WfLauncherInit(void)
{
	BackgroundWorker worker;

	if (IsBinaryUpgrade || !process_shared_preload_libraries_in_progress)
		return;

	launcher_describe(&worker, "WfLauncherMain", WF_LAUNCHER_RESTART_S);
	snprintf(worker.bgw_name, BGW_MAXLEN, "wfengine launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "wfengine launcher");
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/*
 * wfengine_wake_launcher is wf._wake_launcher(), internal: the install
 * script calls it so that the launcher starts this database's worker as
 * soon as CREATE EXTENSION commits.  Without preload it does nothing.
 */
Datum
wfengine_wake_launcher(PG_FUNCTION_ARGS)
{
	WfWakeLauncherAtCommit();
	PG_RETURN_VOID();
}


/* ------------------------------------------------------------------------
 * The launcher
 * ------------------------------------------------------------------------
 */

/*
 * launcher_detach unpublishes the launcher; an on_shmem_exit callback.
 */
static void
launcher_detach(int code, Datum arg)
{
	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	if (WfShmem->launcher_pid == MyProcPid)
	{
		WfShmem->launcher_pid = 0;
		WfShmem->launcher_latch = NULL;
		WfWorkers->launcher_started_at = 0;
		WfWorkers->launcher_next_scan = 0;
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * launcher_may_warn tells whether the launcher may log a WARNING now: at
 * most one per WF_LOG_INTERVAL_MS.
 */
static bool
launcher_may_warn(TimestampTz now)
{
	if (launcher_last_warning != 0 &&
		!TimestampDifferenceExceeds(launcher_last_warning, now, WF_LOG_INTERVAL_MS))
		return false;
	launcher_last_warning = now;
	return true;
}

/*
 * launcher_wanted_names parses wfengine.databases into a list of names in
 * the current memory context.  *filter is set to false when the setting is
 * empty (every database).  An unparsable value is reported once and
 * selects no database.
 */
static List *
launcher_wanted_names(bool *filter)
{
	char	   *raw;
	List	   *names = NIL;

	*filter = (wf_databases != NULL && wf_databases[0] != '\0');
	if (!*filter)
		return NIL;

	raw = pstrdup(wf_databases);
	if (!SplitIdentifierString(raw, ',', &names))
	{
		if (launcher_bad_databases == NULL ||
			strcmp(launcher_bad_databases, wf_databases) != 0)
		{
			ereport(WARNING,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid list syntax in parameter \"%s\"",
							"wfengine.databases"),
					 errdetail("No database is served until it is fixed.")));
			if (launcher_bad_databases != NULL)
				pfree(launcher_bad_databases);
			launcher_bad_databases = MemoryContextStrdup(TopMemoryContext, wf_databases);
		}
		return NIL;
	}
	return names;
}

/*
 * launcher_database_list returns the databases that should have a worker,
 * as a list of WfDbEntry in the current memory context: every database
 * that allows connections and is not a template (nor left invalid by an
 * interrupted DROP DATABASE), restricted to wfengine.databases when set.
 * It runs its own transaction to read pg_database, a shared catalog.
 */
static List *
launcher_database_list(void)
{
	MemoryContext resultcxt = CurrentMemoryContext;
	List	   *result = NIL;
	List	   *names;
	bool		filter;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	TimestampTz read_at;
	Oid		   *live;
	int			nlive = 0,
				maxlive = 64;

	names = launcher_wanted_names(&filter);

	/* every database, for the metrics entries of dropped ones (below) */
	live = palloc(maxlive * sizeof(Oid));
	read_at = GetCurrentTimestamp();
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();

	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext oldcxt;
		WfDbEntry  *entry;

		if (nlive == maxlive)
		{
			maxlive *= 2;
			live = repalloc(live, maxlive * sizeof(Oid));
		}
		live[nlive++] = db->oid;
		if (filter && names == NIL)
			continue;			/* wfengine.databases names none */
		if (db->datistemplate || !db->datallowconn)
			continue;
#ifdef DATCONNLIMIT_INVALID_DB
		if (database_is_invalid_form(db))
			continue;
#endif
		if (filter)
		{
			ListCell   *lc;
			bool		listed = false;

			foreach(lc, names)
			{
				if (strcmp((char *) lfirst(lc), NameStr(db->datname)) == 0)
				{
					listed = true;
					break;
				}
			}
			if (!listed)
				continue;
		}

		oldcxt = MemoryContextSwitchTo(resultcxt);
		entry = palloc(sizeof(WfDbEntry));
		entry->dboid = db->oid;
		namestrcpy(&entry->name, NameStr(db->datname));
		result = lappend(result, entry);
		MemoryContextSwitchTo(oldcxt);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);

	CommitTransactionCommand();
	MemoryContextSwitchTo(resultcxt);
	WfMetricsForgetDropped(live, nlive, read_at);
	pfree(live);
	return result;
}

/*
 * launcher_reap forgets the handles of workers that have stopped, freeing
 * their slots when the worker never claimed them, and frees slots that a
 * previous launcher registered but whose worker never came.
 */
static void
launcher_reap(TimestampTz now)
{
	int			i;

	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		BgwHandleStatus status;
		pid_t		pid;

		if (launcher_handles[i] == NULL)
			continue;
		status = GetBackgroundWorkerPid(launcher_handles[i], &pid);
		if (status == BGWH_POSTMASTER_DIED)
			proc_exit(1);
		if (status != BGWH_STOPPED)
			continue;

		LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
		if (WfShmem->workers[i].dboid == launcher_handle_db[i] &&
			WfShmem->workers[i].pid == 0)
			WfClearSlot(&WfShmem->workers[i]);
		LWLockRelease(WfShmem->lock);
		pfree(launcher_handles[i]);
		launcher_handles[i] = NULL;
		launcher_handle_db[i] = InvalidOid;
	}

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		WfDbWorkerSlot *slot = &WfShmem->workers[i];

		if (OidIsValid(slot->dboid) && slot->pid == 0 &&
			launcher_handles[i] == NULL &&
			TimestampDifferenceExceeds(slot->started_at, now, WF_PENDING_STALE_MS))
			WfClearSlot(slot);
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * launcher_forget_starts drops the start times that no longer hold back a
 * restart, so the table stays as small as the set of recent starts.
 */
static void
launcher_forget_starts(TimestampTz now)
{
	HASH_SEQ_STATUS status;
	WfStartEntry *entry;

	hash_seq_init(&status, launcher_starts);
	while ((entry = (WfStartEntry *) hash_seq_search(&status)) != NULL)
	{
		if (TimestampDifferenceExceeds(entry->last_start, now, WF_WORKER_RESTART_DELAY_MS))
			(void) hash_search(launcher_starts, &entry->dboid, HASH_REMOVE, NULL);
	}
}

/*
 * launcher_listed tells whether a database is in a WfDbEntry list.
 */
static bool
launcher_listed(List *dbs, Oid dboid)
{
	ListCell   *lc;

	foreach(lc, dbs)
	{
		if (((WfDbEntry *) lfirst(lc))->dboid == dboid)
			return true;
	}
	return false;
}

/*
 * launcher_stop_unwanted terminates the workers of databases that are no
 * longer to be served (dropped from wfengine.databases, made a template,
 * closed to connections).
 */
static void
launcher_stop_unwanted(List *dbs)
{
	int			i;

	LWLockAcquire(WfShmem->lock, LW_SHARED);
	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		WfDbWorkerSlot *slot = &WfShmem->workers[i];

		if (OidIsValid(slot->dboid) && slot->pid != 0 &&
			!launcher_listed(dbs, slot->dboid))
		{
			elog(DEBUG1, "wfengine launcher: stopping the worker of database %u",
				 slot->dboid);
			if (kill(slot->pid, SIGTERM) != 0 && errno != ESRCH)
				elog(DEBUG1, "could not send SIGTERM to process %d: %m",
					 (int) slot->pid);
		}
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * launcher_start_worker registers the worker of one database in slot
 * slotno, which the caller has filled in.  Returns false (and frees the
 * slot) when the postmaster has no background worker slot left.
 */
static bool
launcher_start_worker(int slotno, WfDbEntry *db)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	MemoryContext oldcxt;
	bool		ok;

	launcher_describe(&worker, "WfWorkerMain", BGW_NEVER_RESTART);
	snprintf(worker.bgw_name, BGW_MAXLEN, "wfengine worker for database %s",
			 NameStr(db->name));
	snprintf(worker.bgw_type, BGW_MAXLEN, "wfengine worker");
	worker.bgw_main_arg = Int32GetDatum(slotno);
	memcpy(worker.bgw_extra, &db->dboid, sizeof(Oid));
	worker.bgw_notify_pid = MyProcPid;

	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	ok = RegisterDynamicBackgroundWorker(&worker, &handle);
	MemoryContextSwitchTo(oldcxt);

	if (!ok)
	{
		LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
		if (WfShmem->workers[slotno].dboid == db->dboid &&
			WfShmem->workers[slotno].pid == 0)
			WfClearSlot(&WfShmem->workers[slotno]);
		LWLockRelease(WfShmem->lock);
		return false;
	}
	launcher_handles[slotno] = handle;
	launcher_handle_db[slotno] = db->dboid;
	pg_atomic_fetch_add_u64(&WfWorkers->launcher_starts, 1);
	elog(DEBUG1, "wfengine launcher: started a worker for database \"%s\"",
		 NameStr(db->name));
	return true;
}

/*
 * launcher_expire_notes forgets, in every note, a missing extension seen
 * longer than absent_ms ago and a pause that has ended, and frees the
 * notes left saying nothing.
 */
static void
launcher_expire_notes(TimestampTz now, long absent_ms)
{
	int			i;

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	for (i = 0; i < WF_MAX_DB_NOTES; i++)
	{
		WfDbNote   *note = &WfWorkers->notes[i];

		if (!OidIsValid(note->dboid))
			continue;
		if (note->absent && TimestampDifferenceExceeds(note->absent_since, now, absent_ms))
			note->absent = false;
		WfNoteForgetIfEmpty(note, now);
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * launcher_needs_worker tells whether a database needs a worker started
 * now: it has none (running or about to), is neither paused by DDL nor
 * known to lack the extension, and its worker was not started less than
 * WF_WORKER_RESTART_DELAY_MS ago.  A pause or a restart delay that ends
 * before *wake brings *wake forward.
 */
static bool
launcher_needs_worker(WfDbEntry *db, TimestampTz now, TimestampTz *wake)
{
	WfStartEntry *start;
	WfDbNote   *note;
	bool		needed = true;
	int			i;

	/* does it need a worker now? */
	LWLockAcquire(WfShmem->lock, LW_SHARED);
	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		if (WfShmem->workers[i].dboid == db->dboid)
		{
			needed = false;		/* it has one, running or about to */
			break;
		}
	}
	note = needed ? WfNoteFind(db->dboid) : NULL;
	if (note != NULL && note->paused_until > now)
	{
		if (note->paused_until < *wake)
			*wake = note->paused_until;
		needed = false;
	}
	else if (note != NULL && note->absent)
		needed = false;
	LWLockRelease(WfShmem->lock);
	if (!needed)
		return false;

	/* not more often than every WF_WORKER_RESTART_DELAY_MS */
	start = (WfStartEntry *) hash_search(launcher_starts, &db->dboid,
										 HASH_FIND, NULL);
	if (start != NULL &&
		!TimestampDifferenceExceeds(start->last_start, now, WF_WORKER_RESTART_DELAY_MS))
	{
		TimestampTz next = TimestampTzPlusMilliseconds(start->last_start,
													   WF_WORKER_RESTART_DELAY_MS);

		if (next < *wake)
			*wake = next;
		return false;
	}
	return true;
}

/*
 * launcher_take_slot takes a free worker slot for a database and fills it
 * in ("registered, not yet running"); only the launcher does, so nobody
 * races us.  Returns the slot number, or -1 when every slot is taken.
 */
static int
launcher_take_slot(WfDbEntry *db, TimestampTz now)
{
	int			slotno = -1;
	int			i;

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		WfDbWorkerSlot *slot = &WfShmem->workers[i];

		if (!OidIsValid(slot->dboid) && launcher_handles[i] == NULL)
		{
			slotno = i;
			slot->dboid = db->dboid;
			slot->pid = 0;
			slot->latch = NULL;
			slot->started_at = now;
			pg_atomic_write_u64(&slot->next_due, 0);
			pg_atomic_write_u64(&slot->ticks, 0);
			pg_atomic_write_u64(&slot->fired, 0);
			pg_atomic_write_u64(&slot->relay_dropped_total, 0);
			WfRelayReset(slot, db->dboid);
			break;
		}
	}
	LWLockRelease(WfShmem->lock);
	return slotno;
}

/*
 * launcher_scan does one pass of the launcher: reap, read pg_database,
 * stop workers that are no longer wanted, start the missing ones.  It
 * returns when the launcher should look again, at the latest one launcher
 * naptime from now.
 */
static TimestampTz
launcher_scan(void)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz wake = TimestampTzPlusMilliseconds(now, wf_launcher_naptime * 1000L);
	long		absent_ms = WF_ABSENT_RECHECK_NAPTIMES * wf_launcher_naptime * 1000L;
	List	   *dbs;
	ListCell   *lc;

	launcher_reap(now);
	launcher_forget_starts(now);
	dbs = launcher_database_list();
	launcher_stop_unwanted(dbs);
	pg_atomic_fetch_add_u64(&WfWorkers->launcher_scans, 1);

	now = GetCurrentTimestamp();

	launcher_expire_notes(now, absent_ms);

	foreach(lc, dbs)
	{
		WfDbEntry  *db = (WfDbEntry *) lfirst(lc);
		WfStartEntry *start;
		int			slotno;

		if (!launcher_needs_worker(db, now, &wake))
			continue;

		slotno = launcher_take_slot(db, now);
		if (slotno < 0)
		{
			if (launcher_may_warn(now))
				ereport(WARNING,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("wfengine cannot serve more than %d databases",
								WF_MAX_DB_WORKERS),
						 errdetail("No worker was started for database \"%s\".",
								   NameStr(db->name)),
						 errhint("Restrict the databases served with \"%s\".",
								 "wfengine.databases")));
			break;
		}

		start = (WfStartEntry *) hash_search(launcher_starts, &db->dboid,
											 HASH_ENTER, NULL);
		start->last_start = now;
		if (!launcher_start_worker(slotno, db))
		{
			TimestampTz retry = TimestampTzPlusMilliseconds(now, WF_WORKER_RESTART_DELAY_MS);

			if (launcher_may_warn(now))
				ereport(WARNING,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("could not register a wfengine worker for database \"%s\"",
								NameStr(db->name)),
						 errhint("You might need to increase \"%s\".",
								 "max_worker_processes")));
			if (retry < wake)
				wake = retry;
			break;
		}
	}

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	WfWorkers->launcher_next_scan = wake;
	LWLockRelease(WfShmem->lock);
	return wake;
}

/*
 * WfLauncherMain is the launcher's entry point.  It connects to no
 * database, publishes its latch, and scans pg_database whenever its latch
 * is set (a worker started or stopped, CREATE EXTENSION, DDL on a
 * database, SIGHUP) or the launcher naptime has passed.
 */
void
WfLauncherMain(Datum main_arg)
{
	MemoryContext scancxt;
	HASHCTL		ctl;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("wfengine launcher");

	if (WfShmem == NULL || WfWorkers == NULL)
		elog(FATAL, "wfengine shared memory is not initialised");

	on_shmem_exit(launcher_detach, (Datum) 0);
	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	if (WfShmem->launcher_pid != 0)
	{
		pid_t		other = WfShmem->launcher_pid;

		LWLockRelease(WfShmem->lock);
		ereport(LOG,
				(errmsg("wfengine launcher already running with PID %d, exiting",
						(int) other)));
		proc_exit(0);
	}
	WfShmem->launcher_pid = MyProcPid;
	WfShmem->launcher_latch = MyLatch;
	WfWorkers->launcher_started_at = GetCurrentTimestamp();
	LWLockRelease(WfShmem->lock);

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(WfStartEntry);
	launcher_starts = hash_create("wfengine worker starts", 64, &ctl,
								  HASH_ELEM | HASH_BLOBS);

	scancxt = AllocSetContextCreate(TopMemoryContext, "wfengine launcher scan",
									ALLOCSET_DEFAULT_SIZES);

	ereport(LOG, (errmsg("wfengine launcher started")));

	for (;;)
	{
		TimestampTz wake;
		long		timeout;
		MemoryContext oldcxt;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		oldcxt = MemoryContextSwitchTo(scancxt);
		wake = launcher_scan();
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(scancxt);

		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), wake);
		if (timeout < 10)
			timeout = 10;		/* a restart delay just expired: don't spin */
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, WfWaitEvent());
		ResetLatch(MyLatch);
	}
}


/* ------------------------------------------------------------------------
 * wf.worker_status()
 * ------------------------------------------------------------------------
 */

/*
 * worker_status_row puts one row of wf.worker_status() into the result,
 * cut to the columns its SQL definition has: the definition of 0.1.0 has
 * the first WF_STATUS_V1_COLUMNS only (an old schema served by this
 * library).
 */
#define WF_STATUS_COLUMNS 10
#define WF_STATUS_V1_COLUMNS 7

static void
worker_status_row(ReturnSetInfo *rsinfo, Datum *values, bool *nulls)
{
	if (rsinfo->setDesc->natts != WF_STATUS_COLUMNS &&
		rsinfo->setDesc->natts != WF_STATUS_V1_COLUMNS)
		elog(ERROR, "wf.worker_status() has %d columns, not %d",
			 rsinfo->setDesc->natts, WF_STATUS_COLUMNS);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * wfengine_worker_status is wf.worker_status(): one row for the launcher
 * (database NULL; next_due is its next scan, ticks the scans done, fired
 * the workers started) and one per worker slot (pid NULL while the worker
 * has not started yet), with what its last tick left for a lock
 * (due_locked, due_locked_since) and the notifications the relay dropped
 * for its database since the worker slot was taken.  It reads shared
 * memory only; without preload it returns no rows.
 */
Datum
wfengine_worker_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WfDbWorkerSlot slots[WF_MAX_DB_WORKERS];
	uint64		ticks[WF_MAX_DB_WORKERS];
	uint64		fired[WF_MAX_DB_WORKERS];
	uint64		due[WF_MAX_DB_WORKERS];
	uint64		locked[WF_MAX_DB_WORKERS];
	uint64		locked_since[WF_MAX_DB_WORKERS];
	uint64		dropped[WF_MAX_DB_WORKERS];
	pid_t		launcher_pid;
	TimestampTz launcher_started_at;
	TimestampTz launcher_next_scan;
	int			i;

	InitMaterializedSRF(fcinfo, 0);

	if (WfShmem == NULL || WfWorkers == NULL)
		return (Datum) 0;

	LWLockAcquire(WfShmem->lock, LW_SHARED);
	launcher_pid = WfShmem->launcher_pid;
	launcher_started_at = WfWorkers->launcher_started_at;
	launcher_next_scan = WfWorkers->launcher_next_scan;
	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		WfDbWorkerSlot *w = &WfShmem->workers[i];

		slots[i].dboid = w->dboid;
		slots[i].pid = w->pid;
		slots[i].started_at = w->started_at;
		due[i] = pg_atomic_read_u64(&w->next_due);
		ticks[i] = pg_atomic_read_u64(&w->ticks);
		fired[i] = pg_atomic_read_u64(&w->fired);
		locked[i] = pg_atomic_read_u64(&w->due_locked);
		locked_since[i] = pg_atomic_read_u64(&w->due_locked_since);
		dropped[i] = pg_atomic_read_u64(&w->relay_dropped_total);
	}
	LWLockRelease(WfShmem->lock);

	if (launcher_pid != 0)
	{
		Datum		values[WF_STATUS_COLUMNS];
		bool		nulls[WF_STATUS_COLUMNS];

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum("launcher");
		nulls[1] = true;
		values[2] = Int32GetDatum((int32) launcher_pid);
		values[3] = TimestampTzGetDatum(launcher_started_at);
		nulls[3] = (launcher_started_at == 0);
		values[4] = TimestampTzGetDatum(launcher_next_scan);
		nulls[4] = (launcher_next_scan == 0);
		values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&WfWorkers->launcher_scans));
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&WfWorkers->launcher_starts));
		/* the launcher fires nothing and relays nothing */
		nulls[7] = nulls[8] = nulls[9] = true;
		worker_status_row(rsinfo, values, nulls);
	}

	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		Datum		values[WF_STATUS_COLUMNS];
		bool		nulls[WF_STATUS_COLUMNS];
		char	   *dbname;

		if (!OidIsValid(slots[i].dboid))
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum("worker");
		dbname = get_database_name(slots[i].dboid);
		if (dbname != NULL)
			values[1] = CStringGetTextDatum(dbname);
		else
			nulls[1] = true;
		values[2] = Int32GetDatum((int32) slots[i].pid);
		nulls[2] = (slots[i].pid == 0);
		values[3] = TimestampTzGetDatum(slots[i].started_at);
		nulls[3] = (slots[i].pid == 0 || slots[i].started_at == 0);
		values[4] = TimestampTzGetDatum((TimestampTz) due[i]);
		nulls[4] = (due[i] == 0);
		values[5] = Int64GetDatum((int64) ticks[i]);
		values[6] = Int64GetDatum((int64) fired[i]);
		values[7] = Int64GetDatum((int64) locked[i]);
		values[8] = TimestampTzGetDatum((TimestampTz) locked_since[i]);
		nulls[8] = (locked_since[i] == 0);
		values[9] = Int64GetDatum((int64) dropped[i]);
		worker_status_row(rsinfo, values, nulls);
	}

	return (Datum) 0;
}
