/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  Cumulative engine counters and histograms: what the monitoring views
 *	  cannot count cheaply from the tables.
 *
 * What is counted.  Transitions written and events appended, runs
 * started, claims (calls, tasks handed out, wake-ups of waiting claims),
 * results by verdict (accepted, cancel_requested, duplicate, stale),
 * timers fired (and fired stale), task deadlines acted on; and two
 * histograms: the lag of a fired timer behind its due time, and the time
 * from the commit that woke a waiting claim to that claim getting its
 * tasks.  The names are counter_names[] and hist_names[] below; the SQL
 * functions wf.engine_counters(), wf.timer_lag_histogram() and
 * wf.claim_latency_histogram() read them (docs/monitoring.md).
 *
 * Counted at commit.  A counter must not count work that rolled back (a
 * claim whose transaction aborted handed nothing out), so WfCount and
 * WfObserve only add to backend-local frames, one per subtransaction
 * that counted something, in TopTransactionContext: an increment of a
 * local array on the hot path.  A subtransaction that aborts drops its
 * frames and those of its children; one that commits hands them to its
 * parent.  At commit (and at PREPARE: a prepared transaction is nearly
 * always committed, and COMMIT PREPARED may run anywhere) the frames are
 * summed and added to shared memory with one pg_atomic_fetch_add_u64 per
 * non-zero value; nothing there can fail.  The callbacks are registered
 * in a backend the first time it counts, so sessions that never use the
 * engine pay nothing.
 *
 * Per database.  The shared struct holds wfengine.metrics_databases
 * entries, one per database that counted something, claimed under a
 * spinlock the first time; a backend remembers its entry.  When every
 * entry is taken a further database counts nothing
 * (metrics_dropped_databases says how many such commits there were).  The
 * launcher gives back the entries of dropped databases after each read of
 * pg_database (WfMetricsForgetDropped): only an entry claimed before that
 * read began, so that a database created meanwhile keeps its own.  The entries hold no tenant: they are
 * aggregates of every tenant of the database, which is why the SQL
 * functions are granted to pg_monitor only (see the install script).
 *
 * Restarts.  Like pg_stat_statements, and like PostgreSQL's own
 * cumulative statistics: a clean shutdown writes the entries to
 * pg_stat/wfengine_metrics.stat (from the postmaster's on_shmem_exit
 * callback), and the next start reads the file back and removes it.  The
 * file is read only when pg_control says the server was shut down cleanly
 * (an immediate shutdown also exits the postmaster normally, and writes
 * the file, but leaves the cluster to crash recovery): after a crash or an
 * immediate stop the counters start from zero, as the server's own
 * cumulative statistics do.  A file of another layout (another build with other
 * counters) is ignored with a LOG message.
 *
 * Claim wake-ups.  notify.c records, per wait bucket, when a commit last
 * woke it (WfMetricsNoteWake, one atomic write after the broadcast); a
 * waiting claim that was woken and then claims something observes the
 * time since that moment.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/metrics.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "guc.h"
#include "metrics.h"

PG_FUNCTION_INFO_V1(wfengine_engine_counters);
PG_FUNCTION_INFO_V1(wfengine_timer_lag_histogram);
PG_FUNCTION_INFO_V1(wfengine_claim_latency_histogram);

/* how many databases keep counters */

/* histogram buckets: upper bounds in microseconds, the last is +Inf */
#define WF_HIST_BUCKETS 17
static const int64 hist_bounds_us[WF_HIST_BUCKETS - 1] = {
	1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000, 60000000, 300000000
};

/* the file a clean shutdown writes */
#define WF_METRICS_FILE PGSTAT_STAT_PERMANENT_DIRECTORY "/wfengine_metrics.stat"
#define WF_METRICS_MAGIC 0x57464d31	/* "WFM1" */

static const char *const counter_names[WF_COUNTER_COUNT] = {
	[WF_CNT_RUNS_STARTED] = "runs_started",
	[WF_CNT_TRANSITIONS] = "transitions",
	[WF_CNT_EVENTS] = "events_appended",
	[WF_CNT_CLAIM_CALLS] = "claim_calls",
	[WF_CNT_TASKS_CLAIMED] = "tasks_claimed",
	[WF_CNT_CLAIM_WAKEUPS] = "claim_wakeups",
	[WF_CNT_RESULTS_ACCEPTED] = "results_accepted",
	[WF_CNT_RESULTS_CANCEL_REQUESTED] = "results_cancel_requested",
	[WF_CNT_RESULTS_DUPLICATE] = "results_duplicate",
	[WF_CNT_RESULTS_STALE] = "results_stale",
	[WF_CNT_TIMERS_FIRED] = "timers_fired",
	[WF_CNT_TIMERS_STALE] = "timers_stale",
	[WF_CNT_DEADLINES_FIRED] = "deadlines_fired",
	[WF_CNT_DUE_LOCK_SKIPS] = "due_lock_skips",
};

