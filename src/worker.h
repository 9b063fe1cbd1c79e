/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The per-database engine worker (see worker.c).
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

/* background worker entry point, found by name through bgw_function_name */
extern PGDLLEXPORT void WfWorkerMain(Datum main_arg) pg_attribute_noreturn();

#endif							/* WF_WORKER_H */
