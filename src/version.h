/*-------------------------------------------------------------------------
 *
 * version.h
 *	  The library's version and the schema version it needs (see version.c).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/version.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_VERSION_H
#define WF_VERSION_H

/* the library's own version: default_version of wfengine.control (Makefile) */
#ifndef WFENGINE_VERSION
#error "WFENGINE_VERSION must be defined by the Makefile"
#endif

/*
 * The oldest installed schema (pg_extension.extversion) the C code of this
 * library runs against.  Every API call (WfApiBegin) and the engine worker
 * refuse a database whose schema is older.  Whoever makes the C code depend
 * on an object that an upgrade script adds raises it to that script's
 * version, or, when only some calls need the object, leaves it and calls
 * WfRequireSchemaVersion in those calls instead.  0.1.0 and 0.2.0 have the
 * same schema today, so the library serves a database still on 0.1.0.
 */
#define WF_MIN_SCHEMA_VERSION "0.1.0"

extern void WfVersionInit(void);
extern const char *WfSchemaVersion(void);
extern int	WfCompareVersions(const char *a, const char *b);
extern bool WfSchemaVersionAtLeast(const char *required, const char **installed);
extern const char *WfRequireSchemaVersion(const char *required);

#endif							/* WF_VERSION_H */
