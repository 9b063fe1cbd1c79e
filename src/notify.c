/*-------------------------------------------------------------------------
 *
 * notify.c
 *	  Commit-time signals: waking waiting claimers and the engine worker,
 *	  and LISTEN/NOTIFY for subscribers.
 *
 * Every WfNote* function only records what happened, in lists that live
 * in TopTransactionContext: a list append on the hot path, nothing else.
 * One transaction callback, registered by WfNotifyInit, turns the lists
 * into signals at the end of the transaction:
 *
 *	 PRE_COMMIT  queues the NOTIFYs with Async_Notify.  PostgreSQL delivers
 *				 them only if the transaction commits, and only after the
 *				 commit (PreCommit_Notify runs after the PRE_COMMIT
 *				 callbacks).  One notification per distinct queue per
 *				 transaction, never one per task, and one per (run, kind).
 *	 COMMIT		 runs after the commit is visible to other snapshots: for
 *				 each touched wait bucket it bumps the bucket's generation
 *				 and broadcasts its condition variable (claim.c sleeps on
 *				 them), and it sets the latch of this database's engine
 *				 worker when a timer was written that is due sooner than the
 *				 worker's current sleep.  Nothing here can fail.
 *	 ABORT, PREPARE
 *				 forget the lists.  A prepared transaction signals nothing:
 *				 NOTIFY is not allowed in one, and COMMIT PREPARED may run in
 *				 another session; waiting claimers see its tasks at their
 *				 next wake-up or deadline.
 *
 * A subtransaction that aborts does not take its notes back: the worst
 * case is one spurious notification or wake-up, which every receiver must
 * tolerate anyway (a wake-up only means "look again").
 *
 * Waking the launcher and the engine worker.  Each worker publishes in its
 * slot's next_due the moment by which it starts its next tick: while it
 * sleeps, when the sleep ends; while it ticks, the promise that bounds
 * the coming sleep (worker.c).  A committer that writes a timer must wake
 * the worker when next_due is 0 (not published yet) or later than the
 * timer's fire_at, setting the slot's tick_wanted before the latch (a
 * latch set without it only relays notifications); WfWakeWorker does
 * exactly that and is what
 * commit-time code calls after the timer became visible (wake_waiters does
 * the same for this database's worker without taking the lock).  A second
 * transaction callback, registered in a backend only once it is needed,
 * sends the wake-ups that DDL asked for: the launcher after CREATE
 * EXTENSION (through wf._wake_launcher() in the install script), this
 * database's worker after DROP EXTENSION wfengine (the DDL guard).
 *
 * Channels.  PostgreSQL lets any role LISTEN on any channel, so payloads
 * carry ids only, and the channels of a tenant carry a tag that other
 * tenants cannot compute: 12 hex digits of BLAKE2b(tenant) keyed by the
 * channel key of wf.secrets (which only the extension's owner reads).  A
 * queue's channel is "wfq.<tag>.<queue>"; when that would exceed
 * NAMEDATALEN - 1 bytes, the queue name is cut after 37 bytes and
 * ".<8 hex digits of md5(queue)>" appended.  The payload is the queue
 * name.  Run changes go to "wf_runs.<tag>" with the payload
 * {"run_id": "<uuid>", "kind": "<kind>"}; the relay's overflow notice goes
 * to "wf_overflow".  wf.channel() tells a session its channel names;
 * docs/notifications.md documents them.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/notify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "commands/async.h"
#include "common/md5.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "crypto.h"
#include "guc.h"
#include "metrics.h"
#include "notify.h"
#include "shmem.h"
#include "spi_util.h"
#include "tenant.h"

/* the statements of notify.c (registered by _PG_init: WfNotifyPlans) */
enum
{
	PLAN_CHANNEL_KEY = 0,
	PLAN_CHANNEL_KEY_INSERT
};

static const WfPlanSpec notify_plan_specs[] = {
	[PLAN_CHANNEL_KEY] = {
		"channel_key",
		"SELECT s.value FROM wf.secrets s WHERE s.name OPERATOR(pg_catalog.=) 'channel_key'",
		0, {InvalidOid}
	},
	[PLAN_CHANNEL_KEY_INSERT] = {
		"channel_key_insert",
		"INSERT INTO wf.secrets (name, value) VALUES ('channel_key', $1) "
		"ON CONFLICT (name) DO NOTHING",
		1, {BYTEAOID}
	},
};

