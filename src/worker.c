/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The launcher and the per-database engine workers.
 *
 * Processes.  When wfengine is preloaded, _PG_init registers one static
 * background worker, the launcher ("wfengine launcher").  It starts only
 * once recovery has finished, so nothing runs on a hot standby and
 * everything starts after promotion.  It connects to no database and reads
 * pg_database, a shared catalog, every wfengine.launcher_naptime or when
 * its latch is set, and starts one dynamic worker ("wfengine worker") for
 * every connectable, non-template database (or only those named in
 * wfengine.databases).  A worker that finds no wfengine extension in its
 * database exits at once; the launcher remembers that and does not try
 * that database again until CREATE EXTENSION wakes it (at commit, through
 * wf._wake_launcher() in the install script) or 10 launcher naptimes have
 * passed.  So the extension's presence is discovered by the workers, which
 * can read pg_extension, and not by the launcher, which cannot.
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
 * Waking.  A worker sleeps on its latch until the earliest pending timer
 * (as WfTimerTick reports it) or wfengine.naptime, whichever comes first,
 * and publishes that moment in its slot's next_due; see worker.h for the
 * protocol that lets a committer wake it only when it wrote something
 * sooner.  A tick that fired a full batch is followed at once by another.
 *
 * DDL on databases.  DROP DATABASE, ALTER DATABASE RENAME/SET TABLESPACE
 * and CREATE DATABASE ... TEMPLATE fail on PostgreSQL 15 while any other
 * backend is connected to the database concerned.  A ProcessUtility hook
 * therefore pauses the database (a note in this file's own piece of
 * shared memory that keeps the launcher from starting a worker there),
 * terminates its worker and waits for it to be gone (at most 10 s), runs
 * the statement, and lifts the pause 5 s after the statement ended.  It
 * does so only for the database's owner (or a superuser), who could run
 * the statement anyway.  DROP EXTENSION wfengine wakes the worker at
 * commit; it then finds the extension gone and exits.  Each tick holds
 * AccessShareLock on the extension object, so DROP EXTENSION waits for a
 * running tick instead of pulling the tables from under it.
 *
 * Shared state of our own.  The pause and "no extension here" notes, the
 * launcher's counters and a count of CREATE EXTENSION commits (which
 * closes the race between a worker finding no extension and the CREATE
 * EXTENSION that commits just after its snapshot) live in a small struct
 * of this file (WfWorkerShared), also protected by WfShmem->lock.
 *
 * Errors.  Each tick is one short transaction.  An error in it is logged
 * (rate-limited), the transaction is aborted and the worker retries after
 * a growing delay of 1 to 10 s; one bad tick never kills the worker.
 * WfTimerTick isolates individual timers in subtransactions.  An error in
 * the launcher ends it, and the postmaster restarts it after
 * WF_LAUNCHER_RESTART_S seconds; that is safe because a new launcher
 * adopts the slots it finds.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/worker.c
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
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "nodes/parsenodes.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/varlena.h"
#if PG_VERSION_NUM >= 170000
#include "utils/wait_event.h"
#endif

#include "guc.h"
#include "notify.h"
#include "shmem.h"
#include "timer.h"
#include "worker.h"

/* constants */
#define WF_LAUNCHER_RESTART_S		5	/* bgw_restart_time of the launcher */
#define WF_WORKER_RESTART_DELAY_MS	2000	/* least time between two starts
											 * of one database's worker */
#define WF_PENDING_STALE_MS			60000	/* a slot never claimed by its
											 * worker is freed after this */
#define WF_ABSENT_RECHECK_NAPTIMES	10	/* re-probe a database without the
										 * extension after this many
										 * launcher naptimes */
#define WF_DDL_WAIT_MS				10000	/* how long DDL waits for a worker
											 * to exit */
#define WF_DDL_POLL_MS				50
#define WF_DDL_GRACE_MS				5000	/* the pause outlives the DDL
											 * statement by this much */
#define WF_ERROR_DELAY_MAX_MS		10000	/* longest sleep after a failed
											 * tick */
#define WF_STUCK_DELAY_MS			1000	/* sleep when something is due
											 * but nothing could be fired */
