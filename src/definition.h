/*-------------------------------------------------------------------------
 *
 * definition.h
 *	  Workflow definitions: the per-backend cache of compiled versions,
 *	  lookups in a compiled definition and JSONPath evaluation.
 *
 * The compiled form itself (WfDefinition, WfStepDef) and the step graph
 * are defcompile.h's.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/definition.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_DEFINITION_H
#define WF_DEFINITION_H

#include "spi_util.h"

#include "utils/jsonb.h"

#include "defcompile.h"

/*
 * How WfResolveChildren finds the definition of a branch (named name, with
 * spec) of a parallel step of definition parent: returns its definition_id
 * and sets *branch.
 */
typedef int64 (*WfBranchResolver) (const char *tenant, const char *parent, const char *name,
								   Jsonb *spec, WfDefinition **branch);

extern WfDefinition *WfDefinitionGet(int64 definition_id);
extern bool WfDefinitionVersion(const char *tenant, const char *name, int32 version,
								int64 *definition_id);
extern bool WfDefinitionLatest(const char *tenant, const char *name, int64 *definition_id,
							   int32 *version);
extern void WfDefinitionCacheStore(WfDefinition *def, MemoryContext defcxt);
extern void WfResolveChildren(WfDefinition *def, const char *tenant,
							  WfBranchResolver resolve_branch);
extern bytea *WfSpecDigest(Jsonb *spec);
extern const WfStepDef *WfTaskStepDef(const WfDefinition *def, const char *name,
									  int *index);
extern bool WfIsCompensation(const char *step);
extern int	WfDefinitionTimerBound(const WfDefinition *def);
extern Jsonb *WfEvaluatePath(Datum path, Jsonb *context);
extern Jsonb *WfEvaluatePathAll(Datum path, Jsonb *context);
extern bool WfPathMatches(Datum path, Jsonb *context);
extern Jsonb *WfEvaluateMapping(const WfMapping *map, int n, Jsonb *context);

/*
 * The entries of $.steps in the run context that paths may read: all of
 * them, or the steps named, and whether they read $.children (what the
 * engine must put back of the outputs the context keeps in the history,
 * runstore.c).
 */
typedef struct WfStepsRead
{
	bool		all;
	List	   *names;			/* of char *, while not all */
	bool		children;		/* $.children (its branch outputs) too */
} WfStepsRead;

extern void WfPathStepsRead(Datum path, WfStepsRead *reads);
extern void WfMappingStepsRead(const WfMapping *map, int n, WfStepsRead *reads);
extern bool WfStepsReadHas(const WfStepsRead *reads, const char *step, int len);
extern void WfDefinitionInit(void);


/* the statements of definition.c */
typedef enum WfDefinitionPlan
{
	WF_DEFINITION_DEF_VERSION = 0,
	WF_DEFINITION_DEF_BY_ID,
	WF_DEFINITION_DEF_BY_DIGEST
} WfDefinitionPlan;

/* the columns of def_by_digest */
typedef enum WfDefByDigestColumn
{
	WF_DEF_BY_DIGEST_COL_VERSION = 1,
	WF_DEF_BY_DIGEST_COL_DEFINITION_ID
} WfDefByDigestColumn;

extern PGDLLIMPORT WfPlanTable WfDefinitionPlans;

#endif							/* WF_DEFINITION_H */
