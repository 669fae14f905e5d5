/* faultsweep.h - fault injection over a replay: fail one device call of a trace's replay and
 * check that nothing broke. Shared by the Check test (tests/test_faults.c: a subset of the calls)
 * and the benchmark that fails every call (bench/bench_faults.c, bench/faults.sh).
 *
 * One run replays a trace under a policy on a simulated device wrapped in the fault injector
 * (backends/faulty.c), which fails the nth call of one kind (cudaMalloc, cudaFree, cuMemCreate,
 * ...) with a status (GS_ERR_DEVICE: a hard failure; GS_ERR_OOM: the driver out of memory). It
 * then checks the promises of README "Robustness":
 *   - the call was made (the runs before it are the clean run's, so the nth call exists);
 *   - the heap passes gs_heap_check after the event that met the failure, after every OOM, every
 *     1024th event and the last one;
 *   - the report: a hard failure during the replay stops it at that event, with the backend's
 *     message (the injector's "cuMemMap(0x...): device error (injected: call 7)"), in the
 *     result, the table and the JSON (which parses); an injected OOM is either handled by the
 *     policy (the run goes on, or ends in an OOM outcome) or reported the same way;
 *   - the device ledger: the simulated device's free memory after the allocator let go of
 *     everything equals its free memory before, unless the failed call was one of that
 *     teardown's, which is then counted (gs_result.teardown_failures, at least 1), never dropped.
 */
#ifndef GS_FAULTSWEEP_H
#define GS_FAULTSWEEP_H

#include <glib.h>

#include "backend.h"
#include "policies.h"
#include "replay.h"
#include "trace.h"

typedef struct {
    const char *name;         /* the trace's name, for messages */
    const gs_trace *t;
    const gs_policy *p;
    uint64_t capacity;        /* 0: no limit */
    gs_clients_mode clients;  /* a trace with several clients: their arrangement */
} gs_fault_target;

/* How many calls of each kind a clean run of x makes, its teardown's included. */
void gs_fault_count(const gs_fault_target *x, uint64_t calls[GS_CALL_COUNT]);

typedef struct {
    size_t runs;              /* replays with a failed call */
    size_t in_replay;         /* of which the call failed during an event */
    size_t in_teardown;       /* ... while the allocator gave everything back */
    size_t reported;          /* stopped with the failure reported at its event */
    size_t handled;           /* an injected OOM the policy handled (the run went on) */
    size_t oom_outcome;       /* ... and the run ended in an OOM outcome */
    size_t heap_checks;
    size_t broken;            /* runs where a promise did not hold */
    GString *why;             /* the first few broken promises, a line each */
} gs_fault_tally;

void gs_fault_tally_init(gs_fault_tally *y);
void gs_fault_tally_clear(gs_fault_tally *y);

/* Fail call nth (1-based) of kind k with st in a replay of x; check; count into y. TRUE when
 * every promise held. */
gboolean gs_fault_one(const gs_fault_target *x, gs_call_kind k, uint64_t nth, gs_status st,
                      gs_fault_tally *y);

/* The calls of kind k a sweep fails, of the n a clean run makes: every one when every is 1;
 * else the first `first`, then every `every`th, and the last (often a teardown's). Returns
 * how many were put in out (which holds n at most). */
size_t gs_fault_pick(uint64_t n, uint64_t first, uint64_t every, uint64_t *out);

/* The standard policies of the sweep (README "Robustness"). */
extern const char *const gs_fault_policies[];
extern const size_t gs_fault_n_policies;

#endif
