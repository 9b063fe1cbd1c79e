/*-------------------------------------------------------------------------
 *
 * sqlcheck.c
 *	  A check that every statement of the plan table names its objects
 *	  with their schema.
 *
 * The engine's statements run as the extension's owner.  WfApiBegin pins
 * search_path to "pg_catalog, pg_temp" for them (tenant.c); beyond that,
 * every relation, type, function and operator a statement names is
 * schema-qualified, so that a statement holds even where the pin were
 * missed.  wf._unqualified_names() parses every statement of the plan
 * table (raw parse trees: nothing is resolved) and reports each name that
 * search_path would resolve: a relation that is not a CTE, a type, a
 * function, an operator, and the operators that SQL syntax implies
 * without a way to qualify them (IN, IS [NOT] DISTINCT FROM, NULLIF,
 * BETWEEN, LIKE, a CASE with an operand, JOIN ... USING).  The regression
 * test 310_hostile expects it to return nothing.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/sqlcheck.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "spi_util.h"

PG_FUNCTION_INFO_V1(wfengine_unqualified_names);

typedef struct NameCheck
{
	List	   *ctes;			/* CTE names of the statement */
	Tuplestorestate *store;
	TupleDesc	desc;
	int			statement;
} NameCheck;

/*
 * The words of the expressions that stand for an unqualified operator
 * whatever they are written with (IS DISTINCT FROM means "="), by
 * A_Expr_Kind; the kinds not named are the BETWEEN forms.
 */
static const char *const implied_operator_names[] = {
	[AEXPR_DISTINCT] = "IS DISTINCT FROM",
	[AEXPR_NOT_DISTINCT] = "IS NOT DISTINCT FROM",
	[AEXPR_NULLIF] = "NULLIF",
	[AEXPR_IN] = "IN",
	[AEXPR_LIKE] = "LIKE",
	[AEXPR_ILIKE] = "LIKE",
	[AEXPR_SIMILAR] = "LIKE",
};

static void report(NameCheck *c, const char *kind, const char *name);
static bool collect_ctes(Node *node, NameCheck *c);
static bool check_names(Node *node, NameCheck *c);

/*
 * report adds one unqualified name to the result.
 */
static void
report(NameCheck *c, const char *kind, const char *name)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = Int32GetDatum(c->statement);
	values[1] = CStringGetTextDatum(kind);
	values[2] = CStringGetTextDatum(name);
	tuplestore_putvalues(c->store, c->desc, values, nulls);
}

/*
 * name_list_text returns a dotted name list as text.
 */
static char *
name_list_text(List *names)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, names)
	{
		if (buf.len > 0)
			appendStringInfoChar(&buf, '.');
		if (IsA(lfirst(lc), String))
			appendStringInfoString(&buf, strVal(lfirst(lc)));
		else
			appendStringInfoChar(&buf, '*');
	}
	return buf.data;
}

/*
 * collect_ctes gathers the names of the statement's common table
 * expressions, which a relation may name without a schema.
 */
static bool
collect_ctes(Node *node, NameCheck *c)
{
	if (node == NULL)
		return false;
	if (IsA(node, CommonTableExpr))
		c->ctes = lappend(c->ctes, ((CommonTableExpr *) node)->ctename);
	return raw_expression_tree_walker(node, collect_ctes, (void *) c);
}

/*
 * check_type reports a type name that has no schema.
 */
static void
check_type(TypeName *t, NameCheck *c)
{
	if (t != NULL && list_length(t->names) < 2)
		report(c, "type", name_list_text(t->names));
}

/*
 * check_names walks a raw parse tree and reports every name that
 * search_path would resolve.
 */