#define WF_LOG_INTERVAL_MS			60000	/* rate limit of repeated
											 * warnings */
#define WF_MAX_DB_NOTES				(4 * WF_MAX_DB_WORKERS)

/*
 * What the launcher must know about a database beyond its worker slot.
 * Lives in this file's piece of shared memory and is protected by
 * WfShmem->lock.
 */
typedef struct WfDbNote
{
	Oid			dboid;			/* InvalidOid when the entry is free */
	TimestampTz paused_until;	/* start no worker before this (DDL) */
	pid_t		paused_by;		/* the backend running that DDL */
	bool		absent;			/* the extension was missing at last look */
	TimestampTz absent_since;	/* when the worker found it missing */
} WfDbNote;

typedef struct WfWorkerShared
{
	TimestampTz launcher_started_at;	/* start of the running launcher */
	TimestampTz launcher_next_scan; /* when the launcher wakes up by itself */
	pg_atomic_uint64 launcher_scans;	/* scans of pg_database done */
	pg_atomic_uint64 launcher_starts;	/* workers registered */
	pg_atomic_uint64 creations; /* CREATE EXTENSION commits, any database */
	WfDbNote	notes[WF_MAX_DB_NOTES];
} WfWorkerShared;

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

/* shared memory state */
static WfWorkerShared *WfWorkers = NULL;

/* hooks */
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ProcessUtility_hook_type prev_process_utility_hook = NULL;

/* launcher-local state */
static BackgroundWorkerHandle *launcher_handles[WF_MAX_DB_WORKERS];
static Oid	launcher_handle_db[WF_MAX_DB_WORKERS];
static HTAB *launcher_starts = NULL;
static TimestampTz launcher_last_warning = 0;
static char *launcher_bad_databases = NULL; /* last unparsable setting */

/* worker-local state */
static bool worker_found_no_extension = false;
static uint64 worker_creations_seen = 0;	/* WfWorkers->creations before
											 * the last tick's snapshot */
static char *worker_dbname = NULL;
static int	worker_failed_ticks = 0;
static int	worker_unlogged_errors = 0;
static TimestampTz worker_last_error_log = 0;

/* backend-local state of the commit-time wake-ups */
static bool xact_callback_registered = false;
static bool wake_launcher_at_commit = false;
static bool wake_worker_at_commit = false;
static bool ddl_exit_callback_registered = false;

PG_FUNCTION_INFO_V1(wfengine_worker_status);
PG_FUNCTION_INFO_V1(wfengine_wake_launcher);

/* forward declarations */
static void wf_worker_shmem_request(void);
static void wf_worker_shmem_startup(void);
static void wf_process_utility(PlannedStmt *pstmt, const char *queryString,
							   bool readOnlyTree, ProcessUtilityContext context,
							   ParamListInfo params, QueryEnvironment *queryEnv,
							   DestReceiver *dest, QueryCompletion *qc);
static void wf_xact_callback(XactEvent event, void *arg);
static uint32 wf_wait_event(void);
static void clear_slot(WfDbWorkerSlot *slot);
static WfDbNote *note_find(Oid dboid);
static WfDbNote *note_get(Oid dboid);
static void note_forget_if_empty(WfDbNote *note, TimestampTz now);


/* ------------------------------------------------------------------------
 * Registration and shared memory
 * ------------------------------------------------------------------------
 */

/*
 * WfWorkerInit registers the launcher, this file's shared memory and the
 * ProcessUtility hook.  _PG_init calls it only while the library is being
 * preloaded (and never in binary upgrade mode).
 */
void
WfWorkerInit(void)
{
	BackgroundWorker worker;

	if (IsBinaryUpgrade || !process_shared_preload_libraries_in_progress)
		return;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = wf_worker_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = wf_worker_shmem_startup;

	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = wf_process_utility;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = WF_LAUNCHER_RESTART_S;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "wfengine");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "WfLauncherMain");
	snprintf(worker.bgw_name, BGW_MAXLEN, "wfengine launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "wfengine launcher");
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/*
 * wf_worker_shmem_request asks for this file's piece of shared memory.
 */
static void
wf_worker_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(WfWorkerShared)));
}

