/*-------------------------------------------------------------------------
 *
 * shard.c
 *	  The shard check: an API call of a tenant whose partition this
 *	  database does not own is refused.
 *
 * In a sharded deployment (docs/scale-out.md) tenants are spread over
 * several databases, each an ordinary wfengine install, behind a router
 * (wfengine_router).  A tenant's partition is hashtext(tenant) &
 * (partitions - 1), the value PL/Proxy's RUN ON computes on the router;
 * wfshard.partitions gives each partition to a shard and wfshard.self names
 * this one.  The router sends a call to the shard of the caller's tenant;
 * a call that reaches another shard anyway (a stale router map, a worker
 * pointed at the wrong database) must be refused, never served, or the
 * tenant's runs would be split over two shards.
 *
 * WfShardCheckTenant is called once per outermost API call (tenant.c,
 * WfApiSwitchIn), after the switch to the extension's owner.  The map is
 * read once per backend and kept until either table changes: their
 * statement trigger (wf._shard_map_changed) queues a relcache invalidation
 * of the table, which every backend receives after the commit.  With both
 * tables empty the deployment is not sharded, and the check is one test
 * of a cached flag.  Superusers are not checked (as row-level security
 * does not hold them): the engine worker, which acts for the runs it finds
 * in this database, and the administrator, who sets up and repairs shards.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/shard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "shard.h"

/* the most partitions a map may have (wf.configure_shard checks it too) */
#define WF_SHARD_MAX_PARTITIONS 4096

/*
 * The partition lock: every API call of a tenant takes it in share mode,
 * without waiting, for the rest of its transaction, and so does the engine
 * worker for each due item it handles; the cut-over of a move
 * (wf.move_out_cutover) takes it exclusively, which waits for the calls in
 * flight and refuses new ones.  Field 4 of the advisory tag is the
 * engine's own (tenant.h), so no SQL advisory lock can take it.
 */
#define WF_LOCK_PARTITION	0x5749
#define WF_LOCK_PARTITION_KEY 0x77667368	/* "wfsh" */

/* SQLSTATE of a tenant the map gives to another shard (docs/scale-out.md) */
#define ERRCODE_WF_WRONG_SHARD	MAKE_SQLSTATE('5','5','W','0','1')

/* what this backend knows of the map */
typedef enum WfShardState
{
	WF_SHARD_UNKNOWN = 0,		/* not read yet, or invalidated */
	WF_SHARD_OFF,				/* not sharded: no map */
	WF_SHARD_ON					/* a map, and this shard's name */
} WfShardState;

/* cached map */
static WfShardState shard_state = WF_SHARD_UNKNOWN;
static Oid	shard_map_relid = InvalidOid;
static Oid	shard_self_relid = InvalidOid;
static int	shard_partitions = 0;	/* a power of 2 */
static char *shard_self = NULL; /* in TopMemoryContext */
static char **shard_owner = NULL;	/* per partition, in TopMemoryContext */
static int64 shard_map_version = 0;
static bool shard_callback = false;
static uint64 shard_invals = 0;	/* invalidations of the map received so far */
static bool shard_skip_next = false;	/* WfShardAllowAnyTenant */
static int	shard_held = -1;		/* partition locked by this transaction's call */

/* the statement that reads the map (not kept: read once per backend) */
static const char *const shard_read_sql =
"SELECT m.partition, m.shard, s.shard, s.map_version "
"FROM wfshard.partitions m LEFT JOIN wfshard.self s ON true "
"ORDER BY m.partition";

/* forward declarations */
static void shard_invalidate(Datum arg, Oid relid);
static void shard_forget(void);
static void shard_load(void);

/*
 * shard_forget frees the cached map.
 */
static void
shard_forget(void)
{
	if (shard_owner != NULL)
	{
		for (int i = 0; i < shard_partitions; i++)
			if (shard_owner[i] != NULL)
				pfree(shard_owner[i]);
		pfree(shard_owner);
	}
	if (shard_self != NULL)
		pfree(shard_self);
	shard_owner = NULL;
	shard_self = NULL;
	shard_partitions = 0;
	shard_state = WF_SHARD_UNKNOWN;
}

