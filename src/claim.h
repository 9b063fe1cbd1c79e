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

#include "spi_util.h"

/* the statements of claim.c */
extern PGDLLIMPORT WfPlanTable WfClaimPlans;

#endif							/* WF_CLAIM_H */