static const char *const hist_names[WF_HIST_COUNT] = {
	[WF_HIST_TIMER_LAG] = "timer_lag",
	[WF_HIST_WAKE_TO_CLAIM] = "wake_to_claim",
};

/* the counts of one database, as kept in shared memory and in the file */
typedef struct WfMetricsValues
{
	uint64		counters[WF_COUNTER_COUNT];
	uint64		buckets[WF_HIST_COUNT][WF_HIST_BUCKETS];	/* not cumulative */
	uint64		sum_us[WF_HIST_COUNT];
} WfMetricsValues;

/* one database's entry in shared memory */
typedef struct WfMetricsDb
{
	Oid			dboid;			/* InvalidOid when free; set under lock */
	TimestampTz claimed_at;		/* when dboid was set (0: read from the file) */
	pg_atomic_uint64 counters[WF_COUNTER_COUNT];
	pg_atomic_uint64 buckets[WF_HIST_COUNT][WF_HIST_BUCKETS];
	pg_atomic_uint64 sum_us[WF_HIST_COUNT];
} WfMetricsDb;

typedef struct WfMetricsShared
{
	slock_t		lock;			/* protects the assignment of dboid */
	pg_atomic_uint64 dropped;	/* commits of databases that found no entry */
	pg_atomic_uint64 woken_at[WF_QUEUE_WAIT_BUCKETS];	/* TimestampTz */
	int			ndb;			/* entries: wfengine.metrics_databases at start */
	WfMetricsDb db[FLEXIBLE_ARRAY_MEMBER];
} WfMetricsShared;

/* the header of the file */
typedef struct WfMetricsFileHeader
{
	uint32		magic;
	uint32		ncounters;
	uint32		nhist;
	uint32		nbuckets;
	uint32		nentries;
} WfMetricsFileHeader;

/* shared memory state */
static WfMetricsShared *metrics = NULL;

/* backend state: this database's entry, once found */
static WfMetricsDb *my_db = NULL;
static bool callbacks_registered = false;

/* what one (sub)transaction counted, in TopTransactionContext */
typedef struct WfMetricsFrame
{
	SubTransactionId subid;
	WfMetricsValues v;
} WfMetricsFrame;

static List *frames = NIL;		/* innermost last */

/* forward declarations */
static void metrics_shutdown(int code, Datum arg);
static void metrics_load(void);
static void metrics_xact_callback(XactEvent event, void *arg);
static void metrics_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
									 SubTransactionId parentSubid, void *arg);

/*
 * WfMetricsShmemSize is the size of the shared struct; shmem.c requests it.
 */
Size
WfMetricsShmemSize(void)
{
	return MAXALIGN(add_size(offsetof(WfMetricsShared, db),
							 mul_size(wf_metrics_databases, sizeof(WfMetricsDb))));
}

/*
 * WfMetricsShmemStartup creates or attaches to the shared struct; called
 * by shmem.c's startup hook under AddinShmemInitLock.  The postmaster
 * loads the file of the last clean shutdown and arranges for the next one.
 */
void
WfMetricsShmemStartup(void)
{
	bool		found;
	int			i,
				j,
				k;

	metrics = ShmemInitStruct("wfengine metrics", WfMetricsShmemSize(), &found);
	if (!found)
	{
		SpinLockInit(&metrics->lock);
		pg_atomic_init_u64(&metrics->dropped, 0);
		for (i = 0; i < WF_QUEUE_WAIT_BUCKETS; i++)
			pg_atomic_init_u64(&metrics->woken_at[i], 0);
		metrics->ndb = wf_metrics_databases;
		for (i = 0; i < metrics->ndb; i++)
		{
			WfMetricsDb *d = &metrics->db[i];

			d->dboid = InvalidOid;
			d->claimed_at = 0;
			for (j = 0; j < WF_COUNTER_COUNT; j++)
				pg_atomic_init_u64(&d->counters[j], 0);
			for (j = 0; j < WF_HIST_COUNT; j++)
			{
				pg_atomic_init_u64(&d->sum_us[j], 0);
				for (k = 0; k < WF_HIST_BUCKETS; k++)
					pg_atomic_init_u64(&d->buckets[j][k], 0);
			}
		}
		metrics_load();
	}
	if (!IsUnderPostmaster)
		on_shmem_exit(metrics_shutdown, (Datum) 0);
}

