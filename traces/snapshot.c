/* snapshot.c - a PyTorch memory snapshot's entries turned into the converter's event columns,
 * in C: the fast path of traces/gsconvert (docs/speed.md, "The snapshot reader in C").
 *
 * The Python converter reads a snapshot in its own walker at about 150k entries a second;
 * this reads the pickle (pickle.c), turns each entry of device_traces into the row the
 * converter's DeviceEvents would make of it (snapshot.py: the same action codes, the immediate
 * free folded into its free_requested, the entry's index, its top user frame numbered per
 * device in order of first use), and hands the converter those columns together with the rest
 * of the snapshot written back as a small pickle. The converter then goes on as if its own
 * walker had read it: the empty_cache and pool inference, the trace and its checks stay in one
 * place, in Python. Anything this reader cannot turn into exactly the rows the Python reader
 * makes (a float time, an integer past 64 bits, a frame whose library test needs Unicode
 * digits, an opcode no snapshot holds) it declines, and the
 * converter reads the snapshot itself: so an answer is the Python reader's, or none.
 *
 * The output (gs_snapshot_read; native byte order, both ends run on one machine):
 *   "GSSNAP02", u32 devices, then for each device:
 *     u64 entries, u64 rows, u8 whether a program action was seen, u32 frames,
 *     each frame: u32 length, its UTF-8 bytes (frame k + 1; 0 is none),
 *     the columns, each rows long: u8 action, u8 deferred, u64 stream, i64 addr, u64 size,
 *     i64 time_us, u64 entry index, u32 frame;
 *     the rows the converter's build_trace would make of those columns (snaprows.c);
 *   u32 streams, u64 each (those of the program's actions);
 *   u32 private pools, each i64 and i64 its id, u64 the allocations its entries name (2.12's
 *   pool_id: DeviceEvents.note_pool);
 *   u64 length, the snapshot but device_traces as a pickle (device_traces: each device's entry
 *   count).
 */
#include "trace-int.h"

#include <string.h>

/* the converter's action codes (traces/gsconvert/model.py, _ACTIONS) */
enum { A_ALLOC, A_FREE, A_FREE_DONE, A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_OOM };
/* an entry's action: the codes above, then these */
enum { E_FREE_COMPLETED = 100, E_SNAPSHOT, E_UNKNOWN };
/* a frame dict's gs_pv.top once read: a library's (skipped), or a frame's number (>= 0) */
#define TOP_LIBRARY (-2)
#define NO_FRAME (-1)

typedef struct {
    /* the rows' columns, written in this order (the layout above): n rows, room for cap (a
     * row is eight stores, where GArray appends cost about 60 instructions each) */
    uint8_t *action, *deferred;
    uint64_t *stream;
    int64_t *addr;
    uint64_t *size;
    int64_t *time;
    uint64_t *where;
    uint32_t *frame;
    size_t n, cap;
    GArray *local;    /* a frame's number -> its number on this device + 1 (0: not yet) */
    GArray *frames;   /* this device's frames, in order of first use: their numbers */
    gboolean program; /* a program action was seen (the converter's rec.devices) */
    int prev_action;  /* for the immediate free: the previous entry's action and address */
    int64_t prev_addr;
    int64_t prev_free; /* the row of the free made from it, or -1 */
} device;

/* A private pool's allocations (note_pool). */
typedef struct {
    int64_t id[2];
    uint64_t count;
} pool_count;

/* The keys read of every entry (reader.entry_keys) and frame dict (reader.frame_keys). */
enum {
    K_ACTION,
    K_ADDR,
    K_DEVICE_FREE,
    K_SIZE,
    K_STREAM,
    K_TIME_US,
    K_POOL_ID,
    K_FRAMES,
    N_ENTRY_KEYS
};
static const char *const entry_keys[N_ENTRY_KEYS] = {"action", "addr",    "device_free", "size",
                                                     "stream", "time_us", "pool_id",     "frames"};
static const char *const frame_keys[] = {"filename", "line", "name"};

