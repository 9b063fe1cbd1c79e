/*-------------------------------------------------------------------------
 *
 * version.c
 *	  The installed schema version, and the refusal to run this library's
 *	  code against a schema older than it needs.
 *
 * After `make install` of a new version, the new shared library serves
 * every database of the server, including those whose extension is still
 * at an older version because nobody has run ALTER EXTENSION wfengine
 * UPDATE there yet.  The library knows its own version (WFENGINE_VERSION,
 * from wfengine.control) and the oldest schema its C code runs against
 * (WF_MIN_SCHEMA_VERSION, version.h).  Every API call checks the installed
 * version first (WfApiBegin, spi_util.c) and refuses an older one with
 * ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE and the hint to update; the
 * engine worker asks WfSchemaVersionAtLeast instead, logs once and fires
 * nothing until the database is updated (worker.c).  A call whose code
 * alone needs a newer object calls WfRequireSchemaVersion with the version
 * that added it, so the other calls keep working on the older schema.
 *
 * Caching.  The installed version (pg_extension.extversion) is read once
 * and kept for the backend, which is connected to one database for its
 * whole life, so the cache is per database.  A syscache callback on
 * pg_extension (EXTENSIONOID) forgets it whenever any row of pg_extension
 * changes: CREATE, ALTER (UPDATE) and DROP EXTENSION of any extension, in
 * this backend or in another one, as invalidations are processed at the
 * start of the next transaction or lock.  A read that an invalidation
 * overtook is not kept (the counter below), so the check costs a test of
 * one flag per call in the steady state.
 *
 * Versions are compared numerically, part by part ("0.10.0" is newer than
 * "0.9.1"); a missing part counts as 0.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/version.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "version.h"

/* the most dot-separated parts a version may have */
#define WF_VERSION_PARTS 8

/* backend-local state */
static bool version_callback_registered = false;
static bool version_known = false;	/* version_installed is up to date */
static char *version_installed = NULL;	/* in TopMemoryContext; NULL: no
										 * extension */
static uint64 version_invalidations = 0;	/* callbacks seen so far */

/* forward declarations */
static void version_invalidate(Datum arg, int cacheid, uint32 hashvalue);
static bool parse_version(const char *s, long *parts);

/*
 * version_invalidate forgets the installed version: a row of pg_extension
 * changed (or the whole cache was reset).
 */
static void
version_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	version_known = false;
	version_invalidations++;
}

/*
 * WfVersionInit registers the syscache callback; called from _PG_init.
 */
void
WfVersionInit(void)
{
	if (version_callback_registered)
		return;
	CacheRegisterSyscacheCallback(EXTENSIONOID, version_invalidate, (Datum) 0);
	version_callback_registered = true;
}

/*
 * WfSchemaVersion returns the installed version of extension wfengine in
 * this database (pg_extension.extversion), or NULL when it is not
 * installed.  Needs a transaction.  The result stays valid until the next
 * call.
 */
const char *
WfSchemaVersion(void)
{
	uint64		seen;
	Oid			extoid;
	char	   *found = NULL;

	if (version_known)
		return version_installed;

	seen = version_invalidations;
	extoid = get_extension_oid("wfengine", true);
	if (OidIsValid(extoid))
	{
		HeapTuple	tup;
		Datum		d;
		bool		isnull;

		tup = SearchSysCache1(EXTENSIONOID, ObjectIdGetDatum(extoid));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for extension %u", extoid);
		d = SysCacheGetAttr(EXTENSIONOID, tup, Anum_pg_extension_extversion, &isnull);
		if (isnull)
			elog(ERROR, "extension \"wfengine\" has no version");
		found = MemoryContextStrdup(TopMemoryContext, TextDatumGetCString(d));
		ReleaseSysCache(tup);
	}

	if (version_installed != NULL)
		pfree(version_installed);
	version_installed = found;
	/* keep it only if no invalidation arrived while it was read */
	version_known = (version_invalidations == seen);
	return version_installed;
}

/*
 * parse_version splits s into WF_VERSION_PARTS numbers (missing parts are
 * 0); false when s is not digits separated by single dots.
 */
static bool
parse_version(const char *s, long *parts)
{
	int			n = 0;

	memset(parts, 0, sizeof(long) * WF_VERSION_PARTS);
	for (;;)
	{
		long		v = 0;

		if (n >= WF_VERSION_PARTS || *s < '0' || *s > '9')
			return false;
		while (*s >= '0' && *s <= '9')
		{
			if (v > (LONG_MAX - 9) / 10)
				return false;
			v = v * 10 + (*s++ - '0');
		}
		parts[n++] = v;
		if (*s == '\0')
			return true;
		if (*s++ != '.')
			return false;
	}
}

/*
 * WfCompareVersions compares two versions part by part: negative when a
 * is older than b, 0 when they are equal, positive when a is newer.  A
 * version that is not of the form "1.2.3" is an error.
 */
int
WfCompareVersions(const char *a, const char *b)
{
	long		pa[WF_VERSION_PARTS];
	long		pb[WF_VERSION_PARTS];

	if (!parse_version(a, pa) || !parse_version(b, pb))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wfengine schema version \"%s\" cannot be compared with the loaded library %s",
						parse_version(a, pa) ? b : a, WFENGINE_VERSION),
				 errdetail("Versions are numbers separated by dots."),
				 errhint("Run ALTER EXTENSION wfengine UPDATE.")));
	for (int i = 0; i < WF_VERSION_PARTS; i++)
	{
		if (pa[i] != pb[i])
			return pa[i] < pb[i] ? -1 : 1;
	}
	return 0;
}

/*
 * WfSchemaVersionAtLeast tells whether the installed schema is at version
 * required or newer, without raising an error for an older one (the
 * engine worker's question); *installed (when not NULL) is set to the
 * installed version.  False when the extension is not installed.
 */
bool
WfSchemaVersionAtLeast(const char *required, const char **installed)
{
	const char *v = WfSchemaVersion();

	if (installed != NULL)
		*installed = v;
	return v != NULL && WfCompareVersions(v, required) >= 0;
}

/*
 * WfRequireSchemaVersion refuses to go on unless the installed schema is
 * at version required or newer.  WfApiBegin calls it with
 * WF_MIN_SCHEMA_VERSION for every API call, after checking that the
 * extension is installed; a call that needs a newer object calls it again
 * with the version of the upgrade script that added the object.  Returns
 * the installed version (valid until the next call of WfSchemaVersion).
 */
const char *
WfRequireSchemaVersion(const char *required)
{
	const char *installed;

	if (WfSchemaVersionAtLeast(required, &installed))
		return installed;
	if (installed == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"wfengine\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION wfengine.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("wfengine schema version %s is older than the loaded library %s",
					installed, WFENGINE_VERSION),
			 errdetail("The library needs schema version %s or later.", required),
			 errhint("Run ALTER EXTENSION wfengine UPDATE.")));
	return NULL;				/* keep the compiler quiet */
}
