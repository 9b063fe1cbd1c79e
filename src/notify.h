/*-------------------------------------------------------------------------
 *
 * notify.h
 *	  Commit-time signals: wake waiting claimers, the launcher, the engine
 *	  worker, and LISTEN/NOTIFY subscribers.
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

#include "spi_util.h"

#include "utils/timestamp.h"
#include "utils/uuid.h"

/* LISTEN channels; see notify.c and docs/notifications.md */
#define WF_QUEUE_CHANNEL_PREFIX "wfq."
#define WF_QUEUE_CHANNEL_CUT 37	/* bytes of a long queue name kept */
#define WF_RUN_CHANNEL_PREFIX "wf_runs."
#define WF_OVERFLOW_CHANNEL "wf_overflow"

/* a task of (tenant, queue) becomes claimable when this transaction commits */
extern void WfNoteTaskReady(const char *tenant, const char *queue);

/* the run changed state; kind is e.g. "started", "step_done", "completed" */
extern void WfNoteRunChange(const char *tenant, const pg_uuid_t *run_id, const char *kind);

/* a timer or deadline at fire_at was written; wake the worker if sooner */
extern void WfNoteTimer(TimestampTz fire_at);

/* the LISTEN channels of a tenant; buf has room for NAMEDATALEN bytes */
extern void WfQueueChannel(const char *tenant, const char *queue, char *buf);
extern void WfRunChannel(const char *tenant, char *buf);

/* the key of the tenants' channel tags (wf.secrets); inside an API call */
extern void WfChannelKey(const uint8 **key, size_t *keylen);

extern void WfNotifyInit(void);

/* set the launcher's latch (no-op when not preloaded or not running) */
extern void WfWakeLauncher(void);

/* wake the worker of a database if it sleeps past fire_at (0: always) */
extern void WfWakeWorker(Oid dboid, TimestampTz fire_at);

/* wake the launcher (CREATE EXTENSION) or this database's worker at commit */
extern void WfWakeLauncherAtCommit(void);
extern void WfWakeWorkerAtCommit(void);

/* the engine worker sends what committed transactions handed to it */
struct WfDbWorkerSlot;
extern int	WfRelaySend(struct WfDbWorkerSlot *slot);
extern bool WfRelayPending(void);


/* the statements of notify.c */
extern PGDLLIMPORT WfPlanTable WfNotifyPlans;

#endif							/* WF_NOTIFY_H */