WfPlanTable WfNotifyPlans = WF_PLAN_TABLE("notify", notify_plan_specs);

/* a queue that gets a claimable task when the transaction commits */
typedef struct WfPendingQueue
{
	char	   *tenant;
	char	   *queue;
	uint32		bucket;			/* WfQueueBucket(tenant, queue) */
	char		channel[NAMEDATALEN];
} WfPendingQueue;

/* a change of a run's state to announce */
typedef struct WfPendingRun
{
	pg_uuid_t	run_id;
	char	   *kind;
	char		channel[NAMEDATALEN];	/* the run channel of its tenant */
} WfPendingRun;

/* what the current transaction has recorded (TopTransactionContext) */
static List *pending_queues = NIL;	/* of WfPendingQueue */
static List *pending_runs = NIL;	/* of WfPendingRun */
static bool pending_timer = false;
static WfDbWorkerSlot *relay_target = NULL;	/* set at PRE_COMMIT */
static TimestampTz pending_fire_at = 0;	/* earliest, when pending_timer */

/* backend-local state of the wake-ups that DDL asks for */
static bool xact_callback_registered = false;
static bool wake_launcher_at_commit = false;
static bool wake_worker_at_commit = false;

/* wf.secrets 'channel_key', TopMemoryContext */
static bytea *channel_key = NULL;

/*
 * The tag of the tenant tagged last under that key (tenant_tag): one
 * tenant's steps make one channel name after another, and each tag is a
 * keyed BLAKE2b (about 2,400 instructions of a step, bench/callgrind.sh).
 */
static char *tagged_tenant = NULL;	/* in TopMemoryContext; NULL: none */
static char tagged_tag[WF_CHANNEL_TAG_LEN + 1];

/* forward declarations */
static void notify_xact_callback(XactEvent event, void *arg);
static void send_notifications(void);
static void wake_waiters(void);
static void forget_pending(void);
static WfDbWorkerSlot *relay_slot(void);
static void relay_notifications(WfDbWorkerSlot *slot);
static bool relay_put(WfRelay *relay, const char *channel, const char *payload,
					  bool coalesce);
static char *run_payload(WfPendingRun *pr, StringInfo buf);
static void wake_xact_callback(XactEvent event, void *arg);
static void channel_key_reset(void);

/*
 * WfNotifyInit registers the transaction callback and the reset of the
 * kept channel key.  It is called from _PG_init whether or not the library
 * is preloaded: NOTIFY works either way; the shared-memory wake-ups are
 * skipped without preload.
 */
void
WfNotifyInit(void)
{
	RegisterXactCallback(notify_xact_callback, NULL);
	WfRegisterResetCallback(channel_key_reset);
}

/*
 * WfChannelKey returns the key of the tenants' LISTEN channel names (kept
 * in wf.secrets, which only the extension's owner reads; the keyed input
 * digests of sensitive.c are derived from it too); inside an API call.  It
 * is read once per backend and install.  A key this transaction had to
 * make is not kept until it is read again: the transaction may still roll
 * back, and another backend make a different one.
 */
