/*-------------------------------------------------------------------------
 *
 * replay.h
 *	  Rebuilding a run from its history and checking it against its snapshot.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/replay.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_REPLAY_H
#define WF_REPLAY_H

#include "spi_util.h"
#include "state.h"

/*
 * What a reader of a run's history keeps, event by event, to put back what
 * a task_scheduled event of 0.3.0 leaves out (WfHistoryFillEvent).
 */
typedef struct WfHistoryFill
{
	const char *run_id;			/* the run's id, as text */
	int64		definition_id;	/* in force: run_started's or the last
								 * run_migrated's */
	Jsonb	   *input;			/* the run's input as it stands
								 * (context.input) */
} WfHistoryFill;

/* the statements of replay.c */
extern PGDLLIMPORT WfPlanTable WfReplayPlans;

extern void WfHistoryFillInit(WfHistoryFill *fill, pg_uuid_t *run_id);
extern Jsonb *WfHistoryFillEvent(WfHistoryFill *fill, const WfEvent *ev);

#endif							/* WF_REPLAY_H */