/*
 * wf_worker_shmem_startup creates or attaches to it.  It runs after
 * shmem.c's hook (registered earlier, so called first), but uses
 * WfShmem->lock only later, at run time.
 */
static void
wf_worker_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	WfWorkers = ShmemInitStruct("wfengine workers", sizeof(WfWorkerShared), &found);
	if (!found)
	{
		memset(WfWorkers, 0, sizeof(WfWorkerShared));
		pg_atomic_init_u64(&WfWorkers->launcher_scans, 0);
		pg_atomic_init_u64(&WfWorkers->launcher_starts, 0);
		pg_atomic_init_u64(&WfWorkers->creations, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * wf_wait_event returns the wait event the launcher and the workers sleep
 * under: a named one on PostgreSQL 17+, else PG_WAIT_EXTENSION.
 */
static uint32
wf_wait_event(void)
{
#if PG_VERSION_NUM >= 170000
	static uint32 event = 0;

	if (event == 0)
		event = WaitEventExtensionNew("WfengineMain");
	return event;
#else
	return PG_WAIT_EXTENSION;
#endif
}

/*
 * clear_slot frees a worker slot.  The caller holds WfShmem->lock
 * exclusively.
 */
static void
clear_slot(WfDbWorkerSlot *slot)
{
	slot->dboid = InvalidOid;
	slot->pid = 0;
	slot->latch = NULL;
	slot->started_at = 0;
	pg_atomic_write_u64(&slot->next_due, 0);
}

/*
 * note_find returns the note of a database, or NULL.  The caller holds
 * WfShmem->lock.
 */
static WfDbNote *
note_find(Oid dboid)
{
	int			i;

	for (i = 0; i < WF_MAX_DB_NOTES; i++)
		if (WfWorkers->notes[i].dboid == dboid)
			return &WfWorkers->notes[i];
	return NULL;
}

/*
 * note_get returns the note of a database, making a new one if needed.
 * When the table is full the oldest "absent" note is given up (which only
 * makes the launcher probe that database again); NULL when every entry is
 * a pause.  The caller holds WfShmem->lock exclusively.
 */
static WfDbNote *
note_get(Oid dboid)
{
	WfDbNote   *note = note_find(dboid);
	WfDbNote   *victim = NULL;
	int			i;

	if (note != NULL)
		return note;
	for (i = 0; i < WF_MAX_DB_NOTES; i++)
	{
		WfDbNote   *n = &WfWorkers->notes[i];

		if (n->dboid == InvalidOid)
		{
			victim = n;
			break;
		}
		if (n->absent && n->paused_until == 0 &&
			(victim == NULL || n->absent_since < victim->absent_since))
			victim = n;
	}
	if (victim == NULL)
		return NULL;
	memset(victim, 0, sizeof(WfDbNote));
	victim->dboid = dboid;
	return victim;
}

/*
 * note_forget_if_empty frees a note that no longer says anything: no
 * pause in force and the extension not known to be missing.  The caller
 * holds WfShmem->lock exclusively.
 */
static void
note_forget_if_empty(WfDbNote *note, TimestampTz now)
{
	if (note->paused_until != 0 && note->paused_until <= now)
		note->paused_until = 0;
	if (!note->absent && note->paused_until == 0)
		memset(note, 0, sizeof(WfDbNote));
}


/* ------------------------------------------------------------------------
 * Waking up
 * ------------------------------------------------------------------------
 */

/*
 * WfWakeLauncher sets the launcher's latch.  Anyone may call it; it does
 * nothing when the library is not preloaded or the launcher is not
 * running.
 */
void
WfWakeLauncher(void)
{
	Latch	   *latch;

	if (WfShmem == NULL)
		return;
	LWLockAcquire(WfShmem->lock, LW_SHARED);
	latch = WfShmem->launcher_latch;
	if (latch != NULL)
		SetLatch(latch);
	LWLockRelease(WfShmem->lock);
}

/*
 * WfWakeWorker sets the latch of the worker of a database when it would
 * otherwise sleep past fire_at (fire_at 0: always).  Called after commit,
 * once what the worker must see is visible; see worker.h.
 */
void
WfWakeWorker(Oid dboid, TimestampTz fire_at)
{
	int			i;

	if (WfShmem == NULL || !OidIsValid(dboid))
		return;
	/* pairs with the barrier after the worker publishes next_due = 0 */
	pg_memory_barrier();
	LWLockAcquire(WfShmem->lock, LW_SHARED);
	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		WfDbWorkerSlot *slot = &WfShmem->workers[i];
		uint64		due;

		if (slot->dboid != dboid || slot->latch == NULL)
			continue;
		due = pg_atomic_read_u64(&slot->next_due);
		if (fire_at == 0 || due == 0 || (TimestampTz) due > fire_at)
			SetLatch(slot->latch);
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * wf_xact_callback sends the wake-ups that a transaction asked for, once
 * it has committed: the launcher after CREATE EXTENSION (forgetting that
 * this database had no extension), this database's worker after DROP
 * EXTENSION.  Nothing here may fail.
 */
static void
wf_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_launcher_at_commit && WfShmem != NULL && WfWorkers != NULL)
			{
				WfDbNote   *note;

				/* a worker that just missed this commit must not say "absent" */
				pg_atomic_fetch_add_u64(&WfWorkers->creations, 1);
				LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
				note = note_find(MyDatabaseId);
				if (note != NULL)
				{
					note->absent = false;
					note_forget_if_empty(note, GetCurrentTimestamp());
				}
				LWLockRelease(WfShmem->lock);
				WfWakeLauncher();
			}
			if (wake_worker_at_commit)
				WfWakeWorker(MyDatabaseId, 0);
			wake_launcher_at_commit = false;
			wake_worker_at_commit = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			wake_launcher_at_commit = false;
			wake_worker_at_commit = false;
			break;
		default:
			break;
	}
}

