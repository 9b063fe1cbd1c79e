/*-------------------------------------------------------------------------
 *
 * defmodel.c
 *	  Workflow definitions: the compiled form's step graph and lookups, and
 *	  the validator's error report.
 *
 * The step graph exists once, here: WfStepEdges lists the edges out of a
 * step of a compiled definition.  WfDefCheckGraph follows them at publish
 * (every route names a step, every step is reachable from the first and
 * can reach the end: a cycle without a way out is refused), and
 * wf._step_edges (publish.c) hands them to the PL/pgSQL that draws a
 * definition (wf._graph_render) and checks a migration
 * (wf._migration_problem).  WfDefError reports an invalid definition for
 * the graph check and for defcompile.c, which compiles the steps (above
 * this file) and calls WfDefCheckGraph last.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/defmodel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/elog.h"

#include "defmodel.h"

/*
 * WfDefError reports an invalid definition, naming the definition, the
 * step (when inside one) and the field.
 */
void
WfDefError(const ValidateCtx *cx, const char *field, int code,
		   const char *hint, const char *fmt,...)
{
	StringInfoData problem;
	StringInfoData where;

	initStringInfo(&problem);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&problem, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&problem, needed);
	}

	initStringInfo(&where);
	if (cx->field_prefix != NULL && field != NULL)
		field = psprintf("%s.%s", cx->field_prefix, field);
	if (cx->step != NULL)
		appendStringInfo(&where, "step \"%s\"", cx->step);
	else if (cx->step_pos > 0)
		appendStringInfo(&where, "step %d", cx->step_pos);
	if (field != NULL)
		appendStringInfo(&where, "%sfield \"%s\"", where.len > 0 ? ", " : "", field);

	ereport(ERROR,
			(errcode(code),
			 errmsg("invalid definition \"%s\": %s%s%s",
					cx->defname, where.data, where.len > 0 ? ": " : "",
					problem.data),
			 hint ? errhint("%s", hint) : 0));
}

/*
 * WfDefinitionStepIndex returns the index of the named step, or -1.
 */
int
WfDefinitionStepIndex(const WfDefinition *def, const char *step)
{
	int			i;

	for (i = 0; i < def->nsteps; i++)
		if (strcmp(def->steps[i].name, step) == 0)
			return i;
	return -1;
}

/*
 * WfStepEdges fills edges (room for WF_MAX_SUCCESSORS) with the edges out
 * of step i of a compiled definition and returns how many: a choice's
 * conditions in order and its default, or the step's next (WF_STEP_END
 * after the last step or with "end": true), then an approval's expiry or
 * a wait's timeout when the step has one (WF_STEP_FAIL when it fails the
 * run).  Everything that follows the step graph reads it here.
 */
int
WfStepEdges(const WfDefinition *def, int i, WfStepEdge *edges)
{
	const WfStepDef *sd = &def->steps[i];
	int			n = 0;
	int			c;

	if (sd->type == WF_STEP_CHOICE)
	{
		for (c = 0; c < sd->n_choices; c++)
			edges[n++] = (WfStepEdge) {WF_EDGE_CHOICE, c, sd->choice_next[c]};
		edges[n++] = (WfStepEdge) {WF_EDGE_DEFAULT, 0, sd->next};
		return n;
	}
	edges[n++] = (WfStepEdge) {WF_EDGE_NEXT, 0, sd->next};
	if (sd->type == WF_STEP_APPROVAL && sd->expires > 0)
		edges[n++] = (WfStepEdge) {WF_EDGE_EXPIRY, 0,
			sd->expiry_next == WF_STEP_END ? WF_STEP_FAIL : sd->expiry_next};
	else if (sd->type == WF_STEP_WAIT_EVENT && sd->timeout.total > 0)
		edges[n++] = (WfStepEdge) {WF_EDGE_TIMEOUT, 0,
			sd->expiry_next == WF_STEP_END ? WF_STEP_FAIL : sd->expiry_next};
	return n;
}

/*
 * successors fills succ with the steps that can follow step i (or
 * WF_STEP_END) and returns how many.  An expiry or a timeout that fails
 * the run leads nowhere.
 */
static int
successors(const WfDefinition *def, int i, int *succ)
{
	WfStepEdge	edges[WF_MAX_SUCCESSORS];
	int			ne = WfStepEdges(def, i, edges);
	int			n = 0;
	int			k;

	for (k = 0; k < ne; k++)
		if (edges[k].target != WF_STEP_FAIL)
			succ[n++] = edges[k].target;
	return n;
}

/*
 * resolve_target returns the index of the step that field of step sd
 * names, or reports that there is none.
 */
static int
resolve_target(ValidateCtx *scx, const WfDefinition *def, const WfStepDef *sd,
			   const char *field, const char *hint, const char *name)
{
	int			t = WfDefinitionStepIndex(def, name);

	if (t < 0)
	{
		scx->step = sd->name;
		WfDefError(scx, field, ERRCODE_INVALID_PARAMETER_VALUE, hint,
				  "names step \"%s\", which does not exist", name);
	}
	return t;
}

/*
 * resolve_routes resolves the step names of "next" (a choice's default),
 * of "on_expiry" and "on_timeout", and of a choice's conditions.
 */
