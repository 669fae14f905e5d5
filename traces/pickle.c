/* pickle.c - a PyTorch memory snapshot's pickle, read as a stream: the opcodes PyTorch's
 * pickler writes (protocols 2 to 5), the plain values they make, and those values written back
 * as a pickle.
 *
 * The reader is the fast path of traces/gsconvert (docs/speed.md, "The snapshot reader in C"):
 * what it cannot read exactly as traces/gsconvert/walker.py reads it, it declines (GS_PICKLE_
 * DECLINED, with the reason), and the converter reads the snapshot itself. So it never reports
 * bad input; it only says "not mine". That keeps one judge of what a snapshot may hold (the
 * Python reader, with its messages), and lets this one be small: it accepts the opcodes a
 * snapshot is made of and refuses every other, every stack shape the Python reader would find
 * odd, every integer past 64 bits, every key that is not a string, an integer, None or a bool.
 *
 * The values: small integers, None and the bools are tagged pointers (no allocation: an entry
 * holds four integers); everything else is a counted gs_pv. The entries of device_traces (the
 * lists made right after the key 'device_traces', walker.py's rule) are handed to a callback
 * as each batch is appended and never kept, as the Python walker does, so memory follows the
 * memo and the snapshot's other parts, not the entries.
 */
#include "trace-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK (1u << 20)
#define MAX_STRING (64u << 20) /* a longer one: declined (the Python reader takes to 256 MiB) */
#define MAX_DEPTH 2000         /* nesting the writer follows; deeper is declined */
#define STR_CACHE 256          /* gs_pickle_vm.strs */
#define STR_SHORT 32           /* the longest string kept there */

/* ---- the values ---- */

gs_pv *gs_pv_int(int64_t i)
{
    if (i >= -(INT64_C(1) << 60) && i < (INT64_C(1) << 60))
        return (gs_pv *)(((uintptr_t)i << 2) | 1);
    gs_pv *v = g_new0(gs_pv, 1);
    v->refs = 1;
    v->kind = GS_PV_INT;
    v->u.i = i;
    return v;
}

static gs_pv *pv_new(uint8_t kind)
{
    gs_pv *v = g_new0(gs_pv, 1);
    v->refs = 1;
    v->kind = kind;
    v->top = GS_PV_TOP_UNKNOWN;
    return v;
}

static gs_pv *pv_str(const char *s, size_t n)
{
    gs_pv *v = g_malloc(sizeof(gs_pv) + n + 1);
    memset(v, 0, sizeof *v);
    v->refs = 1;
    v->kind = GS_PV_STR;
    v->top = GS_PV_TOP_UNKNOWN;
    v->u.str.n = n;
    v->u.str.s = (char *)(v + 1);
    memcpy(v->u.str.s, s, n);
    v->u.str.s[n] = '\0';
    return v;
}

static gboolean has_items(const gs_pv *v)
{
    return v->kind == GS_PV_LIST || v->kind == GS_PV_TUPLE || v->kind == GS_PV_DICT;
}

/* Drops a reference; what no longer has one goes, its items with it, by a list of values to
 * free rather than a recursion (a pickle may nest as deep as it likes). */
void gs_pv_unref(gs_pv *v)
{
    if (!gs_pv_is_heap(v) || --v->refs) return;
    gs_pv *local[64], **todo = local;
    size_t n = 0, cap = G_N_ELEMENTS(local);
    todo[n++] = v;
    while (n) {
        gs_pv *x = todo[--n];
        if (has_items(x)) {
            for (size_t k = 0; k < x->u.seq.n; k++) {
                gs_pv *c = x->u.seq.v[k];
                if (!gs_pv_is_heap(c) || --c->refs) continue;
                if (n == cap) {
                    gs_pv **more = g_new(gs_pv *, 2 * cap);
                    memcpy(more, todo, n * sizeof *todo);
                    if (todo != local) g_free(todo);
                    todo = more;
                    cap *= 2;
                }
                todo[n++] = c;
            }
            g_free(x->u.seq.v);
        }
        g_free(x);
    }
    if (todo != local) g_free(todo);
}

/* Room for extra more items at once: a dict's or a tuple's items come together, and growing
 * by doubling from 8 made each entry's dict three allocations where one does. */
