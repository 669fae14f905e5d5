/* trace.h - gpusim allocation traces: the text format of docs/trace-format.md, in memory.
 *
 * A trace names allocations by id, never by address, so one trace replays under any policy.
 * The reader resolves ids once, at load time, into dense "slots" (one per alloc event), so the
 * replay engine indexes an array instead of hashing ids on the hot path. It also marks each
 * free that a later free_done completes, since the allocator must know at free time whether
 * the block is reusable at once or only after the deferred completion.
 *
 * Text format, version 1 (optionally gzip-compressed; detected by the gzip magic, not the name):
 *
 *     # gpusim-trace 1
 *     # key: value                       (header metadata; any number, before the column line)
 *     seq,time_us,op,client,device,stream,id,size
 *     0,0,alloc,torch,0,0,1,37632
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
#include <stdint.h>
#include <stdarg.h>
#include <stddef.h>

#include "util.h"

G_BEGIN_DECLS

#define GS_TRACE_MAGIC "# gpusim-trace 1"
#define GS_TRACE_COLUMNS "seq,time_us,op,client,device,stream,id,size"

/* The most distinct streams, and the most distinct clients, one trace may have. The reader
 * refuses the first event that would bring one more (GS_TRACE_ERROR_FORMAT, "FILE:LINE:
 * message", in lenient mode too), and gs_trace_add_alloc treats one more as a programmer error,
 * so every gs_event.stream is below GS_TRACE_MAX_STREAMS and every gs_event.client below
 * GS_TRACE_MAX_CLIENTS, whatever the input was.
 *   streams: the core packs a stream index into 16 bits of its free-block key (its
 *            GS_MAX_STREAMS; sim/, which sees both headers, asserts that this fits in it).
 *   clients: gs_event.client is 16 bits. */
#define GS_TRACE_MAX_STREAMS 65536u
#define GS_TRACE_MAX_CLIENTS 65536u

typedef enum {
    GS_OP_ALLOC = 0,   /* a request of size bytes (before any rounding) */
    GS_OP_FREE,        /* the program released the allocation */
    GS_OP_FREE_DONE,   /* deferred completion of an earlier free (cross-stream use) */
    GS_OP_EMPTY_CACHE, /* the program asked the allocator to release its cache */
    GS_OP_MARK,        /* phase/iteration boundary; size carries the iteration number */
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
    uint32_t slot;   /* UINT32_MAX for EMPTY_CACHE and MARK */
    uint32_t stream; /* index into gs_trace.streams, < GS_TRACE_MAX_STREAMS */
    uint16_t client; /* index into gs_trace.clients, < GS_TRACE_MAX_CLIENTS */
    uint8_t op;      /* gs_op */
    uint8_t flags;   /* GS_EV_* */
    uint32_t device;
} gs_event;

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
} gs_trace;

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

/* Parse from memory (already decompressed or not; gzip is detected). name is used in messages. */
gs_trace *gs_trace_parse(const char *name, const char *data, size_t len, unsigned flags,
                         gs_trace_warn_fn warn, void *ud, GError **err);

/* Write a trace. Gzip-compressed when path ends in ".gz". Written whole: to a temporary file in
 * the same directory, then renamed, so an interrupted write never leaves a partial file. */
gboolean gs_trace_save(const gs_trace *t, const char *path, GError **err);

void gs_trace_free(gs_trace *t);

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
void gs_trace_add_op(gs_trace *t, gs_op op, uint64_t size);         /* EMPTY_CACHE or MARK */
void gs_trace_set_meta(gs_trace *t, const char *key, const char *value);
const char *gs_trace_get_meta(const gs_trace *t, const char *key);

const char *gs_op_name(gs_op op);


G_END_DECLS

#endif
