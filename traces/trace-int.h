/* trace-int.h - what the files of traces/ share with each other and with no one else: the
 * format's rules for names and numbers, which the object, the reader and the writer all apply.
 * Grouped by the file that defines each thing (as mimalloc's internal.h is). Not API: only the
 * C files of traces/ include it; everything public is in trace.h.
 */
#ifndef GS_TRACE_INT_H
#define GS_TRACE_INT_H

#ifndef GS_TRACES_COMPILATION
#error "trace-int.h is private to traces/: include trace.h"
#endif

#include "trace.h"

#include <stdio.h>

/* ---- trace.c: the format's rules ---- */

/* Client names and metadata keys: [A-Za-z0-9_.-]+. Restricting them keeps every name writable
 * in a CSV column and a "# key: value" line without quoting. Inline: the reader's fast path
 * asks it of every byte of a client or op field. */
static inline gboolean gs_trace_is_name_char(unsigned char c)
{
    return (unsigned)((c | 0x20) - 'a') < 26 || (unsigned)(c - '0') < 10 || c == '_' ||
           c == '.' || c == '-';
}

/* s[0..len) is a valid client name or metadata key: not empty, name characters only. */
gboolean gs_trace_valid_name(const char *s, size_t len);

/* Strict unsigned decimal: digits only, no sign or spaces, overflow is an error. */
gboolean gs_trace_parse_u64(const char *s, size_t len, uint64_t *out);

/* The header keys with a meaning (trace.h) against the events: NULL when they agree, else what
 * is wrong (a static string). The reader calls it once the events are in. */
const char *gs_trace_header_problem(const gs_trace *t);

/* What a reader counts of the events it appends (gs_trace.tally): the oom events, the private
 * pool events and the distinct devices (in order of first appearance), and the peak of the live
 * requested bytes, one cheap step per event, so that what reports and the bound ask of these
 * needs no pass over the events of a trace that was read. */
struct gs_trace_tally {
    size_t n;          /* events counted: the tally holds while it equals gs_trace.n */
    size_t n_oom;
    size_t n_pool;     /* pool_begin, pool_end, pool_release */
    uint32_t last;     /* the last device added (consecutive events mostly share one) */
    GArray *devices;   /* uint32_t, distinct */
    GHashTable *device_set; /* the same, as device + 1, once there are more than a few: a
                             * scan of them all at each change of device made a trace of
                             * 100,000 devices quadratic */
    /* The sum of the live requests' sizes, each counted up to GS_MAX_DEVICE_BYTES, from an
     * alloc to its free (deferred or not), and its peak: as sim/bound.c sums them (unsigned,
     * the same steps in the same order, so the same figure). */
    uint64_t live, peak_live;
};

struct gs_trace_tally *gs_trace_tally_new(void);
void gs_trace_tally_free(struct gs_trace_tally *y);

/* Whether device d is in the tally, adding it when it is not; FALSE when it is not and the
 * tally already has GS_TRACE_MAX_DEVICES (the reader refuses the event). */
gboolean gs_trace_tally_device(struct gs_trace_tally *y, uint32_t d);

/* Counts event e; FALSE when it names one device more than GS_TRACE_MAX_DEVICES. */
static inline gboolean gs_trace_tally_event(struct gs_trace_tally *y, const gs_event *e)
{
    y->n++;
    y->n_oom += e->op == GS_OP_OOM;
    y->n_pool += gs_event_is_pool(e);
    uint64_t counted = MIN(e->size, GS_MAX_DEVICE_BYTES);
    if (e->op == GS_OP_ALLOC) {
        y->live += counted;
        if (y->live > y->peak_live)
            y->peak_live = y->live;
    } else if (e->op == GS_OP_FREE) {
        y->live -= counted;
    }
    if (G_LIKELY(e->device == y->last && y->devices->len)) return TRUE;
    y->last = e->device;
    return gs_trace_tally_device(y, e->device);
}

/* ---- read.c: the text reader ---- */

/* read() that retries on EINTR; -1 with errno set on error. (pickle.c reads with it too.) */
ssize_t gs_trace_read_some(int fd, void *buf, size_t n);

/* ---- binary.c: the binary format ---- */

