/* trace.h - gpusim allocation traces: the text format of docs/trace-format.md, in memory.
 *
 * A trace names allocations by id, never by address, so one trace replays under any policy.
 * The reader resolves ids once, at load time, into dense "slots" (one per alloc event), so the
 * replay engine indexes an array instead of hashing ids on the hot path. It also marks each
 * free that a later free_done completes, since the allocator must know at free time whether
 * the block is reusable at once or only after the deferred completion.
 *
 * Text format, version 1 or 2 (optionally gzip-compressed; detected by the gzip magic, not the
 * name):
 *
 *     # gpusim-trace 2
 *     # key: value                       (header metadata; any number, before the column line)
 *     seq,time_us,op,client,device,stream,id,size
 *     0,0,alloc,torch,0,0,1,37632
 *     1,5,oom,torch,0,0,0,130547712
 *
 * Ops: alloc, free, free_done, empty_cache, mark (version 1), and oom (version 2): a request of
 * size bytes that failed with an out-of-memory error in the recorded run. It names no
 * allocation (id 0) and nothing frees it. Where later events follow it, the recorded program
 * caught the error and went on; where it is the trace's last event, the program died there. A
 * replay makes the request as the program did: if it fails, the OOM is counted and the replay
 * goes on (caught) or stops (the last event); if it succeeds, the memory is given back at once,
 * since the recorded program never had it. Its size is what the recording allocator logged
 * (PyTorch: the request rounded to 512 bytes). The writer writes version 1 when the trace has
 * no oom event, so a version-1 trace reads and writes back byte for byte; the reader takes
 * both, and refuses an oom line in a version-1 file.
 *
 * Header keys with a meaning (any other key is free-form metadata):
 *   device_total_bytes: N            the device's memory (every device's, with several)
 *   device_total_bytes_by_device: D=N,...   several devices of different sizes
 *   fatal_oom_event: N               the recorded run died of the OOM at event N (seq), which
 *                                    must be the trace's last event, an oom
 *   died_after_log: yes              the recorded run died of an OOM after the log ends (its
 *                                    NAME.json says so; a snapshot dumped before the death)
 *   synthesized_allocs: N            recording started mid-run: events 0 .. N-1 are allocations
 *                                    made up for blocks the log saw freed or held but never
 *                                    allocated (the converter's); results are approximate
 *   started_mid_run: yes             recording started mid-run (other evidence: segments the
 *                                    log never saw made), even with no synthesized allocation
 *   inferred_empty_cache: N          N of the empty_cache events were inferred by the converter
 *                                    from the allocator's own segment releases
 *   offline_bytes_by_device: D=N,... the offline planner's peak per device, stored by
 *   offline_planner: ID              `gpusim convert` (sim/bound.h) so a replay need not plan
 *                                    again; used only when ID is the planner gpusim has
 *   pytorch_version: V               the PyTorch that recorded the trace, as torch.__version__
 *                                    says it (2.12.0+cu130): plain pytorch emulates that
 *                                    release (policies.h, gs_policy_at_release)
 * The reader checks fatal_oom_event (a number naming the last event, an oom) and the numbers of
 * device_total_bytes and synthesized_allocs.
 *
 * Frames (docs/trace-format.md "Frames"): "# frame N: file:line:function" header lines, N = 1,
 * 2, ... in order, and then a 9th column "frame" naming an alloc's or oom's frame number
 * (empty or 0: none; other ops leave it empty). Written only when the trace has one, so a
 * trace without is unchanged; the binary format does not carry them (its writer refuses).
 *
 * Several devices (the device column): each device is its own allocator with its own memory,
 * as in PyTorch; an event belongs to its device, and empty_cache empties its device's cache.
 *
 * The reader is strict: any malformed line is an error "FILE:LINE: message" (GS_TRACE_ERROR),
 * unless GS_TRACE_LENIENT is given, in which case semantic errors (free of an unknown id,
 * double free, free_done without free, alloc of a live id) become counted warnings and the
 * offending event is dropped. Syntax errors, and an event past a trace's limits (below), are
 * always fatal.
 */
#ifndef GS_TRACE_H
#define GS_TRACE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdarg.h>
#include <stddef.h>

#include "util.h"

G_BEGIN_DECLS

