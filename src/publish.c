/*-------------------------------------------------------------------------
 *
 * publish.c
 *	  SQL entry points over definitions: wf.publish_definition, which
 *	  validates a spec and stores it as an immutable version, and
 *	  wf._step_edges, the step graph of a spec for the PL/pgSQL that draws
 *	  it and checks migrations.
 *
 * Versions are immutable.  The digest is BLAKE2b-256 of the canonical
 * text of the spec (jsonb's own output: keys sorted, whitespace
 * normalised), so publishing the same spec again, however it is
 * formatted, returns the existing version; a changed spec gets the next
 * version.  The limits across a definition's branches and the tenant's
 * definition quota are checked here, before the spec is stored.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/publish.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "argcheck.h"
#include "defcompile.h"
#include "definition.h"
#include "guc.h"
#include "publish.h"
#include "quota.h"
#include "sensitive.h"
#include "shard.h"
#include "spi_util.h"
#include "tenant.h"

PG_FUNCTION_INFO_V1(wfengine_publish_definition);
PG_FUNCTION_INFO_V1(wfengine_step_edges);

/* the statements of publish.c (registered by _PG_init: WfPublishPlans) */
enum
{
	PLAN_DEF_INSERT = 0
};

static const WfPlanSpec publish_plan_specs[] = {
	[PLAN_DEF_INSERT] = {
		"def_insert",
		"INSERT INTO wf.definitions (tenant_id, name, version, digest, spec) "
		"SELECT $1, $2, COALESCE(pg_catalog.max(d.version), 0) OPERATOR(pg_catalog.+) 1, $3, $4 "
		"FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"ON CONFLICT DO NOTHING RETURNING definition_id, version",
		4, {TEXTOID, TEXTOID, BYTEAOID, JSONBOID}
	},
};

WfPlanTable WfPublishPlans = WF_PLAN_TABLE("publish", publish_plan_specs);

/* the columns of def_insert */
enum
{
	DEF_INSERT_COL_DEFINITION_ID = 1,
	DEF_INSERT_COL_VERSION
};


#define WF_PUBLISH_TRIES 5

static int64 publish_spec(const char *tenant, const char *name, Jsonb *spec,
						  int32 *version, WfDefinition **compiled);
static int64 publish_branch(const char *tenant, const char *parent, const char *name,
							Jsonb *spec, WfDefinition **branch);

/*
 * wfengine_publish_definition is wf.publish_definition(name, spec): it
 * validates spec and returns its version, the existing one when the
 * canonical spec was published before under this name.
 */
Datum
wfengine_publish_definition(PG_FUNCTION_ARGS)
{
	char	   *name = WfTextArg(fcinfo, 0, "definition name", WF_ARG_NAME);
	Jsonb	   *spec = PG_GETARG_JSONB_P(1);
	const char *tenant = WfCurrentTenant();
	WfDefinition *def;
	int32		version = 0;

	if (!WfValidDefinitionName(name))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid definition name \"%s\"", name),
				 errhint("A definition name has 1 to 128 letters, digits, '_', '-', '.' or ':' and starts with a letter or '_'.")));
	if (VARSIZE(spec) > (Size) wf_max_definition_size)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("definition \"%s\" is %zu bytes, more than the limit of %d bytes",
						name, (Size) VARSIZE(spec), wf_max_definition_size),
				 errhint("The limit is set by wfengine.max_definition_size.")));
	/* a literal of a mapping is copied into task inputs as it is */
	WfRefuseSealedLookalikes(spec, "spec", psprintf("definition \"%s\"", name));

	/* the router publishes on every shard (shard.c) */
	WfShardAllowAnyTenant();
	WfApiBegin();
	(void) publish_spec(tenant, name, spec, &version, &def);
	WfApiEnd();
	PG_RETURN_INT32(version);
}

/*
 * publish_spec validates spec, publishes the definitions of its parallel
 * branches, checks the limits across branches, and stores spec as the next
 * version of name unless the same canonical spec is there already.
 * Returns its definition_id; *version and *compiled are set.
 */
