/*-------------------------------------------------------------------------
 *
 * ddlguard.c
 *	  The ProcessUtility hook that keeps the engine workers out of the way
 *	  of DDL on databases.
 *
 * DDL on databases.  DROP DATABASE, ALTER DATABASE RENAME/SET TABLESPACE
 * and CREATE DATABASE ... TEMPLATE fail on PostgreSQL 15 while any other
 * backend is connected to the database concerned.  A ProcessUtility hook
 * therefore pauses the database (a note in the launcher's piece of shared
 * memory, shmem.h, that keeps the launcher from starting a worker there),
 * terminates its worker and waits for it to be gone (at most 10 s), runs
 * the statement, and lifts the pause 5 s after the statement ended.  It
 * does so only for the database's owner (or a superuser), who could run
 * the statement anyway.  DROP EXTENSION wfengine wakes the worker at
 * commit; it then finds the extension gone and exits.  ALTER EXTENSION
 * wfengine UPDATE wakes it too, so that a worker idling on a schema older
 * than the library needs (worker.c) notices the update at once.  Each tick holds
 * AccessShareLock on the extension object (worker.c), so DROP EXTENSION
 * waits for a running tick instead of pulling the tables from under it.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/ddlguard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "miscadmin.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/timestamp.h"

#include "ddlguard.h"
#include "notify.h"
#include "shmem.h"

/* constants */
#define WF_DDL_WAIT_MS				10000	/* how long DDL waits for a worker
											 * to exit */
#define WF_DDL_POLL_MS				50
#define WF_DDL_GRACE_MS				5000	/* the pause outlives the DDL
											 * statement by this much */

static ProcessUtility_hook_type prev_process_utility_hook = NULL;

/* backend-local state */
static bool ddl_exit_callback_registered = false;

/* forward declarations */
static void wf_process_utility(PlannedStmt *pstmt, const char *queryString,
							   bool readOnlyTree, ProcessUtilityContext context,
							   ParamListInfo params, QueryEnvironment *queryEnv,
							   DestReceiver *dest, QueryCompletion *qc);

/*
 * WfDdlGuardInit installs the ProcessUtility hook.  _PG_init calls it only
 * while the library is being preloaded (and never in binary upgrade mode).
 */
void
WfDdlGuardInit(void)
{
	if (IsBinaryUpgrade || !process_shared_preload_libraries_in_progress)
		return;

	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = wf_process_utility;
}

/*
 * ddl_target_database returns the name of the database whose other
 * connections make a utility statement fail, or NULL.
 */
static const char *
ddl_target_database(Node *parsetree)
{
	ListCell   *lc;

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			return ((DropdbStmt *) parsetree)->dbname;
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
				return ((RenameStmt *) parsetree)->subname;
			return NULL;
		case T_AlterDatabaseStmt:
			foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
			{
				DefElem    *def = lfirst_node(DefElem, lc);

				if (strcmp(def->defname, "tablespace") == 0)
					return ((AlterDatabaseStmt *) parsetree)->dbname;
			}
			return NULL;
		case T_CreatedbStmt:
			foreach(lc, ((CreatedbStmt *) parsetree)->options)
			{
				DefElem    *def = lfirst_node(DefElem, lc);

				if (strcmp(def->defname, "template") == 0 && def->arg != NULL)
					return defGetString(def);
			}
			return NULL;
		default:
			return NULL;
	}
}

/*
 * is_drop_of_wfengine tells whether a statement is DROP EXTENSION naming
 * wfengine.
 */
static bool
is_drop_of_wfengine(Node *parsetree)
{
	DropStmt   *stmt;
	ListCell   *lc;

	if (!IsA(parsetree, DropStmt))
		return false;
	stmt = (DropStmt *) parsetree;
	if (stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, stmt->objects)
	{
		Node	   *obj = (Node *) lfirst(lc);

		if (IsA(obj, String) && strcmp(strVal(obj), "wfengine") == 0)
			return true;
	}
	return false;
}

/*
 * is_update_of_wfengine tells whether a statement is ALTER EXTENSION
 * wfengine UPDATE.
 */
static bool
is_update_of_wfengine(Node *parsetree)
{
	return IsA(parsetree, AlterExtensionStmt) &&
		strcmp(((AlterExtensionStmt *) parsetree)->extname, "wfengine") == 0;
}

/*
 * ddl_release_pauses ends the pauses this backend still holds, 5 s from
 * now; an on_shmem_exit callback for a backend that is terminated (FATAL)
 * while it runs DDL on a database, so that the pause does not outlive it.
 */
