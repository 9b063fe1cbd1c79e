/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  The launcher, which starts one engine worker per database.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/launcher.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_LAUNCHER_H
#define WF_LAUNCHER_H

extern void WfLauncherInit(void);

/* background worker entry point, found by name through bgw_function_name */
extern PGDLLEXPORT void WfLauncherMain(Datum main_arg) pg_attribute_noreturn();

#endif							/* WF_LAUNCHER_H */
