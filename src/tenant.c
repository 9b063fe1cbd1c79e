/*-------------------------------------------------------------------------
 *
 * tenant.c
 *	  Who the session is: its tenant and the actor of its events, and the
 *	  switch to the extension owner that every API call runs under.
 *
 * A tenant is a role named "wf_tenant_<tenant>" (created by
 * wf.create_tenant()); a login belongs to the tenant of the one tenant role
 * it is a member of.  The tenant is taken from the session user, which a
 * session cannot change itself (SET ROLE changes the current user only, and
 * SET SESSION AUTHORIZATION needs a superuser), never from a setting.  A
 * superuser, or the extension's owner, that belongs to no tenant acts for
 * tenant "default"; any other role that belongs to none is refused, and so
 * is a role that belongs to two.  The answer is cached per backend and
 * forgotten whenever a role or a role membership changes.
 *
 * The API functions are not SECURITY DEFINER: they check who calls them
 * (EXECUTE privilege, the tenant), and then run their statements as the
 * extension's owner (WfApiBegin), which the roles of applications, workers
 * and operators have no table privileges for.  While it does, search_path
 * is pinned to "pg_catalog, pg_temp", so that no type, operator, function
 * or relation the caller defined (in a schema of its own or in pg_temp)
 * is ever resolved by a statement running with the owner's rights.  Every
 * statement names the tenant; row-level security on every table is the
 * second wall, for direct SQL.  The actor recorded in events is the role that called the
 * outermost API function, also when one API call makes another on its
 * behalf (a parent cancelling its child runs).  The calls in progress are
 * a stack; the frames of calls that an error ended are dropped when their
 * subtransaction or transaction aborts.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/tenant.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "shard.h"
#include "tenant.h"

/* the tenant of a superuser or of the owner that belongs to no tenant */
#define WF_DEFAULT_TENANT "default"

/*
 * The search_path every API call runs with: nothing of the caller's (its
 * schemas, or types and relations it made in pg_temp, which are searched
 * first unless pg_temp is named) can be found by the engine's statements,
 * which run as the extension's owner.  Temporary objects come last, so
 * they never shadow a catalog name; functions and operators are never
 * looked up in pg_temp at all.
 */
#define WF_SAFE_SEARCH_PATH "pg_catalog, pg_temp"

/* how deep API calls may nest (a parent stopping its children, ...) */
#define WF_MAX_API_DEPTH 32

/* the cached tenant of a session user */
static Oid	tenant_user = InvalidOid;
static char *tenant_name = NULL;
static const char *tenant_override = NULL;	/* WfActForTenant */
static bool tenant_callbacks = false;

/* one entry per API call in progress */
typedef struct ApiFrame
{
	SubTransactionId subid;		/* the subtransaction the call began in */
	bool		switched;		/* this call switched to the owner */
	Oid			save_userid;
	int			save_sec_context;
	int			guc_nestlevel;	/* the GUC nest level of the pinned search_path,
								 * 0 when the path read so already */
} ApiFrame;

static ApiFrame api_stack[WF_MAX_API_DEPTH];
static int	api_depth = 0;
static char *api_actor = NULL;	/* the outermost caller, in TopMemoryContext */

/* forward declarations */
static void tenant_invalidate(Datum arg, int cacheid, uint32 hashvalue);
static void api_xact_callback(XactEvent event, void *arg);
static void api_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								 SubTransactionId parentSubid, void *arg);
static char *lookup_tenant(Oid userid);

PG_FUNCTION_INFO_V1(wfengine_current_tenant);

/*
 * tenant_invalidate forgets the cached tenant when roles or memberships
 * change.
 */
static void
tenant_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	tenant_user = InvalidOid;
}

/*
 * api_xact_callback forgets the API calls of a transaction that ended
 * (an error may have skipped their WfApiEnd; the transaction's end has
 * already restored the user).
 */
static void
api_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		api_depth = 0;
		tenant_override = NULL;
		WfShardXactEnd();
		if (api_actor != NULL)
			pfree(api_actor);
		api_actor = NULL;
	}
}

/*
 * api_subxact_callback forgets the API calls that began inside a
 * subtransaction that aborts (an error caught by a PL/pgSQL exception
 * block skipped their WfApiEnd; the abort has restored the user).
 * Subtransaction ids only grow within a transaction, so those calls are
 * the frames whose id is mySubid or later.
 */
static void
api_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	while (api_depth > 0 && api_stack[api_depth - 1].subid >= mySubid)
		api_depth--;
}

/*
 * WfTenantInit registers the callbacks; called from _PG_init.
 */