static void
ddl_release_pauses(int code, Datum arg)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													WF_DDL_GRACE_MS);
	int			i;

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	for (i = 0; i < WF_MAX_DB_NOTES; i++)
	{
		WfDbNote   *note = &WfWorkers->notes[i];

		if (OidIsValid(note->dboid) && note->paused_by == MyProcPid)
		{
			note->paused_until = until;
			note->paused_by = 0;
		}
	}
	LWLockRelease(WfShmem->lock);
}

/*
 * ddl_pause_database keeps the launcher from starting a worker for a
 * database (until ddl_unpause_database, or the exit of this backend),
 * terminates the worker it has, and waits for it to be gone, at most
 * WF_DDL_WAIT_MS.  Returns false when no pause could be recorded.  Two
 * backends pausing one database at once share the note, which the later
 * one owns; if that one finishes first, a worker may start early and then
 * wait on the other statement's lock on the database, which is harmless.
 */
static bool
ddl_pause_database(Oid dboid)
{
	TimestampTz start = GetCurrentTimestamp();
	pid_t		signalled = 0;
	WfDbNote   *note;

	if (!ddl_exit_callback_registered)
	{
		on_shmem_exit(ddl_release_pauses, (Datum) 0);
		ddl_exit_callback_registered = true;
	}

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	note = WfNoteGet(dboid);
	if (note != NULL)
	{
		note->paused_until = DT_NOEND;
		note->paused_by = MyProcPid;
	}
	LWLockRelease(WfShmem->lock);
	if (note == NULL)
		return false;

	for (;;)
	{
		bool		present = false;
		pid_t		pid = 0;
		int			i;

		LWLockAcquire(WfShmem->lock, LW_SHARED);
		for (i = 0; i < WF_MAX_DB_WORKERS; i++)
		{
			if (WfShmem->workers[i].dboid == dboid)
			{
				present = true;
				pid = WfShmem->workers[i].pid;
				break;
			}
		}
		LWLockRelease(WfShmem->lock);

		if (!present)
			break;
		if (pid != 0 && pid != signalled)
		{
			if (kill(pid, SIGTERM) != 0 && errno != ESRCH)
				elog(DEBUG1, "could not send SIGTERM to process %d: %m", (int) pid);
			signalled = pid;
		}
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), WF_DDL_WAIT_MS))
		{
			ereport(WARNING,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("wfengine worker of database %u did not exit in time",
							dboid)));
			break;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 WF_DDL_POLL_MS, WfWaitEvent());
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * ddl_unpause_database lets the pause end WF_DDL_GRACE_MS from now (long
 * enough for the statement's transaction to commit) and wakes the
 * launcher, so that it starts the worker again if the database remains.
 */
static void
ddl_unpause_database(Oid dboid)
{
	WfDbNote   *note;

	LWLockAcquire(WfShmem->lock, LW_EXCLUSIVE);
	note = WfNoteFind(dboid);
	if (note != NULL && note->paused_by == MyProcPid)
	{
		note->paused_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 WF_DDL_GRACE_MS);
		note->paused_by = 0;
	}
	LWLockRelease(WfShmem->lock);
	WfWakeLauncher();
}

/*
 * ddl_next_process_utility runs a utility statement through the previous
 * hook, or the standard one.
 */
static void
ddl_next_process_utility(PlannedStmt *pstmt, const char *queryString,
						 bool readOnlyTree, ProcessUtilityContext context,
						 ParamListInfo params, QueryEnvironment *queryEnv,
						 DestReceiver *dest, QueryCompletion *qc)
{
	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context,
								  params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * wf_process_utility is the ProcessUtility hook (installed only when
 * preloaded).  Around DDL that needs a database free of other connections
 * it stops that database's worker; after DROP EXTENSION wfengine and
 * ALTER EXTENSION wfengine UPDATE it wakes this database's worker at
 * commit.  Everything else passes through.
 */
static void
wf_process_utility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	Oid			paused = InvalidOid;

	if (WfShmem != NULL && WfWorkers != NULL)
	{
		const char *dbname = ddl_target_database(parsetree);

		if (dbname != NULL)
		{
			Oid			dboid = get_database_oid(dbname, true);

#if PG_VERSION_NUM >= 160000
			if (OidIsValid(dboid) &&
				object_ownercheck(DatabaseRelationId, dboid, GetUserId()) &&
				ddl_pause_database(dboid))
				paused = dboid;
#else
			if (OidIsValid(dboid) &&
				pg_database_ownercheck(dboid, GetUserId()) &&
				ddl_pause_database(dboid))
				paused = dboid;
#endif
		}
		else if (is_drop_of_wfengine(parsetree) || is_update_of_wfengine(parsetree))
			WfWakeWorkerAtCommit();
	}

	if (!OidIsValid(paused))
	{
		ddl_next_process_utility(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
		return;
	}

	PG_TRY();
	{
		ddl_next_process_utility(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		ddl_unpause_database(paused);
	}
	PG_END_TRY();
}