/*
 * metrics_load reads the file of the last clean shutdown into the fresh
 * struct and removes it, so that a crash later cannot bring it back.
 */
static void
metrics_load(void)
{
	FILE	   *f;
	WfMetricsFileHeader h;
	uint32		i;
	bool		crc_ok;
	ControlFileData *control = get_controlfile(DataDir, &crc_ok);

	/* a crash, or an immediate stop: start from zero, as pgstat does */
	if (!crc_ok || (control->state != DB_SHUTDOWNED &&
					control->state != DB_SHUTDOWNED_IN_RECOVERY))
	{
		pfree(control);
		unlink(WF_METRICS_FILE);
		return;
	}
	pfree(control);

	f = AllocateFile(WF_METRICS_FILE, PG_BINARY_R);
	if (f == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", WF_METRICS_FILE)));
		return;
	}
	if (fread(&h, sizeof(h), 1, f) != 1 || h.magic != WF_METRICS_MAGIC ||
		h.ncounters != WF_COUNTER_COUNT || h.nhist != WF_HIST_COUNT ||
		h.nbuckets != WF_HIST_BUCKETS)
	{
		ereport(LOG,
				(errmsg("ignoring wfengine metrics file \"%s\" of another layout",
						WF_METRICS_FILE)));
		goto done;
	}
	/* fewer entries since (wfengine.metrics_databases lowered): the first */
	for (i = 0; i < h.nentries && i < (uint32) metrics->ndb; i++)
	{
		Oid			dboid;
		WfMetricsValues v;
		WfMetricsDb *d = &metrics->db[i];
		int			j,
					k;

		if (fread(&dboid, sizeof(dboid), 1, f) != 1 || fread(&v, sizeof(v), 1, f) != 1)
		{
			ereport(LOG,
					(errmsg("wfengine metrics file \"%s\" is truncated", WF_METRICS_FILE)));
			break;
		}
		d->dboid = dboid;
		for (j = 0; j < WF_COUNTER_COUNT; j++)
			pg_atomic_write_u64(&d->counters[j], v.counters[j]);
		for (j = 0; j < WF_HIST_COUNT; j++)
		{
			pg_atomic_write_u64(&d->sum_us[j], v.sum_us[j]);
			for (k = 0; k < WF_HIST_BUCKETS; k++)
				pg_atomic_write_u64(&d->buckets[j][k], v.buckets[j][k]);
		}
	}
done:
	FreeFile(f);
	unlink(WF_METRICS_FILE);
}

/*
 * read_values copies an entry out of shared memory.
 */
static void
read_values(WfMetricsDb *d, WfMetricsValues *v)
{
	int			j,
				k;

	for (j = 0; j < WF_COUNTER_COUNT; j++)
		v->counters[j] = pg_atomic_read_u64(&d->counters[j]);
	for (j = 0; j < WF_HIST_COUNT; j++)
	{
		v->sum_us[j] = pg_atomic_read_u64(&d->sum_us[j]);
		for (k = 0; k < WF_HIST_BUCKETS; k++)
			v->buckets[j][k] = pg_atomic_read_u64(&d->buckets[j][k]);
	}
}

/*
 * metrics_shutdown writes the entries to the file at a clean shutdown of
 * the postmaster (code 0); after a crash it writes nothing.
 */
