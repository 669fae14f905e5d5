/* plot.h - gpusim's plots: what a replay records for them, the data files and gnuplot scripts
 * that draw them, and running gnuplot.
 *
 * The plots (README "Plots"):
 *   NAME-timeline   allocated and reserved bytes over the trace's time, one colour per policy,
 *                   markers at retries and OOMs, the capacity dashed;
 *   NAME-bars       peak reserved, waste, fragmentation, retries, OOMs, device time per policy;
 *   NAME-map-K-SPEC the address space at the moment of peak reserved under policy K: a row per
 *                   segment, its blocks coloured by state;
 *   NAME-oom-map-K-SPEC  the same at policy K's first OOM, the failed request drawn beside the
 *                   largest free block of its pool;
 *   NAME-sweep      (gpusim sweep) metrics against a swept setting, a line per other setting;
 *   NAME-matrix     (gpusim sweep with a capacity list) ok or OOM per policy setting and
 *                   capacity, the retries written in each cell;
 *   NAME-whatif     (gpusim whatif) the minimum capacity per setting against the recorded cap,
 *                   and the modelled device time at the cap.
 * Each is a .gp script beside its .dat data files, written whole (temporary file, then rename),
 * so `cd DIR && gnuplot NAME-timeline.gp` draws it again; gpusim runs the same scripts to make
 * NAME.png (pngcairo) and NAME.svg, also written whole.
 *
 * Recording is opt-in: a gs_plot_series is the observer (gs_replay_opts.observe) of one replay,
 * so a replay without --plot pays one untaken branch per event.
 */
#ifndef GS_PLOT_H
#define GS_PLOT_H

#include <glib.h>

#include "replay.h"

G_BEGIN_DECLS

#define GS_PLOT_ERROR (gs_plot_error_quark())
GQuark gs_plot_error_quark(void);
typedef enum {
    GS_PLOT_ERROR_IO,          /* cannot write a data file, script or image */
    GS_PLOT_ERROR_NO_GNUPLOT,  /* gnuplot (or $GPUSIM_GNUPLOT) is not installed */
    GS_PLOT_ERROR_GNUPLOT,     /* gnuplot ran and failed */
    GS_PLOT_ERROR_INPUT,       /* a saved result that cannot be plotted */
} gs_plot_error_code;

/* ---- recording during a replay ---- */

/* The timeline (downsampled to at most GS_PLOT_POINTS buckets, each keeping its maxima so no
 * peak is lost), the retries and OOMs, a snapshot of every segment and block taken each time
 * reserved bytes reach a new maximum (so it ends as the address map at peak reserved), and one
 * more at the first OOM, with the request that failed and its pool's free blocks. */
#define GS_PLOT_POINTS 2000
typedef struct gs_plot_series gs_plot_series;

/* n_events: the trace's events (sets the bucket width). */
gs_plot_series *gs_plot_series_new(size_t n_events);
void gs_plot_series_free(gs_plot_series *s);
/* The gs_observe_fn: ud is the gs_plot_series. */
void gs_plot_observe(const gs_heap *h, const gs_event *e, size_t index, void *ud);
/* The series as members of a result's JSON object (gs_result.json_extra):
 * ", \"timeline\": {...}, \"address_map\": {...}" (and ", \"oom_map\": {...}" after an
 * OOM); and back, from a result object of a saved report (NULL when it holds none; err set
 * when it holds a malformed one). */
char *gs_plot_series_json(const gs_plot_series *s);
gs_plot_series *gs_plot_series_from_json(const gs_json *result, GError **err);

/* ---- what one policy's plot needs: from a gs_result, or from a saved report ---- */
typedef struct {
    char *policy;
    uint64_t capacity;          /* 0: no limit */
    char *outcome;              /* "ok", "oom", "error" */
    int64_t peak_allocated, peak_reserved;
    double frag_peak;
    uint64_t retries, ooms;
    double device_us;
    gs_plot_series *series;     /* NULL: the bars only; owned */
    char *oom_client;           /* several clients: whose request met the first OOM (else NULL) */
} gs_plot_run;