typedef struct {
    GPtrArray *devices;     /* device * */
    GHashTable *frame_of;   /* frame text -> its number + 1 */
    GPtrArray *frame_texts; /* number -> text */
    GPtrArray *standins;    /* number + 1 -> its GS_PV_FRAMES (0: none), made as needed */
    GHashTable *streams;    /* uint64 * set */
    GArray *pools;          /* pool_count, in order of first use */
    FILE *progress;         /* where a line goes every 65,536 entries, or NULL */
    uint64_t entries;       /* entries consumed */
    gs_pv_keys entry_keys, frame_keys;
} reader;

static device *device_new(void)
{
    device *d = g_new0(device, 1);
    d->local = g_array_new(FALSE, TRUE, 4);
    d->frames = g_array_new(FALSE, FALSE, 4);
    d->prev_action = E_UNKNOWN;
    d->prev_free = -1;
    return d;
}

static void device_free(gpointer p)
{
    device *d = p;
    g_free(d->action);
    g_free(d->deferred);
    g_free(d->stream);
    g_free(d->addr);
    g_free(d->size);
    g_free(d->time);
    g_free(d->where);
    g_free(d->frame);
    g_array_free(d->local, TRUE);
    g_array_free(d->frames, TRUE);
    g_free(d);
}

/* ---- top user frames (traces/gsconvert/walker.py, top_user_frame) ---- */

/* Whether a file name is PyTorch's or Python's own: _LIBRARY_FRAME, the regex
 * (^|[/\\])(torch[/\\]|lib[/\\]python\d)|^<, searched. -1 where \d might match a digit
 * other than 0-9 (Python's \d takes any Unicode digit): declined. */
static int is_library(const char *s, size_t n)
{
    int unsure = 0;
    if (n && s[0] == '<') return 1;
    for (size_t p = 0; p < n; p++) {
        if (p && s[p - 1] != '/' && s[p - 1] != '\\') continue;
        if (n - p > 5 && memcmp(s + p, "torch", 5) == 0 && (s[p + 5] == '/' || s[p + 5] == '\\'))
            return 1;
        if (n - p > 10 && memcmp(s + p, "lib", 3) == 0 && (s[p + 3] == '/' || s[p + 3] == '\\') &&
            memcmp(s + p + 4, "python", 6) == 0) {
            unsigned char c = (unsigned char)s[p + 10];
            if (c >= '0' && c <= '9') return 1;
            unsure |= c >= 0x80;
        }
    }
    return unsure ? -1 : 0;
}

/* A frame's number, its text interned. */
static int32_t frame_number(reader *r, const char *text)
{
    gpointer k = g_hash_table_lookup(r->frame_of, text);
    if (k) return GPOINTER_TO_INT(k) - 1;
    char *own = g_strdup(text);
    g_ptr_array_add(r->frame_texts, own);
    int32_t f = (int32_t)r->frame_texts->len - 1;
    g_hash_table_insert(r->frame_of, own, GINT_TO_POINTER(f + 1));
    return f;
}

/* What frame dict d is: TOP_LIBRARY, or its frame's number; cached in d->top. FALSE to
 * decline. */
static gboolean frame_of_dict(gs_pickle_vm *m, reader *r, gs_pv *d)
{
    if (d->top != GS_PV_TOP_UNKNOWN) return TRUE;
    gs_pv *f[G_N_ELEMENTS(frame_keys)];
    gs_pv_dict_fields(d, &r->frame_keys, f);
    gs_pv *fn = f[0], *lv = f[1], *name = f[2];
    if (!gs_pv_is_kind(fn, GS_PV_STR)) {
        d->top = TOP_LIBRARY;
        return TRUE;
    }
    int lib = is_library(fn->u.str.s, fn->u.str.n);
    if (memchr(fn->u.str.s, 0, fn->u.str.n) ||
        (gs_pv_is_kind(name, GS_PV_STR) && memchr(name->u.str.s, 0, name->u.str.n))) {
        gs_pickle_decline(m, "a frame with a NUL in its text");
        return FALSE;
    }
    if (lib < 0) {
        gs_pickle_decline(m, "a file name whose library test needs Unicode digits");
        return FALSE;
    }
    if (lib) {
        d->top = TOP_LIBRARY;
        return TRUE;
    }
    int64_t line = 0;
    if (!lv || !gs_pv_get_int(lv, &line)) line = 0;
    GString *t = g_string_new_len(fn->u.str.s, (gssize)fn->u.str.n);
    g_string_append_printf(t, ":%" G_GINT64_FORMAT ":", line);
    if (gs_pv_is_kind(name, GS_PV_STR))
        g_string_append_len(t, name->u.str.s, (gssize)name->u.str.n);
    d->top = frame_number(r, t->str);
    g_string_free(t, TRUE);
    return TRUE;
}