void
WfChannelKey(const uint8 **key, size_t *keylen)
{
	if (channel_key == NULL)
	{
		bool		isnull;
		Datum		d;
		bool		made = false;

		if (WfPlanExec(&WfNotifyPlans, PLAN_CHANNEL_KEY, NULL, NULL, false, 1, SPI_OK_SELECT) != 1)
		{
			/* made at first use (a restore brings the old one back) */
			uint8		fresh[32];
			bytea	   *b = palloc(VARHDRSZ + sizeof(fresh));
			Datum		values[1];

			WfRandomBytes(fresh, sizeof(fresh));
			SET_VARSIZE(b, VARHDRSZ + sizeof(fresh));
			memcpy(VARDATA(b), fresh, sizeof(fresh));
			values[0] = PointerGetDatum(b);
			WfPlanExec(&WfNotifyPlans, PLAN_CHANNEL_KEY_INSERT, values, NULL, false, 0, SPI_OK_INSERT);
			if (WfPlanExec(&WfNotifyPlans, PLAN_CHANNEL_KEY, NULL, NULL, false, 1, SPI_OK_SELECT) != 1)
				elog(ERROR, "the channel key of wfengine could not be made");
			made = true;
		}
		d = WfGetDatum(0, 1, &isnull);
		if (isnull)
			elog(ERROR, "the channel key of wfengine is null");
		if (made)
		{
			bytea	   *fresh = (bytea *) palloc(VARSIZE_ANY(DatumGetPointer(d)));

			memcpy(fresh, DatumGetPointer(d), VARSIZE_ANY(DatumGetPointer(d)));
			*key = (const uint8 *) VARDATA_ANY(fresh);
			*keylen = VARSIZE_ANY_EXHDR(fresh);
			return;
		}
		channel_key = (bytea *) MemoryContextAlloc(TopMemoryContext,
												   VARSIZE_ANY(DatumGetPointer(d)));
		memcpy(channel_key, DatumGetPointer(d), VARSIZE_ANY(DatumGetPointer(d)));
	}
	*key = (const uint8 *) VARDATA_ANY(channel_key);
	*keylen = VARSIZE_ANY_EXHDR(channel_key);
}

/*
 * channel_key_reset forgets the kept channel key with the other caches
 * tied to one installation of the extension (spi_util.c calls it).
 */
static void
channel_key_reset(void)
{
	if (channel_key != NULL)
		pfree(channel_key);
	channel_key = NULL;
	if (tagged_tenant != NULL)
		pfree(tagged_tenant);
	tagged_tenant = NULL;
}

/*
 * tenant_tag writes the channel tag of tenant (see the file header) into
 * tag, which has room for WF_CHANNEL_TAG_LEN + 1 bytes.  It reads the
 * channel key, so it runs inside an API call.
 */
static void
tenant_tag(const char *tenant, char *tag)
{
	const uint8 *key;
	size_t		keylen;

	if (tagged_tenant != NULL && strcmp(tagged_tenant, tenant) == 0)
	{
		memcpy(tag, tagged_tag, sizeof(tagged_tag));
		return;
	}
	WfChannelKey(&key, &keylen);
	WfChannelTag(key, keylen, tenant, tag);
	/* kept only under the kept key, not one this transaction just made */
	if (channel_key != NULL)
	{
		char	   *copy = MemoryContextStrdup(TopMemoryContext, tenant);

		if (tagged_tenant != NULL)
			pfree(tagged_tenant);
		tagged_tenant = copy;
		memcpy(tagged_tag, tag, sizeof(tagged_tag));
	}
}

/*
 * WfQueueChannel writes the LISTEN channel of queue of tenant into buf,
 * which must have room for NAMEDATALEN bytes.  See the file header for
 * the format.
 */
void
WfQueueChannel(const char *tenant, const char *queue, char *buf)
{
	char		tag[WF_CHANNEL_TAG_LEN + 1];
	size_t		len = strlen(queue);

	tenant_tag(tenant, tag);
	if (strlen(WF_QUEUE_CHANNEL_PREFIX) + WF_CHANNEL_TAG_LEN + 1 + len <= NAMEDATALEN - 1)
		snprintf(buf, NAMEDATALEN, "%s%s.%s", WF_QUEUE_CHANNEL_PREFIX, tag, queue);
	else
	{
		char		hex[33];
		const char *errstr = NULL;

		if (!pg_md5_hash(queue, len, hex, &errstr))
			elog(ERROR, "could not compute the channel name of queue \"%s\": %s",
				 queue, errstr ? errstr : "unknown error");
		snprintf(buf, NAMEDATALEN, "%s%s.%.*s.%.8s", WF_QUEUE_CHANNEL_PREFIX, tag,
				 WF_QUEUE_CHANNEL_CUT, queue, hex);
	}
}

/*
 * WfRunChannel writes the LISTEN channel of the runs of tenant into buf
 * (NAMEDATALEN bytes).
 */
void
WfRunChannel(const char *tenant, char *buf)
{
	char		tag[WF_CHANNEL_TAG_LEN + 1];

	tenant_tag(tenant, tag);
	snprintf(buf, NAMEDATALEN, "%s%s", WF_RUN_CHANNEL_PREFIX, tag);
}

