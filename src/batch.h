/*-------------------------------------------------------------------------
 *
 * batch.h
 *	  Batches and eager dispatch: many results, or many starts, in one
 *	  statement; a result and the next claim in one call.
 *
 * The file exports only its SQL-callable functions (wfengine_*, bound by
 * the install scripts); nothing in C calls into it.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/batch.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_BATCH_H
#define WF_BATCH_H

/*
 * the most elements of one batch (wf.complete_tasks, wf.fail_tasks, their
 * _and_claim forms, wf.start_runs)
 */
#define WF_MAX_BATCH 1000

#endif							/* WF_BATCH_H */