void
WfTenantInit(void)
{
	if (tenant_callbacks)
		return;
	CacheRegisterSyscacheCallback(AUTHOID, tenant_invalidate, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, tenant_invalidate, (Datum) 0);
	RegisterXactCallback(api_xact_callback, NULL);
	RegisterSubXactCallback(api_subxact_callback, NULL);
	tenant_callbacks = true;
}

/*
 * WfExtensionOwner returns the owner of extension wfengine.
 */
Oid
WfExtensionOwner(void)
{
	Oid			extoid = get_extension_oid("wfengine", true);
	HeapTuple	tup;
	Oid			owner;

	if (!OidIsValid(extoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"wfengine\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION wfengine.")));
	tup = SearchSysCache1(EXTENSIONOID, ObjectIdGetDatum(extoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for extension %u", extoid);
	owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * lookup_tenant finds the tenant of userid: the one role named
 * wf_tenant_<tenant> it is a member of.
 */
static char *
lookup_tenant(Oid userid)
{
	Datum		values[1];
	Oid			types[1] = {OIDOID};
	char	   *found = NULL;
	int			n;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	values[0] = ObjectIdGetDatum(userid);
	/* memberships as granted: pg_has_role() is true of every role for a superuser */
	if (SPI_execute_with_args("WITH RECURSIVE m(roleid) AS ("
							  " SELECT $1 UNION"
							  " SELECT a.roleid FROM pg_catalog.pg_auth_members a"
							  " JOIN m ON a.member OPERATOR(pg_catalog.=) m.roleid) "
							  "SELECT pg_catalog.substr(r.rolname, 11) FROM pg_catalog.pg_roles r"
							  " JOIN m ON r.oid OPERATOR(pg_catalog.=) m.roleid "
							  "WHERE r.rolname OPERATOR(pg_catalog.~~) 'wf\\_tenant\\_%' "
							  "ORDER BY 1 LIMIT 2",
							  1, types, values, NULL, true, 2) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the tenant of a role");
	n = (int) SPI_processed;
	if (n == 2)
	{
		char	   *a = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		char	   *b = SPI_getvalue(SPI_tuptable->vals[1], SPI_tuptable->tupdesc, 1);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" belongs to more than one wfengine tenant (\"%s\", \"%s\")",
						GetUserNameFromId(userid, false), a, b),
				 errhint("A login acts for one tenant: revoke all but one of its wf_tenant_* roles.")));
	}
	if (n == 1)
		found = MemoryContextStrdup(TopMemoryContext,
									SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();

	if (found == NULL)
	{
		if (!superuser_arg(userid) && userid != WfExtensionOwner())
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("role \"%s\" belongs to no wfengine tenant",
							GetUserNameFromId(userid, false)),
					 errhint("An administrator adds it with wf.add_tenant_member(tenant, role).")));
		found = MemoryContextStrdup(TopMemoryContext, WF_DEFAULT_TENANT);
	}
	return found;
}

/*
 * WfCurrentTenant returns the tenant of the session user.
 */
const char *
WfCurrentTenant(void)
{
	Oid			userid = GetSessionUserId();

	if (tenant_override != NULL)
		return tenant_override;

	if (OidIsValid(tenant_user) && tenant_user == userid && tenant_name != NULL)
		return tenant_name;
	if (tenant_name != NULL)
		pfree(tenant_name);
	tenant_name = NULL;
	tenant_user = InvalidOid;
	tenant_name = lookup_tenant(userid);
	tenant_user = userid;
	return tenant_name;
}

/* may the engine wait for locks now (WfSetLockWait) */
static bool lock_wait_allowed = true;

/*
 * WfLockWaitAllowed tells whether the engine may wait for a lock that
 * another transaction holds (true but while WfSetLockWait(false) is in
 * force: the engine worker's tick).
 */
bool
WfLockWaitAllowed(void)
{
	return lock_wait_allowed;
}

/*
 * WfSetLockWait allows or forbids lock waits and returns the previous
 * setting; the caller restores it, on error as well (PG_FINALLY).
 */
bool
WfSetLockWait(bool allowed)
{
	bool		old = lock_wait_allowed;

	lock_wait_allowed = allowed;
	return old;
}

/*
 * WfLockTenantKey takes the transaction-level lock of kind (WF_LOCK_*) on
 * tenant's key, held to the end of the transaction.  Two keys may share
 * a lock (a hash collision): they then only take turns needlessly.  With
 * wait false it only tries, and returns false when another transaction
 * holds it; with wait true while lock waits are forbidden (WfSetLockWait)
 * it fails with ERRCODE_LOCK_NOT_AVAILABLE instead of waiting.
 */
