/*-------------------------------------------------------------------------
 *
 * publish.h
 *	  wf.publish_definition: its statements.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/publish.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_PUBLISH_H
#define WF_PUBLISH_H

#include "spi_util.h"

/* the statements of publish.c */
extern PGDLLIMPORT WfPlanTable WfPublishPlans;

#endif							/* WF_PUBLISH_H */