/* The top user frame of a frames list's items: *top its number, or NO_FRAME. */
static gboolean top_of_items(gs_pickle_vm *m, reader *r, gs_pv *const *items, size_t n,
                             int32_t *top)
{
    *top = NO_FRAME;
    for (size_t k = 0; k < n; k++) {
        gs_pv *fr = items[k];
        if (!gs_pv_is_kind(fr, GS_PV_DICT)) return TRUE;
        if (!frame_of_dict(m, r, fr)) return FALSE;
        if (fr->top != TOP_LIBRARY) {
            *top = fr->top;
            return TRUE;
        }
    }
    return TRUE;
}

/* The top user frame of an entry's frames value: *top its number, or NO_FRAME. */
static gboolean top_frame(gs_pickle_vm *m, reader *r, gs_pv *frames, int32_t *top)
{
    *top = NO_FRAME;
    if (gs_pv_is_kind(frames, GS_PV_FRAMES)) {
        *top = frames->top;
        return TRUE;
    }
    if (!gs_pv_is_kind(frames, GS_PV_LIST)) return TRUE;
    return top_of_items(m, r, frames->u.seq.v, frames->u.seq.n, top);
}

static gs_pv *standin(reader *r, int32_t top)
{
    guint k = (guint)(top + 1);
    if (r->standins->len <= k) g_ptr_array_set_size(r->standins, k + 1);
    gs_pv *s = g_ptr_array_index(r->standins, k);
    if (!s) {
        s = g_new0(gs_pv, 1);
        s->refs = 1;
        s->kind = GS_PV_FRAMES;
        s->top = top;
        g_ptr_array_index(r->standins, k) = s;
    }
    return s;
}

/* gs_pickle_hooks.frames: a frames list read as the walker reads it, a stand-in. */
static gs_pv *frames_read(gs_pickle_vm *m, gs_pv *const *items, size_t n, void *ud)
{
    reader *r = ud;
    int32_t top;
    if (!top_of_items(m, r, items, n, &top)) return NULL;
    gs_pv *s = standin(r, top);
    s->refs++; /* (a new reference, for the memo) */
    return s;
}

/* ---- entries ---- */

static int action_of(const gs_pv *a)
{
    static const struct {
        const char *name;
        int code;
    } names[] = {
        {"alloc", A_ALLOC},
        {"free_requested", A_FREE},
        {"free_completed", E_FREE_COMPLETED},
        {"segment_alloc", A_SEG_ALLOC},
        {"segment_free", A_SEG_FREE},
        {"segment_map", A_SEG_MAP},
        {"segment_unmap", A_SEG_UNMAP},
        {"oom", A_OOM},
        {"snapshot", E_SNAPSHOT},
    };
    if (!gs_pv_is_kind(a, GS_PV_STR)) return E_UNKNOWN;
    for (size_t k = 0; k < G_N_ELEMENTS(names); k++)
        if (gs_pv_is_str(a, names[k].name)) return names[k].code;
    return E_UNKNOWN;
}

