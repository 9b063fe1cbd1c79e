/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Shared memory of wfengine.
 *
 * The launcher and the per-database workers publish their latches here so
 * that a backend can wake the worker of its database after committing a
 * timer that is due sooner than the worker's current sleep (next_due).
 * Claimers that wait for work sleep on one of WF_QUEUE_WAIT_BUCKETS
 * condition variables, chosen by a hash of (tenant, queue); a commit that
 * makes a task of that queue claimable bumps the bucket's generation and
 * broadcasts.  A hash collision only causes a spurious wake-up.
 *
 * Worker slots.  WfShmem->workers[] is the truth about which database has
 * a worker; WfShmem->lock protects it.  launcher.c describes who takes and
 * frees a slot.
 *
 * The launcher's shared state.  The pause and "no extension here" notes,
 * the launcher's counters and a count of CREATE EXTENSION commits (which
 * closes the race between a worker finding no extension and the CREATE
 * EXTENSION that commits just after its snapshot) live in a small struct
 * of their own (WfWorkers), also protected by WfShmem->lock.  The
 * launcher, the engine worker, the DDL guard and the commit-time wake-ups
 * read and write them under that lock through the helpers below.
 *
 * The engine counters and histograms (metrics.c) and the queues' claim
 * floors (claimfloor.c) are structs of their own, sized and created here
 * too.
 *
 * All of this exists only when the library is preloaded; without it
 * WfShmem and WfWorkers stay NULL and every user of them falls back to
 * doing nothing.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/wait_event.h"

#include "claimfloor.h"
#include "metrics.h"
#include "shmem.h"

WfShmemState *WfShmem = NULL;
WfWorkerShared *WfWorkers = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* forward declarations */
static void wf_shmem_request(void);
static void wf_shmem_startup(void);

/*
 * WfShmemInit installs the shared memory hooks; called from _PG_init when
 * the library is being preloaded.
 */
void
WfShmemInit(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = wf_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = wf_shmem_startup;
}

static void
wf_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(WfShmemState)));
	RequestAddinShmemSpace(MAXALIGN(sizeof(WfWorkerShared)));
	RequestAddinShmemSpace(WfMetricsShmemSize());
	RequestAddinShmemSpace(WfClaimFloorShmemSize());
	RequestNamedLWLockTranche("wfengine", 1);
}

/*
 * wf_shmem_startup creates or attaches to the structs.  WfShmem->lock,
 * which protects WfWorkers too, is used only later, at run time.
 */