static void
metrics_shutdown(int code, Datum arg)
{
	FILE	   *f;
	WfMetricsFileHeader h;
	int			i;
	const char *tmp = WF_METRICS_FILE ".tmp";

	if (code != 0 || metrics == NULL)
		return;
	f = AllocateFile(tmp, PG_BINARY_W);
	if (f == NULL)
		goto error;
	memset(&h, 0, sizeof(h));
	h.magic = WF_METRICS_MAGIC;
	h.ncounters = WF_COUNTER_COUNT;
	h.nhist = WF_HIST_COUNT;
	h.nbuckets = WF_HIST_BUCKETS;
	for (i = 0; i < metrics->ndb; i++)
		if (metrics->db[i].dboid != InvalidOid)
			h.nentries++;
	if (fwrite(&h, sizeof(h), 1, f) != 1)
		goto error;
	for (i = 0; i < metrics->ndb; i++)
	{
		WfMetricsValues v;

		if (metrics->db[i].dboid == InvalidOid)
			continue;
		read_values(&metrics->db[i], &v);
		if (fwrite(&metrics->db[i].dboid, sizeof(Oid), 1, f) != 1 ||
			fwrite(&v, sizeof(v), 1, f) != 1)
			goto error;
	}
	if (FreeFile(f))
	{
		f = NULL;
		goto error;
	}
	(void) durable_rename(tmp, WF_METRICS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", tmp)));
	if (f)
		FreeFile(f);
	unlink(tmp);
}

/*
 * database_entry returns this database's entry, claiming a free one the
 * first time; NULL when every entry belongs to another database.  A
 * session that found none looks again only a second later: a count is on
 * the hot path of every transition, and the entries stay full until the
 * launcher gives back those of dropped databases (its naptime).
 */
static WfMetricsDb *
database_entry(void)
{
	int			i;
	WfMetricsDb *free_entry = NULL;
	TimestampTz now;
	static TimestampTz none_until = 0;

	if (my_db != NULL)
		return my_db;
	if (metrics == NULL || !OidIsValid(MyDatabaseId))
		return NULL;
	now = GetCurrentTimestamp();
	if (now < none_until)
		return NULL;
	SpinLockAcquire(&metrics->lock);
	for (i = 0; i < metrics->ndb; i++)
	{
		if (metrics->db[i].dboid == MyDatabaseId)
		{
			my_db = &metrics->db[i];
			break;
		}
		if (metrics->db[i].dboid == InvalidOid && free_entry == NULL)
			free_entry = &metrics->db[i];
	}
	if (my_db == NULL && free_entry != NULL)
	{
		free_entry->dboid = MyDatabaseId;
		free_entry->claimed_at = now;
		my_db = free_entry;
	}
	SpinLockRelease(&metrics->lock);
	if (my_db == NULL)
		none_until = TimestampTzPlusMilliseconds(now, 1000);
	return my_db;
}

/*
 * WfMetricsForgetDropped gives back the entries of databases that no
 * longer exist.  live[0 .. nlive - 1] are the oids of every database of
 * pg_database as read by a transaction that began at read_at; an entry
 * whose database is not among them and that was claimed before read_at
 * belonged to a dropped database (DROP DATABASE ends every session of it
 * first, so no backend counts into it any more).  Its counts are cleared,
 * then the entry is freed under the lock for the next database to claim.
 * An entry claimed after read_at is left alone: its database may have
 * been created after the read.  Called by the launcher; nothing else
 * frees entries.
 */
void
WfMetricsForgetDropped(const Oid *live, int nlive, TimestampTz read_at)
{
	int			i;

	if (metrics == NULL)
		return;
	for (i = 0; i < metrics->ndb; i++)
	{
		WfMetricsDb *d = &metrics->db[i];
		Oid			dboid = d->dboid;
		bool		found = false;
		int			j,
					k;

		if (!OidIsValid(dboid) || d->claimed_at >= read_at)
			continue;
		for (j = 0; j < nlive && !found; j++)
			found = (live[j] == dboid);
		if (found)
			continue;
		for (j = 0; j < WF_COUNTER_COUNT; j++)
			pg_atomic_write_u64(&d->counters[j], 0);
		for (j = 0; j < WF_HIST_COUNT; j++)
		{
			pg_atomic_write_u64(&d->sum_us[j], 0);
			for (k = 0; k < WF_HIST_BUCKETS; k++)
				pg_atomic_write_u64(&d->buckets[j][k], 0);
		}
		SpinLockAcquire(&metrics->lock);
		if (d->dboid == dboid && d->claimed_at < read_at)
		{
			d->dboid = InvalidOid;
			d->claimed_at = 0;
		}
		SpinLockRelease(&metrics->lock);
	}
}

/*
 * current_frame returns the frame of the current subtransaction, making
 * it (and registering the callbacks) on first use; NULL without shared
 * memory.
 */
static WfMetricsFrame *
current_frame(void)
{
	SubTransactionId subid;
	WfMetricsFrame *fr;
	MemoryContext old;

	if (metrics == NULL || !IsTransactionState())
		return NULL;
	subid = GetCurrentSubTransactionId();
	if (frames != NIL)
	{
		fr = (WfMetricsFrame *) llast(frames);
		if (fr->subid == subid)
			return fr;
	}
	if (!callbacks_registered)
	{
		RegisterXactCallback(metrics_xact_callback, NULL);
		RegisterSubXactCallback(metrics_subxact_callback, NULL);
		callbacks_registered = true;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	fr = palloc0(sizeof(WfMetricsFrame));
	fr->subid = subid;
	frames = lappend(frames, fr);
	MemoryContextSwitchTo(old);
	return fr;
}

/*
 * WfCount adds n to counter c when the transaction commits.
 */
void
WfCount(WfCounter c, uint64 n)
{
	WfMetricsFrame *fr = current_frame();

	if (fr != NULL)
		fr->v.counters[c] += n;
}

/*
 * WfObserve records in histogram h the time from from to to (negative
 * times count as zero) when the transaction commits.
 */
void
WfObserve(WfHistogram h, TimestampTz from, TimestampTz to)
{
	WfMetricsFrame *fr = current_frame();
	int64		us = Max(to - from, 0);
	int			b;

	if (fr == NULL)
		return;
	for (b = 0; b < WF_HIST_BUCKETS - 1; b++)
		if (us <= hist_bounds_us[b])
			break;
	fr->v.buckets[h][b]++;
	fr->v.sum_us[h] += (uint64) us;
}

/*
 * add_values adds the counts of src to dst.
 */
static void
add_values(WfMetricsValues *dst, const WfMetricsValues *src)
{
	int			j,
				k;

	for (j = 0; j < WF_COUNTER_COUNT; j++)
		dst->counters[j] += src->counters[j];
	for (j = 0; j < WF_HIST_COUNT; j++)
	{
		dst->sum_us[j] += src->sum_us[j];
		for (k = 0; k < WF_HIST_BUCKETS; k++)
			dst->buckets[j][k] += src->buckets[j][k];
	}
}

/*
 * flush adds what the committed transaction counted to its database's
 * entry.  Runs after the commit; nothing here can fail.
 */
static void
flush(void)
{
	WfMetricsValues sum;
	WfMetricsDb *d;
	ListCell   *lc;
	int			j,
				k;

	memset(&sum, 0, sizeof(sum));
	foreach(lc, frames)
		add_values(&sum, &((WfMetricsFrame *) lfirst(lc))->v);
	d = database_entry();
	if (d == NULL)
	{
		pg_atomic_fetch_add_u64(&metrics->dropped, 1);
		return;
	}
	for (j = 0; j < WF_COUNTER_COUNT; j++)
		if (sum.counters[j] != 0)
			pg_atomic_fetch_add_u64(&d->counters[j], sum.counters[j]);
	for (j = 0; j < WF_HIST_COUNT; j++)
	{
		if (sum.sum_us[j] != 0)
			pg_atomic_fetch_add_u64(&d->sum_us[j], sum.sum_us[j]);
		for (k = 0; k < WF_HIST_BUCKETS; k++)
			if (sum.buckets[j][k] != 0)
				pg_atomic_fetch_add_u64(&d->buckets[j][k], sum.buckets[j][k]);
	}
}

/*
 * metrics_xact_callback adds the counts of a transaction that commits (or
 * is prepared) and forgets them at its end either way.
 */
static void
metrics_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			if (frames != NIL)
				flush();
			frames = NIL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			frames = NIL;
			break;
		default:
			break;
	}
}

