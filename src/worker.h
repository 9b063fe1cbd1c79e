/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The launcher and the per-database engine workers.
 *
 * Waking a worker.  Each worker publishes in its slot's next_due the
 * moment it will wake up by itself.  While it is awake and about to look
 * at the timers it publishes 0 first, so a committer that writes a timer
 * must wake the worker when next_due is 0 or later than the timer's
 * fire_at; WfWakeWorker does exactly that and is what commit-time code
 * calls after the timer became visible.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/worker.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_WORKER_H
#define WF_WORKER_H

#include "utils/timestamp.h"

extern void WfWorkerInit(void);

/* set the launcher's latch (no-op when not preloaded or not running) */
extern void WfWakeLauncher(void);

/* wake the worker of a database if it sleeps past fire_at (0: always) */
extern void WfWakeWorker(Oid dboid, TimestampTz fire_at);

/* background worker entry points, found by name through bgw_function_name */
extern PGDLLEXPORT void WfLauncherMain(Datum main_arg) pg_attribute_noreturn();
extern PGDLLEXPORT void WfWorkerMain(Datum main_arg) pg_attribute_noreturn();

#endif							/* WF_WORKER_H */
