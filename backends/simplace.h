/* simplace.h - where the simulated device's cudaMalloc puts a segment: rules 1 to 5 of
 * simdevice.c (VA ranges carved downward, first fit from the bottom inside them, holes reused
 * from the top, small requests packed into shared 2 MiB pages). Private to the simulated
 * device; every operation is O(log n) in the ranges, holes or pages it keeps.
 */
#ifndef GS_SIMPLACE_H
#define GS_SIMPLACE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gs_simplace gs_simplace;

/* The placement of a fresh context whose first 2 MiB go at x (rule 5); align_512m: the H200's
 * 512 MiB alignment of ranges for multiples of 512 MiB (rule 3). */
gs_simplace *gs_simplace_new(uint64_t x, bool align_512m);
void gs_simplace_free(gs_simplace *p);
/* Place size bytes (a multiple of 2 MiB) by rules 2 and 3; returns the address. */
uint64_t gs_simplace_place(gs_simplace *p, uint64_t size);
/* Give back what gs_simplace_place gave at addr (rule 4); an address it did not give is
 * ignored. */
void gs_simplace_unplace(gs_simplace *p, uint64_t addr);
/* A small request of n bytes (rule 1, n a multiple of 512 up to 1 MiB): its place in a shared
 * page; *new_page when it needs a page of its own. Without commit, only says where it would go
 * and whether it needs a page (returning 0 then). */
uint64_t gs_simplace_small(gs_simplace *p, uint64_t n, bool commit, bool *new_page);
/* Free a small allocation; true when its page went back. */
bool gs_simplace_unsmall(gs_simplace *p, uint64_t addr);
/* The lowest address carved for segments: the virtual-memory reservations, which grow up, must
 * stay below it. */
uint64_t gs_simplace_bottom(const gs_simplace *p);

#endif
