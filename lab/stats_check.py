"""stats_check.py - torch.cuda.memory_stats() natively and under `gpusim run`, side by side.

Run on the GPU, natively and under gpusim run with the same setting, and diff the two outputs:

    python3 lab/stats_check.py > native.txt
    build/gpusim run -p pytorch -- python3 lab/stats_check.py > run.txt
    diff native.txt run.txt

A few tensors made and freed, then every key of torch.cuda.memory_stats() printed at three
points: after them, after torch.cuda.reset_peak_memory_stats() and more work, and after
reset_accumulated_memory_stats(); then max_memory_allocated(), memory_reserved() and a MemPool's
use_count(). Under gpusim run the figures are gpusim's emulation of the same allocator, so the
two files should be equal line for line (the program's own outputs too).
"""
import torch


def show(tag):
    for key, value in torch.cuda.memory_stats().items():
        print(f"{tag} {key} {value}")


def main():
    M = 1 << 20
    x = [torch.empty(n * M, dtype=torch.uint8, device="cuda") for n in (3, 30, 1, 300, 7)]
    small = [torch.empty(n * 1024, dtype=torch.uint8, device="cuda") for n in (1, 10, 100)]
    del x[1], small[0]
    show("a")
    torch.cuda.reset_peak_memory_stats()
    y = torch.empty(20 * M, dtype=torch.uint8, device="cuda")
    del y, x[0]
    show("b")
    torch.cuda.reset_accumulated_memory_stats()
    z = torch.empty(64 * M, dtype=torch.uint8, device="cuda")
    show("c")
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        w = torch.empty(5 * M, dtype=torch.uint8, device="cuda")
        print("use_count in", pool.use_count())
    print("use_count after", pool.use_count())
    del w, pool, z
    print("max_memory_allocated", torch.cuda.max_memory_allocated())
    print("memory_reserved", torch.cuda.memory_reserved())


if __name__ == "__main__":
    main()