static void seq_reserve(gs_pv *c, size_t extra)
{
    if (c->u.seq.cap - c->u.seq.n >= extra) return;
    size_t cap = c->u.seq.cap ? 2 * c->u.seq.cap : 8;
    if (cap < c->u.seq.n + extra) cap = c->u.seq.n + extra;
    c->u.seq.cap = cap;
    c->u.seq.v = g_renew(gs_pv *, c->u.seq.v, cap);
}

static void seq_push(gs_pv *c, gs_pv *x)
{
    seq_reserve(c, 1);
    c->u.seq.v[c->u.seq.n++] = x;
}

/* ---- the input: the file, gunzipped as it is read when it starts as gzip does ---- */

typedef struct {
    int fd;
    gboolean gz, eof, gz_end; /* gz_end: a member just ended */
    z_stream zs;
    unsigned char *raw; /* compressed bytes read, raw[rpos..rlen) still to inflate */
    size_t rpos, rlen;
    unsigned char *buf; /* the pickle's bytes, buf[pos..len) not yet taken */
    size_t pos, len, cap;
    uint64_t total; /* bytes of the file read */
} input;

/* More bytes at the end of buf; FALSE at the end of the input or on a failure (why says
 * which: NULL at a clean end). */
static gboolean in_more(input *in, const char **why)
{
    if (in->cap - in->len < CHUNK) {
        memmove(in->buf, in->buf + in->pos, in->len - in->pos);
        in->len -= in->pos;
        in->pos = 0;
        if (in->cap - in->len < CHUNK) {
            in->cap = 2 * in->cap + CHUNK;
            in->buf = g_realloc(in->buf, in->cap);
        }
    }
    if (!in->gz) {
        ssize_t r = gs_trace_read_some(in->fd, in->buf + in->len, CHUNK);
        if (r < 0) *why = "the input could not be read";
        in->len += r > 0 ? (size_t)r : 0;
        in->total += r > 0 ? (uint64_t)r : 0;
        return r > 0;
    }
    for (;;) {
        if (in->rpos == in->rlen) {
            ssize_t r = gs_trace_read_some(in->fd, in->raw, CHUNK);
            if (r < 0) {
                *why = "the input could not be read";
                return FALSE;
            }
            if (r == 0) {
                if (!in->gz_end) *why = "the gzip data ends early"; /* the Python reader says so */
                return FALSE;
            }
            in->rpos = 0;
            in->rlen = (size_t)r;
            in->total += (uint64_t)r;
        }
        if (in->gz_end) {
            /* another member; zero padding and anything else are left to the Python reader */
            if (inflateReset(&in->zs) != Z_OK) {
                *why = "zlib failed";
                return FALSE;
            }
            in->gz_end = FALSE;
        }
        in->zs.next_in = in->raw + in->rpos;
        in->zs.avail_in = (uInt)(in->rlen - in->rpos);
        in->zs.next_out = in->buf + in->len;
        in->zs.avail_out = (uInt)(in->cap - in->len);
        int res = inflate(&in->zs, Z_NO_FLUSH);
        size_t took = in->rlen - in->rpos - in->zs.avail_in;
        size_t made = in->cap - in->len - in->zs.avail_out;
        in->rpos += took;
        in->len += made;
        if (res == Z_STREAM_END) in->gz_end = TRUE;
        else if (res != Z_OK && !(res == Z_BUF_ERROR && in->rpos == in->rlen)) {
            *why = "corrupt gzip data";
            return FALSE;
        }
        if (made) return TRUE;
        if (!took && res != Z_STREAM_END && in->rpos != in->rlen) {
            *why = "corrupt gzip data";
            return FALSE;
        }
    }
}

/* ---- the machine ---- */

struct gs_pickle_vm {
    const gs_pickle_hooks *hooks;
    void *ud;
    input in;
    gs_pv **stack;
    size_t sp, stack_cap;
    size_t *marks;
    size_t nmarks, marks_cap;
    gs_pv **memo;
    size_t nmemo, memo_cap;
    uint64_t limit; /* resident bytes past which it declines (0: none) */
    gs_pv *dt;      /* the device_traces list, once made */
    uint32_t ndev;
    gs_pv gone; /* the memo slot of an entry consumed */
    /* Short strings made lately, by a hash of their bytes: a snapshot's entries each hold a
     * few strings the pickler writes afresh ('alloc', 'N/A', ''), and one value shared costs a
     * reference where a new one cost a malloc and a free (a sixth of the reading). Values are
     * never changed, and what reads them compares their text, not their identity. */
    gs_pv *strs[STR_CACHE];
    const char *why;
    char whybuf[96];
};
typedef struct gs_pickle_vm vm;

