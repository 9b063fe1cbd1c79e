/*-------------------------------------------------------------------------
 *
 * claimfloor.h
 *	  Where a claim of a queue may start its scan of the claim index (the
 *	  queue's claim floor), kept in shared memory; see claimfloor.c.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/claimfloor.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_CLAIMFLOOR_H
#define WF_CLAIMFLOOR_H

#include "utils/timestamp.h"

/* how a claim of a queue scans the claim index */
typedef struct WfClaimFloor
{
	bool		use_floor;		/* false: from the start of the queue */
	int32		priority;		/* with use_floor: the queue's one priority */
	TimestampTz floor_at;		/* ... and the least (available_at, */
	int64		floor_task;		/* task_id) to read */
	uint32		slot;			/* the shared slot (internal) */
	uint64		key;			/* the queue's key (internal) */
} WfClaimFloor;

extern Size WfClaimFloorShmemSize(void);
extern void WfClaimFloorShmemInit(void *mem, bool found);

extern void WfClaimFloorPlan(const char *tenant, const char *queue, TimestampTz now,
							 WfClaimFloor *cf);
extern void WfClaimFloorLearn(const WfClaimFloor *cf, TimestampTz now, int wanted, int got,
							  bool uniform, int32 priority, TimestampTz least_at,
							  int64 least_task, int64 entries_read, int64 index_blocks);
extern void WfClaimFloorNoteTask(const char *tenant, const char *queue, int32 priority,
								 TimestampTz available_at, int64 task_id);
extern void WfClaimFloorRescan(const char *tenant, const char *queue);

#endif							/* WF_CLAIMFLOOR_H */
