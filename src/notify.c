/*-------------------------------------------------------------------------
 *
 * notify.c
 *	  Commit-time signals: waking waiting claimers and the engine worker,
 *	  and LISTEN/NOTIFY for subscribers.
 *
 * (Being written; see issue 3.)  Every function here only records what
 * happened; the signals are sent from a transaction callback, after the
 * commit made the change visible, and never for a transaction that
 * aborts.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/notify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "notify.h"

/*
 * WfNotifyInit registers the transaction callbacks.
 */
void
WfNotifyInit(void)
{
}

/*
 * WfNoteTaskReady records that a task of (tenant, queue) becomes
 * claimable when the current transaction commits.
 */
void
WfNoteTaskReady(const char *tenant, const char *queue)
{
}

/*
 * WfNoteRunChange records a change of a run's state for subscribers.
 */
void
WfNoteRunChange(const pg_uuid_t *run_id, const char *kind)
{
}

/*
 * WfNoteTimer records that a timer or deadline due at fire_at was
 * written, so that the worker is woken at commit if it sleeps longer.
 */
void
WfNoteTimer(TimestampTz fire_at)
{
}