void gs_pickle_decline(gs_pickle_vm *m, const char *why)
{
    m->why = why;
}

uint64_t gs_pickle_bytes_read(const gs_pickle_vm *m)
{
    return m->in.total;
}

#define DECLINE(m, reason)   \
    do {                     \
        (m)->why = (reason); \
        return FALSE;        \
    } while (0)

/* The process's resident bytes (0 where /proc does not say). */
static uint64_t resident(void)
{
    char buf[64] = {0};
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    unsigned long long size, rss;
    if (r <= 0 || sscanf(buf, "%llu %llu", &size, &rss) != 2) return 0;
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static gboolean need(vm *m, size_t n)
{
    while (m->in.len - m->in.pos < n) {
        const char *why = NULL;
        if (!in_more(&m->in, &why)) DECLINE(m, why ? why : "the pickle is cut short");
        /* at every MiB, as the Python reader checks its budget: half of it here, so that the
         * converter's limit is the walker's to report (its message, its judgement) */
        if (!gs_pickle_memory_ok(m)) return FALSE;
    }
    return TRUE;
}

gboolean gs_pickle_memory_ok(gs_pickle_vm *m)
{
    /* half the limit: the converter's walker then reads the snapshot and judges it (its
     * message, its measure) */
    if (m->limit && resident() > m->limit / 2)
        DECLINE(m, "more memory than half the conversion's limit");
    return TRUE;
}

static void push(vm *m, gs_pv *v)
{
    if (m->sp == m->stack_cap) {
        m->stack_cap = m->stack_cap ? 2 * m->stack_cap : 64;
        m->stack = g_renew(gs_pv *, m->stack, m->stack_cap);
    }
    m->stack[m->sp++] = v;
}

/* The stack above the last mark may be popped; nothing below it (the Python reader's rule,
 * and CPython's). */
static size_t floor_of(const vm *m)
{
    return m->nmarks ? m->marks[m->nmarks - 1] : 0;
}

/* Whether v may go into a container other than device_traces: not a device's list, not a
 * consumed entry's stand-in. (A frames list's stand-in may: an entry can name one.) */
static gboolean storable(const gs_pv *v)
{
    return !gs_pv_is_heap(v) || (v->kind != GS_PV_DEVLIST && v->kind != GS_PV_GONE);
}

static gboolean key_ok(const gs_pv *k)
{
    return !gs_pv_is_heap(k) || k->kind == GS_PV_STR || k->kind == GS_PV_INT;
}

/* Valid UTF-8, surrogates allowed (Python decodes the pickle's strings with 'surrogatepass'). */
static gboolean utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
        else return FALSE;
        if (n - i < len) return FALSE;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return FALSE;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return FALSE;
        i += len;
    }
    return TRUE;
}

static gboolean memo_put(vm *m, size_t idx)
{
    if (m->sp == floor_of(m)) DECLINE(m, "PUT with nothing to put");
    if (idx != m->nmemo)
        DECLINE(m, "a PUT out of the memo's order"); /* PyTorch's pickler never writes one */
    gs_pv *v = m->stack[m->sp - 1];
    if (m->nmemo == m->memo_cap) {
        m->memo_cap = m->memo_cap ? 2 * m->memo_cap : 1024;
        m->memo = g_renew(gs_pv *, m->memo, m->memo_cap);
    }
    m->memo[m->nmemo++] = gs_pv_ref(v);
    if (gs_pv_is_heap(v)) {
        if (v->puts < 255) v->puts++;
        v->slot = (uint32_t)idx;
    }
    return TRUE;
}

static gboolean memo_get(vm *m, size_t idx)
{
    if (idx >= m->nmemo) DECLINE(m, "a GET of a memo slot never set");
    gs_pv *v = m->memo[idx];
    if (v == &m->gone || gs_pv_is_kind(v, GS_PV_DEVLIST) || (m->dt && v == m->dt))
        DECLINE(m, "a second reference to an entry or to a device's list, or to device_traces");
    /* A list or dict taken from the memo is filled no more (the pickler fills each before it
     * refers to it again): so no value can hold itself, and counting references frees all. */
    if (gs_pv_is_heap(v)) v->lent = 1;
    push(m, gs_pv_ref(v));
    return TRUE;
}

