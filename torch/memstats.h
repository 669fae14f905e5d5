/* memstats.h - torch.cuda.memory_stats() under gpusim run, and the program's resets of it.
 *
 * PyTorch's pluggable allocator keeps no statistics: its getDeviceStats, resetPeakStats and
 * resetAccumulatedStats throw ("CUDAPluggableAllocator does not yet support getDeviceStats"), so
 * a program that logged torch.cuda.memory_allocated() or max_memory_reserved(), or that
 * torch.compile tuned kernels for, died under gpusim run. gpusim keeps every statistic PyTorch's
 * allocator keeps, exactly (docs/metrics.md), and gpusim run's hook hands the program those of
 * its PyTorch client (torch/run/gpusim_stats.py).
 *
 * The program may reset them (torch.cuda.reset_peak_memory_stats,
 * reset_accumulated_memory_stats). That must not touch the run's own statistics: they are the
 * run's figures (what --stats writes, what a replay of the trace gives), and stitch's growth
 * reads the peaks. So this keeps, per device, the program's view apart: after a reset of the
 * peaks, each peak since then (followed after every request the client makes, only once a
 * reset was made); after a reset of the accumulated counts, their values then, taken off.
 *
 * Not thread-safe: the library calls it under its lock.
 */
#ifndef GS_TORCH_MEMSTATS_H
#define GS_TORCH_MEMSTATS_H

#include "core.h"
#include "tenants.h"

typedef struct gs_memstats gs_memstats;

gs_memstats *gs_memstats_new(void);
void gs_memstats_free(gs_memstats *m);

/* What the program sees of device d: the run's statistics run (the client's) into out, with
 * the peaks since its last reset_peak_memory_stats and the accumulated counts since its last
 * reset_accumulated_memory_stats. */
void gs_memstats_view(const gs_memstats *m, int d, const gs_stats *run, gs_stats *out);
/* torch.cuda.reset_peak_memory_stats(d): from now every peak the program sees starts at its
 * current (now: the client's statistics as they are). */
void gs_memstats_reset_peaks(gs_memstats *m, int d, const gs_stats *now);
/* torch.cuda.reset_accumulated_memory_stats(d): every allocated and freed count, retries,
 * OOMs, synchronisations and device calls start again at 0 (full: the client's statistics as
 * they are, gs_heap_stats's). */
void gs_memstats_reset_accumulated(gs_memstats *m, int d, const gs_stats *full);
/* Whether device d's peaks must follow the currents (a reset of them was made). */
bool gs_memstats_following(const gs_memstats *m, int d);
/* After a request of the client on device d: the peaks since the reset take the currents, and
 * a new peak of the run's reached inside the request (now: at least the currents and peaks up
 * to date, gs_heap_stats_now's). A peak inside a request that passes neither the run's peak
 * nor the current after it is not seen. */
void gs_memstats_after(gs_memstats *m, int d, const gs_stats *now);

#endif