/*
 * WfNoteTaskReady records that a task of (tenant, queue) becomes
 * claimable when the current transaction commits.  Called by the state
 * machine wherever it writes a task attempt; a queue is recorded once per
 * transaction however many tasks it gets.
 */
void
WfNoteTaskReady(const char *tenant, const char *queue)
{
	ListCell   *lc;
	WfPendingQueue *pq;
	MemoryContext old;
	char		channel[NAMEDATALEN];

	foreach(lc, pending_queues)
	{
		pq = (WfPendingQueue *) lfirst(lc);
		if (strcmp(pq->queue, queue) == 0 && strcmp(pq->tenant, tenant) == 0)
			return;
	}

	/* first: it may run a statement, which must not happen in TopTransactionContext */
	WfQueueChannel(tenant, queue, channel);
	old = MemoryContextSwitchTo(TopTransactionContext);
	pq = palloc(sizeof(WfPendingQueue));
	pq->tenant = pstrdup(tenant);
	pq->queue = pstrdup(queue);
	pq->bucket = WfQueueBucket(tenant, queue);
	strlcpy(pq->channel, channel, NAMEDATALEN);
	pending_queues = lappend(pending_queues, pq);
	MemoryContextSwitchTo(old);
}

/*
 * WfNoteRunChange records a change of a run's state for subscribers.  A
 * repeat of the previous note is dropped here; Async_Notify drops any
 * other exact duplicate, so a transaction announces each (run, kind) once.
 */
void
WfNoteRunChange(const char *tenant, const pg_uuid_t *run_id, const char *kind)
{
	WfPendingRun *pr;
	MemoryContext old;
	char		channel[NAMEDATALEN];

	if (pending_runs != NIL)
	{
		pr = (WfPendingRun *) llast(pending_runs);
		if (memcmp(&pr->run_id, run_id, sizeof(pg_uuid_t)) == 0 &&
			strcmp(pr->kind, kind) == 0)
			return;
	}

	WfRunChannel(tenant, channel);
	old = MemoryContextSwitchTo(TopTransactionContext);
	pr = palloc(sizeof(WfPendingRun));
	memcpy(&pr->run_id, run_id, sizeof(pg_uuid_t));
	pr->kind = pstrdup(kind);
	strlcpy(pr->channel, channel, NAMEDATALEN);
	pending_runs = lappend(pending_runs, pr);
	MemoryContextSwitchTo(old);
}

/*
 * WfNoteTimer records that a timer or deadline due at fire_at was
 * written, so that the worker is woken at commit if it sleeps longer.
 * Only the earliest time is kept.
 */
void
WfNoteTimer(TimestampTz fire_at)
{
	if (!pending_timer || fire_at < pending_fire_at)
		pending_fire_at = fire_at;
	pending_timer = true;
}

/*
 * notify_xact_callback is the one transaction callback; see the file
 * header for what each event does.
 */
static void
notify_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* with a running engine worker, it sends them after commit */
			relay_target = relay_slot();
			if (relay_target == NULL)
				send_notifications();
			break;
		case XACT_EVENT_COMMIT:
			if (relay_target != NULL)
				relay_notifications(relay_target);
			relay_target = NULL;
			wake_waiters();
			forget_pending();
			break;
		case XACT_EVENT_ABORT:
			relay_target = NULL;
			forget_pending();
			break;
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
		case XACT_EVENT_PREPARE:
			forget_pending();
			break;
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			/* engine functions are parallel unsafe: nothing was recorded */
			break;
	}
}

/*
 * send_notifications queues this transaction's NOTIFYs; called at
 * PRE_COMMIT, when an error still aborts the transaction cleanly.
 */
static void
send_notifications(void)
{
	ListCell   *lc;
	StringInfoData payload;

	if (pending_queues == NIL && pending_runs == NIL)
		return;

	foreach(lc, pending_queues)
	{
		WfPendingQueue *pq = (WfPendingQueue *) lfirst(lc);

		Async_Notify(pq->channel, pq->queue);
	}

	initStringInfo(&payload);
	foreach(lc, pending_runs)
	{
		WfPendingRun *pr = (WfPendingRun *) lfirst(lc);

		Async_Notify(pr->channel, run_payload(pr, &payload));
	}
	pfree(payload.data);
}