/*
 * metrics_subxact_callback drops the frames of a subtransaction that
 * aborts (and of its children: their ids are higher), and hands those of
 * one that commits to its parent.
 */
static void
metrics_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	WfMetricsFrame *fr;

	if (frames == NIL)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		while (frames != NIL &&
			   ((WfMetricsFrame *) llast(frames))->subid >= mySubid)
			frames = list_delete_last(frames);
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		while (frames != NIL &&
			   (fr = (WfMetricsFrame *) llast(frames))->subid >= mySubid)
		{
			int			n = list_length(frames);
			WfMetricsFrame *prev = n > 1 ?
			(WfMetricsFrame *) list_nth(frames, n - 2) : NULL;

			if (prev != NULL && prev->subid >= parentSubid)
			{
				/* the parent (or a sibling merged already) has a frame */
				add_values(&prev->v, &fr->v);
				frames = list_delete_last(frames);
			}
			else
			{
				fr->subid = parentSubid;
				break;
			}
		}
	}
}

/*
 * WfMetricsNoteWake records that a commit woke wait bucket b at at
 * (notify.c, after the broadcast).
 */
void
WfMetricsNoteWake(uint32 bucket, TimestampTz at)
{
	if (metrics != NULL)
		pg_atomic_write_u64(&metrics->woken_at[bucket], (uint64) at);
}

