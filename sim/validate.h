/* validate.h - gpusim validate: the simulator's prediction beside the same replay on the real
 * device, check by check (report/validate.c reports the comparison).
 */
#ifndef GS_VALIDATE_H
#define GS_VALIDATE_H

#include <glib.h>
#include <stdio.h>

#include "replay.h"

G_BEGIN_DECLS

/* Tolerances, stated in gpusim validate --help and docs/real-gpu.md. */
#define GS_VALIDATE_TIME_TOL 0.25    /* modelled device time within 25% of the measured */
#define GS_VALIDATE_KIND_SHARE 0.10  /* a call kind's time is judged from 10% of the total */
#define GS_VALIDATE_DRIVER_TOL 0.02  /* driver's view of peak reserved within 2% */

typedef struct {
    uint64_t capacity, device_total; /* as gs_replay_opts, for both sides */
    const gs_calibration *cal;       /* the simulator's cost model; NULL: built-in */
    gs_backend *backend;             /* the real device */
    unsigned runs;                   /* timed runs after the warm-up; 0 = 1 */
    bool touch;
    GArray *samples;                 /* optional: every timed call, for gs_calibration_write */
} gs_validate_opts;

typedef struct {
    gs_result sim;                 /* the simulator's prediction (no bound: its lower_bound_bytes
                                    * and offline_bytes, and real's, are 0) */
    gs_result real;                /* the first timed run: outcome, statistics, call counts */
    double real_us[GS_CALL_COUNT]; /* median over the timed runs of each kind's time */
    double real_total_us;          /* median of the runs' total device time */
    double real_host_s;            /* median host seconds of the replay loop, touches excluded */
    unsigned runs;                 /* timed runs done */
    bool runs_agree;               /* every timed run made the same calls, same peak */
    uint64_t driver_peak;          /* the driver's view of peak reserved (warm-up run) */
} gs_validation;

/* FALSE on a setup error (err set); a device failure is in v->real.error. */
gboolean gs_validate_run(const gs_trace *t, const gs_policy *p, const gs_validate_opts *o,
                         gs_validation *v, GError **err);
void gs_validation_clear(gs_validation *v);
/* An empty array of gs_call_sample for gs_validate_opts.samples (gs_calibration_save). */
GArray *gs_call_samples_new(void);

G_END_DECLS

#endif
