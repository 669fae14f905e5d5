#!/bin/sh
# Write a man page from a program's own --help, so the page never drifts from the program.
#
#   mkman.sh gpusim         OUT.1 VERSION DATADIR LIBDIR DOCDIR GPUSIM_EXECUTABLE
#   mkman.sh gpusim-convert OUT.1 VERSION DATADIR LIBDIR DOCDIR PYTHON traces/convert.py
#   mkman.sh gpusim-synth   OUT.1 VERSION DATADIR LIBDIR DOCDIR PYTHON traces/synth.py
#
# meson runs it at build time (docs/meson.build). For gpusim it runs 'gpusim help' and
# 'gpusim COMMAND --help' for every command that help lists; for the two scripts, their argparse
# --help (and, for gpusim-synth, each scenario's). mkman.awk, beside this file, turns the help
# texts into troff by shape: a paragraph flush left is filled text; an option list ("  -p,
# --policy=SPEC   what it does", or argparse's term line with its description indented below)
# becomes a .TP list; anything else indented (examples, tables) is kept as it is (.nf).
# ENVIRONMENT, FILES and SEE ALSO are written there, from the installed paths (DATADIR, LIBDIR,
# DOCDIR: absolute, as configured).
#
# POSIX sh and awk. The output is the same for the same programs: no date, COLUMNS and the
# locale fixed for the programs' help, and awk reads bytes (LC_ALL=C).
set -eu

usage() {
    sed -n '2,6s/^# \{0,1\}//p' "$0" >&2
    exit 1
}
[ $# -ge 7 ] || usage
name=$1 out=$2
MKMAN_NAME=$1 MKMAN_VERSION=$3 MKMAN_DATADIR=$4 MKMAN_LIBDIR=$5 MKMAN_DOCDIR=$6
export MKMAN_NAME MKMAN_VERSION MKMAN_DATADIR MKMAN_LIBDIR MKMAN_DOCDIR
shift 6
case $name in
    gpusim) MKMAN_MODE=gpusim ;;
    *) [ $# -ge 2 ] || usage; MKMAN_MODE=script ;;
esac
case $0 in
    */*) awkprog=${0%/*}/mkman.awk ;;
    *) awkprog=./mkman.awk ;;
esac

# The help texts go into a folder beside OUT, removed on the way out.
MKMAN_DIR=$out.help
export MKMAN_DIR
rm -rf "$MKMAN_DIR"
mkdir "$MKMAN_DIR"
trap 'rm -rf "$MKMAN_DIR" "$out.tmp"' EXIT
trap 'exit 1' HUP INT TERM

# run_help FILE ARGV...: ARGV's standard output into FILE, with COLUMNS and the locale fixed.
run_help() {
    f=$1
    shift
    rc=0
    (
        unset LANGUAGE
        COLUMNS=100 LC_ALL=C.UTF-8
        export COLUMNS LC_ALL
        exec "$@"
    ) >"$f" 2>"$MKMAN_DIR/stderr" || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "mkman.sh: $* exited $rc: $(cat "$MKMAN_DIR/stderr")" >&2
        exit 1
    fi
}

# list MODE: what mkman.awk's MODE prints of MKMAN_DIR/main (commands, scenarios).
list() {
    MKMAN_MODE=$1 LC_ALL=C awk -f "$awkprog"
}

set -f  # the names that help lists are words, never patterns
if [ "$name" = gpusim ]; then
    exe=$1
    run_help "$MKMAN_DIR/main" "$exe" help
    cmds=$(list commands)
    k=0
    for cmd in $cmds; do
        k=$((k + 1))
        run_help "$MKMAN_DIR/cmd.$k" "$exe" "$cmd" --help
    done
else
    python=$1 script=$2
    MKMAN_PROG=${script##*/}
    export MKMAN_PROG
    run_help "$MKMAN_DIR/main" "$python" "$script" --help
    if [ "$name" = gpusim-synth ]; then
        scenarios=$(list scenarios)
        k=0
        for scenario in $scenarios; do
            k=$((k + 1))
            run_help "$MKMAN_DIR/scen.$k" "$python" "$script" "$scenario" --help
        done
    fi
fi

export MKMAN_MODE
LC_ALL=C awk -f "$awkprog" >"$out.tmp"
mv "$out.tmp" "$out"
