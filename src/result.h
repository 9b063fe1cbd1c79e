/*-------------------------------------------------------------------------
 *
 * result.h
 *	  Results of task attempts, as workers report them.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/result.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_RESULT_H
#define WF_RESULT_H

extern void WfFailDamagedTask(int64 task_id, int64 fence, const char *message);

#endif							/* WF_RESULT_H */