/* The first 8 bytes of a binary trace (docs/trace-format.md, "The binary format"). */
extern const unsigned char gs_trace_binary_magic[8];
gboolean gs_trace_is_binary(const char *data, size_t len);

/* Reads a binary trace whose first bytes are first[0..first_len) (the magic included) and, if
 * fd >= 0, the rest of the file from fd. NULL with err set ("FILE: byte N: message") on any
 * problem; the reader of read.c calls it when the input starts with the magic. */
gs_trace *gs_trace_binary_read(const char *name, int fd, const char *first, size_t first_len,
                               GError **err);

/* What keeps t from being written as a binary trace that reads back as itself (the reader's
 * checks, applied to t), or NULL. g_free it. */
char *gs_trace_binary_problem(const gs_trace *t);
/* Writes t (gs_trace_binary_problem(t) == NULL) to f; 0, or an errno. */
int gs_trace_binary_write(const gs_trace *t, FILE *f);

/* ---- pickle.c: a snapshot's pickle, read as a stream (snapshot.c's input) ---- */

/* A value of the pickle. Small integers (62 bits), None and the bools are tagged pointers,
 * never allocated (gs_pv_is_heap false); the rest are counted. */
typedef struct gs_pv gs_pv;
enum {
    GS_PV_INT = 1, /* an integer past 62 bits (and at most 64: wider ones are declined) */
    GS_PV_FLOAT,
    GS_PV_STR,
    GS_PV_TUPLE,
    GS_PV_LIST,
    GS_PV_DICT,    /* its pairs in u.seq, key then value, in the order set */
    GS_PV_DEVLIST, /* a device's list in device_traces: top its device, u.count its entries */
    GS_PV_GONE,    /* the memo slot of an entry consumed */
    GS_PV_FRAMES,  /* the memo slot of a consumed entry's frames list: top its top frame */
};
#define GS_PV_TOP_UNKNOWN (-1) /* gs_pv.top of a dict not yet read as a frame */
struct gs_pv {
    uint32_t refs;
    uint8_t kind;
    uint8_t puts;  /* memo slots holding it (saturating) */
    uint8_t busy;  /* a tuple being written; an entry in a batch being consumed */
    uint8_t lent;  /* taken from the memo (a list or dict then takes no more items) */
    int32_t top;   /* a dict: what it is as a frame (snapshot.c); GS_PV_FRAMES: its frame */
    uint32_t slot; /* the memo slot holding it (puts == 1) */
    union {
        int64_t i;
        double f;
        uint64_t count;
        struct {
            gs_pv **v;
            size_t n, cap;
        } seq;
        struct {
            size_t n;
            char *s; /* NUL-terminated, right after the struct */
        } str;
    } u;
};
#define GS_PV_NONE ((gs_pv *)(uintptr_t)2)
#define GS_PV_TRUE ((gs_pv *)(uintptr_t)6)
#define GS_PV_FALSE ((gs_pv *)(uintptr_t)10)
static inline gboolean gs_pv_is_heap(const gs_pv *v)
{
    return v && ((uintptr_t)v & 3) == 0;
}
static inline gboolean gs_pv_is_kind(const gs_pv *v, int kind)
{
    return gs_pv_is_heap(v) && v->kind == kind;
}
static inline gs_pv *gs_pv_ref(gs_pv *v)
{
    if (gs_pv_is_heap(v)) v->refs++;
    return v;
}
gs_pv *gs_pv_int(int64_t i);
/* An integer (not a bool), into *out. */
gboolean gs_pv_get_int(const gs_pv *v, int64_t *out);
void gs_pv_unref(gs_pv *v);
/* A dict's value for a string key (the last one set), or NULL. */
gs_pv *gs_pv_dict_get(const gs_pv *d, const char *key);
/* The keys read of many dicts (every entry's "action", "addr", ...): their texts, and the key
 * strings met so far, each with the index of the key it is (-1: none of them), a reference held
 * (so that address is never another string's). A pickle memoizes its keys, so every entry's
 * dict holds the same few strings: each pair's key is found among them by its address, where
 * a lookup by text took a length check and often a memcmp for every pair, for each key. */
