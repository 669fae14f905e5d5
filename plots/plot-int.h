/* plot-int.h - what the files of plots/ share with each other and with no one else: the
 * recorded series' layout, the plotter, and the pieces every gnuplot script is made of.
 * Grouped by the file that defines each thing (as mimalloc's internal.h is). Not API: only the
 * C files of plots/ include it (plots/meson.build defines GS_PLOTS_COMPILATION for them alone);
 * everything public is in plot.h.
 *
 *   series.c    the recorder (a replay's observer), its JSON out and back in, gs_plot_run
 *   draw.c      the plotter, file names, labels, the script frame; gs_plot_trace
 *   timeline.c  NAME-timeline
 *   bars.c      NAME-bars
 *   map.c       NAME-map-K-SPEC, NAME-oom-map-K-SPEC
 *   sweep.c     NAME-sweep (gs_plot_sweep)
 *   matrix.c    NAME-matrix (gs_plot_matrix)
 *   whatif.c    NAME-whatif (gs_plot_whatif)
 *   render.c    running gnuplot (gs_plotter_render)
 *   saved.c     saved reports read back (gs_plot_saved)
 */
#ifndef GS_PLOT_INT_H
#define GS_PLOT_INT_H

#ifndef GS_PLOTS_COMPILATION
#error "plot-int.h is private to plots/: include plot.h instead"
#endif

#include <string.h>

#include "plot.h"

/* GiB as the plots' axes show them. */
static inline double gib(int64_t b) { return (double)b / (double)GS_GiB; }

/* ---- series.c: what a replay records ---- */

typedef struct {
    uint64_t event, time_us;
    int64_t allocated, reserved;
} gs_plot_point;

typedef struct {
    uint64_t addr, size;
    uint32_t first, n; /* its blocks: blocks[first .. first + n) */
    uint8_t pool;
    bool expandable;
    uint32_t pool_id;  /* its private pool's id in the trace; 0: the ordinary pools */
} gs_plot_seg;

typedef struct {
    uint64_t off, size; /* offset in its segment */
    uint8_t state;      /* gs_block_state */
} gs_plot_block;

/* A copy of the heap at one moment: every segment and its blocks. */
typedef struct {
    bool have;
    gs_plot_point at;         /* the moment: after this event */
    GArray *segs, *blocks;    /* gs_plot_seg, gs_plot_block */
} gs_plot_heapmap;

/* The request that met the first OOM, and the free memory of its pool then (the heap as the
 * failure left it, after the allocator's own flush and retry: what gs_oom_report sees). */
typedef struct {
    uint64_t request, rounded;  /* as asked for; as the policy rounded it */
    unsigned pool;              /* the policy's pool */
    uint32_t private_pool;      /* the private pool it was routed to, by the trace's id (0: none) */
    char private_words[64];     /* "private pool N's small pool", when private_pool */
    bool pool_small;            /* the policy counts its pool as small */
    unsigned npools;            /* the policy's pools (1: the pool needs no name) */
    uint64_t limit;             /* the allocator's limit (0: none) */
    uint64_t largest_in_pool;   /* the largest free block in the request's pool, any stream */
    uint64_t largest_on_stream; /* ... on the request's stream */
    uint64_t free_in_pool;      /* every free byte of the pool, and in how many blocks */
    uint64_t n_free_in_pool;
    uint64_t largest_seg;       /* where the largest is: its segment's address (0: no free */
    uint64_t largest_off;       /* block in the pool) and its offset in the segment */
} gs_plot_oom_req;

struct gs_plot_series {
    size_t width;             /* events per timeline bucket */
    size_t n_events;          /* the trace's (0: a series read back from JSON) */
    GArray *points;           /* gs_plot_point: per bucket, the maxima of allocated and reserved */
    GArray *retries, *ooms;   /* gs_plot_point: the moment of each (at most series.c's MAX_MARKERS) */
    uint64_t n_retries, n_ooms; /* over every heap of the replay */
    GArray *seen;             /* series.c's heap_seen: each heap's counts and bytes when last
                               * observed (several clients in separate allocators: one heap each) */
    int64_t allocated, reserved; /* the sums over seen of its heaps' bytes: the device's */
    /* the address map: every heap after the event where reserved bytes reached their maximum */
    int64_t max_reserved;
    gs_plot_heapmap peak;
    /* the address map at the first OOM: the heaps as the failed request left them, and the
     * request */
    gs_plot_heapmap oom;
    gs_plot_oom_req oom_req;
};

/* "the large pool", "the small pool", "its pool" (a policy of one pool). Static. */
const char *gs_plot_pool_words(const gs_plot_oom_req *q);

/* A gs_block_state as the JSON and the map's data name it: "free", "allocated", "pending",
 * "unmapped"; "?" for any other. */
const char *gs_plot_state_name(unsigned state);

/* ---- draw.c: the plotter and what every script is made of ---- */

struct gs_plotter {
    char *dir;
    GPtrArray *scripts; /* char*: stems of the scripts written, in order */
    GArray *kept;       /* uint64_t pairs (device, inode): files never replaced */
    char *report;       /* the report's path (-o), canonical: never a plot's name (NULL: none) */
    GHashTable *stems;  /* char* -> char*: each plot name stem taken, and the owner that took it */
    GHashTable *written; /* char* -> char*: each file written, and its owner (no two owners' plots
                          * may share a name: "run"'s oom-map is "run-oom"'s map) */
    char *result;       /* gs_plot_saved: the saved report being drawn (owners are per report) */
    char *owner;        /* the owner of the files being written: the trace (of result) whose stem
                         * gs_plotter_stem gave last */
    bool made;          /* dir made (at the first file written) */
    GPtrArray *notes;   /* char*: what was not drawn, and why (gs_plotter_notes) */
};

