/*-------------------------------------------------------------------------
 *
 * defcompile.h
 *	  Workflow definitions: validation of a spec into its compiled form
 *	  (defmodel.h).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/defcompile.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_DEFCOMPILE_H
#define WF_DEFCOMPILE_H

#include "utils/jsonb.h"

#include "defmodel.h"

extern WfDefinition *WfCompileDefinition(const char *name, Jsonb *spec,
										 bool enforce_limits);
extern bool WfValidDefinitionName(const char *name);

#endif							/* WF_DEFCOMPILE_H */