void gs_plot_run_from_result(gs_plot_run *pr, const gs_result *r, gs_plot_series *series);
void gs_plot_run_clear(gs_plot_run *pr);

/* ---- writing plots ---- */
typedef struct gs_plotter gs_plotter;

/* Plots go to dir, made with its parents at the first file written (a run that fails before
 * leaves no empty directory). Refused now (GS_PLOT_ERROR_IO) when dir could not be made: it or
 * its nearest existing ancestor is not a directory we may write in. */
gs_plotter *gs_plotter_new(const char *dir, GError **err);
/* Make p's directory now (a command whose -o may name a file in it, once its inputs are read). */
gboolean gs_plotter_make(gs_plotter *p, GError **err);
void gs_plotter_free(gs_plotter *p);
/* Never replace the file at path (an input of the run: a trace, a saved report): a plot whose
 * name it has is GS_PLOT_ERROR_IO instead. A path that does not exist is ignored. */
void gs_plotter_keep(gs_plotter *p, const char *path);
/* Never write a plot at path, the command's report (-o; NULL or "-": none), whether or not it
 * exists yet: the plot is GS_PLOT_ERROR_IO instead, naming it. */
void gs_plotter_keep_report(gs_plotter *p, const char *path);
/* The timeline (runs with a series), the bars, and an address map per run with a series (and
 * one at the first OOM of each run that met one). trace: as given on the command line; the
 * plots' file names start with its base name. */
gboolean gs_plot_trace(gs_plotter *p, const char *trace, const gs_plot_run *runs, size_t n,
                       GError **err);
/* NAME-oom-map-K-SPEC alone: the address map of r (the K-th run) at its first OOM, when its
 * series holds one (nothing is written otherwise). */
gboolean gs_plot_oom_map(gs_plotter *p, const char *trace, size_t k, const gs_plot_run *r,
                         GError **err);
/* A sweep: cells[i] has values[i * n_params + k] for params[k] ("" where it does not apply). */
gboolean gs_plot_sweep(gs_plotter *p, const char *trace, const char *const *params,
                       size_t n_params, const char *const *values, const gs_plot_run *cells,
                       size_t n_cells, GError **err);
/* Run gnuplot on every script written so far: NAME.png and NAME.svg beside each. The program is
 * $GPUSIM_GNUPLOT, else gnuplot. GS_PLOT_ERROR_NO_GNUPLOT when it is missing (the data and the
 * scripts stay). On success, *n_images (may be NULL) is the number of images written. */
gboolean gs_plotter_render(gs_plotter *p, size_t *n_images, GError **err);
const char *gs_plotter_dir(const gs_plotter *p);
/* char*: a sentence for each plot p did not draw, and why (a matrix of too many settings). */
const GPtrArray *gs_plotter_notes(const gs_plotter *p);

/* The policy x capacity matrix of a sweep with a capacity parameter (NAME-matrix): a row per
 * policy setting, a column per capacity, each cell ok or OOM with its retries written in it.
 * The arguments are gs_plot_sweep's; a sweep without a "capacity" parameter draws nothing. */
#define GS_PLOT_MATRIX_MAX_ROWS 300 /* more settings: the matrix is not drawn (a note says so) */
gboolean gs_plot_matrix(gs_plotter *p, const char *trace, const char *const *params,
                        size_t n_params, const char *const *values, const gs_plot_run *cells,
                        size_t n_cells, GError **err);

/* ---- gpusim whatif: the survival chart (NAME-whatif) ---- */
typedef struct {
    const char *policy;
    bool recorded;              /* the setting the recorded run had */
    const char *outcome;        /* at the cap: "ok", "survived", "oom", "error" */
    bool found;                 /* a minimum capacity was found (up to the device's memory) */
    uint64_t min_capacity;      /* when found */
    uint64_t fails_above;       /* a larger capacity at which it fails (0: none seen) */
    double device_us;           /* modelled device time of the replay at the cap */
    double vs_default;          /* device_us against the default setting's (0: no default) */
    bool lower_bound;           /* the minimum is a lower bound: the trace ends where its
                                 * recorded run died (drawn ">= X") */
} gs_plot_whatif_row;

