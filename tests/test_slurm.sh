#!/bin/sh
# test_slurm.sh GPUSIM SRCDIR - docs/cluster.md's Slurm recipe against a real single-node Slurm: a
# minimal slurm.conf in a scratch directory (its own ports, no munge: auth/none), slurmctld and
# slurmd started here in the foreground as the current user, a job array of 3 shards of a
# sweep submitted with sbatch --wait, merged, compared byte for byte with the single-machine
# CSV (but the host-time column). Skips (77) where Slurm cannot start: not installed (Debian's
# slurmctld, slurmd and slurm-client), daemons that do not come up within 30 s (not root, a
# host name that does not resolve, ...). Only the daemons this test started are stopped, by
# their process ids.
set -u
gpusim=$1
src=$2
. "$src/tests/clitest.sh"
skip() { echo "slurm: $*: skipped"; exit 77; }
for p in slurmctld slurmd sbatch sinfo; do
    command -v $p >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
    command -v $p >/dev/null 2>&1 || skip "$p is not installed"
done
case $gpusim in /*) ;; *) gpusim=$(pwd)/$gpusim ;; esac
case $src in /*) ;; *) src=$(pwd)/$src ;; esac

pids=""
stop() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 1' INT TERM

# two free TCP ports, asked of the kernel (a fixed port could be taken by another run)
ports=$(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))') || skip "no free port"
set -- $ports
host=$(hostname -s 2>/dev/null) || skip "no host name"
me=$(id -un)
mkdir -p "$tmp/state" "$tmp/spool"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=gpusimtest
SlurmctldHost=$host
SlurmUser=$me
SlurmdUser=$me
SlurmctldPort=$1
SlurmdPort=$2
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=gpusimtest Nodes=$host Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF="$tmp/slurm.conf"
# a job array of this test must not inherit a Slurm job's own settings, if it runs inside one
unset SLURM_JOB_ID SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SBATCH_PARTITION
slurmctld -D -c -f "$tmp/slurm.conf" >"$tmp/ctld.out" 2>&1 &
pids="$pids $!"
slurmd -D -f "$tmp/slurm.conf" >"$tmp/d.out" 2>&1 &
pids="$pids $!"
up=""
for _ in $(seq 30); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && { up=1; break; }
    sleep 1
done
[ -n "$up" ] || skip "the daemons did not come up in 30 s ($(tail -n 1 "$tmp/slurmctld.log" "$tmp/ctld.out" "$tmp/d.out" 2>/dev/null | tr '\n' ' ' | cut -c1-300))"

trace=$src/traces/data/batch-alternate.gstrace.gz
grid="-p pytorch:max_split_size_mb:{64,128,256} --capacity {5.75,6.25}GiB"
# shellcheck disable=SC2086
"$gpusim" sweep "$trace" $grid -j 1 -q -o "$tmp/whole.csv" || fail "the single-machine sweep: exit"
# the recipe, as docs/cluster.md writes it
cd "$tmp" || exit 1
timeout 120 sbatch --wait --array=0-2 -o "$tmp/job-%a.out" --wrap "'$gpusim' sweep '$trace' \
    -p 'pytorch:max_split_size_mb:{64,128,256}' --capacity '{5.75,6.25}GiB' -j 1 -q \
    --shard auto -o shard-\$SLURM_ARRAY_TASK_ID.csv" \
    >"$tmp/sbatch.out" 2>&1 || fail "sbatch: exit $?: $(cat "$tmp/sbatch.out" "$tmp"/job-*.out 2>/dev/null)"
# shellcheck disable=SC2086
"$gpusim" sweep --merge shard-*.csv $grid -o merged.csv || fail "merge: exit $?"
mask_host_time "$tmp/whole.csv" >"$tmp/whole.m"
mask_host_time "$tmp/merged.csv" >"$tmp/merged.m"
cmp -s "$tmp/whole.m" "$tmp/merged.m" ||
    fail "merged CSV differs from the single-machine one: $(diff "$tmp/whole.m" "$tmp/merged.m" | head -5)"
[ "$(ls "$tmp"/shard-*.csv | wc -l)" -eq 3 ] || fail "want 3 shards: $(ls "$tmp")"

[ "$fails" -eq 0 ] && echo "Slurm job array recipe: merged CSV identical"
[ "$fails" -eq 0 ]
