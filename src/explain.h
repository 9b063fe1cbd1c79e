/*-------------------------------------------------------------------------
 *
 * explain.h
 *	  wf.explain(run).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/explain.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_EXPLAIN_H
#define WF_EXPLAIN_H

#include "spi_util.h"

extern PGDLLIMPORT WfPlanTable WfExplainPlans;

#endif							/* WF_EXPLAIN_H */