static void add_row(device *d, int action, uint64_t stream, int64_t addr, uint64_t size, int64_t t,
                    int deferred, uint64_t where, int32_t top)
{
    uint8_t a = (uint8_t)action, df = (uint8_t)deferred;
    uint32_t f = 0;
    if (top >= 0) {
        if (d->local->len <= (guint)top) g_array_set_size(d->local, (guint)top + 1);
        f = g_array_index(d->local, uint32_t, top);
        if (!f) {
            g_array_append_val(d->frames, top);
            f = g_array_index(d->local, uint32_t, top) = d->frames->len;
        }
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 4096;
        d->action = g_renew(uint8_t, d->action, d->cap);
        d->deferred = g_renew(uint8_t, d->deferred, d->cap);
        d->stream = g_renew(uint64_t, d->stream, d->cap);
        d->addr = g_renew(int64_t, d->addr, d->cap);
        d->size = g_renew(uint64_t, d->size, d->cap);
        d->time = g_renew(int64_t, d->time, d->cap);
        d->where = g_renew(uint64_t, d->where, d->cap);
        d->frame = g_renew(uint32_t, d->frame, d->cap);
    }
    size_t i = d->n++;
    d->action[i] = a;
    d->deferred[i] = df;
    d->stream[i] = stream;
    d->addr[i] = addr;
    d->size[i] = size;
    d->time[i] = t;
    d->where[i] = where;
    d->frame[i] = f;
}

/* An alloc's pool_id (2.12 and later), as DeviceEvents.note_pool takes it: none, or a pair of
 * integers, counted when it is not (0, 0), the ordinary pools. FALSE (declined) for anything
 * else, which the walker refuses with its message. */
static gboolean note_pool(reader *r, const gs_pv *p)
{
    if (!p || p == GS_PV_NONE) return TRUE;
    int64_t a, b;
    if (!(gs_pv_is_kind(p, GS_PV_TUPLE) || gs_pv_is_kind(p, GS_PV_LIST)) || p->u.seq.n != 2 ||
        !gs_pv_get_int(p->u.seq.v[0], &a) || !gs_pv_get_int(p->u.seq.v[1], &b))
        return FALSE;
    if (!a && !b) return TRUE;
    for (guint k = 0; k < r->pools->len; k++) {
        pool_count *c = &g_array_index(r->pools, pool_count, k);
        if (c->id[0] == a && c->id[1] == b) {
            c->count++;
            return TRUE;
        }
    }
    pool_count c = {{a, b}, 1};
    g_array_append_val(r->pools, c);
    return TRUE;
}

/* One entry, as DeviceEvents.feed makes it (snapshot.py), f its fields (K_*): FALSE to
 * decline. */
static gboolean entry(gs_pickle_vm *m, reader *r, device *d, gs_pv *const *f, uint64_t where)
{
    int action = action_of(f[K_ACTION]);
    if (action == E_UNKNOWN) {
        gs_pickle_decline(m, "an entry whose action is not one of a snapshot's");
        return FALSE;
    }
    if (action == E_SNAPSHOT) {
        d->prev_action = E_SNAPSHOT;
        d->prev_free = -1;
        return TRUE;
    }
    int64_t addr, size, stream, t;
    if (!gs_pv_get_int(f[action == A_OOM ? K_DEVICE_FREE : K_ADDR], &addr) ||
        !gs_pv_get_int(f[K_SIZE], &size) || size < 0 || !gs_pv_get_int(f[K_STREAM], &stream) ||
        !gs_pv_get_int(f[K_TIME_US], &t)) {
        gs_pickle_decline(m, "an entry field that is not an integer of 64 bits");
        return FALSE;
    }
    int32_t top = NO_FRAME;
    if ((action == A_ALLOC || action == A_OOM) && !top_frame(m, r, f[K_FRAMES], &top)) return FALSE;
    if (action == A_ALLOC && !note_pool(r, f[K_POOL_ID])) {
        gs_pickle_decline(m, "an entry whose pool_id is not a pair of integers");
        return FALSE;
    }
    int64_t this_free = -1;
    if (action == A_FREE) {
        this_free = (int64_t)d->n;
        add_row(d, A_FREE, (uint64_t)stream, addr, (uint64_t)size, t, 1, where, NO_FRAME);
    } else if (action == E_FREE_COMPLETED) {
        if (d->prev_action == A_FREE && d->prev_addr == addr && d->prev_free >= 0)
            d->deferred[d->prev_free] = 0; /* immediate */
        else add_row(d, A_FREE_DONE, (uint64_t)stream, addr, (uint64_t)size, t, 0, where, NO_FRAME);
    } else {
        add_row(d, action, (uint64_t)stream, addr, (uint64_t)size, t, 0, where, top);
    }
    if (action == A_ALLOC || action == A_FREE || action == E_FREE_COMPLETED) {
        d->program = TRUE;
        uint64_t s = (uint64_t)stream;
        if (!g_hash_table_contains(r->streams, &s))
            g_hash_table_add(r->streams, g_memdup2(&s, sizeof s));
    }
    d->prev_action = action;
    d->prev_addr = addr;
    d->prev_free = this_free;
    return TRUE;
}