#define GS_TRACE_MAGIC "# gpusim-trace 1"   /* a trace with no oom event */
#define GS_TRACE_MAGIC_2 "# gpusim-trace 2" /* a trace with oom events */
#define GS_TRACE_MAGIC_3 "# gpusim-trace 3" /* a trace with private pool events */
#define GS_TRACE_VERSION 3                  /* the newest version the reader takes */
#define GS_TRACE_COLUMNS "seq,time_us,op,client,device,stream,id,size"
/* The column line of a trace with frames: a 9th column names an alloc's or oom's frame
 * number, declared by a "# frame N: file:line:function" header line. */
#define GS_TRACE_COLUMNS_FRAMES GS_TRACE_COLUMNS ",frame"
#define GS_TRACE_FRAME_PREFIX "# frame "

/* The binary format (traces/binary.c, docs/trace-format.md "The binary format"): the trace as
 * it is in memory, ids resolved to slots, events as gs_event records; gs_trace_load and
 * gs_trace_parse recognise it by its first 8 bytes (text, gzip text or binary), and
 * gs_trace_save writes it when the name ends in GS_TRACE_BINARY_SUFFIX. */
#define GS_TRACE_BINARY_VERSION 1
#define GS_TRACE_BINARY_RECORD 32   /* bytes per event: sizeof(gs_event) */
#define GS_TRACE_BINARY_SUFFIX ".gsbin"

/* The most distinct streams, clients and devices one trace may have. The reader refuses the
 * first event that would bring one more (GS_TRACE_ERROR_FORMAT, "FILE:LINE: message", in
 * lenient mode too), and gs_trace_add_alloc treats one more stream or client as a programmer
 * error, so every gs_event.stream is below GS_TRACE_MAX_STREAMS and every gs_event.client below
 * GS_TRACE_MAX_CLIENTS, whatever the input was.
 *   streams: the core packs a stream index into 16 bits of its free-block key (its
 *            GS_MAX_STREAMS; sim/, which sees both headers, asserts that this fits in it).
 *   clients: gs_event.client is 16 bits.
 *   devices: sim/devices.c numbers a trace's devices in 16 bits; refused as the file is read,
 *            not once it is whole (100,000 devices were refused only after 11.7 s). */
#define GS_TRACE_MAX_STREAMS 65536u
#define GS_TRACE_MAX_CLIENTS 65536u
#define GS_TRACE_MAX_DEVICES 65536u

typedef enum {
    GS_OP_ALLOC = 0,   /* a request of size bytes (before any rounding) */
    GS_OP_FREE,        /* the program released the allocation */
    GS_OP_FREE_DONE,   /* deferred completion of an earlier free (cross-stream use) */
    GS_OP_EMPTY_CACHE, /* the program asked the allocator to release its cache */
    GS_OP_MARK,        /* phase/iteration boundary; size carries the iteration number */
    GS_OP_OOM,         /* a request of size bytes that failed in the recorded run (version 2) */
    /* Private pools (version 3; docs/trace-format.md "Version 3"): the pool's id is in slot
     * (gs_event_pool), never UINT32_MAX or 0. */
    GS_OP_POOL_BEGIN,  /* requests on the stream (size 1: on every stream) go to the pool */
    GS_OP_POOL_END,    /* they no longer do */
    GS_OP_POOL_RELEASE,/* the pool loses a use (size 1: and its cache is emptied now) */
    GS_OP_COUNT
} gs_op;

/* Flags on an event. */
enum {
    GS_EV_DEFERRED = 1u << 0, /* on a FREE: a FREE_DONE for the same slot follows later */
};

/* One event, 32 bytes. For ALLOC/FREE/FREE_DONE, slot is the dense allocation index
 * (0 .. n_slots-1, in order of the alloc events) and size is the allocation's requested size
 * (for FREE/FREE_DONE the reader fills in the alloc's size, whatever the file said). */
typedef struct {
    uint64_t time_us;
    uint64_t size;
    uint32_t slot;   /* UINT32_MAX for EMPTY_CACHE, MARK and OOM */
    uint32_t stream; /* index into gs_trace.streams, < GS_TRACE_MAX_STREAMS */
    uint16_t client; /* index into gs_trace.clients, < GS_TRACE_MAX_CLIENTS */
    uint8_t op;      /* gs_op */
    uint8_t flags;   /* GS_EV_* */
    uint32_t device;
} gs_event;