static int64
publish_spec(const char *tenant, const char *name, Jsonb *spec, int32 *version,
			 WfDefinition **compiled)
{
	bytea	   *digest_b;
	MemoryContext defcxt;
	MemoryContext oldcxt;
	WfDefinition *def;
	int64		definition_id = 0;
	int			try;

	*version = 0;
	defcxt = AllocSetContextCreate(CurrentMemoryContext, "wfengine definition",
								   ALLOCSET_SMALL_SIZES);
	oldcxt = MemoryContextSwitchTo(defcxt);
	def = WfCompileDefinition(name, spec, true);
	def->tenant_id = pstrdup(tenant);
	MemoryContextSwitchTo(oldcxt);
	WfResolveChildren(def, tenant, publish_branch);
	if (def->total_steps > wf_max_steps)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("invalid definition \"%s\": it has %d steps across its branches, more than the limit of %d",
						name, def->total_steps, wf_max_steps),
				 errhint("The limit is set by wfengine.max_steps.")));
	WfCheckDefinitionQuota(tenant, name, def->total_steps, VARSIZE(spec), def->depth,
						   WfDefinitionTimerBound(def));
	if (def->depth > WF_MAX_NESTING)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("invalid definition \"%s\": parallel steps are nested %d deep, more than %d",
						name, def->depth, WF_MAX_NESTING)));

	digest_b = WfSpecDigest(spec);

	/*
	 * Look for the same spec first; otherwise insert the next version.  A
	 * concurrent publish of the same name can take our version number
	 * between the two statements; ON CONFLICT DO NOTHING then returns no
	 * row and we look again.
	 */
	for (try = 0; try < WF_PUBLISH_TRIES; try++)
	{
		Datum		values[4];

		values[0] = CStringGetTextDatum(tenant);
		values[1] = CStringGetTextDatum(name);
		values[2] = PointerGetDatum(digest_b);
		values[3] = JsonbPGetDatum(spec);

		if (WfPlanExec(&WfDefinitionPlans, WF_DEFINITION_DEF_BY_DIGEST, values, NULL, false, 1, SPI_OK_SELECT) == 1)
		{
			*version = DatumGetInt32(WfGetDatumNotNull(0, WF_DEF_BY_DIGEST_COL_VERSION));
			definition_id = DatumGetInt64(WfGetDatumNotNull(0, WF_DEF_BY_DIGEST_COL_DEFINITION_ID));
			MemoryContextDelete(defcxt);
			def = WfDefinitionGet(definition_id);
			break;
		}
		if (WfPlanExec(&WfPublishPlans, PLAN_DEF_INSERT, values, NULL, false, 0,
					   SPI_OK_INSERT_RETURNING) == 1)
		{
			def->definition_id = definition_id = DatumGetInt64(WfGetDatumNotNull(0, DEF_INSERT_COL_DEFINITION_ID));
			def->version = *version = DatumGetInt32(WfGetDatumNotNull(0, DEF_INSERT_COL_VERSION));
			WfDefinitionCacheStore(def, defcxt);
			break;
		}
	}
	if (*version == 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not publish definition \"%s\" because of concurrent publishes", name),
				 errhint("Retry the transaction.")));
	*compiled = def;
	return definition_id;
}

/*
 * publish_branch publishes a parallel step's branch before its parent
 * (WfBranchResolver).
 */
static int64
publish_branch(const char *tenant, const char *parent, const char *name, Jsonb *spec,
			   WfDefinition **branch)
{
	int32		version;

	return publish_spec(tenant, name, spec, &version, branch);
}

/*
 * wfengine_step_edges is wf._step_edges(spec): the edges of the step graph
 * of a definition spec, as the compiled definition has them
 * (WfStepEdges), in a fixed order: step by step in definition order, a
 * choice's conditions in order and its default, or the step's next, then
 * an approval's expiry or a wait's timeout.  One row per edge: its number
 * in that order, the step it leaves (index and name), where it goes (a
 * step's index and name, or no index and "end" or "fail"), its kind
 * (next, choice, default, expiry, timeout), a choice's condition number
 * and a label (a condition as the spec writes it, "default", "approved",
 * "expired", "timed out").  wf._graph_render draws these edges and
 * wf._migration_problem follows them, so the graph exists once.
 *
 * The spec is validated as a published one is loaded (without the
 * configurable limits); an invalid spec is an error.  It reads no table.
 */
Datum
wfengine_step_edges(PG_FUNCTION_ARGS)
{
	Jsonb	   *spec = PG_GETARG_JSONB_P(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt;
	MemoryContext oldcxt;
	WfDefinition *def;
	int32		edge = 0;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "wfengine step edges",
								ALLOCSET_SMALL_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	def = WfCompileDefinition("spec", spec, false);
	for (i = 0; i < def->nsteps; i++)
	{
		const WfStepDef *sd = &def->steps[i];
		WfStepEdge	edges[WF_MAX_SUCCESSORS];
		int			n = WfStepEdges(def, i, edges);
		int			k;

		for (k = 0; k < n; k++)
		{
			const WfStepEdge *e = &edges[k];
			Datum		values[8];
			bool		nulls[8] = {false};
			const char *kind;
			const char *label = NULL;

			switch (e->kind)
			{
				case WF_EDGE_CHOICE:
					kind = "choice";
					label = sd->choice_when_text[e->choice];
					break;
				case WF_EDGE_DEFAULT:
					kind = "default";
					label = "default";
					break;
				case WF_EDGE_EXPIRY:
					kind = "expiry";
					label = "expired";
					break;
				case WF_EDGE_TIMEOUT:
					kind = "timeout";
					label = "timed out";
					break;
				default:
					kind = "next";
					if (sd->type == WF_STEP_APPROVAL)
						label = "approved";
					break;
			}
			values[0] = Int32GetDatum(++edge);
			values[1] = Int32GetDatum(i);
			values[2] = CStringGetTextDatum(sd->name);
			if (e->target >= 0)
			{
				values[3] = Int32GetDatum(e->target);
				values[4] = CStringGetTextDatum(def->steps[e->target].name);
			}
			else
			{
				nulls[3] = true;
				values[4] = CStringGetTextDatum(e->target == WF_STEP_FAIL ? "fail" : "end");
			}
			values[5] = CStringGetTextDatum(kind);
			values[6] = Int32GetDatum(e->choice);
			nulls[6] = e->kind != WF_EDGE_CHOICE;
			values[7] = label != NULL ? CStringGetTextDatum(label) : (Datum) 0;
			nulls[7] = label == NULL;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
	return (Datum) 0;
}