/* Bars of the rows' minimum capacities (in the order given: the verdict's) against the cap, and
 * (assumption: NULL, or what the trace was continued by, written under the axes)
 * beside them the device time at the cap. cap_words: what the cap is ("recorded cap", "cap
 * given", "device full at the OOM", "device memory"), in the title and the key; cap 0: no cap
 * (no line is drawn). */
gboolean gs_plot_whatif(gs_plotter *p, const char *trace, uint64_t cap, const char *cap_words,
                        uint64_t device_total, const gs_plot_whatif_row *rows, size_t n,
                        const char *assumption, GError **err);

/* ---- gpusim frontier: memory against time (NAME-frontier) ---- */
typedef struct {
    const char *policy;
    bool drawn;          /* it has a minimum capacity and completes uncapped */
    const char *why_not; /* when not drawn: the key says so ("no minimum capacity") */
    double time;         /* device time with no cap over PyTorch default's */
    double memory;       /* minimum capacity over the bound */
    bool pareto;         /* on the front */
    bool ours;           /* gpusim's own policy: marked */
} gs_plot_frontier_point;

/* The points (numbered in the order given, keyed beside the chart) and the staircase of the
 * front through those on it. */
gboolean gs_plot_frontier(gs_plotter *p, const char *trace, const gs_plot_frontier_point *pts,
                          size_t n, GError **err);

/* ---- saved results: `gpusim plot RESULT` ---- */
/* Plot a report written by `gpusim replay --format json|csv` or `gpusim sweep`: the format is
 * told by its content. JSON from a replay with --plot carries the series and gives every plot;
 * otherwise the bars (and, for a sweep's CSV, the sweep plot). p NULL: read and check it only,
 * drawing nothing (gpusim plot checks every RESULT before it draws the first). */
gboolean gs_plot_saved(gs_plotter *p, const char *path, GError **err);
/* The same of a report already read (path names it in messages): gpusim plot reads each RESULT
 * once, so one on a pipe is checked and drawn from the same bytes. */
gboolean gs_plot_saved_text(gs_plotter *p, const char *path, const char *text, size_t len,
                            GError **err);

/* ---- names ---- */
/* "resnet50" for "traces/data/resnet50.gstrace.gz": the plots' file-name stem. */
char *gs_plot_stem(const char *trace);
/* trace's stem among the names in claims (stem -> the owner that took it; both g_strdup'd: a
 * GHashTable with g_free for both): gs_plot_stem's, or with "-2", "-3", ... after it when another
 * owner took it (d1/run.gstrace and d2/run.gstrace in one command: the second's plots are
 * run-2-*, not written over the first's); a stem that is another owner's and a '-' and a word
 * ("run-oom" beside "run": run's OOM map is run-oom-map-1-*) has its '-'s as '_' first
 * ("run_oom"). owner: who the files are for (NULL: the trace); the same owner gets the same stem
 * again. */
char *gs_plot_stem_claim(GHashTable *claims, const char *trace, const char *owner);
/* gs_plot_stem_claim among the stems of p's plots: every plot of p names its trace so. A file
 * name that another owner's plots took in p (trace "run"'s run-oom-map-1-P is trace "run-oom"'s
 * peak map) is refused when written (GS_PLOT_ERROR_IO), never replaced. */
char *gs_plotter_stem(gs_plotter *p, const char *trace);
/* s as a part of a file name, as the plots name theirs: every byte but letters, digits, "_.-+"
 * and UTF-8 made '-', at most 80 bytes (so no '/', no quote, nothing a shell acts on).
 * gpusim replay --export-snapshot names its pickles so. g_free it. */
char *gs_plot_file_part(const char *s);

G_END_DECLS

#endif
