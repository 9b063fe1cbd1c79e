/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  Shared memory of wfengine: background worker slots, the launcher's
 *	  notes about databases, and the condition variables that waiting
 *	  claimers sleep on.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/shmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_SHMEM_H
#define WF_SHMEM_H

#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "metrics.h"

/* how many database workers the launcher can track */
#define WF_MAX_DB_WORKERS 64

/*
 * Notifications handed to the engine worker of their database to send
 * (notify.c): each worker slot has a relay of its own, so that a database
 * whose worker is slow or stopped fills only its own (and drops, counts
 * and announces what does not fit), never another database's.
 */
#define WF_RELAY_PER_DB 256
#define WF_RELAY_PAYLOAD 96

typedef struct WfRelayItem
{
	char		channel[NAMEDATALEN];
	char		payload[WF_RELAY_PAYLOAD];
} WfRelayItem;

typedef struct WfRelay
{
	slock_t		lock;			/* protects the fields below */
	Oid			dboid;			/* the database whose notifications it
								 * holds (the slot's; InvalidOid: none) */
	int			count;			/* items[0 .. count - 1] wait */
	WfRelayItem items[WF_RELAY_PER_DB];
} WfRelay;

/*
 * Start-rate token buckets, one per (database, tenant) with a limit
 * (quota.c).  A tenant is known by a 64-bit hash of its name: names of any
 * length fit, and two tenants of one database that collide (about one in
 * 10^19 per pair) would share a bucket.
 */
#define WF_RATE_BUCKETS 1024

typedef struct WfRateBucket
{
	Oid			dboid;			/* InvalidOid when free */
	uint64		tenant_key;		/* hash of the tenant's name */
	double		tokens;
	TimestampTz refilled_at;
	TimestampTz full_at;		/* from then on it is as good as a new bucket */
} WfRateBucket;

/*
 * Upper bounds of the buffered events of a tenant (quota.c): a cache that
 * spares wf.send_event counting a tenant's whole buffer at every send.  An
 * entry may be overwritten by another (database, tenant) at any time; a
 * missing or old one only means counting again.
 */
#define WF_BUFFER_BOUNDS 1024

typedef struct WfBufferBound
{
	Oid			dboid;			/* InvalidOid when free */
	uint64		tenant_key;		/* hash of the tenant's name */
	int64		upper;			/* at least the tenant's buffered events */
	TimestampTz counted_at;		/* when they were last counted */
} WfBufferBound;

/* one per-database engine worker */
typedef struct WfDbWorkerSlot
{
	Oid			dboid;			/* InvalidOid when the slot is free */
	pid_t		pid;			/* 0 until the worker has started */
	Latch	   *latch;			/* the worker's latch, NULL until started */
	pg_atomic_uint64 next_due;	/* TimestampTz the worker ticks again by */
	pg_atomic_uint32 tick_wanted;	/* 1: a committer wants a tick now (set
									 * before the latch); else a set latch
									 * only means "relay notifications" */
	TimestampTz started_at;
	pg_atomic_uint64 ticks;		/* timer ticks done */
	pg_atomic_uint64 fired;		/* timers and deadlines fired */
	pg_atomic_uint32 relay_dropped; /* notifications dropped since the last
									 * overflow notice */
	pg_atomic_uint64 relay_dropped_total;	/* notifications dropped since the
											 * slot was taken */
	pg_atomic_uint64 due_locked;	/* due items the last tick left because
									 * a transaction holds their rows */
	pg_atomic_uint64 due_locked_since;	/* TimestampTz: the due time of the
										 * oldest of them (0: none) */
	WfRelay		relay;			/* the notifications of the slot's database */
} WfDbWorkerSlot;

/* the whole shared state */
typedef struct WfShmemState
{
	LWLock	   *lock;			/* protects the slot array */
	pid_t		launcher_pid;
	Latch	   *launcher_latch;
	WfDbWorkerSlot workers[WF_MAX_DB_WORKERS];
	ConditionVariable queue_cv[WF_QUEUE_WAIT_BUCKETS];
	pg_atomic_uint64 queue_gen[WF_QUEUE_WAIT_BUCKETS];	/* bumped on wake */
	ConditionVariable any_queue_cv; /* broadcast with every bucket's: the
									 * claims that wait on several queues */
	slock_t		rate_lock;		/* protects rate[] */
	WfRateBucket rate[WF_RATE_BUCKETS];
	slock_t		bound_lock;		/* protects bounds[] */
	WfBufferBound bounds[WF_BUFFER_BOUNDS];
} WfShmemState;

/* how many databases the launcher can keep a note about */
#define WF_MAX_DB_NOTES				(4 * WF_MAX_DB_WORKERS)

/*
 * What the launcher must know about a database beyond its worker slot.
 * Lives in the launcher's piece of shared memory and is protected by
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

/* the launcher's piece of shared memory, also protected by WfShmem->lock */
typedef struct WfWorkerShared
{
	TimestampTz launcher_started_at;	/* start of the running launcher */
	TimestampTz launcher_next_scan; /* when the launcher wakes up by itself */
	pg_atomic_uint64 launcher_scans;	/* scans of pg_database done */
	pg_atomic_uint64 launcher_starts;	/* workers registered */
	pg_atomic_uint64 creations; /* CREATE EXTENSION commits, any database */
	WfDbNote	notes[WF_MAX_DB_NOTES];
} WfWorkerShared;

/* NULL unless the library was preloaded */
extern WfShmemState *WfShmem;
extern WfWorkerShared *WfWorkers;

extern void WfShmemInit(void);
extern WfDbWorkerSlot *WfWorkerSlotFor(Oid dboid);
extern uint32 WfQueueBucket(const char *tenant, const char *queue);

/* worker slots and notes; the caller holds WfShmem->lock (see shmem.c) */
extern void WfClearSlot(WfDbWorkerSlot *slot);
extern void WfRelayReset(WfDbWorkerSlot *slot, Oid dboid);
extern WfDbNote *WfNoteFind(Oid dboid);
extern WfDbNote *WfNoteGet(Oid dboid);
extern void WfNoteForgetIfEmpty(WfDbNote *note, TimestampTz now);

/* the wait event the background processes and the DDL guard sleep under */
extern uint32 WfWaitEvent(void);
extern uint32 WfNamedWaitEvent(const char *name, uint32 *cache);

#endif							/* WF_SHMEM_H */