/* A consumed value's memo slot now holds repl (the Python reader's _consume: a second
 * reference to an entry is refused, one to its frames list reads its stand-in). */
gboolean gs_pickle_forget(gs_pickle_vm *m, gs_pv *v, gs_pv *repl)
{
    if (!gs_pv_is_heap(v) || !v->puts) return TRUE;
    if (v->puts != 1 || m->memo[v->slot] != v) DECLINE(m, "an entry or frames list memoized twice");
    m->memo[v->slot] = repl ? gs_pv_ref(repl) : &m->gone;
    v->puts = 0;
    gs_pv_unref(v);
    return TRUE;
}

static gboolean new_list(vm *m)
{
    gs_pv *top = m->sp ? m->stack[m->sp - 1] : NULL;
    if (top && gs_pv_is_heap(top) && top->kind == GS_PV_DEVLIST)
        top = m->dt; /* what is below the device lists */
    if (m->dt && top == m->dt) {
        gs_pv *l = pv_new(GS_PV_DEVLIST);
        l->top = (int32_t)m->ndev++;
        push(m, l);
        return TRUE;
    }
    gs_pv *l = pv_new(GS_PV_LIST);
    if (!m->dt && top && gs_pv_is_str(top, "device_traces")) m->dt = gs_pv_ref(l);
    push(m, l);
    return TRUE;
}

/* APPEND/APPENDS of stack[from..sp) to the list below them. */
static gboolean append(vm *m, size_t from)
{
    if (from == 0) DECLINE(m, "APPEND with no list");
    gs_pv *l = m->stack[from - 1];
    if (!gs_pv_is_heap(l) || (l->kind != GS_PV_LIST && l->kind != GS_PV_DEVLIST) || l->lent)
        DECLINE(m, "APPEND to what is no list, or one referred to before");
    size_t n = m->sp - from;
    if (l->kind == GS_PV_DEVLIST) {
        if (!n) DECLINE(m, "an empty APPENDS to a device's list");
        for (size_t k = 0; k < n; k++) {
            gs_pv *e = m->stack[from + k];
            if (!gs_pv_is_heap(e) || e->kind != GS_PV_DICT || e->busy)
                DECLINE(m, "an entry that is not a dict, or one appended twice");
            e->busy = 1; /* (a second time in one batch is a shared reference) */
        }
        if (!m->hooks->consume(m, (uint32_t)l->top, l->u.count, m->stack + from, n, m->ud))
            return FALSE;
        l->u.count += n; /* a device's list counts its entries and keeps none */
        for (size_t k = 0; k < n; k++) gs_pv_unref(m->stack[from + k]);
    } else {
        for (size_t k = 0; k < n; k++) {
            gs_pv *x = m->stack[from + k];
            if (!storable(x) && !(l == m->dt && x->kind == GS_PV_DEVLIST))
                DECLINE(m, "a device's list in another container");
        }
        seq_reserve(l, n);
        for (size_t k = 0; k < n; k++)
            seq_push(l, m->stack[from + k]); /* (the stack's references move) */
    }
    m->sp = from;
    return TRUE;
}

static gboolean setitems(vm *m, size_t from)
{
    if (from == 0 || (m->sp - from) % 2) DECLINE(m, "SETITEMS with no dict, or an odd count");
    gs_pv *d = m->stack[from - 1];
    if (!gs_pv_is_heap(d) || d->kind != GS_PV_DICT || d->lent)
        DECLINE(m, "SETITEMS to what is no dict, or one referred to before");
    for (size_t k = from; k < m->sp; k += 2) {
        if (!key_ok(m->stack[k]))
            DECLINE(m, "a dict key that is not a string, an integer, None or a bool");
        if (!storable(m->stack[k + 1])) DECLINE(m, "a device's list in a dict");
    }
    seq_reserve(d, m->sp - from);
    for (size_t k = from; k < m->sp; k++) seq_push(d, m->stack[k]);
    d->top = GS_PV_TOP_UNKNOWN; /* what it says as a frame may have changed */
    m->sp = from;
    return TRUE;
}

static gboolean tuple(vm *m, size_t from)
{
    for (size_t k = from; k < m->sp; k++)
        if (!storable(m->stack[k])) DECLINE(m, "a device's list in a tuple");
    gs_pv *t = pv_new(GS_PV_TUPLE);
    seq_reserve(t, m->sp - from);
    for (size_t k = from; k < m->sp; k++) seq_push(t, m->stack[k]);
    m->sp = from;
    push(m, t);
    return TRUE;
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}

