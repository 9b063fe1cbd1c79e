/*-------------------------------------------------------------------------
 *
 * retention.h
 *	  Legal hold and the purge of finished runs.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/retention.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_RETENTION_H
#define WF_RETENTION_H

#include "spi_util.h"

/* the statements of retention.c */
extern PGDLLIMPORT WfPlanTable WfRetentionPlans;

#endif							/* WF_RETENTION_H */