static gboolean consume(gs_pickle_vm *m, uint32_t dev, uint64_t first, gs_pv **items, size_t n,
                        void *ud)
{
    reader *r = ud;
    while (r->devices->len <= dev) g_ptr_array_add(r->devices, device_new());
    device *d = g_ptr_array_index(r->devices, dev);
    for (size_t k = 0; k < n; k++) {
        gs_pv *e = items[k], *f[N_ENTRY_KEYS];
        gs_pv_dict_fields(e, &r->entry_keys, f);
        gs_pv *fr = f[K_FRAMES];
        if (!entry(m, r, d, f, first + k)) return FALSE;
        /* its memo slots, as the Python walker's _consume leaves them (once the batch is fed:
         * feeding reads no slot, so entry by entry is the same): the entry's refuses a second
         * reference, its frames list's reads as the top frame found in it */
        if (!gs_pickle_forget(m, e, NULL)) return FALSE;
        if (gs_pv_is_kind(fr, GS_PV_LIST) && fr->puts) {
            int32_t top;
            if (!top_frame(m, r, fr, &top) || !gs_pickle_forget(m, fr, standin(r, top)))
                return FALSE;
        }
    }
    if (r->progress && (r->entries + n) >> 16 != r->entries >> 16) {
        fprintf(r->progress, "%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n", r->entries + n,
                gs_pickle_bytes_read(m));
        fflush(r->progress);
    }
    r->entries += n;
    return gs_pickle_memory_ok(m);
}

/* ---- the output ---- */

static void put_device(GString *o, const reader *r, const device *d, uint64_t entries)
{
    gs_put_u64(o, entries);
    gs_put_u64(o, d ? d->n : 0);
    g_string_append_c(o, d && d->program);
    gs_put_u32(o, d ? d->frames->len : 0);
    if (!d) {
        g_string_append_c(o, 0); /* no rows */
        return;
    }
    for (guint k = 0; k < d->frames->len; k++) {
        const char *t = g_ptr_array_index(r->frame_texts, g_array_index(d->frames, int32_t, k));
        gs_put_u32(o, (uint32_t)strlen(t));
        gs_put(o, t, strlen(t));
    }
    gs_put(o, d->action, d->n);
    gs_put(o, d->deferred, d->n);
    gs_put(o, d->stream, d->n * 8);
    gs_put(o, d->addr, d->n * 8);
    gs_put(o, d->size, d->n * 8);
    gs_put(o, d->time, d->n * 8);
    gs_put(o, d->where, d->n * 8);
    gs_put(o, d->frame, d->n * 4);
    gs_snap_columns c = {
        .action = d->action,
        .deferred = d->deferred,
        .stream = d->stream,
        .size = d->size,
        .addr = d->addr,
        .time = d->time,
        .frame = d->frame,
        .n = d->n,
    };
    gs_snapshot_put_rows(o, &c);
}

/* The root's shape that the Python reader would take: a dict whose device_traces is the list
 * the device lists were made for, each in its place, with an entry at least. */