static gboolean string(vm *m, size_t n)
{
    if (n > MAX_STRING) DECLINE(m, "a string longer than 64 MiB");
    if (!need(m, n)) return FALSE;
    const unsigned char *s = m->in.buf + m->in.pos;
    if (!utf8_ok(s, n)) DECLINE(m, "a string that is not UTF-8");
    m->in.pos += n;
    if (n > STR_SHORT) {
        push(m, pv_str((const char *)s, n));
        return TRUE;
    }
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t k = 0; k < n; k++) h = (h ^ s[k]) * 16777619u;
    gs_pv **c = &m->strs[h % STR_CACHE];
    if (!*c || (*c)->u.str.n != n || memcmp((*c)->u.str.s, s, n) != 0) {
        gs_pv_unref(*c);
        *c = pv_str((const char *)s, n);
    }
    push(m, gs_pv_ref(*c));
    return TRUE;
}

/* At least n bytes ahead, if the input has them: FALSE at its end (or a failure of it, which
 * need reports when the reading gets there). */
static gboolean have(vm *m, size_t n)
{
    while (m->in.len - m->in.pos < n) {
        const char *why = NULL;
        if (!in_more(&m->in, &why)) return FALSE;
    }
    return TRUE;
}

/* The walker's way with a stack (walker.py, EMPTY_LIST): a list made right after the string
 * "frames" (above the last MARK), written as MEMOIZE, MARK, memo references only and
 * APPENDS, is read as the top user frame found in it, never as a list: a stand-in, memoized and
 * pushed in its place. The walker matches that within what it holds of the input, at least
 * 64 KiB ahead: a longer run is declined. *took when it read the list so. */
static gboolean frames_shortcut(vm *m, gboolean *took)
{
    *took = FALSE;
    gs_pv *top = m->sp ? m->stack[m->sp - 1] : NULL;
    if (!gs_pv_is_str(top, "frames") || (m->nmarks && m->marks[m->nmarks - 1] >= m->sp))
        return TRUE;
    if (!have(m, 2) || m->in.buf[m->in.pos] != 0x94 || m->in.buf[m->in.pos + 1] != '(') return TRUE;
    GArray *items = g_array_new(FALSE, FALSE, sizeof(gs_pv *));
    size_t at = 2;
    gboolean ok = TRUE, match = FALSE;
    for (;;) {
        if (at > 65000) {
            ok = FALSE;
            m->why = "a frames list longer than the converter's walker reads at once";
            break;
        }
        if (!have(m, at + 1)) break;
        unsigned op = m->in.buf[m->in.pos + at];
        if (op == 'e') {
            match = TRUE;
            at++;
            break;
        }
        size_t len = op == 'h' ? 2 : op == 'j' ? 5 : 0;
        if (!len || !have(m, at + len)) break;
        const unsigned char *a = m->in.buf + m->in.pos + at + 1;
        size_t idx = op == 'h' ? a[0] : (size_t)le(a, 4);
        gs_pv *v = idx < m->nmemo ? m->memo[idx] : NULL;
        if (!v || v == &m->gone || gs_pv_is_kind(v, GS_PV_DEVLIST) || (m->dt && v == m->dt)) {
            ok = FALSE;
            m->why = "a frames list naming a memo slot the walker refuses";
            break;
        }
        g_array_append_val(items, v);
        at += len;
    }
    if (ok && match) {
        gs_pv *s = m->hooks->frames(m, (gs_pv *const *)(void *)items->data, items->len, m->ud);
        if (!s) ok = FALSE;
        else {
            m->in.pos += at;
            push(m, s);
            ok = memo_put(m, m->nmemo); /* (the MEMOIZE the run began with) */
            *took = ok;
        }
    }
    g_array_free(items, TRUE);
    return ok;
}

/* SETITEMS' and APPENDS' MARK taken off: the items are stack[*from..sp), their container the
 * value below them, which must be above the mark before. */
static gboolean pop_mark(vm *m, size_t *from)
{
    if (!m->nmarks) DECLINE(m, "SETITEMS or APPENDS without a MARK");
    *from = m->marks[--m->nmarks];
    if (*from <= floor_of(m)) DECLINE(m, "SETITEMS or APPENDS with no container");
    return TRUE;
}

