/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  Configuration variables of wfengine, kept in alphabetical order.
 *
 * Limits that protect the server from one tenant (definition size, step
 * count, payload size) are PGC_SUSET: a superuser may change them for a
 * session, an ordinary role may not raise its own limits.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/guc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "guc.h"

/* GUC variables */
int			wf_max_claim_batch = 1000;
int			wf_max_definition_size = 64 * 1024;
int			wf_max_payload_size = 256 * 1024;
int			wf_max_steps = 20;

/*
 * WfGucInit defines every wfengine.* setting and reserves the prefix.
 */
void
WfGucInit(void)
{
	DefineCustomIntVariable("wfengine.max_claim_batch",
							gettext_noop("Sets the largest number of tasks one claim may return."),
							gettext_noop("Range 1 to 100000."),
							&wf_max_claim_batch,
							1000, 1, 100000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.max_definition_size",
							gettext_noop("Sets the largest accepted workflow definition, in bytes."),
							gettext_noop("Measured on the jsonb form of the spec. Range 1kB to 16MB."),
							&wf_max_definition_size,
							64 * 1024, 1024, 16 * 1024 * 1024,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.max_payload_size",
							gettext_noop("Sets the largest accepted run input, task output or error, in bytes."),
							gettext_noop("Measured on the jsonb form. Range 1kB to 64MB."),
							&wf_max_payload_size,
							256 * 1024, 1024, 64 * 1024 * 1024,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("wfengine.max_steps",
							gettext_noop("Sets the largest number of steps a workflow definition may have."),
							gettext_noop("Checked when a definition is published. Range 1 to 1000."),
							&wf_max_steps,
							20, 1, 1000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("wfengine");
}