bool
WfLockTenantKey(const char *tenant, const char *key, uint16 kind, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId,
						 hash_bytes((const unsigned char *) tenant, strlen(tenant)),
						 hash_bytes((const unsigned char *) key, strlen(key)),
						 kind);
	if (wait && !lock_wait_allowed)
	{
		/* the engine worker: never wait for a client (WfSetLockWait) */
		if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain a lock of tenant \"%s\" on \"%s\"", tenant, key),
					 errdetail("Another transaction of the tenant holds it.")));
		return true;
	}
	return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * wfengine_current_tenant is wf.current_tenant().
 */
Datum
wfengine_current_tenant(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(WfCurrentTenant()));
}

/*
 * WfCurrentActor returns the name recorded as the actor of events: the
 * role that called the outermost API function of this transaction, or the
 * current role outside any.
 */
const char *
WfCurrentActor(void)
{
	if (api_depth > 0 && api_actor != NULL)
		return api_actor;
	return GetUserNameFromId(GetUserId(), false);
}

/*
 * WfApiSwitchIn is called at the start of every API call (WfApiBegin): it
 * learns the caller, then runs the rest of the call as the extension's
 * owner with the search_path pinned to WF_SAFE_SEARCH_PATH.
 */
void
WfApiSwitchIn(Oid owner)
{
	ApiFrame   *f;

	if (api_depth >= WF_MAX_API_DEPTH)
		elog(ERROR, "wfengine API calls nest too deep");
	f = &api_stack[api_depth];
	f->subid = GetCurrentSubTransactionId();
	GetUserIdAndSecContext(&f->save_userid, &f->save_sec_context);
	if (api_depth == 0)
	{
		if (api_actor != NULL)
			pfree(api_actor);
		api_actor = MemoryContextStrdup(TopMemoryContext,
										GetUserNameFromId(f->save_userid, false));
		(void) WfCurrentTenant();	/* refuses a role of no tenant */
	}
	f->switched = f->save_userid != owner;
	if (f->switched)
		SetUserIdAndSecContext(owner, f->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);

	/*
	 * Pin the search_path for the call, as a SET clause of a function
	 * would: a GUC nest level of its own, undone by WfApiSwitchOut or, when
	 * an error ends the call, by the (sub)transaction's abort.  Every
	 * statement is schema-qualified as well; the pin is what holds where one
	 * is not.  A path that already reads so (a call inside another) is left
	 * as it is, without a nest level: setting it again only makes the next
	 * name lookup recompute the search path, and leaving a nest level walks
	 * every GUC of the server (AtEOXact_GUC; about 3,700 instructions a
	 * level, bench/callgrind.sh).  Nothing the call runs saves a GUC at its
	 * level: the engine's own settings (lock_timeout, enable_seqscan) and
	 * functions with SET clauses take levels of their own.
	 */
	f->guc_nestlevel = 0;
	if (namespace_search_path == NULL ||
		strcmp(namespace_search_path, WF_SAFE_SEARCH_PATH) != 0)
	{
		f->guc_nestlevel = NewGUCNestLevel();
		(void) set_config_option("search_path", WF_SAFE_SEARCH_PATH,
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	api_depth++;

	/*
	 * A sharded deployment: refuse a tenant that lives on another shard
	 * (shard.c).  The engine acting for a run's tenant is not a caller.
	 */
	if (api_depth == 1 && tenant_override == NULL)
		WfShardCheckTenant(WfCurrentTenant());
}

/*
 * WfApiSwitchOut ends an API call: back to the caller's role.
 */
void
WfApiSwitchOut(void)
{
	ApiFrame   *f;

	if (api_depth == 0)
		elog(ERROR, "wfengine API call ended that never began");
	f = &api_stack[--api_depth];
	if (f->guc_nestlevel > 0)
		AtEOXact_GUC(true, f->guc_nestlevel);
	if (f->switched)
		SetUserIdAndSecContext(f->save_userid, f->save_sec_context);
}

/*
 * WfInApiCall tells whether an API call is in progress (WfApiSwitchIn
 * began one in this transaction that has not ended).
 */
bool
WfInApiCall(void)
{
	return api_depth > 0;
}

/*
 * WfApiCaller returns the role that called the outermost API function in
 * progress (the current role outside any).
 */
Oid
WfApiCaller(void)
{
	if (api_depth > 0)
		return api_stack[0].save_userid;
	return GetUserId();
}

/*
 * WfActForTenant makes the API calls that follow act for tenant (NULL:
 * for the session's tenant again) and returns the tenant acted for
 * before, to be restored.  Only the engine uses it, to make one run's
 * transition reach the runs it owns (a parent stopping its child runs,
 * which may be done by the engine worker, whose own tenant is "default").
 */
const char *
WfActForTenant(const char *tenant)
{
	const char *old = tenant_override;

	tenant_override = tenant;
	return old;
}
