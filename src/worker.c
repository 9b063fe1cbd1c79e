/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The launcher and the per-database engine workers.
 *
 * (Being written; see issue 3.)
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "worker.h"

/*
 * WfWorkerInit registers the launcher when the library is preloaded.
 */
void
WfWorkerInit(void)
{
}
