#!/bin/sh
# user_wait.sh [GPUSIM] - what a user waits for: gpusim replay of a converted trace and gpusim
# whatif of a snapshot (conversion included), on synthetic snapshots of 10^4 to 10^6 entries
# (bench/big_snapshot.py, no frames; about 0.7 events an entry). CPU seconds (user + system)
# and wall seconds of each, with the machine's processors for whatif's replays. README.md,
# "How far to trust it", and docs/speed.md quote it.
#
#   bench/user_wait.sh                 # build/gpusim; snapshots in $TMPDIR (regenerated)
set -eu
gpusim=${1:-build/gpusim}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-9s %-9s %-22s %-22s\n' entries events "replay cpu / wall (s)" "whatif cpu / wall (s)"
for n in 10000 100000 1000000; do
    python3 "$here/bench/big_snapshot.py" "$n" "$tmp/s.pickle.gz" --no-frames >/dev/null
    # the synthetic device holds what the snapshot's peak needs: say its size, as a user would
    python3 "$here/traces/convert.py" -q "$tmp/s.pickle.gz" -o "$tmp/s.gsbin" --device-total 1099511627776
    ev=$("$gpusim" replay -q "$tmp/s.gsbin" | sed -n 's/^trace .*: \([0-9]*\) events.*/\1/p')
    /usr/bin/time -f "%U %S %e" -o "$tmp/r" "$gpusim" replay -q "$tmp/s.gsbin" >/dev/null
    /usr/bin/time -f "%U %S %e" -o "$tmp/w" "$gpusim" whatif -q "$tmp/s.pickle.gz" --device-total 1TiB >/dev/null
    printf '%-9s %-9s %-22s %-22s\n' "$n" "$ev" \
        "$(awk '{ printf "%.2f / %.2f", $1 + $2, $3 }' "$tmp/r")" \
        "$(awk '{ printf "%.2f / %.2f", $1 + $2, $3 }' "$tmp/w")"
done
echo "($(nproc) processors; $(uname -m))"
