/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The launcher and the per-database engine workers.
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

extern void WfWorkerInit(void);

#endif							/* WF_WORKER_H */