/*
 * wake_waiters wakes the claimers waiting on the touched queues and, when
 * needed, the engine worker; called at COMMIT, after the commit became
 * visible.  It must not fail: it only touches shared memory that exists
 * for the life of the server.
 */
static void
wake_waiters(void)
{
	ListCell   *lc;
	uint32		done[WF_QUEUE_WAIT_BUCKETS / 32];
	TimestampTz now;

	if (WfShmem == NULL)
		return;
	now = pending_queues != NIL ? GetCurrentTimestamp() : 0;

	memset(done, 0, sizeof(done));
	foreach(lc, pending_queues)
	{
		WfPendingQueue *pq = (WfPendingQueue *) lfirst(lc);
		uint32		b = pq->bucket;

		if (done[b / 32] & ((uint32) 1 << (b % 32)))
			continue;
		done[b / 32] |= (uint32) 1 << (b % 32);
		/* for the wake-to-claim histogram; the bump below orders it */
		WfMetricsNoteWake(b, now);
		/* the bump is a full barrier: it is ordered after the commit */
		pg_atomic_fetch_add_u64(&WfShmem->queue_gen[b], 1);
		ConditionVariableBroadcast(&WfShmem->queue_cv[b]);
	}
	/* the claims that wait on several queues (claim.c) look at their buckets */
	if (pending_queues != NIL)
		ConditionVariableBroadcast(&WfShmem->any_queue_cv);

	if (pending_timer)
	{
		WfDbWorkerSlot *slot = WfWorkerSlotFor(MyDatabaseId);

		if (slot != NULL)
		{
			TimestampTz next_due = (TimestampTz) pg_atomic_read_u64(&slot->next_due);
			Latch	   *latch = slot->latch;

			/* 0: the worker has not published a time yet */
			if (latch != NULL && (next_due == 0 || pending_fire_at < next_due))
			{
				pg_atomic_write_u32(&slot->tick_wanted, 1);
				SetLatch(latch);
			}
		}
	}
}

/*
 * forget_pending drops what the transaction recorded.  The memory itself
 * belongs to TopTransactionContext and goes away with it.
 */
static void
forget_pending(void)
{
	pending_queues = NIL;
	pending_runs = NIL;
	pending_timer = false;
	pending_fire_at = 0;
}

/*
 * run_payload formats the payload of a run notification into buf.
 */
static char *
run_payload(WfPendingRun *pr, StringInfo buf)
{
	resetStringInfo(buf);
	appendStringInfo(buf, "{\"run_id\": \"%s\", \"kind\": \"%s\"}",
					 DatumGetCString(DirectFunctionCall1(uuid_out,
														 UUIDPGetDatum(&pr->run_id))),
					 pr->kind);
	return buf->data;
}

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
 * once what the worker must see is visible; see the file header.
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
		{
			pg_atomic_write_u32(&slot->tick_wanted, 1);
			SetLatch(slot->latch);
		}
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * wake_xact_callback sends the wake-ups that a transaction asked for, once
 * it has committed: the launcher after CREATE EXTENSION (forgetting that
 * this database had no extension), this database's worker after DROP
 * EXTENSION.  Nothing here may fail.
 */
static void
wake_xact_callback(XactEvent event, void *arg)
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
				note = WfNoteFind(MyDatabaseId);
				if (note != NULL)
				{
					note->absent = false;
					WfNoteForgetIfEmpty(note, GetCurrentTimestamp());
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
 * register_wake_callback installs wake_xact_callback once per backend.
 */
static void
register_wake_callback(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(wake_xact_callback, NULL);
		xact_callback_registered = true;
	}
}

/*
 * WfWakeLauncherAtCommit asks for the launcher to be woken when the
 * current transaction commits, and for this database to be probed again
 * (CREATE EXTENSION).  Without preload it does nothing.
 */
void
WfWakeLauncherAtCommit(void)
{
	if (WfShmem != NULL && WfWorkers != NULL)
	{
		register_wake_callback();
		wake_launcher_at_commit = true;
	}
}