/*
 * register_xact_callback installs wf_xact_callback once per backend.
 */
static void
register_xact_callback(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(wf_xact_callback, NULL);
		xact_callback_registered = true;
	}
}

/*
 * wfengine_wake_launcher is wf._wake_launcher(), internal: the install
 * script calls it so that the launcher starts this database's worker as
 * soon as CREATE EXTENSION commits.  Without preload it does nothing.
 */
Datum
wfengine_wake_launcher(PG_FUNCTION_ARGS)
{
	if (WfShmem != NULL && WfWorkers != NULL)
	{
		register_xact_callback();
		wake_launcher_at_commit = true;
	}
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

	names = launcher_wanted_names(&filter);
	if (filter && names == NIL)
		return NIL;

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
			clear_slot(&WfShmem->workers[i]);
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
			clear_slot(slot);
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

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "wfengine");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "WfWorkerMain");
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
			clear_slot(&WfShmem->workers[slotno]);
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
	int			i;

	launcher_reap(now);
	launcher_forget_starts(now);
	dbs = launcher_database_list();
	launcher_stop_unwanted(dbs);
	pg_atomic_fetch_add_u64(&WfWorkers->launcher_scans, 1);

	now = GetCurrentTimestamp();

	/* expire old notes */
	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	for (i = 0; i < WF_MAX_DB_NOTES; i++)
	{
		WfDbNote   *note = &WfWorkers->notes[i];

		if (!OidIsValid(note->dboid))
			continue;
		if (note->absent && TimestampDifferenceExceeds(note->absent_since, now, absent_ms))
			note->absent = false;
		note_forget_if_empty(note, now);
	}
	LWLockRelease(WfShmem->lock);

	foreach(lc, dbs)
	{
		WfDbEntry  *db = (WfDbEntry *) lfirst(lc);
		WfStartEntry *start;
		WfDbNote   *note;
		bool		needed = true;
		int			slotno = -1;

		/* does it need a worker now? */
		LWLockAcquire(WfShmem->lock, LW_SHARED);
		for (i = 0; i < WF_MAX_DB_WORKERS; i++)
		{
			if (WfShmem->workers[i].dboid == db->dboid)
			{
				needed = false; /* it has one, running or about to */
				break;
			}
		}
		note = needed ? note_find(db->dboid) : NULL;
		if (note != NULL && note->paused_until > now)
		{
			if (note->paused_until < wake)
				wake = note->paused_until;
			needed = false;
		}
		else if (note != NULL && note->absent)
			needed = false;
		LWLockRelease(WfShmem->lock);
		if (!needed)
			continue;

		/* not more often than every WF_WORKER_RESTART_DELAY_MS */
		start = (WfStartEntry *) hash_search(launcher_starts, &db->dboid,
											 HASH_FIND, NULL);
		if (start != NULL &&
			!TimestampDifferenceExceeds(start->last_start, now, WF_WORKER_RESTART_DELAY_MS))
		{
			TimestampTz next = TimestampTzPlusMilliseconds(start->last_start,
														   WF_WORKER_RESTART_DELAY_MS);

			if (next < wake)
				wake = next;
			continue;
		}

		/* take a free slot; only the launcher does, so nobody races us */
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
				break;
			}
		}
		LWLockRelease(WfShmem->lock);

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
						 timeout, wf_wait_event());
		ResetLatch(MyLatch);
	}
}