/*
 * shard_invalidate is the relcache callback: a change of either table (or
 * a reset of the whole relcache, relid invalid) makes the next API call
 * read the map again.
 */
static void
shard_invalidate(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == shard_map_relid || relid == shard_self_relid)
	{
		shard_state = WF_SHARD_UNKNOWN;
		shard_invals++;
	}
}

/*
 * WfShardReset is the plan cache's reset callback (another install or
 * version of the extension: the tables may be new ones), registered by
 * _PG_init.
 */
void
WfShardReset(void)
{
	shard_state = WF_SHARD_UNKNOWN;
	shard_map_relid = InvalidOid;
	shard_self_relid = InvalidOid;
}

/*
 * WfShardInit registers the relcache callback; called from _PG_init, which
 * also registers WfShardReset with the plan cache.
 */
void
WfShardInit(void)
{
	if (shard_callback)
		return;
	CacheRegisterRelcacheCallback(shard_invalidate, (Datum) 0);
	shard_callback = true;
}

static void shard_load_once(void);

/*
 * shard_load reads wfshard.partitions and wfshard.self into the cache.  Called
 * by WfShardCheckTenant as the extension's owner, outside SPI.  A schema
 * without the tables (0.1.0: no schema wfshard) is not sharded.
 *
 * An invalidation received while the map is read (the read opens the
 * tables, which takes in the invalidations queued meanwhile) may come from
 * a change committed after the read's snapshot was taken, such as a move's
 * cut-over giving the partition away: the map is read again, else that
 * invalidation would be lost and the backend would serve the partition
 * from the older map until the next change (issue 30: a new connection's
 * first call during a cut-over started runs on the source after it gave
 * the partition away, and the cleanup of the move deleted them).
 */
static void
shard_load(void)
{
	/*
	 * The second read normally settles it: the tables are then locked by
	 * this transaction already, so opening them takes in no new
	 * invalidations.  A map that keeps changing under the reader is refused
	 * with a retryable error rather than read forever.
	 */
	for (int round = 0;; round++)
	{
		uint64		seen = shard_invals;

		shard_load_once();
		if (shard_invals == seen)
			break;
		if (round >= 8)
		{
			shard_state = WF_SHARD_UNKNOWN;
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("shard map changed %d times while it was read", round + 1),
					 errhint("Retry the call; the map settles once the move or configuration that changes it commits.")));
		}
	}
}

/*
 * shard_load_once reads the map once (shard_load).
 */
