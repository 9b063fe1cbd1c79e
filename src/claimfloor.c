/*-------------------------------------------------------------------------
 *
 * claimfloor.c
 *	  The claim floor of a queue: where its claims start reading the claim
 *	  index, so that they never walk over the entries of the attempts
 *	  claimed before them.
 *
 * Why.  A claim reads tasks_claim_idx, (tenant_id, queue, priority DESC,
 * available_at, task_id) WHERE status = 'ready', from the start of its
 * queue.  Every attempt it leases leaves its entry behind, pointing at a
 * row version that is dead once the claim commits; vacuum (or the index
 * scan's own kill_prior_tuple) removes such entries only when no snapshot
 * can still see the version.  While any session holds a snapshot open (a
 * long REPEATABLE READ transaction, a pg_dump, a standby's feedback), none
 * can go, and every claim visits, and fetches from the heap, the entry of
 * every attempt claimed since that snapshot was taken: the cost of a claim
 * grows with the work done, and throughput collapses (875 to 51 steps/s
 * over 120 s, docs/benchmarks.md).
 *
 * When.  Only while it pays: a claim from the start counts the entries
 * the claim index gave its scan and the index's buffers it read; when it
 * read more than WF_FLOOR_DRAG_ENTRIES entries beyond the attempts it took
 * (entries nothing could remove yet) or more than WF_FLOOR_DRAG_BLOCKS
 * buffers (pages of entries killed but not yet removed, which a scan skips
 * without returning them: every busy queue between two VACUUMs), the
 * queue's claims read from the floor until a claim from the start reads
 * clean again.  On a clean index a
 * claim from the start is as cheap, and the floor only risks hiding an
 * attempt for a while (below).
 *
 * What.  For a queue whose ready attempts all have one priority (nearly
 * every queue) the entries in index order are ordered by (available_at,
 * task_id), and the attempts claimed are the oldest.  The floor is the
 * least (available_at, task_id) of the attempts of the queue's last
 * claim: the next claim reads only entries from there on (an index range
 * that starts at the floor), so the dead entries behind it are never
 * visited.  A claim that reads from the floor and finds nothing, one every
 * WF_FLOOR_FULL_MS, one after a claim from the floor came back short, and
 * every claim of a queue with several priorities read from the start of
 * the queue ("claim") as before, and teach the floor what they found.
 *
 * Why it is safe.  The floor only ever decides where the scan starts; the
 * statement still takes only ready, available, unlocked rows, so nothing
 * is claimed that should not be.  What the floor can do wrong is hide a
 * claimable attempt behind it for a while: one whose entry sorts before
 * the floor although it was not claimed — an attempt a concurrent claim
 * skipped (SKIP LOCKED) and that claim rolled back, or one committed by a
 * transaction that scheduled it with an available_at earlier than the
 * floor but committed after the claim that moved the floor took its
 * snapshot.  Such an attempt is claimed by the next claim that reads from
 * the start: one claim of the queue every WF_FLOOR_FULL_MS (or every
 * WF_FLOOR_FULL_SHARE times as long as such a claim took, when it is
 * slow), and at once when the
 * queue has nothing else (a claim never returns nothing while its queue
 * has a claimable attempt).  Every new attempt is reported
 * (WfClaimFloorNoteTask, from the transition that schedules it, before it
 * commits): one before the floor moves the floor back to it, and one of
 * another priority marks the queue as having several (read from the start
 * until a claim from the start finds the queue empty, so priorities are
 * never inverted); an attempt that is
 * claimable again (its lease expired, WfClaimFloorRescan) makes the next
 * claim read from the start.  Rows written behind
 * the engine's back (an import, an operator's UPDATE) are found by the
 * claims that read from the start.
 *
 * The slots.  WF_FLOOR_SLOTS slots in shared memory, each protected by
 * its own spinlock, chosen by a hash of (database, tenant, queue); a slot
 * remembers the full hash of its queue, and a queue that finds another in
 * its slot takes the slot over, starting again from nothing (so two busy
 * queues sharing a slot only lose the floor, never claim wrongly).
 * Without shared memory (the library not preloaded) every claim reads
 * from the start.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/claimfloor.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/spin.h"

#include "claimfloor.h"

/* slots of queues' floors */
#define WF_FLOOR_SLOTS 4096
/*
 * One claim of a queue reads from the start at least this often, and at
 * most one in WF_FLOOR_FULL_SHARE times its own duration (a read from the
 * start is what a held snapshot makes slow).
 */
#define WF_FLOOR_FULL_MS 1000
#define WF_FLOOR_FULL_SHARE 20
/*
 * A claim from the start that read more entries of the claim index than
 * this beyond the attempts it took walked over entries nothing could
 * remove yet: the queue's claims read from the floor until one from the
 * start finds it clean again.
 */
