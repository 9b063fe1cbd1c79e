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

/* the statements of replay.c */
extern PGDLLIMPORT WfPlanTable WfReplayPlans;

#endif							/* WF_REPLAY_H */