/* Whether e frees its slot's allocation, at once or by completing a deferred free. */
static inline int gs_event_is_free(const gs_event *e)
{
    return e->op == GS_OP_FREE || e->op == GS_OP_FREE_DONE;
}

/* Whether e is a private pool event, and its pool's id. */
static inline int gs_event_is_pool(const gs_event *e)
{
    return e->op >= GS_OP_POOL_BEGIN && e->op <= GS_OP_POOL_RELEASE;
}
static inline uint32_t gs_event_pool(const gs_event *e) { return e->slot; }

typedef struct {
    char *key;
    char *value;
} gs_trace_meta;

typedef struct {
    char *path;             /* as given to gs_trace_load, or NULL for a built trace */
    gs_event *ev;           /* n events, in file order */
    size_t n;
    size_t cap;             /* allocated length of ev (builder use) */
    size_t n_slots;         /* number of ALLOC events */
    uint64_t *slot_id;      /* n_slots: the id each slot had in the file (for the writer) */
    GPtrArray *clients;     /* char*: client names, index = gs_event.client */
    GArray *streams;        /* uint64_t: raw stream values, index = gs_event.stream */
    GArray *meta;           /* gs_trace_meta, header comments in file order */
    uint64_t device_total;  /* "# device_total_bytes:", 0 if absent */
    size_t n_warnings;      /* lenient mode: problems found and skipped */
    struct gs_trace_builder *builder; /* private to trace.c: per-slot bookkeeping for the
                                       * gs_trace_add_* calls; NULL until the first one */
    void *map; /* private to traces/: the anonymous mapping a binary trace's events
                * were read into (ev is it; NULL otherwise), and its length */
    size_t map_len;
    struct gs_trace_tally *tally; /* private to traces/: what a reader counted of the events
                                   * as it read them (oom and pool events, devices, the peak of
                                   * live requested bytes), so that gs_trace_get_caveats,
                                   * gs_trace_devices, gs_trace_has_pools and
                                   * gs_trace_read_peak_live need no pass over them; dropped by
                                   * the builder's next event. Code that edits a loaded trace's
                                   * events in place must not change their op, device, size or
                                   * flags (none does). */
    /* Top user frames (docs/trace-format.md, "Frames"): NULL when the trace has none.
     * frames holds the strings ("file:line:function"), frame k being frames[k - 1]; ev_frames
     * the events that name one, as gs_trace_ev_frame in ascending event order. Sparse, since
     * only allocs and ooms carry a frame and a lookup happens only where a report names one. */
    GPtrArray *frames;
    GArray *ev_frames;
} gs_trace;

/* An event's frame number (1 .. frames->len). */
typedef struct {
    size_t ev;
    uint32_t frame;
} gs_trace_ev_frame;

/* Reader flags. */
enum {
    GS_TRACE_LENIENT = 1u << 0,
};

#define GS_TRACE_ERROR (gs_trace_error_quark())
GQuark gs_trace_error_quark(void);

typedef enum {
    GS_TRACE_ERROR_IO,     /* cannot open/read/write the file */
    GS_TRACE_ERROR_FORMAT, /* malformed content */
} gs_trace_error_code;


/* Load a trace. Returns NULL and sets err ("FILE:LINE: message") on any error; never aborts on
 * bad input. Lenient-mode warnings go to the warning callback (may be NULL) and are counted. */
typedef void (*gs_trace_warn_fn)(const char *msg, void *ud);
gs_trace *gs_trace_load(const char *path, unsigned flags, gs_trace_warn_fn warn, void *ud,
                        GError **err);

/* What the file at path holds, by its first bytes (gzip looked into): a gpusim trace (text or
 * binary), a pickle (a PyTorch memory snapshot: protocol 2 and above), or neither (unknown: not
 * a regular file, unreadable, or something else). A pipe is never read here (its bytes would be
 * lost to the reader after). */
typedef enum { GS_SNIFF_UNKNOWN, GS_SNIFF_TRACE, GS_SNIFF_PICKLE } gs_trace_sniffed;
gs_trace_sniffed gs_trace_sniff(const char *path);