/* ------------------------------------------------------------------------
 * The per-database worker
 * ------------------------------------------------------------------------
 */

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
		clear_slot(slot);
		if (worker_found_no_extension &&
			pg_atomic_read_u64(&WfWorkers->creations) == worker_creations_seen)
		{
			WfDbNote   *note = note_get(dboid);

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
 * worker_tick runs one tick in its own transaction: it checks that the
 * extension is installed and keeps it so until commit (else it sets
 * *absent and fires nothing) and,
 * when wfengine.enabled, fires up to wfengine.timer_batch due timers.
 * *fired is how many were fired, *next_due the earliest pending due time
 * (0: none).  Errors propagate to the caller.
 */
static void
worker_tick(int *fired, TimestampTz *next_due, bool *absent)
{
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
	else if (wf_enabled)
	{
		*fired = WfTimerTick(wf_timer_batch, next_due);
		/* notifications that committed transactions handed to us */
		(void) WfRelaySend(WfWorkerSlotFor(MyDatabaseId));
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
	WfDbNote   *note;
	bool		claimed = false;
	bool		announced = false;
	MemoryContext loopcxt;

	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	if (WfShmem == NULL || WfWorkers == NULL)
		elog(FATAL, "wfengine shared memory is not initialised");
	if (slotno < 0 || slotno >= WF_MAX_DB_WORKERS || !OidIsValid(dboid))
		elog(FATAL, "wfengine worker started with invalid arguments");

	/*
	 * Claim the slot before connecting, so that the slot is freed even when
	 * the connection fails.  Give up when another worker of this database
	 * has it, or when DDL on the database paused it meanwhile.
	 */
	slot = &WfShmem->workers[slotno];
	on_shmem_exit(worker_detach, Int32GetDatum(slotno));
	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	note = note_find(dboid);
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

	loopcxt = AllocSetContextCreate(TopMemoryContext, "wfengine worker loop",
									ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(loopcxt);

	for (;;)
	{
		int			fired = 0;
		TimestampTz next_due = 0;
		bool		absent = false;
		TimestampTz now;
		TimestampTz wake;
		long		timeout;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/*
		 * Awake: anything committed from now on must wake us again (see
		 * worker.h), since this tick's snapshot may not see it.
		 */
		pg_atomic_write_u64(&slot->next_due, 0);
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
			if (!announced)
			{
				ereport(LOG,
						(errmsg("wfengine worker started for database \"%s\"",
								worker_dbname ? worker_dbname : "?")));
				announced = true;
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
			wake = TimestampTzPlusMilliseconds(now, (long) wf_naptime);
			if (next_due != 0 && next_due < wake)
				wake = next_due;
			timeout = TimestampDifferenceMilliseconds(now, wake);

			/* a full batch: more may be due, go again at once */
			if (fired >= wf_timer_batch)
				timeout = 0;
			/* due, but nothing could be fired: do not spin */
			else if (timeout == 0 && fired == 0)
			{
				timeout = WF_STUCK_DELAY_MS;
				wake = TimestampTzPlusMilliseconds(now, timeout);
			}
		}
		else
		{
			int			shift = Min(worker_failed_ticks - 1, 4);

			timeout = Min(1000L << shift, WF_ERROR_DELAY_MAX_MS);
			now = GetCurrentTimestamp();
			wake = TimestampTzPlusMilliseconds(now, timeout);
		}

		MemoryContextReset(loopcxt);

		if (timeout > 0)
		{
			pg_atomic_write_u64(&slot->next_due, (uint64) wake);
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout, wf_wait_event());
			ResetLatch(MyLatch);
		}
	}
}


/* ------------------------------------------------------------------------
 * DDL on databases
 * ------------------------------------------------------------------------
 */

/*
 * ddl_target_database returns the name of the database whose other
 * connections make a utility statement fail, or NULL.
 */
static const char *
ddl_target_database(Node *parsetree)
{
	ListCell   *lc;

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			return ((DropdbStmt *) parsetree)->dbname;
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
				return ((RenameStmt *) parsetree)->subname;
			return NULL;
		case T_AlterDatabaseStmt:
			foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
			{
				DefElem    *def = lfirst_node(DefElem, lc);

				if (strcmp(def->defname, "tablespace") == 0)
					return ((AlterDatabaseStmt *) parsetree)->dbname;
			}
			return NULL;
		case T_CreatedbStmt:
			foreach(lc, ((CreatedbStmt *) parsetree)->options)
			{
				DefElem    *def = lfirst_node(DefElem, lc);

				if (strcmp(def->defname, "template") == 0 && def->arg != NULL)
					return defGetString(def);
			}
			return NULL;
		default:
			return NULL;
	}
}

/*
 * is_drop_of_wfengine tells whether a statement is DROP EXTENSION naming
 * wfengine.
 */
static bool
is_drop_of_wfengine(Node *parsetree)
{
	DropStmt   *stmt;
	ListCell   *lc;

	if (!IsA(parsetree, DropStmt))
		return false;
	stmt = (DropStmt *) parsetree;
	if (stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, stmt->objects)
	{
		Node	   *obj = (Node *) lfirst(lc);

		if (IsA(obj, String) && strcmp(strVal(obj), "wfengine") == 0)
			return true;
	}
	return false;
}

/*
 * ddl_release_pauses ends the pauses this backend still holds, 5 s from
 * now; an on_shmem_exit callback for a backend that is terminated (FATAL)
 * while it runs DDL on a database, so that the pause does not outlive it.
 */
static void
ddl_release_pauses(int code, Datum arg)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													WF_DDL_GRACE_MS);
	int			i;

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	for (i = 0; i < WF_MAX_DB_NOTES; i++)
	{
		WfDbNote   *note = &WfWorkers->notes[i];

		if (OidIsValid(note->dboid) && note->paused_by == MyProcPid)
		{
			note->paused_until = until;
			note->paused_by = 0;
		}
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * ddl_pause_database keeps the launcher from starting a worker for a
 * database (until ddl_unpause_database, or the exit of this backend),
 * terminates the worker it has, and waits for it to be gone, at most
 * WF_DDL_WAIT_MS.  Returns false when no pause could be recorded.  Two
 * backends pausing one database at once share the note, which the later
 * one owns; if that one finishes first, a worker may start early and then
 * wait on the other statement's lock on the database, which is harmless.
 */
static bool
ddl_pause_database(Oid dboid)
{
	TimestampTz start = GetCurrentTimestamp();
	pid_t		signalled = 0;
	WfDbNote   *note;

	if (!ddl_exit_callback_registered)
	{
		on_shmem_exit(ddl_release_pauses, (Datum) 0);
		ddl_exit_callback_registered = true;
	}

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	note = note_get(dboid);
	if (note != NULL)
	{
		note->paused_until = DT_NOEND;
		note->paused_by = MyProcPid;
	}
	LWLockRelease(WfShmem->lock);
	if (note == NULL)
		return false;

	for (;;)
	{
		bool		present = false;
		pid_t		pid = 0;
		int			i;

		LWLockAcquire(WfShmem->lock, LW_SHARED);
		for (i = 0; i < WF_MAX_DB_WORKERS; i++)
		{
			if (WfShmem->workers[i].dboid == dboid)
			{
				present = true;
				pid = WfShmem->workers[i].pid;
				break;
			}
		}
		LWLockRelease(WfShmem->lock);

		if (!present)
			break;
		if (pid != 0 && pid != signalled)
		{
			if (kill(pid, SIGTERM) != 0 && errno != ESRCH)
				elog(DEBUG1, "could not send SIGTERM to process %d: %m", (int) pid);
			signalled = pid;
		}
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), WF_DDL_WAIT_MS))
		{
			ereport(WARNING,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("wfengine worker of database %u did not exit in time",
							dboid)));
			break;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 WF_DDL_POLL_MS, wf_wait_event());
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * ddl_unpause_database lets the pause end WF_DDL_GRACE_MS from now (long
 * enough for the statement's transaction to commit) and wakes the
 * launcher, so that it starts the worker again if the database remains.
 */
static void
ddl_unpause_database(Oid dboid)
{
	WfDbNote   *note;

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	note = note_find(dboid);
	if (note != NULL && note->paused_by == MyProcPid)
	{
		note->paused_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 WF_DDL_GRACE_MS);
		note->paused_by = 0;
	}
	LWLockRelease(WfShmem->lock);
	WfWakeLauncher();
}