static void
shard_load_once(void)
{
	Oid			nsp = get_namespace_oid("wfshard", true);
	MemoryContext old;
	int			n;

	shard_forget();
	shard_map_relid = InvalidOid;
	shard_self_relid = InvalidOid;
	if (OidIsValid(nsp))
	{
		shard_map_relid = get_relname_relid("partitions", nsp);
		shard_self_relid = get_relname_relid("self", nsp);
	}
	if (!OidIsValid(shard_map_relid) || !OidIsValid(shard_self_relid))
	{
		shard_state = WF_SHARD_OFF;
		return;
	}

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/*
	 * The latest committed map, not the one of the caller's snapshot: a
	 * statement (or a REPEATABLE READ transaction) that began before a
	 * move's cut-over committed must see that the partition is gone, once
	 * it holds the partition lock (WfShardCheckTenant).
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	if (SPI_execute(shard_read_sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed: could not read wfshard.partitions");
	PopActiveSnapshot();
	n = (int) SPI_processed;
	if (n == 0)
	{
		SPI_finish();
		shard_state = WF_SHARD_OFF;
		return;
	}
	if (n > WF_SHARD_MAX_PARTITIONS || (n & (n - 1)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("shard map has %d partitions", n),
				 errhint("Set the map with wf.configure_shard(); the number of partitions is a power of 2.")));

	old = MemoryContextSwitchTo(TopMemoryContext);
	shard_owner = palloc0(sizeof(char *) * n);
	MemoryContextSwitchTo(old);
	shard_partitions = n;
	for (int i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int32		part = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));

		if (isnull || part != i)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("shard map has no partition %d", i),
					 errhint("Set the map with wf.configure_shard(); its partitions are 0 to n - 1.")));
		shard_owner[i] = MemoryContextStrdup(TopMemoryContext, SPI_getvalue(tup, desc, 2));
		if (i == 0)
		{
			char	   *self = SPI_getvalue(tup, desc, 3);

			if (self == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("shard map is set but wfshard.self names no shard"),
						 errhint("Set both with wf.configure_shard(self, map).")));
			shard_self = MemoryContextStrdup(TopMemoryContext, self);
			shard_map_version = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
			if (isnull)
				shard_map_version = 0;
		}
	}
	SPI_finish();
	shard_state = WF_SHARD_ON;
}

/*
 * WfShardPartition returns the partition of tenant among partitions (a
 * power of 2): hashtext(tenant) & (partitions - 1), as wf.tenant_partition
 * and PL/Proxy's RUN ON on the router compute it.
 */
int
WfShardPartition(const char *tenant, int partitions)
{
	int32		h;

	h = DatumGetInt32(DirectFunctionCall1Coll(hashtext, C_COLLATION_OID,
											  CStringGetTextDatum(tenant)));
	return (int) (h & (partitions - 1));
}

/*
 * WfShardAllowAnyTenant exempts the next outermost API call of this
 * transaction from the check: wf.publish_definition, which the router
 * sends to every shard, so that a tenant's definitions are on every shard
 * (a partition that moves finds them in place).
 */
void
WfShardAllowAnyTenant(void)
{
	shard_skip_next = true;
}

/*
 * WfShardXactEnd forgets an exemption an error left unused; called by
 * tenant.c at the end of every transaction.
 */
void
WfShardXactEnd(void)
{
	shard_skip_next = false;
	shard_held = -1;
}

/*
 * partition_tag sets the lock tag of partition part of this database.
 */
static void
partition_tag(LOCKTAG *tag, int part)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, WF_LOCK_PARTITION_KEY, (uint32) part,
						 WF_LOCK_PARTITION);
}

/*
 * try_partition takes partition part's lock in share mode without waiting;
 * false when a cut-over holds it or waits for it.
 */
static bool
try_partition(int part)
{
	LOCKTAG		tag;

	partition_tag(&tag, part);
	return LockAcquire(&tag, ShareLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * refuse_elsewhere reports a tenant whose partition the map gives to
 * another shard.
 */
static void
refuse_elsewhere(const char *tenant, int part)
{
	ereport(ERROR,
			(errcode(ERRCODE_WF_WRONG_SHARD),
			 errmsg("tenant \"%s\" does not live on shard \"%s\"", tenant, shard_self),
			 errdetail("The tenant is in partition %d of %d, which the shard map (version %lld) gives to shard \"%s\".",
					   part, shard_partitions, (long long) shard_map_version, shard_owner[part]),
			 errhint("Connect to shard \"%s\", or call through the router (wfengine_router).",
					 shard_owner[part])));
}

/*
 * WfShardCheckTenant refuses an API call of tenant when the shard map
 * gives the tenant's partition to another shard.  Called by WfApiSwitchIn
 * for the outermost call, running as the extension's owner, outside SPI.
 */
void
WfShardCheckTenant(const char *tenant)
{
	int			part;

	if (shard_skip_next)
	{
		shard_skip_next = false;
		return;
	}
	if (shard_state == WF_SHARD_OFF)
		return;
	if (superuser_arg(GetSessionUserId()))
		return;
	if (shard_state == WF_SHARD_UNKNOWN)
		shard_load();
	if (shard_state != WF_SHARD_ON)
		return;

	part = WfShardPartition(tenant, shard_partitions);
	if (strcmp(shard_owner[part], shard_self) != 0)
		refuse_elsewhere(tenant, part);

	/*
	 * The partition lock, in share mode for the rest of the transaction: a
	 * cut-over that holds or awaits it refuses the call (it is over in
	 * well under a second); then the map again, since the cut-over may
	 * have given the partition away while this call looked.
	 */
	if (!try_partition(part))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("partition %d of tenant \"%s\" is moving to another shard", part, tenant),
				 errdetail("The cut-over of wfrouter.move_partition holds the partition on shard \"%s\".",
						   shard_self),
				 errhint("Retry the call: a cut-over takes well under a second.")));
	AcceptInvalidationMessages();
	if (shard_state == WF_SHARD_UNKNOWN)
		shard_load();
	if (shard_state == WF_SHARD_ON)
	{
		part = WfShardPartition(tenant, shard_partitions);
		if (strcmp(shard_owner[part], shard_self) != 0)
			refuse_elsewhere(tenant, part);
		shard_held = part;
	}
}