/* The plots that follow are of the saved report at path (NULL: of this run's traces). */
void gs_plotter_set_result(gs_plotter *p, const char *path);
/* Say what was not drawn and why (msg g_strdup'd or printf'd: p takes it). */
void gs_plotter_note(gs_plotter *p, char *msg);

/* FALSE and GS_PLOT_ERROR_IO when path is a file gs_plotter_keep named. */
gboolean gs_plotter_may_replace(const gs_plotter *p, const char *path, GError **err);

/* dir/name holds text, written whole; GS_PLOT_ERROR_IO otherwise. */
gboolean gs_plotter_write(gs_plotter *p, const char *name, GString *text, GError **err);
/* dir/STEM.gp holds g, and gs_plotter_render will run it. */
gboolean gs_plotter_add_script(gs_plotter *p, const char *stem, GString *g, GError **err);

/* The i-th line's or bar's colour. */
const char *gs_plot_colour(size_t i);
/* "capacity 5.75 GiB" as a title shows it; "no capacity limit" for 0. g_free the result. */
char *gs_plot_cap_words(uint64_t cap);
/* A policy's label in legends: its spec, and its capacity when runs differ in it. */
char *gs_plot_run_label(const gs_plot_run *r, bool with_cap);
/* Whether the n runs share one capacity (a title then names it once, the labels never). */
bool gs_plot_same_capacity(const gs_plot_run *runs, size_t n);

/* A gnuplot string literal for s that substitutes nothing, whatever s holds: single-quoted
 * (gnuplot runs `text` in double quotes as a command), a quote or a line break joined in as a
 * double-quoted piece of its own ("'", "\n"). Every text a script holds that is not gpusim's
 * own goes through it, file names too. */
void gs_gp_str(GString *g, const char *s);
/* The same literal, as a string to g_free. */
char *gs_gp_lit(const char *s);
/* s appended to a .dat file: each control character (a line break would start a data row) '?'. */
void gs_dat_text(GString *g, const char *s);
/* The script's frame: a loop drawing PNG then SVG, w x h pixels, into out.'.'.fmt. */
void gs_gp_begin(GString *g, const char *stem, const char *what, int w, int h);
void gs_gp_end(GString *g);
/* A legend strip across a multiplot at height y: one filled box per label, label i in
 * gs_plot_colour(i); extra: more plot clauses (may be NULL). */
void gs_gp_legend_strip(GString *g, double y, double h, const char *const *labels, size_t n,
                        const char *extra);

/* One plot's files, STEM-KIND.gp and STEM-KIND.dat under the trace's stem (gs_plotter_stem):
 * begin names them and starts both texts, the caller writes the data into dat and the script
 * into g (dat_lit: the data's name as a gnuplot literal), finish writes both and frees all. */
typedef struct {
    char *stem, *datname, *dat_lit;
    GString *dat, *g;
} gs_plot_files;
void gs_plot_files_begin(gs_plot_files *f, gs_plotter *p, const char *trace, const char *kind);
gboolean gs_plot_files_finish(gs_plot_files *f, gs_plotter *p, GError **err);

/* label, or when it is longer than fit characters its start and end around an ellipsis (a
 * legend entry or a key line that must fit its room). g_free it. */
char *gs_plot_fit_text(const char *label, long fit);
/* The characters of a label as it is drawn (not UTF-8: as g_utf8_make_valid makes it, each bad
 * byte one character). g_utf8_strlen on bytes that are not UTF-8 reads past their end (a lead
 * byte claims continuation bytes, the NUL among them): a saved report's names can hold any
 * bytes. */
long gs_plot_text_chars(const char *label);

/* ---- timeline.c, bars.c, map.c: one plot each, to dir/STEM.gp and its data ---- */

gboolean gs_plot_timeline(gs_plotter *p, const char *trace, const char *stem,
                          const gs_plot_run *runs, size_t n, GError **err);
gboolean gs_plot_bars(gs_plotter *p, const char *trace, const char *stem,
                      const gs_plot_run *runs, size_t n, GError **err);
/* The address map r->series holds at peak reserved (at_oom false) or at the first OOM (true);
 * that map must be there. */
gboolean gs_plot_map(gs_plotter *p, const char *trace, const char *stem, const gs_plot_run *r,
                     bool at_oom, GError **err);

/* bars.c: metric m of a run in its panel's unit (the sweep's panels use it too): 0 peak
 * reserved (GiB), 1 waste (GiB), 2 fragmentation (%), 3 retries, 4 OOMs, 5 device time (ms). */
double gs_plot_bar_value(const gs_plot_run *r, int m);

/* An outcome the plots draw as getting through: "ok", or "survived" (the replay got past the
 * point where a trace's recorded run died; sim/result.h). */
static inline bool gs_plot_outcome_through(const char *outcome)
{
    return strcmp(outcome, "ok") == 0 || strcmp(outcome, "survived") == 0;
}

#endif
