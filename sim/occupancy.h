/* occupancy.h - which address ranges are taken over which time slots, for the offline planner
 * (bound.c): the lowest offset free over a window of slots, without looking at each placed
 * request that meets the window.
 *
 * The planner's greedy by size asks, for each request live over slots [lo, hi) and `size`
 * bytes long, for the lowest offset where it meets no range taken over any slot of [lo, hi).
 * Looking at every placed request whose lifetime meets the window (and sorting them by offset)
 * costs the overlapping pairs: 4 million on GPT-2, a thousand requests live throughout each
 * step. Here the slots are a segment tree, and each tree node keeps the union of the ranges
 * taken at it (a window's canonical nodes) and of those taken anywhere below it, as sorted
 * disjoint ranges with neighbours merged. Requests packed side by side merge into one range,
 * so a window's answer is found by jumping over a few unions, a few dozen in all, not the
 * thousand ranges inside them.
 */
#ifndef GS_OCCUPANCY_H
#define GS_OCCUPANCY_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct gs_occupancy gs_occupancy;

/* An empty occupancy of slots 0 .. slots - 1 (slots >= 1). */
gs_occupancy *gs_occupancy_new(size_t slots);
void gs_occupancy_free(gs_occupancy *o);
/* The lowest off such that [off, off + size) meets no range taken over any slot of [lo, hi)
 * (lo < hi <= slots). */
uint64_t gs_occupancy_lowest(gs_occupancy *o, size_t lo, size_t hi, uint64_t size);
/* [off, off + size) is taken over slots [lo, hi) (lo < hi <= slots; size > 0). Ranges taken
 * over slots that meet may overlap: the occupancy keeps their union. */
void gs_occupancy_take(gs_occupancy *o, size_t lo, size_t hi, uint64_t off, uint64_t size);

G_END_DECLS

#endif