/* Parse from memory (already decompressed or not; gzip is detected). name is used in messages. */
gs_trace *gs_trace_parse(const char *name, const char *data, size_t len, unsigned flags,
                         gs_trace_warn_fn warn, void *ud, GError **err);

/* Write a trace: the binary format when path ends in ".gsbin" (refused, GS_TRACE_ERROR_FORMAT,
 * when the trace breaks a rule the reader enforces), else text, gzip-compressed when path ends
 * in ".gz". Written whole: to a temporary file in
 * the same directory, then renamed, so an interrupted write never leaves a partial file. */
gboolean gs_trace_save(const gs_trace *t, const char *path, GError **err);

void gs_trace_free(gs_trace *t);

/* A PyTorch memory snapshot read for the converter (traces/snapshot.c says what it appends to
 * out). FALSE when it declines the snapshot, *why (allocated) saying why: the converter then
 * reads it itself. limit: the conversion's memory limit in bytes, 0 for none. progress: where
 * a line "ENTRIES BYTES" (entries read, bytes of the file read) goes every 65,536 entries, or
 * NULL. */
gboolean gs_snapshot_read(const char *path, uint64_t limit, FILE *progress, GString *out,
                          char **why);
/* The trace the converter's rows make, read from f (traces/rows.c says the stream's layout):
 * the trace its Python encoder (traces/gsbin.py, encode_rows) would have encoded, so that
 * gs_trace_save writes the same bytes; `gpusim write-rows` runs it. NULL and *why (g_free it)
 * when the stream is not whole or holds what the encoder would not have taken so (allocations
 * not numbered in order, a device past 32 bits, an op the binary format lacks). */
gs_trace *gs_trace_read_rows(FILE *f, char **why);

/* Building traces in code (tests, generators): */
gs_trace *gs_trace_new(void);
/* Returns the slot of the new allocation. client/stream are names/raw values, interned.
 * pre: client is a valid name ([A-Za-z0-9_.-]+), and a new client or stream keeps the trace
 * within GS_TRACE_MAX_CLIENTS and GS_TRACE_MAX_STREAMS; otherwise nothing is added and the
 * result is UINT32_MAX (g_return_val_if_fail). */
uint32_t gs_trace_add_alloc(gs_trace *t, const char *client, uint64_t stream, uint64_t size);
void gs_trace_add_free(gs_trace *t, uint32_t slot);                 /* immediate free */
void gs_trace_add_free_deferred(gs_trace *t, uint32_t slot);        /* free, completed later */
void gs_trace_add_free_done(gs_trace *t, uint32_t slot);
void gs_trace_add_op(gs_trace *t, gs_op op, uint64_t size);
/* A private pool event (GS_OP_POOL_*) of pool id (non-zero) on stream; flag is the size column
 * (pool_begin: every stream; pool_release: empty it now). */
void gs_trace_add_pool(gs_trace *t, gs_op op, uint64_t stream, uint32_t id, bool flag);         /* EMPTY_CACHE or MARK */
/* A request that failed in the recorded run (GS_OP_OOM); same preconditions as an alloc. */
void gs_trace_add_oom(gs_trace *t, const char *client, uint64_t stream, uint64_t size);
void gs_trace_set_meta(gs_trace *t, const char *key, const char *value);
/* Keep the first n events (n <= t->n), the allocations they make, and the streams and clients
 * up to the last one they name: a recording cut where the program died, its unwinding left
 * out. */
void gs_trace_truncate(gs_trace *t, size_t n);
const char *gs_trace_get_meta(const gs_trace *t, const char *key);

const char *gs_op_name(gs_op op);

/* The top user frame ("file:line:function") of event ev, or NULL when it has none. */
const char *gs_trace_frame(const gs_trace *t, size_t ev);
/* Adds a frame string (no CR, LF or NUL) and returns its number (1, 2, ...); then
 * gs_trace_set_frame gives it to event ev, which must come after every event given one so
 * far. For builders (tests, generators); the reader fills both in from the file. */
uint32_t gs_trace_add_frame(gs_trace *t, const char *frame);
void gs_trace_set_frame(gs_trace *t, size_t ev, uint32_t frame);

