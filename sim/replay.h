/* replay.h - the replay engine: a trace replayed under a policy on a device (its options in
 * opts.h, its result in result.h).
 *
 * Data flows one way: trace (traces/) -> replay engine -> core + policy -> backend; the core's
 * statistics -> a gs_result -> report (report/: table, CSV, JSON) -> plots (plots/).
 */
#ifndef GS_REPLAY_H
#define GS_REPLAY_H

#include <glib.h>
#include <stdio.h>

#include "backend.h"
#include "bound.h"
#include "core.h"
#include "policies.h"
#include "util.h"
#include "trace.h"
#include "opts.h"
#include "reference.h"
#include "result.h"

G_BEGIN_DECLS

/* The limit p's own settings set (per_process_memory_fraction) on a device of device_total
 * bytes (0: gpusim's default), as a replay of t with no cap applies it (p at t's release): 0
 * for none, or where p asks for a release newer than t's. */
uint64_t gs_replay_own_limit(const gs_trace *t, const gs_policy *p, uint64_t device_total);

/* Replay t under policy p. Returns FALSE only for setup errors (err set); an OOM or a device
 * failure during the replay is an outcome, recorded in r. */
gboolean gs_replay_run(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                       gs_result *r, GError **err);
G_END_DECLS

#endif
