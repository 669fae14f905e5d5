/* addrtree.h - entries keyed by address, each with a weight (the largest gap of a VA range, a
 * free hole's length, a page's free tail), and the largest weight under each node, so that the
 * lowest entry whose weight reaches a size, or the highest one below an address, is one
 * descent. The simulated device's placement (simplace.c) keeps its ranges, holes and pages of
 * small allocations in these: sorted arrays with a scan from one end were O(n) an operation
 * and O(n^2) a replay (14,000 segments: 40% of the replay's time in memmove).
 *
 * A treap whose priorities are a hash of the key, so its shape, like every answer, is a
 * function of the entries alone. An entry's pointer is valid until the tree next changes.
 */
#ifndef GS_ADDRTREE_H
#define GS_ADDRTREE_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
    uint64_t key, weight;
    void *value;
} gs_addrtree_entry;

typedef struct gs_addrtree gs_addrtree;

gs_addrtree *gs_addrtree_new(void);
/* Frees the tree, not the values. */
void gs_addrtree_free(gs_addrtree *t);
size_t gs_addrtree_len(const gs_addrtree *t);
/* key must not be in t. */
void gs_addrtree_insert(gs_addrtree *t, uint64_t key, uint64_t weight, void *value);
/* Takes key's entry out; returns its value (NULL if key is not in t). */
void *gs_addrtree_remove(gs_addrtree *t, uint64_t key);
/* key's weight (key must be in t). */
void gs_addrtree_set_weight(gs_addrtree *t, uint64_t key, uint64_t weight);
/* The entry with key, or NULL. */
const gs_addrtree_entry *gs_addrtree_find(const gs_addrtree *t, uint64_t key);
/* The entry with the largest key at most key, or NULL. */
const gs_addrtree_entry *gs_addrtree_floor(const gs_addrtree *t, uint64_t key);
/* The entry with the smallest key whose weight is at least w, or NULL. */
const gs_addrtree_entry *gs_addrtree_first_fit(const gs_addrtree *t, uint64_t w);
/* The entry with the largest key below `below` whose weight is at least w, or NULL. */
const gs_addrtree_entry *gs_addrtree_last_fit(const gs_addrtree *t, uint64_t w, uint64_t below);
/* Calls fn on every entry, in key order (fn must not change t). */
void gs_addrtree_foreach(const gs_addrtree *t, void (*fn)(const gs_addrtree_entry *e, void *ud),
                         void *ud);

G_END_DECLS

#endif