#define WF_FLOOR_DRAG_ENTRIES 64

/*
 * ... or that read more than this many buffers of the claim index: a scan
 * skips the entries an earlier scan killed (LP_DEAD) without returning
 * them, so the entry count does not see them, but it still walks their
 * pages, and those stay until a VACUUM (an insert cleans only the page it
 * goes to, and new attempts go to the end of the queue).  A claim on a
 * clean index reads its descent and a page or two.
 */
#define WF_FLOOR_DRAG_BLOCKS 16

typedef struct FloorSlot
{
	uint64		key;			/* the queue's hash; 0: free */
	bool		priority_known; /* an attempt of the queue was seen */
	bool		mixed;			/* ... of more than one priority */
	bool		floor_valid;	/* floor is set */
	bool		need_full;		/* the next claim reads from the start */
	bool		dragging;		/* reads from the start walk dead entries */
	int32		priority;		/* with priority_known */
	TimestampTz floor_at;		/* with floor_valid: (available_at, */
	int64		floor_task;		/* task_id) of the floor */
	TimestampTz next_full_at;	/* a claim reads from the start by then */
	TimestampTz future_until;	/* the latest available_at scheduled */
	slock_t		mutex;			/* protects the fields above; last (slot_take) */
} FloorSlot;

static FloorSlot *floor_slots = NULL;

/* forward declarations */
static uint64 queue_key(const char *tenant, const char *queue);
static FloorSlot *queue_slot(const char *tenant, const char *queue, uint64 *key,
							 uint32 *slotno);
static void slot_take(FloorSlot *s, uint64 key);
static FloorSlot *lock_queue_slot(const char *tenant, const char *queue, uint64 *key);

/*
 * WfClaimFloorShmemSize is the size of the slots (shmem.c requests it).
 */
Size
WfClaimFloorShmemSize(void)
{
	return MAXALIGN(mul_size(WF_FLOOR_SLOTS, sizeof(FloorSlot)));
}

/*
 * WfClaimFloorShmemInit takes mem, WfClaimFloorShmemSize() bytes of shared
 * memory, for the slots, and initializes them unless found.
 */
void
WfClaimFloorShmemInit(void *mem, bool found)
{
	floor_slots = (FloorSlot *) mem;
	if (!found)
	{
		int			i;

		memset(floor_slots, 0, WfClaimFloorShmemSize());
		for (i = 0; i < WF_FLOOR_SLOTS; i++)
			SpinLockInit(&floor_slots[i].mutex);
	}
}

/*
 * queue_key is the hash of (database, tenant, queue), never 0.
 */
static uint64
queue_key(const char *tenant, const char *queue)
{
	uint64		h = hash_bytes_uint32_extended((uint32) MyDatabaseId, 0);

	h = hash_combine64(h, hash_bytes_extended((const unsigned char *) tenant, strlen(tenant), 0));
	h = hash_combine64(h, hash_bytes_extended((const unsigned char *) queue, strlen(queue), 1));
	return h == 0 ? 1 : h;
}

/*
 * queue_slot returns the slot of (tenant, queue), with the queue's key and
 * the slot's number.  The slots must exist.
 */
static FloorSlot *
queue_slot(const char *tenant, const char *queue, uint64 *key, uint32 *slotno)
{
	*key = queue_key(tenant, queue);
	*slotno = (uint32) (*key % WF_FLOOR_SLOTS);
	return &floor_slots[*slotno];
}

/*
 * lock_queue_slot returns the slot of (tenant, queue) with its mutex held,
 * and the queue's key; NULL without shared memory.
 */
static FloorSlot *
lock_queue_slot(const char *tenant, const char *queue, uint64 *key)
{
	FloorSlot  *s;
	uint32		slotno;

	if (floor_slots == NULL)
		return NULL;
	s = queue_slot(tenant, queue, key, &slotno);
	SpinLockAcquire(&s->mutex);
	return s;
}

/*
 * slot_take makes s the slot of the queue key, knowing nothing about it.
 * The caller holds its mutex.
 */
static void
slot_take(FloorSlot *s, uint64 key)
{
	memset(s, 0, offsetof(FloorSlot, mutex));
	s->key = key;
}

/*
 * WfClaimFloorPlan tells a claim of (tenant, queue) at now how to read the
 * claim index (cf->use_floor: from cf->floor in priority cf->priority;
 * otherwise from the start), and keeps what WfClaimFloorLearn needs.
 */
