/*-------------------------------------------------------------------------
 *
 * events.h
 *	  Buffered correlated events: wf.send_event to a key no run has declared.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/events.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_EVENTS_H
#define WF_EVENTS_H

#include "spi_util.h"

/* the statements of events.c */
extern PGDLLIMPORT WfPlanTable WfEventsPlans;

#endif							/* WF_EVENTS_H */