static void
resolve_routes(const ValidateCtx *cx, WfDefinition *def, char **next_names,
			   char **expiry_names)
{
	int			n = def->nsteps;
	int			i;
	ValidateCtx scx = *cx;

	for (i = 0; i < n; i++)
	{
		WfStepDef  *sd = &def->steps[i];

		if (next_names[i] != NULL)
			sd->next = resolve_target(&scx, def, sd, "next", NULL, next_names[i]);
	}

	for (i = 0; i < n; i++)
	{
		WfStepDef  *sd = &def->steps[i];

		if (expiry_names[i] != NULL)
			sd->expiry_next = resolve_target(&scx, def, sd,
											 sd->type == WF_STEP_WAIT_EVENT ? "on_timeout" : "on_expiry",
											 "Give \"fail\" or the name of a step.",
											 expiry_names[i]);
	}

	for (i = 0; i < n; i++)
	{
		WfStepDef  *sd = &def->steps[i];
		int			c;

		for (c = 0; c < sd->n_choices; c++)
		{
			if (strcmp(sd->choice_next_names[c], "end") == 0)
				sd->choice_next[c] = WF_STEP_END;
			else
				sd->choice_next[c] = resolve_target(&scx, def, sd, psprintf("choices[%d].next", c),
													NULL, sd->choice_next_names[c]);
		}
	}
}

/*
 * find_ends sets ends[i] for the steps that can reach the end: a fixpoint
 * over the successors (the next step or a choice's default, a choice's
 * branches, and the step an approval goes to when it expires).  An expiry
 * that fails the run is not a way out of a loop.
 */
static void
find_ends(const WfDefinition *def, bool *ends)
{
	bool		changed;
	int			i;

	do
	{
		changed = false;
		for (i = 0; i < def->nsteps; i++)
		{
			int			succ[WF_MAX_SUCCESSORS];
			int			ns = successors(def, i, succ);
			int			k;

			for (k = 0; k < ns && !ends[i]; k++)
				if (succ[k] == WF_STEP_END || ends[succ[k]])
					ends[i] = changed = true;
		}
	} while (changed);
}

/*
 * find_reachable sets reachable[i] for the steps reachable from the first.
 */
static void
find_reachable(const WfDefinition *def, bool *reachable)
{
	bool		changed;
	int			i;

	reachable[0] = true;
	do
	{
		changed = false;
		for (i = 0; i < def->nsteps; i++)
		{
			int			succ[WF_MAX_SUCCESSORS];
			int			ns;
			int			k;

			if (!reachable[i])
				continue;
			ns = successors(def, i, succ);
			for (k = 0; k < ns; k++)
				if (succ[k] != WF_STEP_END && !reachable[succ[k]])
					reachable[succ[k]] = changed = true;
		}
	} while (changed);
}

/*
 * check_choice_loops refuses a loop made of choice steps alone: it would
 * run for ever inside one transaction, so every loop must pass a step that
 * waits.
 */
static void
check_choice_loops(const ValidateCtx *cx, const WfDefinition *def)
{
	int			n = def->nsteps;
	int			i;
	ValidateCtx scx = *cx;

	for (i = 0; i < n; i++)
	{
		bool	   *seen;
		int		   *stack;
		int			top = 0;

		if (def->steps[i].type != WF_STEP_CHOICE)
			continue;
		seen = palloc0(sizeof(bool) * n);
		stack = palloc(sizeof(int) * n * WF_MAX_SUCCESSORS);
		stack[top++] = i;
		while (top > 0)
		{
			int			j = stack[--top];
			int			succ[WF_MAX_SUCCESSORS];
			int			ns = successors(def, j, succ);
			int			k;

			for (k = 0; k < ns; k++)
			{
				int			t = succ[k];

				if (t == WF_STEP_END || def->steps[t].type != WF_STEP_CHOICE)
					continue;
				if (t == i)
				{
					scx.step = def->steps[i].name;
					WfDefError(&scx, NULL, ERRCODE_INVALID_PARAMETER_VALUE,
							  "A loop must pass a task, sleep, approval or wait_event step.",
							  "is part of a loop of choice steps only");
				}
				if (!seen[t])
				{
					seen[t] = true;
					stack[top++] = t;
				}
			}
		}
	}
}

/*
 * WfDefCheckGraph resolves "next" (next_names), "on_expiry" and
 * "on_timeout" (expiry_names) and a choice's conditions to step indexes,
 * and checks that every step is reachable from the first one and can
 * reach the end.  Called by WfCompileDefinition once every step is
 * compiled.
 */
void
WfDefCheckGraph(const ValidateCtx *cx, WfDefinition *def, char **next_names,
				char **expiry_names)
{
	int			n = def->nsteps;
	bool	   *reachable = palloc0(sizeof(bool) * n);
	bool	   *ends = palloc0(sizeof(bool) * n);
	int			i;
	ValidateCtx scx = *cx;

	resolve_routes(cx, def, next_names, expiry_names);
	find_ends(def, ends);
	find_reachable(def, reachable);
	check_choice_loops(cx, def);

	for (i = 0; i < n; i++)
	{
		scx.step = def->steps[i].name;
		if (reachable[i] && !ends[i])
			WfDefError(&scx, "next", ERRCODE_INVALID_PARAMETER_VALUE,
					  "Every path through a workflow must reach its end; a loop needs a way out.",
					  "is part of a cycle without a way out");
	}
	for (i = 0; i < n; i++)
	{
		scx.step = def->steps[i].name;
		if (!reachable[i])
			WfDefError(&scx, NULL, ERRCODE_INVALID_PARAMETER_VALUE,
					  "Steps run in list order unless \"next\" says otherwise; remove the step or point a \"next\" at it.",
					  "is unreachable from the first step");
	}
}