/*
 * WfMetricsWokenAt returns when a commit last woke wait bucket b (0: not
 * since the start, or no shared memory).
 */
TimestampTz
WfMetricsWokenAt(uint32 bucket)
{
	if (metrics == NULL)
		return 0;
	return (TimestampTz) pg_atomic_read_u64(&metrics->woken_at[bucket]);
}

/*
 * require_shmem refuses the SQL functions without preload.
 */
static void
require_shmem(void)
{
	if (metrics == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wfengine engine counters are not available"),
				 errdetail("The counters live in shared memory, which exists only when wfengine is preloaded."),
				 errhint("Add wfengine to shared_preload_libraries and restart the server.")));
}

/*
 * this_database reads this database's counts (zeros when it has no entry).
 */
static void
this_database(WfMetricsValues *v)
{
	int			i;

	memset(v, 0, sizeof(WfMetricsValues));
	for (i = 0; i < metrics->ndb; i++)
		if (metrics->db[i].dboid == MyDatabaseId)
		{
			read_values(&metrics->db[i], v);
			return;
		}
}

/*
 * put_row adds a (text, int8) row to the function's tuplestore.
 */
static void
put_row(ReturnSetInfo *rsinfo, const char *name, uint64 value)
{
	Datum		values[2];
	bool		nulls[2] = {false, false};

	values[0] = CStringGetTextDatum(name);
	values[1] = Int64GetDatum((int64) value);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * wfengine_engine_counters is wf.engine_counters(): name and value of
 * every counter of this database, then for each histogram its count and
 * its sum in microseconds, then metrics_dropped_databases (server-wide).
 */
Datum
wfengine_engine_counters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WfMetricsValues v;
	int			j,
				k;

	require_shmem();
	InitMaterializedSRF(fcinfo, 0);
	this_database(&v);
	for (j = 0; j < WF_COUNTER_COUNT; j++)
		put_row(rsinfo, counter_names[j], v.counters[j]);
	for (j = 0; j < WF_HIST_COUNT; j++)
	{
		uint64		count = 0;

		for (k = 0; k < WF_HIST_BUCKETS; k++)
			count += v.buckets[j][k];
		put_row(rsinfo, psprintf("%s_count", hist_names[j]), count);
		put_row(rsinfo, psprintf("%s_sum_us", hist_names[j]), v.sum_us[j]);
	}
	put_row(rsinfo, "metrics_dropped_databases", pg_atomic_read_u64(&metrics->dropped));
	return (Datum) 0;
}

/*
 * histogram_rows returns histogram h of this database as (le, count)
 * rows, cumulative as Prometheus has them: le in seconds, the last
 * 'Infinity'.
 */
static Datum
histogram_rows(FunctionCallInfo fcinfo, WfHistogram h)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WfMetricsValues v;
	uint64		cum = 0;
	int			k;

	require_shmem();
	InitMaterializedSRF(fcinfo, 0);
	this_database(&v);
	for (k = 0; k < WF_HIST_BUCKETS; k++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		cum += v.buckets[h][k];
		values[0] = Float8GetDatum(k < WF_HIST_BUCKETS - 1 ?
								   (double) hist_bounds_us[k] / 1000000.0 :
								   get_float8_infinity());
		values[1] = Int64GetDatum((int64) cum);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * wfengine_timer_lag_histogram is wf.timer_lag_histogram().
 */
Datum
wfengine_timer_lag_histogram(PG_FUNCTION_ARGS)
{
	return histogram_rows(fcinfo, WF_HIST_TIMER_LAG);
}

/*
 * wfengine_claim_latency_histogram is wf.claim_latency_histogram().
 */
Datum
wfengine_claim_latency_histogram(PG_FUNCTION_ARGS)
{
	return histogram_rows(fcinfo, WF_HIST_WAKE_TO_CLAIM);
}
