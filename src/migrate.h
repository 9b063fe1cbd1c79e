/*-------------------------------------------------------------------------
 *
 * migrate.h
 *	  wf.migrate_run: move a live run to another version of its definition.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/migrate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_MIGRATE_H
#define WF_MIGRATE_H

#include "spi_util.h"

/* the statements of migrate.c */
extern PGDLLIMPORT WfPlanTable WfMigratePlans;

#endif							/* WF_MIGRATE_H */
