/*-------------------------------------------------------------------------
 *
 * ddlguard.h
 *	  The ProcessUtility hook around DDL on databases (see ddlguard.c).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/ddlguard.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_DDLGUARD_H
#define WF_DDLGUARD_H

extern void WfDdlGuardInit(void);

#endif							/* WF_DDLGUARD_H */