/* What the header says the trace can tell (trace.h's header keys), for reports. */
typedef struct {
    bool fatal_oom;           /* the recorded run died at event fatal_oom_event */
    size_t fatal_oom_event;
    /* The recorded run died after its log ends (died_after_log: yes, from its NAME.json: a
     * snapshot dumped before the death): no fatal oom event, and what the trace shows is not
     * what killed the run. */
    bool died_after_log;
    bool dies;                /* fatal_oom or died_after_log: a run's end the trace lacks */
    uint64_t synthesized;     /* allocations synthesized at the start (recording cut) */
    bool started_mid_run;     /* synthesized > 0, or the header says so */
    uint64_t inferred_empty_cache;
    size_t n_oom_events;      /* oom events (caught and fatal) */
    /* A capture's trace (gpusim predict, docs/capture.md): the header's "captured" (what made
     * it) and "capture_unknown" (what it could not know), or NULL; pointers into t's header. */
    const char *captured;
    const char *capture_unknown;
} gs_trace_caveats;
void gs_trace_get_caveats(const gs_trace *t, gs_trace_caveats *out);
/* The distinct devices of t's events, ascending (at least one: 0 for an empty trace). Returns
 * their number; *ids is g_new'd (g_free it). */
size_t gs_trace_devices(const gs_trace *t, uint32_t **ids);
/* Whether t has private pool events (GS_OP_POOL_*): a loaded trace answers from what its
 * reader counted, with no pass over the events. */
bool gs_trace_has_pools(const gs_trace *t);
/* The peak, over the events, of the sum of the live requests' sizes (each counted up to
 * GS_MAX_DEVICE_BYTES; a request is live from its alloc to its free, or to its free_done where
 * the free is deferred), as sim/bound.c defines it for a trace of one device, when the reader
 * worked it out as it read (a trace read from a file, with at most one device and, if text,
 * no free_done): true and *out. Otherwise false: the caller passes over the events. */
bool gs_trace_read_peak_live(const gs_trace *t, uint64_t *out);
/* A device's total memory from the header: device_total_bytes_by_device, else
 * device_total_bytes; 0 when neither says. */
uint64_t gs_trace_device_total(const gs_trace *t, uint32_t device);
/* The same for each of devices ids[0..n) into out[0..n): the list read once (a lookup per
 * device read it whole each time, 65,536 devices times a list of 65,536). */
void gs_trace_device_totals(const gs_trace *t, const uint32_t *ids, size_t n, uint64_t *out);
/* The offline planner's peak for device stored in the header (offline_bytes_by_device), when
 * the header's offline_planner is planner and its offline_events, where it has one, is the
 * trace's count of events: true and *out. The value is the file's word, checked only for form
 * (sim/bound.c checks it against the trace's lower bound, and against its requests where the
 * header has no count). */
bool gs_trace_stored_offline(const gs_trace *t, const char *planner, uint32_t device,
                             uint64_t *out);
/* The same for each of devices ids[0..n): found[k] and out[k], the list read once. */
void gs_trace_stored_offlines(const gs_trace *t, const char *planner, const uint32_t *ids, size_t n,
                              uint64_t *out, bool *found);

/* The private pool ids a trace's pool events name, in the order of their first appearance
 * (*ids: g_free it; NULL when none). 0 for a trace without private pools. */
size_t gs_trace_pool_ids(const gs_trace *t, uint32_t **ids);

/* ---- An assumed continuation (repeat.c) ----
 * A trace that ends where its run died says nothing of the rest of the program. Most programs
 * are loops: gs_trace_find_period finds the period of the recorded requests (P events whose
 * last two repetitions before the death repeat exactly, the death's request among them), and
 * gs_trace_assume_repeat continues the trace by it: the events before the death, then the
 * death's request made as the allocation it was and the loop N more periods, as an explicit
 * assumption (its "assumed_repeat" header says which). Both refuse, with *why, what they
 * cannot do: a trace that did not die, several clients or devices, private pools, no period. */
typedef struct {
    size_t period;  /* events in one repetition */
    size_t start;   /* the last complete repetition: events [start, death) */
    size_t death;   /* the fatal oom's event */
} gs_trace_period;
bool gs_trace_find_period(const gs_trace *t, gs_trace_period *out, const char **why);
gs_trace *gs_trace_assume_repeat(const gs_trace *t, const gs_trace_period *p, unsigned n,
                                 const char **why);

G_END_DECLS

#endif
