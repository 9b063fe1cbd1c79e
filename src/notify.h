/*-------------------------------------------------------------------------
 *
 * notify.h
 *	  Commit-time signals: wake waiting claimers, the engine worker, and
 *	  LISTEN/NOTIFY subscribers.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/notify.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_NOTIFY_H
#define WF_NOTIFY_H

#include "utils/timestamp.h"
#include "utils/uuid.h"

/* a task of (tenant, queue) becomes claimable when this transaction commits */
extern void WfNoteTaskReady(const char *tenant, const char *queue);

/* the run changed state; kind is e.g. "started", "step_done", "completed" */
extern void WfNoteRunChange(const pg_uuid_t *run_id, const char *kind);

/* a timer or deadline at fire_at was written; wake the worker if sooner */
extern void WfNoteTimer(TimestampTz fire_at);

extern void WfNotifyInit(void);

#endif							/* WF_NOTIFY_H */