/* One opcode; *stop set at STOP. */
static gboolean step(vm *m, gboolean *stop)
{
    if (!need(m, 1)) return FALSE;
    unsigned op = m->in.buf[m->in.pos++];
    const unsigned char *a;
#define ARG(n)                           \
    do {                                 \
        if (!need(m, (n))) return FALSE; \
        a = m->in.buf + m->in.pos;       \
        m->in.pos += (n);                \
    } while (0)
#define POPS(n)                                                                                 \
    do {                                                                                        \
        if (m->sp < floor_of(m) + (n)) DECLINE(m, "an opcode takes more than the stack holds"); \
    } while (0)
    switch (op) {
    case 0x80: /* PROTO */ ARG(1); return TRUE;
    case 0x95: /* FRAME: framing is transparent */ ARG(8); return TRUE;
    case '.': /* STOP */
        if (m->sp != 1 || m->nmarks) DECLINE(m, "STOP with a stack other than one value");
        *stop = TRUE;
        return TRUE;
    case 'N': push(m, GS_PV_NONE); return TRUE;
    case 0x88: push(m, GS_PV_TRUE); return TRUE;
    case 0x89: push(m, GS_PV_FALSE); return TRUE;
    case 'G': { /* BINFLOAT, big-endian */
        ARG(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; k++) bits = (bits << 8) | a[k];
        gs_pv *v = pv_new(GS_PV_FLOAT);
        memcpy(&v->u.f, &bits, 8);
        push(m, v);
        return TRUE;
    }
    case 'J': /* BININT */
        ARG(4);
        push(m, gs_pv_int((int32_t)(uint32_t)le(a, 4)));
        return TRUE;
    case 'K': /* BININT1 */
        ARG(1);
        push(m, gs_pv_int(a[0]));
        return TRUE;
    case 'M': /* BININT2 */
        ARG(2);
        push(m, gs_pv_int((int64_t)le(a, 2)));
        return TRUE;
    case 0x8a: { /* LONG1: little-endian two's complement */
        ARG(1);
        unsigned n = a[0];
        if (n > 8) DECLINE(m, "an integer past 64 bits");
        ARG(n);
        uint64_t u = le(a, (int)n);
        if (n && n < 8 && (a[n - 1] & 0x80)) u |= ~UINT64_C(0) << (8 * n);
        push(m, gs_pv_int((int64_t)u));
        return TRUE;
    }
    case 0x8c: /* SHORT_BINUNICODE */ ARG(1); return string(m, a[0]);
    case 'X': /* BINUNICODE */ ARG(4); return string(m, le(a, 4));
    case 0x8d: /* BINUNICODE8 */ ARG(8); return string(m, le(a, 8));
    case '}': push(m, pv_new(GS_PV_DICT)); return TRUE;
    case ']': {
        gboolean took;
        if (!frames_shortcut(m, &took)) return FALSE;
        return took || new_list(m);
    }
    case ')': push(m, pv_new(GS_PV_TUPLE)); return TRUE;
    case '(':
        if (m->nmarks == m->marks_cap) {
            m->marks_cap = m->marks_cap ? 2 * m->marks_cap : 16;
            m->marks = g_renew(size_t, m->marks, m->marks_cap);
        }
        m->marks[m->nmarks++] = m->sp;
        return TRUE;
    case 't':
        if (!m->nmarks) DECLINE(m, "TUPLE without a MARK");
        return tuple(m, m->marks[--m->nmarks]);
    case 0x85:
    case 0x86:
    case 0x87: /* TUPLE1, TUPLE2, TUPLE3 */ POPS(op - 0x84); return tuple(m, m->sp - (op - 0x84));
    case 's': /* SETITEM */
        POPS(2);
        if (m->sp < floor_of(m) + 3) DECLINE(m, "SETITEM with no dict");
        return setitems(m, m->sp - 2);
    case 'u': /* SETITEMS */ {
        size_t from;
        return pop_mark(m, &from) && setitems(m, from);
    }
    case 'a': /* APPEND */
        POPS(1);
        if (m->sp < floor_of(m) + 2) DECLINE(m, "APPEND with no list");
        return append(m, m->sp - 1);
    case 'e': /* APPENDS */ {
        size_t from;
        return pop_mark(m, &from) && append(m, from);
    }
    case 0x94: /* MEMOIZE */ return memo_put(m, m->nmemo);
    case 'q': /* BINPUT */ ARG(1); return memo_put(m, a[0]);
    case 'r': /* LONG_BINPUT */ ARG(4); return memo_put(m, le(a, 4));
    case 'h': /* BINGET */ ARG(1); return memo_get(m, a[0]);
    case 'j': /* LONG_BINGET */ ARG(4); return memo_get(m, le(a, 4));
    default:
        g_snprintf(m->whybuf, sizeof m->whybuf, "opcode 0x%02x, which a snapshot does not hold",
                   op);
        m->why = m->whybuf;
        return FALSE;
    }
#undef ARG
#undef POPS
}

