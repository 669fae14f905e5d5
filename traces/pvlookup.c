/* pvlookup.c - reading the values the snapshot's pickle makes (pickle.c): an integer, a
 * string, a dict's value for a key, and many dicts' values for the same keys in one pass
 * (snapshot.c reads every entry's fields so).
 */
#include "trace-int.h"

#include <string.h>

gboolean gs_pv_get_int(const gs_pv *v, int64_t *out)
{
    if ((uintptr_t)v & 1) {
        *out = (int64_t)((intptr_t)v >> 2);
        return TRUE;
    }
    if (gs_pv_is_heap(v) && v->kind == GS_PV_INT) {
        *out = v->u.i;
        return TRUE;
    }
    return FALSE;
}

gs_pv *gs_pv_dict_get(const gs_pv *d, const char *key)
{
    size_t n = strlen(key);
    /* the last pair of a key wins, as dict assignment leaves it */
    for (size_t k = d->u.seq.n; k >= 2; k -= 2) {
        const gs_pv *kv = d->u.seq.v[k - 2];
        if (gs_pv_is_heap(kv) && kv->kind == GS_PV_STR && kv->u.str.n == n &&
            memcmp(kv->u.str.s, key, n) == 0)
            return d->u.seq.v[k - 1];
    }
    return NULL;
}

/* Which of k's keys the string kv, the at-th key of its dict from the end, is: its index, or
 * -1. Found among the strings met by address, first where the first dict had its at-th (dicts
 * of one shape repeat their keys in one order); else by its text, and remembered while there
 * is room. */
static int key_index(gs_pv_keys *k, gs_pv *kv, size_t at)
{
    if (at < k->n_known && k->known[at] == kv) return k->index[at];
    for (size_t i = 0; i < k->n_known; i++)
        if (k->known[i] == kv) return k->index[i];
    int idx = -1;
    for (size_t i = 0; i < k->nk && idx < 0; i++)
        if (kv->u.str.n == strlen(k->text[i]) && memcmp(kv->u.str.s, k->text[i], kv->u.str.n) == 0)
            idx = (int)i;
    if (k->n_known < GS_PV_KNOWN) {
        k->known[k->n_known] = gs_pv_ref(kv);
        k->index[k->n_known++] = (int8_t)idx;
    }
    return idx;
}

void gs_pv_dict_fields(const gs_pv *d, gs_pv_keys *k, gs_pv **out)
{
    for (size_t i = 0; i < k->nk; i++) out[i] = NULL;
    uint64_t want = k->nk >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << k->nk) - 1;
    /* from the end, so the last pair of a key is the one taken, as in gs_pv_dict_get */
    for (size_t j = d->u.seq.n; j >= 2 && want; j -= 2) {
        gs_pv *kv = d->u.seq.v[j - 2];
        if (!gs_pv_is_heap(kv) || kv->kind != GS_PV_STR) continue;
        int i = key_index(k, kv, (d->u.seq.n - j) / 2);
        if (i < 0 || !(want >> i & 1)) continue;
        out[i] = d->u.seq.v[j - 1];
        want &= ~(UINT64_C(1) << i);
    }
}

void gs_pv_keys_clear(gs_pv_keys *k)
{
    for (size_t i = 0; i < k->n_known; i++) gs_pv_unref(k->known[i]);
    k->n_known = 0;
}

gboolean gs_pv_is_str(const gs_pv *v, const char *s)
{
    return gs_pv_is_heap(v) && v->kind == GS_PV_STR && strcmp(v->u.str.s, s) == 0 &&
           strlen(s) == v->u.str.n;
}