/*
 * WfWakeWorkerAtCommit asks for this database's worker to be woken when
 * the current transaction commits (DROP EXTENSION wfengine: the worker
 * then finds the extension gone and exits).  Without preload it does
 * nothing.
 */
void
WfWakeWorkerAtCommit(void)
{
	if (WfShmem != NULL && WfWorkers != NULL)
	{
		register_wake_callback();
		wake_worker_at_commit = true;
	}
}

/*
 * The relay.  PostgreSQL's NOTIFY takes a cluster-wide lock at pre-commit
 * and holds it until the commit record is flushed, so every transaction
 * that notifies commits one at a time and group commit is lost.  When the
 * database has a running engine worker, a transaction therefore does not
 * notify by itself: after its commit it copies its notifications into the
 * relay of its database's worker slot (WF_RELAY_PER_DB of them, in shared
 * memory) and sets the worker's latch, and the worker sends them all in
 * its next short transaction (WfRelaySend), no sooner than
 * WF_RELAY_INTERVAL_MS after the previous one (worker.c).  Queue
 * notifications are coalesced in the relay (one per queue until the worker
 * sends them).  When the relay is full, notifications (queue and run
 * alike) are dropped and counted (relay_dropped_total: wf.worker_status()),
 * and the worker then sends one {"kind": "overflow"} on wf_overflow so that
 * subscribers know to look at their runs and queues themselves.  Each
 * database has a relay of its own: a database whose worker is stopped or
 * slow fills and drops only its own notifications.  Without a worker (not
 * preloaded, wfengine.enabled off) notifications are sent at pre-commit,
 * as PostgreSQL does.
 */

/*
 * relay_slot returns the worker slot of this database when the relay can
 * be used, or NULL.
 */
static WfDbWorkerSlot *
relay_slot(void)
{
	WfDbWorkerSlot *slot;

	if (WfShmem == NULL || !wf_enabled || (pending_queues == NIL && pending_runs == NIL))
		return NULL;
	slot = WfWorkerSlotFor(MyDatabaseId);
	if (slot == NULL || slot->latch == NULL || slot->pid == 0)
		return NULL;
	return slot;
}

/*
 * relay_put adds one notification to a relay; the caller holds its lock.
 * With coalesce, an equal pending item (the same channel: a queue's
 * notification says only "look") is enough.  False when the relay is
 * full.
 */
static bool
relay_put(WfRelay *relay, const char *channel, const char *payload, bool coalesce)
{
	WfRelayItem *item;
	int			i;

	if (coalesce)
	{
		for (i = 0; i < relay->count; i++)
			if (strcmp(relay->items[i].channel, channel) == 0)
				return true;
	}
	if (relay->count >= WF_RELAY_PER_DB)
		return false;
	item = &relay->items[relay->count++];
	strlcpy(item->channel, channel, NAMEDATALEN);
	strlcpy(item->payload, payload, WF_RELAY_PAYLOAD);
	return true;
}

/*
 * relay_notifications hands this transaction's notifications to the
 * worker of its database, in the relay of its slot; called at COMMIT.  It
 * must not fail: formatting happens before the spinlock is taken, and a
 * full relay only drops and counts, queue and run notifications alike
 * (the worker then sends the overflow notice).  The relay is this
 * database's alone: another database's full relay never drops ours.
 */
static void
relay_notifications(WfDbWorkerSlot *slot)
{
	ListCell   *lc;
	int			nr = list_length(pending_runs);
	char	  **rpay = palloc(sizeof(char *) * Max(nr, 1));
	StringInfoData buf;
	int			i = 0;
	uint32		dropped = 0;
	WfRelay    *relay = &slot->relay;

	initStringInfo(&buf);
	i = 0;
	foreach(lc, pending_runs)
		rpay[i++] = pstrdup(run_payload((WfPendingRun *) lfirst(lc), &buf));

	SpinLockAcquire(&relay->lock);
	if (relay->dboid != MyDatabaseId)
	{
		/* the slot went to another database meanwhile: nobody to send them */
		SpinLockRelease(&relay->lock);
		return;
	}
	foreach(lc, pending_queues)
	{
		WfPendingQueue *pq = (WfPendingQueue *) lfirst(lc);

		if (!relay_put(relay, pq->channel, pq->queue, true))
			dropped++;
	}
	i = 0;
	foreach(lc, pending_runs)
	{
		if (!relay_put(relay, ((WfPendingRun *) lfirst(lc))->channel, rpay[i], false))
			dropped++;
		i++;
	}
	SpinLockRelease(&relay->lock);

	if (dropped > 0)
	{
		pg_atomic_fetch_add_u32(&slot->relay_dropped, dropped);
		pg_atomic_fetch_add_u64(&slot->relay_dropped_total, dropped);
	}
	SetLatch(slot->latch);
}

