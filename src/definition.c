/*-------------------------------------------------------------------------
 *
 * definition.c
 *	  Workflow definitions: the per-backend cache of compiled versions,
 *	  lookups in a compiled definition and JSONPath evaluation.
 *
 * A definition is validated and compiled by defcompile.c, and published
 * by publish.c.  Versions are immutable: because a version never changes,
 * the compiled form can be cached per backend for as long as the
 * extension stays installed.  A version is found by its definition_id; a
 * parallel step's branch, published with its parent, by its name and the
 * digest of its spec (WfSpecDigest: BLAKE2b-256 of the canonical text).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/definition.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "crypto.h"
#include "defcompile.h"
#include "definition.h"
#include "jsonutil.h"
#include "rowwrite.h"
#include "spi_util.h"

/* the statements of definition.c (registered by _PG_init: WfDefinitionPlans) */
static const WfPlanSpec definition_plan_specs[] = {
	[WF_DEFINITION_DEF_BY_DIGEST] = {
		"def_by_digest",
		"SELECT d.version, d.definition_id FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"AND d.digest OPERATOR(pg_catalog.=) $3",
		3, {TEXTOID, TEXTOID, BYTEAOID}
	},
	[WF_DEFINITION_DEF_VERSION] = {
		"def_version",
		"SELECT d.definition_id FROM wf.definitions d "
		"WHERE d.tenant_id OPERATOR(pg_catalog.=) $1 AND d.name OPERATOR(pg_catalog.=) $2 "
		"AND d.version OPERATOR(pg_catalog.=) $3",
		3, {TEXTOID, TEXTOID, INT4OID}
	},
	[WF_DEFINITION_DEF_BY_ID] = {
		"def_by_id",
		"SELECT d.tenant_id, d.name, d.version, d.spec FROM wf.definitions d "
		"WHERE d.definition_id OPERATOR(pg_catalog.=) $1",
		1, {INT8OID}
	},
};

WfPlanTable WfDefinitionPlans = WF_PLAN_TABLE("definition", definition_plan_specs);

/* the columns of def_by_id */
enum
{
	DEF_BY_ID_COL_TENANT_ID = 1,
	DEF_BY_ID_COL_NAME,
	DEF_BY_ID_COL_VERSION,
	DEF_BY_ID_COL_SPEC
};

/* one entry of the definition cache */
typedef struct DefCacheEntry
{
	int64		definition_id;	/* hash key */
	WfDefinition *def;
} DefCacheEntry;

/* the cache of compiled definitions */
static MemoryContext def_cache_cxt = NULL;
static HTAB *def_cache = NULL;
static Jsonb *empty_object = NULL;

/* forward declarations */
static void def_cache_reset(void);
static Jsonb *empty_object_get(void);
static int64 lookup_branch(const char *tenant, const char *parent, const char *name,
						   Jsonb *spec, WfDefinition **branch);

/*
 * WfDefinitionInit registers the cache with the installation reset.
 */
void
WfDefinitionInit(void)
{
	WfRegisterResetCallback(def_cache_reset);
}

/*
 * def_cache_reset forgets every compiled definition.
 */
static void
def_cache_reset(void)
{
	if (def_cache_cxt != NULL)
		MemoryContextReset(def_cache_cxt);
	def_cache = NULL;
}

/*
 * WfSpecDigest returns the digest of a spec, as wf.definitions keeps it:
 * BLAKE2b-256 of its canonical text (jsonb's own output: keys sorted,
 * whitespace normalised).
 */
bytea *
WfSpecDigest(Jsonb *spec)
{
	char	   *canonical = JsonbToCString(NULL, &spec->root, VARSIZE(spec));
	uint8		digest[WF_HASH_LEN];
	bytea	   *digest_b = palloc(VARHDRSZ + WF_HASH_LEN);

	WfHashBytes(canonical, strlen(canonical), digest);
	SET_VARSIZE(digest_b, VARHDRSZ + WF_HASH_LEN);
	memcpy(VARDATA(digest_b), digest, WF_HASH_LEN);
	return digest_b;
}

