/*-------------------------------------------------------------------------
 *
 * correlate.h
 *	  Correlation keys of runs, and the buffered events a new run takes.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/correlate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_CORRELATE_H
#define WF_CORRELATE_H

#include "spi_util.h"

#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "definition.h"
#include "state.h"

extern List *WfWriteCorrelations(const WfDefinition *def, WfRunState *run,
								 Jsonb *input, TimestampTz now);
extern void WfLockCorrelationKey(const char *tenant, const char *key);
extern void WfDeliverBufferedEvents(const WfDefinition *def, pg_uuid_t *run_id,
									const char *tenant, List *keys);
extern void WfSerializationFailure(const char *key, const char *what) pg_attribute_noreturn();


/* the statements of correlate.c */
extern PGDLLIMPORT WfPlanTable WfCorrelatePlans;

#endif							/* WF_CORRELATE_H */