static const char *shape_problem(gs_pv *root, gs_pv *dt, uint32_t ndev)
{
    if (!gs_pv_is_kind(root, GS_PV_DICT) || !dt || gs_pv_dict_get(root, "device_traces") != dt)
        return "no device_traces list where a snapshot has it";
    if (dt->u.seq.n != ndev) return "device lists outside device_traces";
    uint64_t all = 0;
    for (uint32_t k = 0; k < ndev; k++) {
        gs_pv *l = dt->u.seq.v[k];
        if (!gs_pv_is_kind(l, GS_PV_DEVLIST) || l->top != (int32_t)k)
            return "device_traces laid out otherwise";
        all += l->u.count;
    }
    return all ? NULL : "no entries";
}

gboolean gs_snapshot_read(const char *path, uint64_t limit, FILE *progress, GString *out,
                          char **why)
{
    reader r = {
        .progress = progress,
        .devices = g_ptr_array_new_with_free_func(device_free),
        .frame_of = g_hash_table_new(g_str_hash, g_str_equal),
        .frame_texts = g_ptr_array_new_with_free_func(g_free),
        .standins = g_ptr_array_new(),
        .streams = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL),
        .pools = g_array_new(FALSE, FALSE, sizeof(pool_count)),
        .entry_keys = {.text = entry_keys, .nk = N_ENTRY_KEYS},
        .frame_keys = {.text = frame_keys, .nk = G_N_ELEMENTS(frame_keys)},
    };
    gs_pv *dt = NULL;
    uint32_t ndev = 0;
    static const gs_pickle_hooks hooks = {.consume = consume, .frames = frames_read};
    gs_pv *root = gs_pickle_load(path, limit, &hooks, &r, &dt, &ndev, why);
    /* (the keys' references go before the root is written: a string held twice is written
     * memoized) */
    gs_pv_keys_clear(&r.entry_keys);
    gs_pv_keys_clear(&r.frame_keys);
    const char *problem = root ? shape_problem(root, dt, ndev) : NULL;
    gboolean ok = root && !problem;
    gsize start = out->len;
    if (ok) {
        g_string_append(out, "GSSNAP02");
        gs_put_u32(out, ndev);
        uint64_t *counts = g_new0(uint64_t, ndev ? ndev : 1);
        for (uint32_t k = 0; k < ndev; k++) {
            counts[k] = dt->u.seq.v[k]->u.count;
            put_device(out, &r, k < r.devices->len ? g_ptr_array_index(r.devices, k) : NULL,
                       counts[k]);
        }
        gs_put_u32(out, g_hash_table_size(r.streams));
        GHashTableIter it;
        gpointer key;
        g_hash_table_iter_init(&it, r.streams);
        while (g_hash_table_iter_next(&it, &key, NULL)) gs_put_u64(out, *(uint64_t *)key);
        gs_put_u32(out, r.pools->len);
        for (guint k = 0; k < r.pools->len; k++) {
            const pool_count *c = &g_array_index(r.pools, pool_count, k);
            gs_put_u64(out, (uint64_t)c->id[0]);
            gs_put_u64(out, (uint64_t)c->id[1]);
            gs_put_u64(out, c->count);
        }
        gsize at = out->len;
        gs_put_u64(out, 0);
        const char *wwhy = NULL;
        ok = gs_pickle_write(out, root, dt, counts, ndev, &wwhy);
        uint64_t len = out->len - at - 8;
        memcpy(out->str + at, &len, 8);
        g_free(counts);
        if (!ok) {
            *why = g_strdup(wwhy);
            g_string_truncate(out, start); /* nothing written, as the caller is promised */
        }
    } else if (problem) {
        *why = g_strdup(problem);
    }
    if (root) {
        gs_pv_unref(root);
        gs_pv_unref(dt);
    }
    for (guint k = 0; k < r.standins->len; k++) gs_pv_unref(g_ptr_array_index(r.standins, k));
    g_ptr_array_free(r.devices, TRUE);
    g_hash_table_destroy(r.frame_of);
    g_ptr_array_free(r.frame_texts, TRUE);
    g_ptr_array_free(r.standins, TRUE);
    g_hash_table_destroy(r.streams);
    g_array_free(r.pools, TRUE);
    return ok;
}
