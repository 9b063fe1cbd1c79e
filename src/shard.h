/*-------------------------------------------------------------------------
 *
 * shard.h
 *	  The shard check of a sharded deployment (see shard.c).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/shard.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_SHARD_H
#define WF_SHARD_H

extern void WfShardInit(void);
extern void WfShardReset(void);
extern int	WfShardPartition(const char *tenant, int partitions);
extern void WfShardAllowAnyTenant(void);
extern void WfShardXactEnd(void);
extern void WfShardCheckTenant(const char *tenant);
extern bool WfShardTenantElsewhere(const char *tenant);
extern bool WfShardCutoverWaiting(void);
extern bool WfShardSharded(void);

#endif							/* WF_SHARD_H */