static bool
check_names(Node *node, NameCheck *c)
{
	if (node == NULL)
		return false;

	switch (nodeTag(node))
	{
		case T_RangeVar:
			{
				RangeVar   *rv = (RangeVar *) node;
				ListCell   *lc;
				bool		cte = false;

				if (rv->schemaname != NULL)
					break;
				foreach(lc, c->ctes)
				{
					if (strcmp((char *) lfirst(lc), rv->relname) == 0)
						cte = true;
				}
				if (!cte)
					report(c, "relation", rv->relname);
				break;
			}
		case T_TypeCast:
			check_type(((TypeCast *) node)->typeName, c);
			break;
		case T_ColumnDef:
			check_type(((ColumnDef *) node)->typeName, c);
			break;
		case T_FuncCall:
			{
				FuncCall   *fc = (FuncCall *) node;

				if (list_length(fc->funcname) < 2)
					report(c, "function", name_list_text(fc->funcname));
				break;
			}
		case T_A_Expr:
			{
				A_Expr	   *e = (A_Expr *) node;

				if (e->kind == AEXPR_OP || e->kind == AEXPR_OP_ANY || e->kind == AEXPR_OP_ALL)
				{
					if (list_length(e->name) < 2)
						report(c, "operator", name_list_text(e->name));
				}
				else if (e->kind < lengthof(implied_operator_names) &&
						 implied_operator_names[e->kind] != NULL)
					report(c, "operator", implied_operator_names[e->kind]);
				else
					report(c, "operator", "BETWEEN");	/* the BETWEEN forms */
				break;
			}
		case T_SubLink:
			{
				SubLink    *sl = (SubLink *) node;

				if ((sl->subLinkType == ANY_SUBLINK || sl->subLinkType == ALL_SUBLINK ||
					 sl->subLinkType == ROWCOMPARE_SUBLINK) &&
					list_length(sl->operName) < 2)
					report(c, "operator", sl->operName != NIL ?
						   name_list_text(sl->operName) : "IN (subquery)");
				break;
			}
		case T_CaseExpr:
			if (((CaseExpr *) node)->arg != NULL)
				report(c, "operator", "CASE operand");
			break;
		case T_JoinExpr:
			if (((JoinExpr *) node)->usingClause != NIL)
				report(c, "operator", "JOIN USING");
			break;
		case T_LockingClause:
			/* FOR UPDATE OF names aliases of the statement, not relations */
			return false;
		case T_SortBy:
			if (((SortBy *) node)->useOp != NIL &&
				list_length(((SortBy *) node)->useOp) < 2)
				report(c, "operator", name_list_text(((SortBy *) node)->useOp));
			break;
		default:
			break;
	}
	return raw_expression_tree_walker(node, check_names, (void *) c);
}

/*
 * check_statement reports the unqualified names of one statement.
 */
static void
check_statement(NameCheck *c, int statement, const char *sql)
{
	List	   *stmts = raw_parser(sql, RAW_PARSE_DEFAULT);
	ListCell   *lc;

	c->statement = statement;
	c->ctes = NIL;
	foreach(lc, stmts)
		(void) collect_ctes((Node *) lfirst_node(RawStmt, lc)->stmt, c);
	foreach(lc, stmts)
		(void) check_names((Node *) lfirst_node(RawStmt, lc)->stmt, c);
}

/*
 * wf._unqualified_names(sql) returns (statement, kind, name) for every name
 * that is not schema-qualified: in the statements of the plan table
 * (statement = the plan's number), or, given sql, in that text only
 * (statement = 0), so that a test can show what the check finds.
 */
Datum
wfengine_unqualified_names(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NameCheck	c;
	int			id;
	int			i;
	const WfPlanTable *t;

	InitMaterializedSRF(fcinfo, 0);
	c.store = rsinfo->setResult;
	c.desc = rsinfo->setDesc;
	if (!PG_ARGISNULL(0))
	{
		check_statement(&c, 0, text_to_cstring(PG_GETARG_TEXT_PP(0)));
		return (Datum) 0;
	}
	id = 0;
	for (t = WfPlanTables(); t != NULL; t = t->next)
		for (i = 0; i < t->nspecs; i++)
			check_statement(&c, ++id, t->specs[i].sql);
	return (Datum) 0;
}