/*
 * WfShardCutoverWaiting returns true when a cut-over waits for the
 * partition this transaction's API call holds: a waiting claim (claim.c)
 * then ends its wait, so that the cut-over does not wait for it.
 */
bool
WfShardCutoverWaiting(void)
{
	LOCKTAG		tag;

	if (shard_held < 0)
		return false;
	partition_tag(&tag, shard_held);
	return LockHasWaiters(&tag, ShareLock, false);
}

/*
 * WfShardSharded is true when this database has a shard map (as far as
 * this backend knows it).
 */
bool
WfShardSharded(void)
{
	return shard_state == WF_SHARD_ON;
}

/*
 * WfShardTenantElsewhere returns true when the shard map gives tenant's
 * partition to another shard: the engine worker (timer.c) leaves that
 * tenant's timers and deadlines alone, since its runs are being moved to
 * another shard or have been (docs/scale-out.md, "Moving a partition").
 * Unlike WfShardCheckTenant it holds for superusers too.  Called inside
 * SPI (shard_load nests a connection of its own).
 */
bool
WfShardTenantElsewhere(const char *tenant)
{
	int			part;

	if (shard_state == WF_SHARD_OFF)
		return false;
	if (shard_state == WF_SHARD_UNKNOWN)
		shard_load();
	if (shard_state != WF_SHARD_ON)
		return false;
	part = WfShardPartition(tenant, shard_partitions);
	if (strcmp(shard_owner[part], shard_self) != 0)
		return true;
	/* a cut-over holds the partition: leave it, and look again later */
	if (!try_partition(part))
		return true;
	/* one that committed before the lock was granted gave it away */
	AcceptInvalidationMessages();
	if (shard_state == WF_SHARD_UNKNOWN)
		shard_load();
	if (shard_state != WF_SHARD_ON)
		return false;
	return strcmp(shard_owner[WfShardPartition(tenant, shard_partitions)], shard_self) != 0;
}

PG_FUNCTION_INFO_V1(wfengine_shard_map_changed);

/*
 * wfengine_shard_map_changed is the statement trigger of wfshard.partitions and
 * wfshard.self: it queues an invalidation of the table, so that every
 * backend reads the map again after the commit.
 */
Datum
wfengine_shard_map_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "wf._shard_map_changed() is a trigger function");
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	shard_state = WF_SHARD_UNKNOWN;
	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(wfengine_lock_partition);

/*
 * wfengine_lock_partition is wf._lock_partition(p): the cut-over of a move
 * takes partition p exclusively, to the end of its transaction.  It waits
 * for the API calls of the partition's tenants in flight (bounded by the
 * caller's lock_timeout); while it waits, new calls are refused.  For
 * superusers only.
 */
Datum
wfengine_lock_partition(PG_FUNCTION_ARGS)
{
	int32		part = PG_GETARG_INT32(0);
	LOCKTAG		tag;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for function wf._lock_partition"),
				 errhint("Moving a partition is for superusers.")));
	if (part < 0 || part >= WF_SHARD_MAX_PARTITIONS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition %d is out of range", part)));
	partition_tag(&tag, part);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	PG_RETURN_BOOL(true);
}