gs_pv *gs_pickle_load(const char *path, uint64_t limit, const gs_pickle_hooks *hooks, void *ud,
                      gs_pv **dt, uint32_t *ndev, char **why)
{
    vm m = {.hooks = hooks, .ud = ud, .limit = limit};
    m.gone.kind = GS_PV_GONE;
    m.gone.refs = 1u << 30;
    m.in.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m.in.fd < 0) {
        *why = g_strdup("the input could not be opened");
        return NULL;
    }
    m.in.cap = 2 * CHUNK;
    m.in.buf = g_malloc(m.in.cap);
    gs_pv *root = NULL;
    const char *w = NULL;
    if (!in_more(&m.in, &w) && !w) w = "the input is empty";
    if (m.in.len >= 2 && m.in.buf[0] == 0x1f && m.in.buf[1] == 0x8b) {
        /* gzip: start again, inflating */
        m.in.gz = TRUE;
        m.in.total = m.in.len;
        m.in.raw = g_malloc(CHUNK);
        memcpy(m.in.raw, m.in.buf, m.in.len);
        m.in.rlen = m.in.len;
        m.in.len = m.in.pos = 0;
        if (inflateInit2(&m.in.zs, MAX_WBITS + 16) != Z_OK)
            g_error("zlib: failed to allocate the inflate state"); /* as g_new would */
    }
    if (!w && limit && resident() > limit / 2) w = "more memory than half the conversion's limit";
    gboolean stop = FALSE, ok = w == NULL;
    while (ok && !stop) ok = step(&m, &stop);
    if (ok) {
        root = m.stack[0];
        /* read to the end, as the Python reader may: a damaged gzip trailer is its to judge */
        const char *end_why = NULL;
        m.in.pos = m.in.len;
        while (in_more(&m.in, &end_why)) m.in.pos = m.in.len;
        if (end_why) {
            root = NULL;
            w = end_why;
        }
    } else if (!w) {
        w = m.why;
    }
    *why = root ? NULL : g_strdup(w ? w : "declined");
    /* the memo's references go, so that what is left counts only the values' own sharing
     * (the writer memoizes a value it meets twice) */
    for (size_t k = 0; k < m.nmemo; k++)
        if (m.memo[k] != &m.gone) gs_pv_unref(m.memo[k]);
    g_free(m.memo);
    for (size_t k = 0; k < STR_CACHE; k++) gs_pv_unref(m.strs[k]);
    if (!root)
        for (size_t k = 0; k < m.sp; k++) gs_pv_unref(m.stack[k]);
    g_free(m.stack);
    g_free(m.marks);
    if (m.in.gz) inflateEnd(&m.in.zs);
    g_free(m.in.raw);
    g_free(m.in.buf);
    close(m.in.fd);
    if (!root && m.dt) {
        gs_pv_unref(m.dt);
        m.dt = NULL;
    }
    *dt = m.dt;
    *ndev = m.ndev;
    return root;
}

/* ---- writing values back as a pickle (protocol 4, no framing) ---- */

typedef struct {
    GString *out;
    GHashTable *slots; /* a shared value written -> its memo slot */
    uint32_t next;
    const gs_pv *dt;
    const uint64_t *counts; /* dt is written as these counts */
    uint32_t ndev;
} writer;

static void w_int(GString *o, int64_t i)
{
    if (i >= 0 && i < 256) {
        g_string_append_c(o, 'K');
        g_string_append_c(o, (char)i);
    } else if (i >= INT32_MIN && i <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)i;
        g_string_append_c(o, 'J');
        for (int k = 0; k < 4; k++) g_string_append_c(o, (char)(u >> (8 * k)));
    } else {
        uint64_t u = (uint64_t)i;
        g_string_append_c(o, (char)0x8a);
        g_string_append_c(o, 8);
        for (int k = 0; k < 8; k++) g_string_append_c(o, (char)(u >> (8 * k)));
    }
}