static void
wf_shmem_startup(void)
{
	bool		found;
	int			i;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	WfShmem = ShmemInitStruct("wfengine", sizeof(WfShmemState), &found);
	if (!found)
	{
		memset(WfShmem, 0, sizeof(WfShmemState));
		WfShmem->lock = &(GetNamedLWLockTranche("wfengine"))->lock;
		for (i = 0; i < WF_MAX_DB_WORKERS; i++)
		{
			pg_atomic_init_u64(&WfShmem->workers[i].next_due, 0);
			pg_atomic_init_u32(&WfShmem->workers[i].tick_wanted, 0);
			pg_atomic_init_u64(&WfShmem->workers[i].ticks, 0);
			pg_atomic_init_u64(&WfShmem->workers[i].fired, 0);
			pg_atomic_init_u32(&WfShmem->workers[i].relay_dropped, 0);
			pg_atomic_init_u64(&WfShmem->workers[i].relay_dropped_total, 0);
			pg_atomic_init_u64(&WfShmem->workers[i].due_locked, 0);
			pg_atomic_init_u64(&WfShmem->workers[i].due_locked_since, 0);
			SpinLockInit(&WfShmem->workers[i].relay.lock);
		}
		SpinLockInit(&WfShmem->rate_lock);
		SpinLockInit(&WfShmem->bound_lock);
		for (i = 0; i < WF_QUEUE_WAIT_BUCKETS; i++)
		{
			ConditionVariableInit(&WfShmem->queue_cv[i]);
			pg_atomic_init_u64(&WfShmem->queue_gen[i], 0);
		}
		ConditionVariableInit(&WfShmem->any_queue_cv);
	}
	WfWorkers = ShmemInitStruct("wfengine workers", sizeof(WfWorkerShared), &found);
	if (!found)
	{
		memset(WfWorkers, 0, sizeof(WfWorkerShared));
		pg_atomic_init_u64(&WfWorkers->launcher_scans, 0);
		pg_atomic_init_u64(&WfWorkers->launcher_starts, 0);
		pg_atomic_init_u64(&WfWorkers->creations, 0);
	}
	/* the queues' claim floors (claimfloor.c) */
	{
		void	   *floors = ShmemInitStruct("wfengine claim floors",
											 WfClaimFloorShmemSize(), &found);

		WfClaimFloorShmemInit(floors, found);
	}
	/* the engine counters (metrics.c), and their file of the last shutdown */
	WfMetricsShmemStartup();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * WfWorkerSlotFor returns the slot of the worker of a database, or NULL.
 * The caller reads it without the lock: slots are only reused after the
 * worker has exited, and a stale latch is harmless to set.
 *
 * Every commit that wakes claimers or relays a notification asks, so the
 * backend remembers where it found its database last time and looks there
 * first: each slot holds its relay (about 40 kB), and a scan touched one
 * line of up to 64 pages of shared memory per commit.  The remembered slot
 * is checked like any other, so a slot freed or taken by another database
 * since sends the caller back to the scan.
 */
WfDbWorkerSlot *
WfWorkerSlotFor(Oid dboid)
{
	static int	last_found = -1;
	int			i;

	if (WfShmem == NULL)
		return NULL;
	if (last_found >= 0 && WfShmem->workers[last_found].dboid == dboid)
		return &WfShmem->workers[last_found];
	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
		if (WfShmem->workers[i].dboid == dboid)
		{
			last_found = i;
			return &WfShmem->workers[i];
		}
	return NULL;
}

/*
 * WfQueueBucket maps (tenant, queue) of this database to a wait bucket.
 */
uint32
WfQueueBucket(const char *tenant, const char *queue)
{
	uint32		h = hash_bytes((const unsigned char *) tenant, strlen(tenant));

	h = hash_combine(h, hash_bytes((const unsigned char *) queue, strlen(queue)));
	/* the same tenant and queue in another database wait elsewhere */
	h = hash_combine(h, murmurhash32((uint32) MyDatabaseId));
	return h % WF_QUEUE_WAIT_BUCKETS;
}

/*
 * WfClearSlot frees a worker slot.  The caller holds WfShmem->lock
 * exclusively.
 */
void
WfClearSlot(WfDbWorkerSlot *slot)
{
	slot->dboid = InvalidOid;
	slot->pid = 0;
	slot->latch = NULL;
	slot->started_at = 0;
	pg_atomic_write_u64(&slot->next_due, 0);
	pg_atomic_write_u64(&slot->due_locked, 0);
	pg_atomic_write_u64(&slot->due_locked_since, 0);
}

/*
 * WfRelayReset gives the relay of a worker slot to the database dboid, as
 * the launcher gives it the slot (WfShmem->lock held exclusively).  What a
 * worker of the same database left in it stays, for the new worker to
 * send; the notifications of another database are thrown away.  A freed
 * slot keeps its relay until then: committers only hand notifications to
 * a slot with a running worker (notify.c).
 */
void
WfRelayReset(WfDbWorkerSlot *slot, Oid dboid)
{
	SpinLockAcquire(&slot->relay.lock);
	if (slot->relay.dboid != dboid)
	{
		slot->relay.dboid = dboid;
		slot->relay.count = 0;
		pg_atomic_write_u32(&slot->relay_dropped, 0);
	}
	SpinLockRelease(&slot->relay.lock);
}

/*
 * WfNoteFind returns the note of a database, or NULL.  The caller holds
 * WfShmem->lock.
 */
WfDbNote *
WfNoteFind(Oid dboid)
{
	int			i;

	for (i = 0; i < WF_MAX_DB_NOTES; i++)
		if (WfWorkers->notes[i].dboid == dboid)
			return &WfWorkers->notes[i];
	return NULL;
}

/*
 * WfNoteGet returns the note of a database, making a new one if needed.
 * When the table is full the oldest "absent" note is given up (which only
 * makes the launcher probe that database again); NULL when every entry is
 * a pause.  The caller holds WfShmem->lock exclusively.
 */
WfDbNote *
WfNoteGet(Oid dboid)
{
	WfDbNote   *note = WfNoteFind(dboid);
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
 * WfNoteForgetIfEmpty frees a note that no longer says anything: no
 * pause in force and the extension not known to be missing.  The caller
 * holds WfShmem->lock exclusively.
 */
void
WfNoteForgetIfEmpty(WfDbNote *note, TimestampTz now)
{
	if (note->paused_until != 0 && note->paused_until <= now)
		note->paused_until = 0;
	if (!note->absent && note->paused_until == 0)
		memset(note, 0, sizeof(WfDbNote));
}

/*
 * WfWaitEvent returns the wait event the launcher, the workers and the
 * DDL guard sleep under: a named one on PostgreSQL 17+ (kept in shared
 * memory by the server), else PG_WAIT_EXTENSION.
 */
uint32
WfWaitEvent(void)
{
	static uint32 event = 0;

	return WfNamedWaitEvent("WfengineMain", &event);
}

/*
 * WfNamedWaitEvent returns the wait event called name (PostgreSQL 17 and
 * later; before, every wait is "Extension"), creating it on first use and
 * keeping it in *cache.
 */
uint32
WfNamedWaitEvent(const char *name, uint32 *cache)
{
#if PG_VERSION_NUM >= 170000
	if (*cache == 0)
		*cache = WaitEventExtensionNew(name);
	return *cache;
#else
	return PG_WAIT_EXTENSION;
#endif
}