/*
 * WfResolveChildren finds the definitions a definition's subworkflow and
 * parallel steps start: a subworkflow's by name and version, a branch's
 * through resolve_branch (WfDefinitionGet: by name and the digest of its
 * spec, published with its parent, so the lookup always finds the same
 * row; publish.c: by publishing the branch first).  A missing subworkflow
 * definition is an error.  It also counts the steps across branches and
 * the nesting depth.
 */
void
WfResolveChildren(WfDefinition *def, const char *tenant, WfBranchResolver resolve_branch)
{
	int			i;
	int			b;

	def->total_steps = def->nsteps;
	def->depth = 1;
	for (i = 0; i < def->nsteps; i++)
	{
		WfStepDef  *sd = &def->steps[i];

		if (sd->type == WF_STEP_SUBWORKFLOW)
		{
			def->has_children = true;
			if (!WfDefinitionVersion(tenant, sd->sub_name, sd->sub_version, &sd->child_ids[0]))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("invalid definition \"%s\": step \"%s\" starts version %d of definition \"%s\", which does not exist",
								def->name, sd->name, sd->sub_version, sd->sub_name),
						 errhint("Publish the child definition first.")));
		}
		else if (sd->type == WF_STEP_PARALLEL)
		{
			def->has_children = true;
			for (b = 0; b < sd->n_branches; b++)
			{
				WfDefinition *branch = NULL;

				sd->child_ids[b] = resolve_branch(tenant, def->name, sd->branch_names[b],
												  sd->branch_specs[b], &branch);
				def->total_steps += branch->total_steps;
				def->depth = Max(def->depth, branch->depth + 1);
			}
		}
	}
}

/*
 * lookup_branch finds the published definition of a parallel step's
 * branch by its name and the digest of its spec (WfBranchResolver).
 */
static int64
lookup_branch(const char *tenant, const char *parent, const char *name, Jsonb *spec,
			  WfDefinition **branch)
{
	Datum		values[3];
	int64		definition_id;

	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(name);
	values[2] = PointerGetDatum(WfSpecDigest(spec));
	if (WfPlanExec(&WfDefinitionPlans, WF_DEFINITION_DEF_BY_DIGEST, values, NULL, false, 1, SPI_OK_SELECT) != 1)
		elog(ERROR, "branch definition \"%s\" of definition \"%s\" is missing",
			 name, parent);
	definition_id = DatumGetInt64(WfGetDatumNotNull(0, WF_DEF_BY_DIGEST_COL_DEFINITION_ID));
	*branch = WfDefinitionGet(definition_id);
	return definition_id;
}

/*
 * WfDefinitionTimerBound returns how many timers a run of def can have
 * pending at once, child-done timers aside: the run timeout, and per step
 * one of each kind it can set (its total timeout, a retry backoff, a sleep,
 * an approval expiry; a compensation's backoff).  A new timer supersedes a
 * pending one of the same kind and step when the tenant limits timers
 * (WfTimerRoom), so this bound holds for loops too.
 */
int
WfDefinitionTimerBound(const WfDefinition *def)
{
	int			n = def->run_timeout > 0 ? 1 : 0;
	int			i;

	for (i = 0; i < def->nsteps; i++)
	{
		const WfStepDef *sd = &def->steps[i];

		if (sd->timeout.total > 0)
			n++;
		if (sd->retry.max_attempts > 1)
			n++;
		if (sd->type == WF_STEP_SLEEP)
			n++;
		if (sd->type == WF_STEP_APPROVAL && sd->expires > 0)
			n++;
		if (sd->compensate != NULL && sd->compensate->retry.max_attempts > 1)
			n++;
	}
	return n;
}

/*
 * WfIsCompensation tells whether a task row's step is a compensation.
 */
bool
WfIsCompensation(const char *step)
{
	return step != NULL &&
		strncmp(step, WF_COMPENSATE_PREFIX, strlen(WF_COMPENSATE_PREFIX)) == 0;
}

/*
 * WfTaskStepDef returns the step definition a task row's step names: a
 * step of the definition, or the compensation of one
 * ("compensate:<step>").  *index is set to the index of the step (of the
 * compensated step for a compensation); NULL when there is none.
 */