/*
 * WfRelaySend sends the notifications that committed transactions handed
 * to the worker of this database (slot: its slot; NULL: none), and an
 * overflow notice when some were dropped since the last one; the engine
 * worker calls it inside its transaction, and they are delivered when
 * that transaction commits.  Returns how many it sent.
 */
int
WfRelaySend(WfDbWorkerSlot *slot)
{
	WfRelayItem *mine;
	int			n;
	int			i;
	uint32		dropped;

	if (WfShmem == NULL || slot == NULL)
		return 0;
	mine = palloc(sizeof(WfRelayItem) * WF_RELAY_PER_DB);
	SpinLockAcquire(&slot->relay.lock);
	n = slot->relay.dboid == MyDatabaseId ? slot->relay.count : 0;
	memcpy(mine, slot->relay.items, sizeof(WfRelayItem) * n);
	if (n > 0)
		slot->relay.count = 0;
	SpinLockRelease(&slot->relay.lock);

	for (i = 0; i < n; i++)
		Async_Notify(mine[i].channel, mine[i].payload);
	dropped = pg_atomic_exchange_u32(&slot->relay_dropped, 0);
	if (dropped > 0)
		Async_Notify(WF_OVERFLOW_CHANNEL, "{\"kind\": \"overflow\"}");
	pfree(mine);
	return n;
}

/*
 * WfRelayPending tells the worker whether notifications of its database
 * wait in its relay.  A committer sets the worker's latch after handing
 * them over, but a lock wait inside the worker's own transaction
 * (ProcSleep, say on the cluster-wide NOTIFY lock that a worker of another
 * database holds) resets the latch; the worker therefore looks here before
 * it sleeps, so that such a wake-up is never lost.
 */
bool
WfRelayPending(void)
{
	WfDbWorkerSlot *slot;
	bool		found;

	if (WfShmem == NULL || (slot = WfWorkerSlotFor(MyDatabaseId)) == NULL)
		return false;
	SpinLockAcquire(&slot->relay.lock);
	found = slot->relay.dboid == MyDatabaseId && slot->relay.count > 0;
	SpinLockRelease(&slot->relay.lock);
	return found || pg_atomic_read_u32(&slot->relay_dropped) > 0;
}

PG_FUNCTION_INFO_V1(wfengine_channel);



/*
 * wfengine_channel is wf.channel(kind, queue): the LISTEN channel of the
 * session's tenant for its runs ("runs") or for a queue ("queue").
 */
Datum
wfengine_channel(PG_FUNCTION_ARGS)
{
	char	   *kind = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	char		buf[NAMEDATALEN];
	text	   *result;

	if (kind == NULL || (strcmp(kind, "runs") != 0 && strcmp(kind, "queue") != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown channel kind \"%s\"", kind ? kind : "(null)"),
				 errhint("Ask for wf.channel('runs') or wf.channel('queue', '<queue>').")));
	if (strcmp(kind, "queue") == 0 && PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the channel of a queue needs the queue name")));

	WfApiBegin();
	if (strcmp(kind, "runs") == 0)
		WfRunChannel(WfCurrentTenant(), buf);
	else
		WfQueueChannel(WfCurrentTenant(), text_to_cstring(PG_GETARG_TEXT_PP(1)), buf);
	result = (text *) SPI_palloc(VARHDRSZ + strlen(buf));
	SET_VARSIZE(result, VARHDRSZ + strlen(buf));
	memcpy(VARDATA(result), buf, strlen(buf));
	WfApiEnd();
	PG_RETURN_TEXT_P(result);
}
