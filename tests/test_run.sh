#!/bin/sh
# test_run.sh GPUSIM SRCDIR - gpusim run without a GPU: the real libgpusim_torch.so on its
# simulated device (--backend sim), under stand-ins for torch and cupy (in a scratch folder: the
# few calls the run hook makes, and allocations through the allocator it installs). Checked: the
# program is unmodified and its imports decide what is wired (torch, cupy, both); the library's
# trace and statistics hold both libraries' requests; torch.cuda.empty_cache reaches gpusim's;
# the program's exit status and output come back; a bad setting or no program are usage errors.
# The real check, on a GPU with real PyTorch and CuPy, is lab/device_predict.sh's gpusim run.
set -u
gpusim=$1
case $gpusim in /*) ;; *) gpusim=$PWD/$gpusim ;; esac
src=$2
. "$src/tests/clitest.sh"
[ -f "$(dirname "$gpusim")/libgpusim_torch.so" ] || { echo "no libgpusim_torch.so beside gpusim: skipped"; exit 77; }
# A library built with AddressSanitizer loads only into a process whose first library is the
# sanitizer's runtime: python3 is given it first (and no leak report: the interpreter's own
# allocations at exit are not the library's).
asan=$(ldd "$(dirname "$gpusim")/libgpusim_torch.so" 2>/dev/null | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
    export LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

mkdir -p "$tmp/py/torch" "$tmp/py/cupy"
cat >"$tmp/py/torch/__init__.py" <<'PY'
"""A stand-in for PyTorch's pluggable-allocator calls, allocating through whatever is current."""
import ctypes, types
_current = None
class _Inner:
    def __init__(self, so):
        self.so, self.reset = so, None
    def set_reset_fn(self, addr):
        self.reset = ctypes.CFUNCTYPE(None)(addr)
class CUDAPluggableAllocator:
    def __init__(self, path, malloc, free):
        so = ctypes.CDLL(path)
        self.malloc, self.free = getattr(so, malloc), getattr(so, free)
        self.malloc.restype = ctypes.c_void_p
        self.malloc.argtypes = (ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
        self.free.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
        self._inner = _Inner(so)
    def allocator(self):
        return self._inner
def change_current_allocator(a):
    global _current
    _current = a
def _alloc(n):
    return _current.malloc(n, 0, None)
def _free(p, n):
    _current.free(p, n, 0, None)
def _empty_cache():
    _current._inner.reset()
# PyTorch 2.11's MemPool over a pluggable allocator, and use_mem_pool as it reaches the
# allocator: the pool hooks' begin (a filter of the thread's requests: here every one), end and
# release, which the C++ shim turns into the library's calls
class MemPool:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("pluggable does not yet support createOrIncrefPool. If you need it, ...")
_uid = [0]
def graph_pool_handle():
    _uid[0] += 1
    return (0, _uid[0])
_FILTER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_every = _FILTER(lambda ctx, stream: 1)
class use_mem_pool:
    def __init__(self, pool):
        self.pool, self.so = pool, _current._inner.so
    def __enter__(self):
        self.so.gpusim_pool_begin.argtypes = (ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                                              _FILTER, ctypes.c_void_p)
        self.so.gpusim_pool_begin(0, *self.pool.id, _every, None)
    def __exit__(self, *exc):
        for f in (self.so.gpusim_pool_end, self.so.gpusim_pool_release):
            f.argtypes = (ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64)
            f(0, *self.pool.id)
# PyTorch's statistics over a pluggable allocator: torch._C's raise; torch.cuda's Python calls
# them at each call and flattens the nested dict, as PyTorch's memory.py does
def _no_stats(*args):
    raise RuntimeError("CUDAPluggableAllocator does not yet support getDeviceStats.")
_C = types.SimpleNamespace(_cuda_memoryStats=_no_stats, _cuda_resetPeakMemoryStats=_no_stats,
                           _cuda_resetAccumulatedMemoryStats=_no_stats,
                           _accelerator_getDeviceStats=_no_stats)
def memory_stats(device=0):
    flat = {}
    def walk(prefix, obj):
        for k, v in obj.items():
            if isinstance(v, dict):
                walk(prefix + k + ".", v)
            else:
                flat[prefix + k] = v
    walk("", _C._cuda_memoryStats(device))
    return dict(sorted(flat.items()))
def reset_peak_memory_stats(device=0):
    _C._cuda_resetPeakMemoryStats(device)
def reset_accumulated_memory_stats(device=0):
    _C._cuda_resetAccumulatedMemoryStats(device)
cuda = types.SimpleNamespace(memory=types.SimpleNamespace(
    CUDAPluggableAllocator=CUDAPluggableAllocator, change_current_allocator=change_current_allocator,
    MemPool=MemPool),
    memory_stats=memory_stats, reset_peak_memory_stats=reset_peak_memory_stats,
    reset_accumulated_memory_stats=reset_accumulated_memory_stats,
    alloc=_alloc, free=_free, empty_cache=_empty_cache, installed=lambda: _current is not None,
    MemPool=MemPool, graph_pool_handle=graph_pool_handle, current_device=lambda: 0,
    use_mem_pool=use_mem_pool)
PY
cat >"$tmp/py/cupy/__init__.py" <<'PY'
"""A stand-in for CuPy's allocator interface (set_allocator, MemoryPointer, UnownedMemory)."""
import types
class OutOfMemoryError(Exception):
    pass
class UnownedMemory:
    def __init__(self, ptr, size, owner, device_id=0):
        self.ptr, self.size, self.owner = ptr, size, owner
class MemoryPointer:
    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset
_allocator = [None]
def set_allocator(f):
    _allocator[0] = f
def empty(n):
    return _allocator[0](n)
cuda = types.SimpleNamespace(
    memory=types.SimpleNamespace(UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer,
                                 OutOfMemoryError=OutOfMemoryError),
    runtime=types.SimpleNamespace(getDevice=lambda: 0),
    get_current_stream=lambda: types.SimpleNamespace(ptr=0),
    set_allocator=set_allocator, installed=lambda: _allocator[0] is not None)
PY
cat >"$tmp/prog.py" <<'PY'
import sys
import torch                      # unmodified: the hook wires gpusim when this import is done
assert torch.cuda.installed(), "torch's allocator is gpusim's"
M = 1 << 20
a = torch.cuda.alloc(300 * M)
b = torch.cuda.alloc(100 * M)
torch.cuda.free(a, 300 * M)
torch.cuda.empty_cache()          # gpusim's: the 300 MiB segment goes back
import cupy                       # and CuPy's, when it is imported
assert cupy.cuda.installed(), "cupy's allocator is gpusim's"
x = cupy.empty(50 * M)
del x                             # CuPy lets go: gpusim frees it
y = cupy.empty(20 * M)
print("program done")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
PY
export PYTHONPATH="$tmp/py"

"$gpusim" run --backend sim -p pytorch --trace "$tmp/run.gstrace" --stats "$tmp/stats.json" -- \
    python3 "$tmp/prog.py" >"$tmp/out" 2>"$tmp/err" || fail "run: exit $?: $(cat "$tmp/err")"
grep -q "program done" "$tmp/out" || fail "run: the program's output: $(cat "$tmp/out")"
awk -F, '$3 == "alloc" { print $8 }' "$tmp/run.gstrace" | tr '\n' ' ' >"$tmp/sizes"
[ "$(cat "$tmp/sizes")" = "314572800 104857600 52428800 20971520 " ] ||
    fail "run: the trace holds both libraries' requests in order: $(cat "$tmp/sizes")"
grep -q ",empty_cache," "$tmp/run.gstrace" || fail "run: torch.cuda.empty_cache reached gpusim's"
# torch's free, then CuPy's as soon as it let go, before its next request
awk -F, '$3 == "alloc" || $3 == "free" { printf "%s:%s ", $3, $8 }' "$tmp/run.gstrace" >"$tmp/ops"
case $(cat "$tmp/ops") in
"alloc:314572800 alloc:104857600 free:314572800 alloc:52428800 free:52428800 alloc:20971520 "*) ;;
*) fail "run: the frees (torch's and cupy's): $(cat "$tmp/ops")" ;;
esac
python3 - "$tmp/stats.json" <<'PY' || fail "run --stats"
import json, sys
r = json.load(open(sys.argv[1]))[0]["results"][0]
assert r["peak_allocated_bytes"] == 400 * 2**20, r
PY
# the same requests replay to the same peak
"$gpusim" replay "$tmp/run.gstrace" -p pytorch --format json -o "$tmp/replay.json" 2>/dev/null || fail "replay of the run's trace"
python3 - "$tmp/stats.json" "$tmp/replay.json" <<'PY' || fail "run: the replay of its trace agrees with its statistics"
import json, sys
a = json.load(open(sys.argv[1]))[0]["results"][0]
b = json.load(open(sys.argv[2]))[0]["results"][0]
for k in ("peak_allocated_bytes", "peak_reserved_bytes", "num_device_alloc"):
    assert a[k] == b[k], (k, a[k], b[k])
PY
# two libraries, two clients: each arrangement's statistics are those of the replay of its trace
for mode in separate shared cooperative; do
    "$gpusim" run --backend sim --device-total 512MiB --clients $mode -p pytorch -p cupy=cupy \
        --trace "$tmp/two.gstrace" --stats "$tmp/two.json" -- python3 "$tmp/prog.py" \
        >/dev/null 2>"$tmp/err" || fail "run --clients $mode: $(cat "$tmp/err")"
    "$gpusim" replay "$tmp/two.gstrace" --clients $mode -p pytorch -p cupy=cupy \
        --device-total 512MiB --format json -o "$tmp/two-replay.json" 2>"$tmp/err" ||
        fail "replay --clients $mode: $(cat "$tmp/err")"
    python3 - "$tmp/two.json" "$tmp/two-replay.json" $mode <<'PY' || fail "run --clients $mode: the replay disagrees"
import json, sys
a = json.load(open(sys.argv[1]))[0]["results"][0]
b = json.load(open(sys.argv[2]))[0]["results"][0]
assert a["arrangement"] == b["arrangement"] == sys.argv[3], (a.get("arrangement"), b.get("arrangement"))
assert sorted(a["clients"]) == ["cupy", "torch"], a["clients"]
want_cupy = "pytorch" if sys.argv[3] == "shared" else "cupy"
assert a["clients"]["cupy"]["policy"] == want_cupy, a["clients"]["cupy"]
for k in ("peak_allocated_bytes", "peak_reserved_bytes", "num_device_alloc", "num_device_free"):
    assert a[k] == b[k], (k, a[k], b[k])
    for c in ("torch", "cupy"):
        assert a["clients"][c][k] == b["clients"][c][k], (c, k, a["clients"][c][k], b["clients"][c][k])
assert a["clients"]["torch"]["peak_allocated_bytes"] == 400 * 2**20
assert a["clients"]["cupy"]["peak_allocated_bytes"] == 50 * 2**20
PY
done
# a setting's own limit (per_process_memory_fraction of the simulated 1 GiB) is the run's: said
# in the OOM's words and in the statistics, as the replay of the run's trace says it
"$gpusim" run --backend sim --device-total 1GiB -p pytorch:per_process_memory_fraction:0.25 \
    --stats "$tmp/frac.json" --trace "$tmp/frac.gstrace" -- \
    python3 -c "import torch; torch.cuda.alloc(300 << 20)" >/dev/null 2>"$tmp/err"
grep -q "capacity 0.25 GiB" "$tmp/err" || fail "run with a fraction: the OOM's words: $(cat "$tmp/err")"
"$gpusim" replay -q "$tmp/frac.gstrace" -p pytorch:per_process_memory_fraction:0.25 \
    --device-total 1GiB -f json -o "$tmp/frac-replay.json" || fail "replay of the fraction's run"
python3 - "$tmp/frac.json" "$tmp/frac-replay.json" <<'PY' || fail "run with a fraction: its capacity"
import json, sys
a = json.load(open(sys.argv[1]))[0]["results"][0]
b = json.load(open(sys.argv[2]))[0]["results"][0]
assert a["capacity_bytes"] == b["capacity_bytes"] == 256 << 20, (a["capacity_bytes"], b["capacity_bytes"])
PY
expect_error "run -p with a key of a newer release" "name the release: pytorch@2.12" \
    "$gpusim" run --backend sim -p pytorch:throw_on_cudamalloc_oom:True -- python3 -c "print('ran')"
# CuPy's OOM says what its allocator held and its limit, as CuPy's own pool's does
cat >"$tmp/cupy_oom.py" <<'PY'
import cupy
M = 1 << 20
x = cupy.empty(600 * M)
try:
    cupy.empty(600 * M)
except cupy.cuda.memory.OutOfMemoryError as e:
    size, held, limit = e.args
    assert size == 600 * M and held >= 600 * M and limit == 1 << 30, e.args
    print("oom said", held)
PY
"$gpusim" run --backend sim --capacity 1GiB -p cupy=cupy -- python3 "$tmp/cupy_oom.py" \
    >"$tmp/out" 2>"$tmp/err" && grep -q "^oom said " "$tmp/out" ||
    fail "run: cupy's OOM: $(cat "$tmp/out" "$tmp/err")"
# two clients, CuPy's OOM caught and the program goes on: each client's outcome is the
# replay's (ok), not "oom" for the OOM it met
cat >"$tmp/two_caught.py" <<'PY'
import torch
M = 1 << 20
a = torch.cuda.alloc(100 * M)
import cupy
x = cupy.empty(600 * M)
try:
    cupy.empty(600 * M)
except cupy.cuda.memory.OutOfMemoryError:
    pass
y = cupy.empty(10 * M)
PY
"$gpusim" run --backend sim --capacity 1GiB --clients separate -p pytorch -p cupy=cupy \
    --stats "$tmp/tc.json" --trace "$tmp/tc.gstrace" -- python3 "$tmp/two_caught.py" \
    >/dev/null 2>"$tmp/err" || fail "run: two clients, an OOM caught: $(cat "$tmp/err")"
"$gpusim" replay -q "$tmp/tc.gstrace" --clients separate -p pytorch -p cupy=cupy \
    --capacity 1GiB -f json -o "$tmp/tc-replay.json" || fail "replay of the caught OOM's run"
python3 - "$tmp/tc.json" "$tmp/tc-replay.json" <<'PY' || fail "run: a caught OOM's client outcomes"
import json, sys
a = json.load(open(sys.argv[1]))[0]["results"][0]
b = json.load(open(sys.argv[2]))[0]["results"][0]
got = {k: c["outcome"] for k, c in a["clients"].items()}
assert got == {k: c["outcome"] for k, c in b["clients"].items()} == {"torch": "ok", "cupy": "ok"}, got
assert a["clients"]["cupy"]["num_ooms"] == b["clients"]["cupy"]["num_ooms"] == 1
PY
# a program that dies of an OOM it did not catch: the frees of its unwinding come after the OOM
# (which alone would read as caught); the hook's sys.excepthook says it was the death, so the
# statistics' outcome is that OOM and the trace ends there, as a replay of it says
cat >"$tmp/dies.py" <<'PY'
import cupy
M = 1 << 20
x = cupy.empty(600 * M)
def step():
    t = cupy.empty(100 * M)  # freed as the exception unwinds
    cupy.empty(600 * M)
step()
PY
"$gpusim" run --backend sim --capacity 1GiB -p cupy=cupy --stats "$tmp/dies.json" \
    --trace "$tmp/dies.gstrace" -- python3 "$tmp/dies.py" >/dev/null 2>"$tmp/err" &&
    fail "run: a program dead of an OOM exited 0"
grep -q "^fatal_oom_event: 2\$\|^# fatal_oom_event: 2\$" "$tmp/dies.gstrace" ||
    fail "run: the trace of a death ends at its OOM: $(head -5 "$tmp/dies.gstrace")"
"$gpusim" replay -q "$tmp/dies.gstrace" -p cupy=cupy --capacity 1GiB -f json -o "$tmp/dies-replay.json" ||
    fail "replay of the death's trace"
python3 - "$tmp/dies.json" "$tmp/dies-replay.json" <<'PY' || fail "run: a death's outcome"
import json, sys
a = json.load(open(sys.argv[1]))[0]["results"][0]
b = json.load(open(sys.argv[2]))[0]["results"][0]
assert a["outcome"] == b["outcome"] == "oom", (a["outcome"], b["outcome"])
assert a["first_oom"]["event"] == b["first_oom"]["event"] == 2, (a["first_oom"], b["first_oom"])
assert a["first_oom"]["size"] == 600 << 20, a["first_oom"]
PY
expect_error "run --clients junk" "not one of separate" "$gpusim" run --clients junk -- python3 -c pass
expect_error "run -p twice" "a setting was given already" "$gpusim" run -p pytorch -p cupy -- python3 -c pass
expect_error "run -p Bad=cupy" "a client name is" "$gpusim" run -p Bad=cupy -- python3 -c pass
# torch.cuda.MemPool, which PyTorch 2.11 refuses to make over a pluggable allocator: the hook's
# stand-in makes the pool in the library; use_mem_pool routes to it; the pool keeps its freed
# block from ordinary requests; deleting it empties its cache at once (one segment back), as
# the real MemPool's destructor; the trace says so and replays to the run's figures
cat >"$tmp/mempool.py" <<'PY'
import torch
M = 1 << 20
pool = torch.cuda.MemPool()
assert type(pool).__name__ == "MemPool" and pool.id == (0, 1), pool.id
assert pool.use_count() == 1, pool.use_count()
with torch.cuda.use_mem_pool(pool):
    assert pool.use_count() == 2, pool.use_count()
    a = torch.cuda.alloc(30 * M)
assert pool.use_count() == 1, pool.use_count()
b = torch.cuda.alloc(30 * M)
torch.cuda.free(a, 30 * M)
c = torch.cuda.alloc(30 * M)
assert c != a, "an ordinary request got the pool's block"
import copy, pickle
for how in (copy.copy, copy.deepcopy, pickle.dumps):  # one owner, as PyTorch's own
    try:
        how(pool)
        raise AssertionError(f"{how.__name__} of a MemPool")
    except TypeError:
        pass
del pool
# a 16th MemPool finds no slot while 15 deleted ones still hold memory: its use is owed, and
# made when it is used once a slot is free; in use, its requests go to its pool
M = 1 << 20
pools, held = [torch.cuda.MemPool() for _ in range(15)], []
for p in pools:
    with torch.cuda.use_mem_pool(p):
        held.append(torch.cuda.alloc(2 * M))
del p, pools
late = torch.cuda.MemPool()
assert late.use_count() == 1, late.use_count()
torch.cuda.free(held.pop(), 2 * M)
torch.cuda.empty_cache()          # the last deleted pool's segment goes, and its slot
with torch.cuda.use_mem_pool(late):
    assert late.use_count() == 2, late.use_count()
with torch.cuda.use_mem_pool(late):
    assert late.use_count() == 2, late.use_count()
assert late.use_count() == 1, late.use_count()
del late
for q in held:
    torch.cuda.free(q, 2 * M)
print("mempool done")
PY
"$gpusim" run --backend sim -p pytorch --trace "$tmp/mp.gstrace" --stats "$tmp/mp.json" -- \
    python3 "$tmp/mempool.py" >"$tmp/out" 2>"$tmp/err" && grep -q "mempool done" "$tmp/out" ||
    fail "run: a MemPool: $(cat "$tmp/out" "$tmp/err")"
grep -q ",pool_release,torch,0,[0-9]*,1,1\$" "$tmp/mp.gstrace" ||
    fail "run: a MemPool's deletion is a release that empties it: $(grep pool_ "$tmp/mp.gstrace")"
"$gpusim" replay -q "$tmp/mp.gstrace" -p pytorch -f json -o "$tmp/mp-replay.json" ||
    fail "replay of the MemPool's run"
python3 - "$tmp/mp.json" "$tmp/mp-replay.json" <<'PY' || fail "run: a MemPool's figures"
import json, sys
a = json.load(open(sys.argv[1]))[0]["results"][0]
b = json.load(open(sys.argv[2]))[0]["results"][0]
assert (a["num_device_alloc"], a["num_device_free"]) == (3 + 15, 1 + 1), a
for k in ("peak_reserved_bytes", "num_device_alloc", "num_device_free", "outcome"):
    assert a[k] == b[k], (k, a[k], b[k])
PY
# torch.cuda.memory_stats() and its resets, which raise for a pluggable allocator: the library's
# statistics, PyTorch's keys; a reset changes what the program sees, not the run's figures
cat >"$tmp/stats.py" <<'PY'
import torch
M = 1 << 20
s = torch.cuda.memory_stats(0)
assert s["allocated_bytes.all.current"] == 0 and s["num_alloc_retries"] == 0, s
assert torch.cuda.memory_stats(3)["reserved_bytes.all.peak"] == 0  # not used: zeros, not opened
torch.cuda.reset_peak_memory_stats(3)
try:
    torch.cuda.memory_stats(999)
    raise AssertionError("a device out of range has statistics")
except RuntimeError:
    pass
a = torch.cuda.alloc(300 * M)
b = torch.cuda.alloc(100 * M)
s = torch.cuda.memory_stats(0)
assert s["allocated_bytes.all.current"] == 400 * M, s["allocated_bytes.all.current"]
assert s["reserved_bytes.all.peak"] >= 400 * M and s["allocation.large_pool.allocated"] == 2, s
assert s["num_device_alloc"] == 2 and "max_split_size" in s and len(s) >= 110, len(s)
torch.cuda.free(a, 300 * M)
torch.cuda.reset_peak_memory_stats(0)
s = torch.cuda.memory_stats(0)
assert s["allocated_bytes.all.peak"] == 100 * M, s["allocated_bytes.all.peak"]
c = torch.cuda.alloc(50 * M)      # from the cached 300 MiB segment, split
torch.cuda.free(c, 50 * M)
s = torch.cuda.memory_stats(0)
assert s["allocated_bytes.all.peak"] == 150 * M, s["allocated_bytes.all.peak"]
torch.cuda.reset_accumulated_memory_stats(0)
s = torch.cuda.memory_stats(0)
assert s["allocation.all.allocated"] == 0 and s["num_device_alloc"] == 0, s
d = torch.cuda.alloc(10 * M)
s = torch.cuda.memory_stats(0)
assert s["allocation.all.allocated"] == 1 and s["allocated_bytes.all.current"] == 110 * M, s
assert torch._C._accelerator_getDeviceStats(0) == torch._C._cuda_memoryStats(0)  # torch.accelerator's
print("stats done")
PY
for mode in separate shared; do  # (shared: the one allocator's figures)
    "$gpusim" run --backend sim --clients $mode -p pytorch --stats "$tmp/st.json" \
        --trace "$tmp/st.gstrace" -- python3 "$tmp/stats.py" >"$tmp/out" 2>"$tmp/err" &&
        grep -q "stats done" "$tmp/out" ||
        fail "run --clients $mode: torch.cuda.memory_stats: $(cat "$tmp/out" "$tmp/err")"
done
"$gpusim" replay -q "$tmp/st.gstrace" -p pytorch -f json -o "$tmp/st-replay.json" ||
    fail "replay of the statistics' run"
python3 - "$tmp/st.json" "$tmp/st-replay.json" <<'PY' || fail "run: a reset touched the run's figures"
import json, sys
a = json.load(open(sys.argv[1]))[0]["results"][0]
b = json.load(open(sys.argv[2]))[0]["results"][0]
assert a["peak_allocated_bytes"] == b["peak_allocated_bytes"] == 400 << 20, a["peak_allocated_bytes"]
assert a["memory_stats"] == b["memory_stats"], "the run's memory_stats differ from the replay's"
assert len(json.load(open(sys.argv[1]))[0]["results"]) == 1, "a device only asked about was opened"
PY
expect_error "run --device-total on the GPU" "simulated device" "$gpusim" run --device-total 1GiB -- python3 -c pass
# the program's exit status is gpusim's
"$gpusim" run --backend sim -- python3 "$tmp/prog.py" 7 >/dev/null 2>&1
rc=$?
[ "$rc" -eq 7 ] || fail "run: exit status $rc, want the program's 7"
# a program that imports neither runs untouched
"$gpusim" run --backend sim -- python3 -c "import sys; assert 'torch' not in sys.modules" ||
    fail "run: the hook imported torch itself"
# --trace and --stats: a place that cannot be written fails before the program runs; a file
# the library did not write at the exit (no request was made) is said, and a program that
# exited 0 then exits 1 (another status stays the program's)
expect_error "run --trace into no directory" "--trace $tmp/no/x.gstrace: cannot write" \
    "$gpusim" run --backend sim --trace "$tmp/no/x.gstrace" -- python3 -c "print('ran')"
expect_error "run --stats into no directory" "--stats $tmp/no/s.json: cannot write" \
    "$gpusim" run --backend sim --stats "$tmp/no/s.json" -- python3 -c "print('ran')"
for code in 0 5; do
    "$gpusim" run --backend sim --trace "$tmp/run.gstrace" --stats "$tmp/none.json" -- \
        python3 -c "import sys; sys.exit($code)" >/dev/null 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq "$([ $code = 0 ] && echo 1 || echo $code)" ] &&
        grep -q "^gpusim: run: --trace $tmp/run.gstrace was not written" "$tmp/err" &&
        grep -q "^gpusim: run: --stats $tmp/none.json was not written" "$tmp/err" ||
        fail "run with no request, exit $code: exit $rc: $(cat "$tmp/err")"
done
expect_error "run with no program" "no -- CMD given" "$gpusim" run --backend sim
expect_error "run with a bad setting" "run: " "$gpusim" run -p pytorch:no_such_key:1 -- python3 -c pass
expect_error "run --backend junk" "expected cuda or sim" "$gpusim" run --backend junk -- python3 -c pass
expect_error "run of a program that is not there" "cannot run" "$gpusim" run --backend sim -- /no/such/program
[ "$fails" -eq 0 ] || exit 1
echo "test_run: ok"