#define GS_PV_KNOWN 16
typedef struct {
    const char *const *text; /* nk of them, at most 64 */
    size_t nk;
    gs_pv *known[GS_PV_KNOWN];
    int8_t index[GS_PV_KNOWN];
    size_t n_known;
} gs_pv_keys;
/* out[i] = gs_pv_dict_get(d, k->text[i]) for each key, in one pass over d's pairs. */
void gs_pv_dict_fields(const gs_pv *d, gs_pv_keys *k, gs_pv **out);
/* Drops k's references (before the values are written out, or freed). */
void gs_pv_keys_clear(gs_pv_keys *k);
gboolean gs_pv_is_str(const gs_pv *v, const char *s);

/* The machine, as a consume callback sees it. */
typedef struct gs_pickle_vm gs_pickle_vm;
/* A batch of device dev's entries (dicts; the first is its entry number first), appended to
 * its list: FALSE to decline the snapshot (gs_pickle_decline says why). The callback drops
 * each entry's memo slot and turns its frames list's into a stand-in (gs_pickle_forget). */
typedef gboolean (*gs_pickle_consume_fn)(gs_pickle_vm *m, uint32_t dev, uint64_t first,
                                         gs_pv **items, size_t n, void *ud);
void gs_pickle_decline(gs_pickle_vm *m, const char *why);
/* Bytes of the file read so far (compressed, for a gzip input). */
uint64_t gs_pickle_bytes_read(const gs_pickle_vm *m);
/* v's memo slot now holds repl (counted), or refuses a reference (repl NULL). FALSE (declined)
 * when v is in more than one slot. */
gboolean gs_pickle_forget(gs_pickle_vm *m, gs_pv *v, gs_pv *repl);
/* What the reader asks of its caller: each batch of entries (consume), and the value a frames
 * list is read as where the Python walker reads it as the top user frame found in it (frames:
 * a list made right after the string "frames" and written as references only, walker.py's
 * EMPTY_LIST). frames gets the values referred to (borrowed) and gives a new reference to the
 * stand-in (GS_PV_FRAMES), or NULL to decline (gs_pickle_decline says why). */
typedef struct {
    gs_pickle_consume_fn consume;
    gs_pv *(*frames)(gs_pickle_vm *m, gs_pv *const *items, size_t n, void *ud);
} gs_pickle_hooks;
/* Reads the pickle at path (gzip or not) to its STOP: the root value, with *dt the
 * device_traces list (NULL if none was seen) and *ndev the device lists made; NULL when it
 * declines, with *why (allocated) saying why. limit: the conversion's memory limit in bytes (0:
 * none); past half of it, it declines. */
gs_pv *gs_pickle_load(const char *path, uint64_t limit, const gs_pickle_hooks *hooks, void *ud,
                      gs_pv **dt, uint32_t *ndev, char **why);
/* Past half the memory limit: declined (FALSE). Checked at every MiB read, and where a caller
 * makes memory of its own (every batch of entries). */
gboolean gs_pickle_memory_ok(gs_pickle_vm *m);
/* Appends root as a pickle (protocol 4) to out, dt written as the list of counts[0..ndev) and
 * a frames stand-in as the text the converter's walker writes for its own, "<frames read>";
 * FALSE, with *why, for what it cannot write (a self-holding tuple, a consumed entry). */
gboolean gs_pickle_write(GString *out, gs_pv *root, const gs_pv *dt, const uint64_t *counts,
                         uint32_t ndev, const char **why);

/* ---- snapshot.c and snaprows.c: read-snapshot's output, in native byte order ---- */

static inline void gs_put(GString *o, const void *p, size_t n)
{
    g_string_append_len(o, p, (gssize)n);
}
static inline void gs_put_u32(GString *o, uint32_t v)
{
    gs_put(o, &v, 4);
}
static inline void gs_put_u64(GString *o, uint64_t v)
{
    gs_put(o, &v, 8);
}

/* ---- snaprows.c: a device's snapshot events made into the trace's rows ---- */

/* One device's event columns as snapshot.c made them (the converter's, each n long). */
typedef struct {
    const uint8_t *action, *deferred;
    const uint64_t *stream, *size;
    const int64_t *addr, *time;
    const uint32_t *frame;
    size_t n;
} gs_snap_columns;
/* Appends the rows the converter's build_trace pass makes of c, and what the pass leaves
 * (snaprows.c says the layout), or a 0 byte where that pass would raise. */
void gs_snapshot_put_rows(GString *out, const gs_snap_columns *c);

#endif
