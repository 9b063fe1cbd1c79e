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
 * All of this exists only when the library is preloaded; without it
 * WfShmem stays NULL and every user of it falls back to doing nothing.
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

#include "shmem.h"

WfShmemState *WfShmem = NULL;

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
	RequestNamedLWLockTranche("wfengine", 1);
}

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
			pg_atomic_init_u64(&WfShmem->workers[i].ticks, 0);
			pg_atomic_init_u64(&WfShmem->workers[i].fired, 0);
			pg_atomic_init_u32(&WfShmem->workers[i].relay_dropped, 0);
		}
		SpinLockInit(&WfShmem->relay_lock);
		SpinLockInit(&WfShmem->rate_lock);
		WfShmem->relay_count = 0;
		for (i = 0; i < WF_QUEUE_WAIT_BUCKETS; i++)
		{
			ConditionVariableInit(&WfShmem->queue_cv[i]);
			pg_atomic_init_u64(&WfShmem->queue_gen[i], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * WfWorkerSlotFor returns the slot of the worker of a database, or NULL.
 * The caller reads it without the lock: slots are only reused after the
 * worker has exited, and a stale latch is harmless to set.
 */
WfDbWorkerSlot *
WfWorkerSlotFor(Oid dboid)
{
	int			i;

	if (WfShmem == NULL)
		return NULL;
	for (i = 0; i < WF_MAX_DB_WORKERS; i++)
		if (WfShmem->workers[i].dboid == dboid)
			return &WfShmem->workers[i];
	return NULL;
}

/*
 * WfQueueBucket maps (tenant, queue) to a wait bucket.
 */
uint32
WfQueueBucket(const char *tenant, const char *queue)
{
	uint32		h = hash_bytes((const unsigned char *) tenant, strlen(tenant));

	h = hash_combine(h, hash_bytes((const unsigned char *) queue, strlen(queue)));
	return h % WF_QUEUE_WAIT_BUCKETS;
}