void
WfClaimFloorPlan(const char *tenant, const char *queue, TimestampTz now, WfClaimFloor *cf)
{
	FloorSlot  *s;

	memset(cf, 0, sizeof(WfClaimFloor));
	if (floor_slots == NULL)
		return;
	s = queue_slot(tenant, queue, &cf->key, &cf->slot);

	SpinLockAcquire(&s->mutex);
	if (s->key != cf->key)
	{
		/* free, or another queue's: ours from now on, knowing nothing */
		slot_take(s, cf->key);
	}
	else if (s->floor_valid && s->priority_known && !s->mixed && s->dragging)
	{
		if (s->need_full || now >= s->next_full_at)
		{
			/* this claim reads from the start; the others need not */
			s->need_full = false;
			s->next_full_at = now + WF_FLOOR_FULL_MS * INT64CONST(1000);
		}
		else
		{
			cf->use_floor = true;
			cf->priority = s->priority;
			cf->floor_at = s->floor_at;
			cf->floor_task = s->floor_task;
		}
	}
	SpinLockRelease(&s->mutex);
}

/*
 * WfClaimFloorLearn records what a claim planned by cf found at now: got
 * attempts of the wanted; when got > 0, uniform tells whether all of them
 * had one priority (priority), and (least_at, least_task) is the least of
 * their (available_at, task_id); entries_read is the number of entries the
 * claim index gave the claim and index_blocks the number of its buffers
 * the claim read (-1: not known).  A claim from the floor that found nothing teaches
 * nothing (its caller reads from the start next, with cf->use_floor
 * cleared, and calls this again).
 */
void
WfClaimFloorLearn(const WfClaimFloor *cf, TimestampTz now, int wanted, int got,
				  bool uniform, int32 priority, TimestampTz least_at, int64 least_task,
				  int64 entries_read, int64 index_blocks)
{
	FloorSlot  *s;

	if (floor_slots == NULL || cf->key == 0)
		return;
	if (cf->use_floor && got == 0)
		return;
	s = &floor_slots[cf->slot];

	SpinLockAcquire(&s->mutex);
	if (s->key == cf->key)
	{
		if (!cf->use_floor)
		{
			TimestampTz took = GetCurrentTimestamp() - now;

			s->next_full_at = Max(s->next_full_at,
								  now + Max(WF_FLOOR_FULL_MS * INT64CONST(1000),
											WF_FLOOR_FULL_SHARE * took));
			/* unknown (no statistics counted): read from the start, as before */
			s->dragging = (entries_read >= 0 && entries_read - got > WF_FLOOR_DRAG_ENTRIES) ||
				index_blocks > WF_FLOOR_DRAG_BLOCKS;
		}
		if (got > 0)
		{
			if (!uniform || (s->priority_known && s->priority != priority))
				s->mixed = true;
			else if (!s->priority_known)
			{
				s->priority_known = true;
				s->priority = priority;
			}
			s->floor_at = least_at;
			s->floor_task = least_task;
			s->floor_valid = true;
			/* a short batch: what is left may be behind the floor */
			if (cf->use_floor && got < wanted)
				s->need_full = true;
		}
		else
		{
			s->floor_valid = false;
			/*
			 * Nothing claimable from the start of the queue: what was learnt
			 * about its priorities is forgotten (the next attempts teach it
			 * again) unless an attempt scheduled for later may still come
			 * due with a priority that was seen.
			 */
			if (!cf->use_floor && now > s->future_until)
			{
				s->priority_known = false;
				s->mixed = false;
			}
		}
	}
	SpinLockRelease(&s->mutex);
}

/*
 * WfClaimFloorNoteTask records that the current transaction schedules an
 * attempt task_id of (tenant, queue) with priority, available at
 * available_at.
 * Called by the transition that writes it, before it commits.
 */
void
WfClaimFloorNoteTask(const char *tenant, const char *queue, int32 priority,
					 TimestampTz available_at, int64 task_id)
{
	uint64		key;
	FloorSlot  *s = lock_queue_slot(tenant, queue, &key);

	if (s == NULL)
		return;
	/* a free slot: the queue's from now on, knowing this attempt */
	if (s->key == 0)
		slot_take(s, key);
	if (s->key == key)
	{
		if (!s->priority_known)
		{
			s->priority_known = true;
			s->priority = priority;
		}
		else if (s->priority != priority)
			s->mixed = true;
		if (available_at > s->future_until)
			s->future_until = available_at;
		if (s->floor_valid &&
			(available_at < s->floor_at ||
			 (available_at == s->floor_at && task_id < s->floor_task)))
		{
			s->floor_at = available_at;
			s->floor_task = task_id;
		}
	}
	SpinLockRelease(&s->mutex);
}

/*
 * WfClaimFloorRescan makes the next claim of (tenant, queue) read from the
 * start: an attempt of the queue is claimable again (a lease expired), and
 * may sort before the floor.
 */
void
WfClaimFloorRescan(const char *tenant, const char *queue)
{
	uint64		key;
	FloorSlot  *s = lock_queue_slot(tenant, queue, &key);

	if (s == NULL)
		return;
	if (s->key == key)
		s->need_full = true;
	SpinLockRelease(&s->mutex);
}