static void w_memo(writer *w, const gs_pv *v)
{
    g_string_append_c(w->out, (char)0x94);
    g_hash_table_insert(w->slots, (gpointer)v, GUINT_TO_POINTER(w->next + 1));
    w->next++;
}

static gboolean w_value(writer *w, gs_pv *v, int depth, const char **why)
{
    GString *o = w->out;
    int64_t i;
    if (depth > MAX_DEPTH) {
        *why = "values nested deeper than the writer follows";
        return FALSE;
    }
    if (v == GS_PV_NONE || v == GS_PV_TRUE || v == GS_PV_FALSE) {
        g_string_append_c(o, v == GS_PV_NONE ? 'N' : v == GS_PV_TRUE ? (char)0x88 : (char)0x89);
        return TRUE;
    }
    if (gs_pv_get_int(v, &i)) {
        w_int(o, i);
        return TRUE;
    }
    if (v == w->dt) {
        g_string_append(o, "](");
        for (uint32_t d = 0; d < w->ndev; d++) w_int(o, (int64_t)w->counts[d]);
        g_string_append_c(o, 'e');
        return TRUE;
    }
    gpointer slot = g_hash_table_lookup(w->slots, v);
    if (slot) {
        uint32_t s = GPOINTER_TO_UINT(slot) - 1;
        g_string_append_c(o, 'j');
        for (int k = 0; k < 4; k++) g_string_append_c(o, (char)(s >> (8 * k)));
        return TRUE;
    }
    gboolean shared = v->refs > 1;
    switch (v->kind) {
    case GS_PV_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &v->u.f, 8);
        g_string_append_c(o, 'G');
        for (int k = 7; k >= 0; k--) g_string_append_c(o, (char)(bits >> (8 * k)));
        return TRUE;
    }
    case GS_PV_STR: {
        uint64_t n = v->u.str.n;
        g_string_append_c(o, (char)0x8d);
        for (int k = 0; k < 8; k++) g_string_append_c(o, (char)(n >> (8 * k)));
        g_string_append_len(o, v->u.str.s, (gssize)n);
        if (shared) w_memo(w, v);
        return TRUE;
    }
    case GS_PV_TUPLE:
        if (v->busy) {
            *why = "a tuple that holds itself";
            return FALSE;
        }
        v->busy = 1;
        g_string_append_c(o, '(');
        for (size_t k = 0; k < v->u.seq.n; k++)
            if (!w_value(w, v->u.seq.v[k], depth + 1, why)) return FALSE;
        v->busy = 0;
        g_string_append_c(o, 't');
        if (shared) w_memo(w, v);
        return TRUE;
    case GS_PV_LIST:
    case GS_PV_DICT:
        g_string_append_c(o, v->kind == GS_PV_LIST ? ']' : '}');
        if (shared) w_memo(w, v);
        if (v->u.seq.n) {
            g_string_append_c(o, '(');
            for (size_t k = 0; k < v->u.seq.n; k++)
                if (!w_value(w, v->u.seq.v[k], depth + 1, why)) return FALSE;
            g_string_append_c(o, v->kind == GS_PV_LIST ? 'e' : 'u');
        }
        return TRUE;
    case GS_PV_FRAMES: {
        /* as json writes the walker's own stand-in (str of it): the converter reads a
         * snapshot's frames nowhere but in its entries */
        static const char text[] = "<frames read>";
        g_string_append_c(o, (char)0x8c);
        g_string_append_c(o, (char)(sizeof text - 1));
        g_string_append_len(o, text, sizeof text - 1);
        if (shared) w_memo(w, v);
        return TRUE;
    }
    default: *why = "a device's list or a consumed entry outside device_traces"; return FALSE;
    }
}

gboolean gs_pickle_write(GString *out, gs_pv *root, const gs_pv *dt, const uint64_t *counts,
                         uint32_t ndev, const char **why)
{
    writer w = {.out = out,
                .slots = g_hash_table_new(NULL, NULL),
                .dt = dt,
                .counts = counts,
                .ndev = ndev};
    g_string_append(out, "\x80\x04");
    gboolean ok = w_value(&w, root, 0, why);
    g_string_append_c(out, '.');
    g_hash_table_destroy(w.slots);
    return ok;
}
