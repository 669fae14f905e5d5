/* test_addrtree.c - the simulated device's address-ordered weighted tree (backends/addrtree.h)
 * against a sorted array scanned end to end: random insertions, removals and weight changes,
 * and after each every query (find, floor, first fit, last fit below a key) on random keys and
 * weights, and the in-order walk. */
#include "testutil.h"

#include "addrtree.h"

typedef struct {
    uint64_t key, weight;
} ent;

typedef struct {
    ent *e;
    size_t n;
} model;

static size_t model_at(const model *m, uint64_t key) /* the first entry with key >= key */
{
    size_t i = 0;
    while (i < m->n && m->e[i].key < key) i++;
    return i;
}

/* An answer against the model's; a failure only is reported (Check logs every assertion it
 * passes, which would cost more than the tree: the queries here run by the hundred thousand). */
static void check_entry(const gs_addrtree_entry *got, const ent *want, const char *what)
{
    bool same = want ? got && got->key == want->key && got->weight == want->weight &&
                           got->value == (void *)(uintptr_t)(want->key + 1)
                     : got == NULL;
    if (!same)
        ck_abort_msg("%s: got %s%" G_GUINT64_FORMAT ", want %s%" G_GUINT64_FORMAT, what,
                     got ? "key " : "none ", got ? got->key : 0, want ? "key " : "none ",
                     want ? want->key : 0);
}

typedef struct {
    const model *m;
    size_t i;
} walk;

static void visit(const gs_addrtree_entry *e, void *ud)
{
    walk *w = ud;
    if (w->i >= w->m->n || e->key != w->m->e[w->i].key)
        ck_abort_msg("the walk's entry %zu: key %" G_GUINT64_FORMAT, w->i, e->key);
    w->i++;
}

static void check_queries(const gs_addrtree *t, const model *m, GRand *r, uint64_t keys,
                          uint64_t weights, bool walk_too)
{
    if (gs_addrtree_len(t) != m->n) ck_abort_msg("%zu entries, want %zu", gs_addrtree_len(t), m->n);
    for (int q = 0; q < 8; q++) {
        uint64_t k = (uint64_t)g_rand_int_range(r, 0, (gint32)keys + 2);
        uint64_t w = (uint64_t)g_rand_int_range(r, 0, (gint32)weights + 2);
        size_t at = model_at(m, k);
        check_entry(gs_addrtree_find(t, k), at < m->n && m->e[at].key == k ? &m->e[at] : NULL,
                    "find");
        size_t fl = at < m->n && m->e[at].key == k ? at + 1 : at; /* entries with key <= k */
        check_entry(gs_addrtree_floor(t, k), fl ? &m->e[fl - 1] : NULL, "floor");
        const ent *first = NULL, *last = NULL;
        for (size_t i = 0; i < m->n; i++)
            if (m->e[i].weight >= w) {
                if (!first) first = &m->e[i];
                if (m->e[i].key < k) last = &m->e[i];
            }
        check_entry(gs_addrtree_first_fit(t, w), first, "first fit");
        check_entry(gs_addrtree_last_fit(t, w, k), last, "last fit");
    }
    if (!walk_too) return;
    walk wk = {m, 0};
    gs_addrtree_foreach(t, visit, &wk);
    if (wk.i != m->n) ck_abort_msg("the walk saw %zu entries, want %zu", wk.i, m->n);
}

START_TEST(random_against_a_sorted_array)
{
    GRand *r = g_rand_new_with_seed(1919);
    for (int k = 0; k < 60; k++) {
        uint64_t keys = (uint64_t)g_rand_int_range(r, 1, k % 2 ? 40 : 3000);
        uint64_t weights = (uint64_t)g_rand_int_range(r, 1, 100);
        gs_addrtree *t = gs_addrtree_new();
        model m = {g_new(ent, keys + 1), 0};
        for (int op = 0; op < 600; op++) {
            uint64_t key = (uint64_t)g_rand_int_range(r, 0, (gint32)keys);
            size_t at = model_at(&m, key);
            bool present = at < m.n && m.e[at].key == key;
            uint64_t w = (uint64_t)g_rand_int_range(r, 0, (gint32)weights);
            int what = g_rand_int_range(r, 0, 3);
            if (!present && what < 2) { /* insert */
                gs_addrtree_insert(t, key, w, (void *)(uintptr_t)(key + 1));
                memmove(&m.e[at + 1], &m.e[at], (m.n - at) * sizeof(ent));
                m.e[at] = (ent){key, w};
                m.n++;
            } else if (present && what == 0) { /* remove */
                if (gs_addrtree_remove(t, key) != (void *)(uintptr_t)(key + 1))
                    ck_abort_msg("remove %" G_GUINT64_FORMAT ": not its value", key);
                memmove(&m.e[at], &m.e[at + 1], (m.n - at - 1) * sizeof(ent));
                m.n--;
            } else if (present) {
                gs_addrtree_set_weight(t, key, w);
                m.e[at].weight = w;
            } else if (gs_addrtree_remove(t, key)) {
                ck_abort_msg("remove %" G_GUINT64_FORMAT ": it was not there", key);
            }
            check_queries(t, &m, r, keys, weights, op % 16 == 0);
        }
        g_free(m.e);
        gs_addrtree_free(t);
    }
    g_rand_free(r);
}
END_TEST

/* Keys at the ends of the range: 0 and 2^64 - 1, and a last fit below 0 (none). */
START_TEST(extreme_keys)
{
    gs_addrtree *t = gs_addrtree_new();
    ck_assert_ptr_null(gs_addrtree_first_fit(t, 0));
    ck_assert_ptr_null(gs_addrtree_floor(t, UINT64_MAX));
    gs_addrtree_insert(t, 0, 5, (void *)1);
    gs_addrtree_insert(t, UINT64_MAX, 7, (void *)2);
    ck_assert_uint_eq(gs_addrtree_first_fit(t, 6)->key, UINT64_MAX);
    ck_assert_uint_eq(gs_addrtree_last_fit(t, 5, UINT64_MAX)->key, 0);
    ck_assert_ptr_null(gs_addrtree_last_fit(t, 0, 0));
    ck_assert_uint_eq(gs_addrtree_floor(t, UINT64_MAX - 1)->key, 0);
    ck_assert_ptr_eq(gs_addrtree_remove(t, 0), (void *)1);
    ck_assert_ptr_null(gs_addrtree_floor(t, UINT64_MAX - 1));
    gs_addrtree_free(t);
}
END_TEST

static Suite *addrtree_suite(void)
{
    Suite *s = suite_create("addrtree");
    TCase *tc = tcase_create("addrtree");
    tcase_add_test(tc, random_against_a_sorted_array);
    tcase_add_test(tc, extreme_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(addrtree_suite());
}
