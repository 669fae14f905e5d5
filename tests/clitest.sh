# clitest.sh - what the end-to-end shell tests share (sourced by test_cli.sh and test_plots.sh):
# a scratch directory removed at exit, a failure counter, and the check every usage error must
# pass.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error DESCRIPTION WANT_SUBSTRING CMD...: exit 2, exactly one stderr line containing
# WANT, nothing on stdout
expect_error() {
    what=$1; want=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] || fail "$what: exit $rc, want 2"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$what: stderr has $(wc -l <"$tmp/err") lines: $(cat "$tmp/err")"
    grep -q -- "$want" "$tmp/err" || fail "$what: stderr lacks '$want': $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "$what: wrote to stdout"
}

# mask_host_time CSV: the CSV with its host-time column (replay_events_per_s, the one value that
# varies from run to run) replaced by X, so two runs' CSVs compare byte for byte. The column is
# found by name in the header (which has no quoted field); rows split on commas alike, so a grid
# whose values hold commas would shift both files' fields the same way.
mask_host_time() {
    awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "replay_events_per_s") c = i
                                print; next }
                      c { $c = "X" } { print }' "$1"
}
