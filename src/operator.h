/*-------------------------------------------------------------------------
 *
 * operator.h
 *	  Operator commands that stop and restart a run's progress.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/operator.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_OPERATOR_H
#define WF_OPERATOR_H

#include "spi_util.h"

/* the statements of operator.c */
extern PGDLLIMPORT WfPlanTable WfOperatorPlans;

#endif							/* WF_OPERATOR_H */
