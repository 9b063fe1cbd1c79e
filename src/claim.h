/*-------------------------------------------------------------------------
 *
 * claim.h
 *	  Lease-based claiming of task attempts (FOR UPDATE SKIP LOCKED).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/claim.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_CLAIM_H
#define WF_CLAIM_H

#include "fmgr.h"
#include "funcapi.h"
#include "datatype/timestamp.h"

#include "runstore.h"
#include "spi_util.h"

/* what a claim asks for: wf.claim_tasks' arguments */
typedef struct WfClaimRequest
{
	char	   *queue;
	char	   *worker;
	int32		max_tasks;
	Interval   *lease;
	int64		wait_us;		/* 0: no wait */
} WfClaimRequest;

/* claiming for the entry points that report and claim in one call */
extern void WfCheckClaimRequest(const WfClaimRequest *req);
extern uint64 WfClaimNow(ReturnSetInfo *rsinfo, const WfClaimRequest *req,
						 const WfScheduledTask *continuations, int ncontinuations,
						 int nlead, const Datum *lead, const bool *lead_nulls);
extern void WfClaimStarted(ReturnSetInfo *rsinfo, const WfClaimRequest *req,
						   const WfScheduledTask *first, const pg_uuid_t *run_id);

/* the statements of claim.c */
extern PGDLLIMPORT WfPlanTable WfClaimPlans;

#endif							/* WF_CLAIM_H */
