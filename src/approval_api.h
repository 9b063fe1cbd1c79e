/*-------------------------------------------------------------------------
 *
 * approval_api.h
 *	  The SQL-callable side of approval steps: tokens, decisions, commands.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/approval_api.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_APPROVAL_API_H
#define WF_APPROVAL_API_H

#include "spi_util.h"

/* the statements of approval_api.c */
extern PGDLLIMPORT WfPlanTable WfApprovalApiPlans;

#endif							/* WF_APPROVAL_API_H */
