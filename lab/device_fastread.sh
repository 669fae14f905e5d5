#!/bin/sh
# device_fastread.sh OUT [GPUSIM] - on the device: fresh PyTorch recordings of the scenarios of
# lab/record_pytorch.py (all but the two-GPU one, the side-stream CNN with cuDNN catching OOMs
# and torch.compile's graphs included), each converted twice by traces/convert.py: reading the
# snapshot with GPUSIM's C reader (gpusim read-snapshot), and with the converter's own walker
# (GPUSIM_SNAPSHOT_READER=none). The trace, the reference, stderr and the exit status must be
# the same, and the C reader must take every recording. OUT/fastread.txt says so run by run,
# with each conversion's CPU seconds; OUT/record.log is the recorder's. The recordings and
# conversions stay in OUT/work/. Exit 1 when any differs or is declined.
set -u
out=$1
gpusim=$(cd "$(dirname "${2:-build/gpusim}")" && pwd)/$(basename "${2:-build/gpusim}")
here=$(cd "$(dirname "$0")/.." && pwd)
work=$out/work
mkdir -p "$work/snapshots" "$work/conv"
# CPU seconds of a command and its children (the converter and its C reader)
cpu() {
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.2f" % (r.ru_utime + r.ru_stime))' "$@"
}
bad=0
for s in sidestream oomdie oomcatch cut graph graphpool mempool llmgen sidecnn compiled; do
  # (each scenario compared as soon as it is recorded: a run cut short keeps what it did)
  python3 "$here/lab/record_pytorch.py" --scenario "$s" --out "$work/snapshots" \
      >> "$out/record.log" 2>&1 || echo "record_pytorch.py $s exited $?" >> "$out/record.log"
  for snap in "$work"/snapshots/"$s"__*.pickle.gz; do
    [ -e "$snap" ] || continue
    n=$(basename "$snap" .pickle.gz)
    c=$work/conv/$n
    t_c=$(GPUSIM_SNAPSHOT_READER=$gpusim cpu sh -c 'python3 "$1" -q "$2" -o "$3.c.gstrace" \
        --reference "$3.c.json" 2> "$3.c.err"; echo "exit $?" >> "$3.c.err"' sh \
        "$here/traces/convert.py" "$snap" "$c")
    t_w=$(GPUSIM_SNAPSHOT_READER=none cpu sh -c 'python3 "$1" -q "$2" -o "$3.w.gstrace" \
        --reference "$3.w.json" 2> "$3.w.err"; echo "exit $?" >> "$3.w.err"' sh \
        "$here/traces/convert.py" "$snap" "$c")
    same=yes
    for ext in gstrace json err; do
        cmp -s "$c.c.$ext" "$c.w.$ext" || same=no
    done
    taken=yes
    "$gpusim" read-snapshot "$snap" > /dev/null 2> "$c.declined" || taken=no
    [ "$same" = yes ] && [ "$taken" = yes ] || bad=1
    printf '%-45s same %-3s taken %-3s cpu s: C reader %s, walker %s\n' "$n" "$same" "$taken" \
        "$t_c" "$t_w" >> "$out/fastread.txt"
  done
done
cat "$out/fastread.txt"
exit $bad