const WfStepDef *
WfTaskStepDef(const WfDefinition *def, const char *name, int *index)
{
	size_t		plen = strlen(WF_COMPENSATE_PREFIX);
	int			i;

	if (name == NULL)
		return NULL;
	if (strncmp(name, WF_COMPENSATE_PREFIX, plen) == 0)
	{
		i = WfDefinitionStepIndex(def, name + plen);
		if (i < 0 || def->steps[i].compensate == NULL)
			return NULL;
		*index = i;
		return def->steps[i].compensate;
	}
	i = WfDefinitionStepIndex(def, name);
	if (i < 0)
		return NULL;
	*index = i;
	return &def->steps[i];
}

/*
 * WfDefinitionCacheStore moves a definition compiled in defcxt into the
 * cache.
 */
void
WfDefinitionCacheStore(WfDefinition *def, MemoryContext defcxt)
{
	DefCacheEntry *entry;
	bool		found;

	if (def_cache_cxt == NULL)
		def_cache_cxt = AllocSetContextCreate(TopMemoryContext,
											  "wfengine definition cache",
											  ALLOCSET_DEFAULT_SIZES);
	if (def_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(DefCacheEntry);
		ctl.hcxt = def_cache_cxt;
		def_cache = hash_create("wfengine definitions", 64, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	MemoryContextSetParent(defcxt, def_cache_cxt);
	entry = hash_search(def_cache, &def->definition_id, HASH_ENTER, &found);
	entry->def = def;
}

/*
 * The versions of a tenant's definition by name, for WfDefinitionLatest:
 * read through the index of the unique (tenant_id, name, version) without
 * a statement (rowwrite.c).
 */
static const char *const version_columns[] = {"tenant_id", "name", "version", "definition_id"};
static WfRowTable versions_table = WF_ROW_TABLE("definitions", version_columns, InvalidOid);

#define WF_VERSIONS_INDEX "definitions_tenant_id_name_version_key"

/*
 * WfDefinitionLatest finds the latest version of tenant's definition name,
 * as "... ORDER BY version DESC LIMIT 1" of the statement it replaces
 * would (the start of every run that names no version: a kept plan's
 * execution was about 40,000 instructions of it, the index read about a
 * quarter of that).  It returns its definition id and sets *version;
 * false when the tenant has no definition of that name.
 */
bool
WfDefinitionLatest(const char *tenant, const char *name, int64 *definition_id,
				   int32 *version)
{
	WfRowScanKey keys[2];
	Datum		values[lengthof(version_columns)];
	bool		nulls[lengthof(version_columns)];

	keys[0].column = 0;
	keys[0].strategy = BTEqualStrategyNumber;
	keys[0].value = CStringGetTextDatum(tenant);
	keys[1].column = 1;
	keys[1].strategy = BTEqualStrategyNumber;
	keys[1].value = CStringGetTextDatum(name);
	if (!WfRowReadLast(&versions_table, WF_VERSIONS_INDEX, 2, keys, tenant, values, nulls))
		return false;
	if (nulls[2] || nulls[3])
		elog(ERROR, "a version of definition \"%s\" has no number or id", name);
	*version = DatumGetInt32(values[2]);
	*definition_id = DatumGetInt64(values[3]);
	return true;
}

/*
 * WfDefinitionVersion finds version of tenant's definition name and
 * returns its id in *definition_id; false when there is no such version.
 * The caller is connected to SPI.
 */
bool
WfDefinitionVersion(const char *tenant, const char *name, int32 version, int64 *definition_id)
{
	Datum		values[3];

	values[0] = CStringGetTextDatum(tenant);
	values[1] = CStringGetTextDatum(name);
	values[2] = Int32GetDatum(version);
	if (WfPlanExec(&WfDefinitionPlans, WF_DEFINITION_DEF_VERSION, values, NULL, false, 1,
				   SPI_OK_SELECT) != 1)
		return false;
	*definition_id = DatumGetInt64(WfGetDatumNotNull(0, 1));
	return true;
}

/*
 * WfDefinitionGet returns the compiled definition with the given id,
 * loading and compiling it on first use in this backend.  The caller
 * must be connected to SPI.
 */
WfDefinition *
WfDefinitionGet(int64 definition_id)
{
	DefCacheEntry *entry;
	Datum		values[1];
	MemoryContext defcxt;
	MemoryContext oldcxt;
	WfDefinition *def;
	char	   *tenant;
	char	   *name;
	int32		version;
	Jsonb	   *spec;

	if (def_cache != NULL)
	{
		entry = hash_search(def_cache, &definition_id, HASH_FIND, NULL);
		if (entry != NULL)
			return entry->def;
	}

	values[0] = Int64GetDatum(definition_id);
	if (WfPlanExec(&WfDefinitionPlans, WF_DEFINITION_DEF_BY_ID, values, NULL, true, 1, SPI_OK_SELECT) != 1)
		elog(ERROR, "definition %lld does not exist", (long long) definition_id);
	tenant = WfGetTextOrNull(0, DEF_BY_ID_COL_TENANT_ID);
	name = WfGetTextOrNull(0, DEF_BY_ID_COL_NAME);
	version = DatumGetInt32(WfGetDatumNotNull(0, DEF_BY_ID_COL_VERSION));
	spec = DatumGetJsonbP(WfGetDatumNotNull(0, DEF_BY_ID_COL_SPEC));

	defcxt = AllocSetContextCreate(CurrentMemoryContext, "wfengine definition",
								   ALLOCSET_SMALL_SIZES);
	oldcxt = MemoryContextSwitchTo(defcxt);
	def = WfCompileDefinition(name, spec, false);
	def->definition_id = definition_id;
	def->tenant_id = pstrdup(tenant);
	def->version = version;
	MemoryContextSwitchTo(oldcxt);
	WfResolveChildren(def, tenant, lookup_branch);
	WfDefinitionCacheStore(def, defcxt);
	return def;
}

/*
 * WfEvaluateMapping builds the object described by a mapping, evaluating
 * each JSONPath against context.  A path that finds nothing, or fails,
 * yields JSON null.
 */
Jsonb *
WfEvaluateMapping(const WfMapping *map, int n, Jsonb *context)
{
	WfJsonBuilder b;
	int			i;

	WfJbBegin(&b);
	for (i = 0; i < n; i++)
	{
		Jsonb	   *value = map[i].literal;

		if (map[i].path != (Datum) 0)
			value = WfEvaluatePath(map[i].path, context);
		WfJbJsonb(&b, map[i].key, value);
	}
	return WfJbEnd(&b);
}

/*
 * empty_object_get returns the empty jsonb object, built once.
 */
static Jsonb *
empty_object_get(void)
{
	if (empty_object == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

		empty_object = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
		MemoryContextSwitchTo(oldcxt);
	}
	return empty_object;
}

/*
 * call_path_function calls a jsonpath function of PostgreSQL (fn, taking
 * target, path, vars and silent) on context, silently and without
 * variables; false when it returned NULL.
 */
static bool
call_path_function(PGFunction fn, Datum path, Jsonb *context, Datum *result)
{
	LOCAL_FCINFO(fcinfo, 4);

	InitFunctionCallInfoData(*fcinfo, NULL, 4, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = JsonbPGetDatum(context);
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = path;
	fcinfo->args[1].isnull = false;
	fcinfo->args[2].value = JsonbPGetDatum(empty_object_get());
	fcinfo->args[2].isnull = false;
	fcinfo->args[3].value = BoolGetDatum(true);
	fcinfo->args[3].isnull = false;
	*result = fn(fcinfo);
	return !fcinfo->isnull;
}

/*
 * read_quoted reads the JSON string at p (a key or a string literal of a
 * path's canonical text, jsonpath_out: double quotes, backslash escapes)
 * into buf, and returns where it ends; NULL when it is not one, or has an
 * escape other than \" \\ \/ (a name with a control character: the
 * caller then assumes the worst).
 */
static const char *
read_quoted(const char *p, StringInfo buf)
{
	resetStringInfo(buf);
	if (*p != '"')
		return NULL;
	for (p++; *p != '\0' && *p != '"'; p++)
	{
		if (*p == '\\')
		{
			p++;
			if (*p != '"' && *p != '\\' && *p != '/')
				return NULL;
		}
		appendStringInfoChar(buf, *p);
	}
	return *p == '"' ? p + 1 : NULL;
}

/*
 * WfPathStepsRead adds to reads the entries of $.steps a compiled path may
 * read.  Read from its canonical text: every root ($: paths have no
 * variables) outside a string is followed by a key ($."input", a key of
 * the context other than "steps": no step; $."children": the branch
 * outputs of $.children) or by $."steps"."<name>" (that step); any other
 * use of the root ($, $.*, $."steps"[*], $."steps" ? (...), ...) may read
 * them all.
 */
void
WfPathStepsRead(Datum path, WfStepsRead *reads)
{
	const char *p;
	StringInfoData key;
	bool		all = false;

	if (reads->all || path == (Datum) 0)
		return;
	p = DatumGetCString(DirectFunctionCall1(jsonpath_out, path));
	initStringInfo(&key);
	while (*p != '\0' && !all)
	{
		if (*p == '"')
		{
			/* a string: skipped (one that cannot be read: assume the worst) */
			p = read_quoted(p, &key);
			all = p == NULL;
			continue;
		}
		if (*p++ != '$')
			continue;
		/* the root: a key must follow */
		if (p[0] != '.' || p[1] != '"' || (p = read_quoted(p + 1, &key)) == NULL)
		{
			all = true;
			continue;
		}
		if (strcmp(key.data, "children") == 0)
			reads->children = true;
		if (strcmp(key.data, "steps") != 0)
			continue;
		/* $."steps": the key of one step must follow */
		if (p[0] != '.' || p[1] != '"' || (p = read_quoted(p + 1, &key)) == NULL)
		{
			all = true;
			continue;
		}
		reads->names = lappend(reads->names, pstrdup(key.data));
	}
	if (all)
	{
		reads->all = true;
		list_free_deep(reads->names);
		reads->names = NIL;
	}
	pfree(key.data);
}

/*
 * WfMappingStepsRead is WfPathStepsRead for every path of a mapping.
 */
void
WfMappingStepsRead(const WfMapping *map, int n, WfStepsRead *reads)
{
	int			i;

	for (i = 0; i < n; i++)
		WfPathStepsRead(map[i].path, reads);
}

/*
 * WfStepsReadHas: the step whose name is the len bytes at step is among
 * the entries reads may read.
 */
bool
WfStepsReadHas(const WfStepsRead *reads, const char *step, int len)
{
	ListCell   *lc;

	if (reads->all)
		return true;
	foreach(lc, reads->names)
	{
		const char *name = lfirst(lc);

		if (strlen(name) == len && memcmp(name, step, len) == 0)
			return true;
	}
	return false;
}

/*
 * WfEvaluatePath returns the first item a compiled jsonpath finds in
 * context, or NULL when it finds nothing.  Evaluation is silent: a
 * structural error (a missing key in strict mode, a type mismatch) finds
 * nothing.  Paths with variables are refused at publish, because they
 * would fail here on every evaluation.
 */
Jsonb *
WfEvaluatePath(Datum path, Jsonb *context)
{
	Datum		r;

	return call_path_function(jsonb_path_query_first, path, context, &r) ?
		DatumGetJsonbP(r) : NULL;
}

/*
 * WfEvaluatePathAll evaluates a compiled jsonpath against context and
 * returns every item it finds, as a JSON array (empty when none).
 */
Jsonb *
WfEvaluatePathAll(Datum path, Jsonb *context)
{
	Datum		r;

	return call_path_function(jsonb_path_query_array, path, context, &r) ?
		DatumGetJsonbP(r) : NULL;
}

/*
 * WfPathMatches evaluates a compiled jsonpath predicate against context;
 * false when it is false, unknown or cannot be evaluated.
 */
bool
WfPathMatches(Datum path, Jsonb *context)
{
	Datum		r;

	return call_path_function(jsonb_path_match, path, context, &r) && DatumGetBool(r);
}
