/* hugemem.c - large host arrays read at random places, backed by transparent huge pages.
 *
 * With millions of live blocks every access of a block struct or a slot lands on a random
 * 4 KiB page of hundreds of MiB, and most of them miss the TLB as well as the cache (in a
 * virtual machine a TLB miss is a two-dimensional page walk). On this project's 2-core KVM
 * guest (THP "madvise"), backing the slot table and the block slabs with 2 MiB pages cut the
 * scaling benchmark's steady cost at 10^6 live blocks by about a fifth (BENCHMARKS.md, "Scaling
 * with live allocations"). Where the kernel gives no huge pages this is an ordinary allocation.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

void *gs_huge_alloc(size_t bytes, bool zero)
{
    void *mem = NULL;
    size_t align = bytes >= GS_HUGE_PAGE ? GS_HUGE_PAGE : 64;
    if (posix_memalign(&mem, align, bytes ? bytes : 1) != 0)
        g_error("out of host memory allocating %zu bytes", bytes); /* as g_new would */
#ifdef MADV_HUGEPAGE
    /* only advice: a kernel without THP refuses it, and the memory is ordinary */
    if (bytes >= GS_HUGE_PAGE) (void)madvise(mem, bytes, MADV_HUGEPAGE);
#endif
    if (zero) memset(mem, 0, bytes);
    return mem;
}
