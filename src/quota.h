/*-------------------------------------------------------------------------
 *
 * quota.h
 *	  Per-tenant limits: runs, tasks in flight, timers, events, definitions.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/quota.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_QUOTA_H
#define WF_QUOTA_H

#include "spi_util.h"

#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "state.h"

extern bool WfStartQuotaSet(const char *tenant);
extern void WfCheckStartQuota(const char *tenant);
extern void WfCheckDefinitionQuota(const char *tenant, const char *name, int steps, Size bytes,
								   int depth, int timers);
extern bool WfClaimLimited(const char *tenant);
extern int32 WfClaimRoom(const char *tenant, const char *queue, int32 want, bool wait);
extern bool WfTakeTimerRefusal(void);
extern void WfTimerRoom(const char *tenant, pg_uuid_t *run_id, const char *kind,
						const char *step, int32 generation, TimestampTz now);
extern void WfQuotaInit(void);
extern bool WfEventsAtLimit(const WfRunState *run);
extern void WfCheckEventQuota(WfRunState *run, const char *hint);
extern bool WfSuppressAuditEvent(const WfRunState *run, WfEventType type, TimestampTz now);
extern int32 WfCheckBufferQuota(const char *tenant, TimestampTz now);


/* the statements of quota.c */
extern PGDLLIMPORT WfPlanTable WfQuotaPlans;

#endif							/* WF_QUOTA_H */