/*
 * wf_process_utility is the ProcessUtility hook (installed only when
 * preloaded).  Around DDL that needs a database free of other connections
 * it stops that database's worker; after DROP EXTENSION wfengine it wakes
 * this database's worker at commit.  Everything else passes through.
 */
static void
wf_process_utility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	Oid			paused = InvalidOid;

	if (WfShmem != NULL && WfWorkers != NULL)
	{
		const char *dbname = ddl_target_database(parsetree);

		if (dbname != NULL)
		{
			Oid			dboid = get_database_oid(dbname, true);

#if PG_VERSION_NUM >= 160000
			if (OidIsValid(dboid) &&
				object_ownercheck(DatabaseRelationId, dboid, GetUserId()) &&
				ddl_pause_database(dboid))
				paused = dboid;
#else
			if (OidIsValid(dboid) &&
				pg_database_ownercheck(dboid, GetUserId()) &&
				ddl_pause_database(dboid))
				paused = dboid;
#endif
		}
		else if (is_drop_of_wfengine(parsetree))
		{
			register_xact_callback();
			wake_worker_at_commit = true;
		}
	}

	if (!OidIsValid(paused))
	{
		if (prev_process_utility_hook)
			prev_process_utility_hook(pstmt, queryString, readOnlyTree, context,
									  params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
		return;
	}

	PG_TRY();
	{
		if (prev_process_utility_hook)
			prev_process_utility_hook(pstmt, queryString, readOnlyTree, context,
									  params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		ddl_unpause_database(paused);
	}
	PG_END_TRY();
}


/* ------------------------------------------------------------------------
 * wf.worker_status()
 * ------------------------------------------------------------------------
 */

/*
 * wfengine_worker_status is wf.worker_status(): one row for the launcher
 * (database NULL; next_due is its next scan, ticks the scans done, fired
 * the workers started) and one per worker slot (pid NULL while the worker
 * has not started yet).  It reads shared memory only; without preload it
 * returns no rows.
 */
Datum
wfengine_worker_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WfDbWorkerSlot slots[WF_MAX_DB_WORKERS];
	uint64		ticks[WF_MAX_DB_WORKERS];
	uint64		fired[WF_MAX_DB_WORKERS];
	uint64		due[WF_MAX_DB_WORKERS];
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
		slots[i].dboid = WfShmem->workers[i].dboid;
		slots[i].pid = WfShmem->workers[i].pid;
		slots[i].started_at = WfShmem->workers[i].started_at;
		due[i] = pg_atomic_read_u64(&WfShmem->workers[i].next_due);
		ticks[i] = pg_atomic_read_u64(&WfShmem->workers[i].ticks);
		fired[i] = pg_atomic_read_u64(&WfShmem->workers[i].fired);
	}
	LWLockRelease(WfShmem->lock);

	if (launcher_pid != 0)
	{
		Datum		values[7];
		bool		nulls[7];

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
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
	{
		Datum		values[7];
		bool		nulls[7];
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
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	return (Datum) 0;
}
