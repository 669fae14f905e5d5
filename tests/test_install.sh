#!/bin/sh
# test_install.sh MESON BUILDDIR SRCDIR PREFIX BINDIR LIBDIR DATADIR MANDIR MAN_PAGES - 'meson install'
# into a scratch DESTDIR, then what a user gets from it: gpusim runs; gpusim-convert and
# gpusim-synth run and write what the source tree's scripts write; the example traces are all
# there and replay; gpusim whatif, with GPUSIM_CONVERT unset, finds and runs the gpusim-convert
# installed beside it; the PyTorch library exports its two functions; the man pages render
# without a warning (MAN_PAGES is 1 when meson made them); every page of docs/ and picture of
# plots/gallery is there, and every relative link and image of the installed pages resolves.
# The converter also runs under Python 3.10 where one is found (python3.10, or pyenv's 3.10),
# and writes the same bytes. Exits 77 (skipped) when there is no meson to install with.
set -u
meson=$1 build=$2 src=$3 prefix=$4 bindir=$5 libdir=$6 datadir=$7 mandir=$8 man_pages=$9
. "$src/tests/clitest.sh"

if [ -z "$meson" ]; then
    echo "no meson program found: skipped"
    exit 77
fi
unset GPUSIM_CONVERT DESTDIR

# meson's directory options are relative to the prefix unless given absolute.
under_prefix() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }
root=$tmp/root
bin=$root$(under_prefix "$bindir")
lib=$root$(under_prefix "$libdir")
share=$root$(under_prefix "$datadir")
man=$root$(under_prefix "$mandir")

# --no-rebuild: meson test has built everything already, and other tests are running.
"$meson" install -C "$build" --no-rebuild --destdir "$root" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "meson install failed"; exit 1; }

# --- the files ---
for f in "$bin/gpusim" "$bin/gpusim-convert" "$bin/gpusim-synth"; do
    [ -f "$f" ] && [ -x "$f" ] || fail "not installed as an executable: ${f#"$root"}"
done
[ -f "$lib/libgpusim_torch.so" ] || fail "not installed: ${lib#"$root"}/libgpusim_torch.so"
# every page of docs/, as is, and no other
n=0
for f in "$src"/docs/*.md; do
    d=$(basename "$f")
    cmp -s "$f" "$share/doc/gpusim/docs/$d" || fail "doc not installed as is: share/doc/gpusim/docs/$d"
    n=$((n + 1))
done
m=$(ls "$share/doc/gpusim/docs/" | grep -c '\.md$')
[ "$m" -eq "$n" ] || fail "installed $m pages in share/doc/gpusim/docs, docs/ has $n"
# the README's links into docs/ resolve where it is installed
grep -o '](docs/[a-z-]*\.md' "$share/doc/gpusim/README.md" | sed 's/^](//' | sort -u |
    while read -r f; do [ -f "$share/doc/gpusim/$f" ] || echo "$f"; done >"$tmp/missing"
[ ! -s "$tmp/missing" ] || fail "the installed README links to pages not installed: $(cat "$tmp/missing")"

# the README and BENCHMARKS beside them, as in the source tree: the pages' links resolve
for d in README.md BENCHMARKS.md; do
    cmp -s "$src/$d" "$share/doc/gpusim/$d" || fail "not installed as is: share/doc/gpusim/$d"
done
grep -o '](\.\./[A-Z]*\.md' "$share/doc/gpusim/docs/"*.md | sed 's/.*](\.\.\///' | sort -u |
    while read -r f; do [ -f "$share/doc/gpusim/$f" ] || echo "$f"; done >"$tmp/missing"
[ ! -s "$tmp/missing" ] || fail "installed docs link to what is not installed: $(cat "$tmp/missing")"
# the gallery the pages show: every PNG of plots/gallery, as is, and no other
n=0
for f in "$src"/plots/gallery/*.png; do
    cmp -s "$f" "$share/doc/gpusim/plots/gallery/$(basename "$f")" ||
        fail "picture not installed as is: share/doc/gpusim/plots/gallery/$(basename "$f")"
    n=$((n + 1))
done
m=$(ls "$share/doc/gpusim/plots/gallery/" 2>/dev/null | grep -c '\.png$')
[ "$m" -eq "$n" ] || fail "installed $m pictures in share/doc/gpusim/plots/gallery, plots/gallery has $n"
# every relative link and image of every installed page (README, BENCHMARKS, docs/), anchors
# aside, names a file or folder that is installed there
for page in "$share/doc/gpusim/"*.md "$share/doc/gpusim/docs/"*.md; do
    dir=$(dirname "$page")
    grep -o '](\([^)]*\))' "$page" | sed -e 's/^](//' -e 's/)$//' -e 's/#.*//' |
        grep -v -e '^$' -e '^[a-z][a-z]*:' | sort -u |
        while IFS= read -r l; do [ -e "$dir/$l" ] || echo "${page#"$share/doc/gpusim/"} -> $l"; done
done >"$tmp/missing"
[ ! -s "$tmp/missing" ] || fail "installed pages link to what is not installed: $(cat "$tmp/missing")"
# gpusim verify's start-up hook, found by the installed gpusim: a program under it reports (the
# stand-in torch of tests/data/faketorch: no GPU here)
[ -s "$share/gpusim/verify/sitecustomize.py" ] || fail "not installed: share/gpusim/verify/sitecustomize.py"
(unset GPUSIM_VERIFY_HOOK; PYTHONPATH=$src/tests/data/faketorch "$bin/gpusim" verify -- python3 -c 'import torch') \
    >"$tmp/verify.txt" 2>&1 || fail "installed gpusim verify: $(cat "$tmp/verify.txt")"
grep -q "^pytorch  *ok " "$tmp/verify.txt" || fail "installed gpusim verify: no report: $(cat "$tmp/verify.txt")"
# The hooks' Python (verify, run, capture and the capture's package): every module of the
# source tree installed as is; a module left out of torch/meson.build breaks only the installed
# gpusim, which no other test runs.
(cd "$src/torch" && find verify run capture hookchain.py -name '*.py' ! -path '*/__pycache__/*') |
    while read -r f; do cmp -s "$src/torch/$f" "$share/gpusim/$f" || echo "$f"; done >"$tmp/missing"
[ ! -s "$tmp/missing" ] || fail "hook modules not installed as is: $(cat "$tmp/missing")"
# The example traces: exactly the source folder's, byte for byte.
n=0
for t in "$src"/traces/data/*.gstrace.gz; do
    name=$(basename "$t")
    cmp -s "$t" "$share/gpusim/traces/$name" || fail "example trace not installed as is: $name"
    n=$((n + 1))
done
m=$(ls "$share/gpusim/traces/" | grep -c '\.gstrace\.gz$')
[ "$m" -eq "$n" ] || fail "installed $m example traces, the source has $n"
[ -s "$share/gpusim/traces/README.md" ] || fail "the example traces' README is not installed"
# Nothing installed points back into the build directory.
if command -v readelf >/dev/null 2>&1; then
    for f in "$bin/gpusim" "$lib/libgpusim_torch.so"; do
        readelf -d "$f" | grep -E 'RPATH|RUNPATH' | grep -q "$build" &&
            fail "${f#"$root"} keeps a run path into the build directory"
    done
fi

# --- gpusim ---
"$bin/gpusim" version >"$tmp/v" 2>&1 || fail "installed gpusim version: $(cat "$tmp/v")"
grep -q "^gpusim [0-9]" "$tmp/v" || fail "installed gpusim version printed: $(cat "$tmp/v")"
for t in "$share"/gpusim/traces/*.gstrace.gz; do
    "$bin/gpusim" replay "$t" --format csv -q >"$tmp/r.csv" 2>"$tmp/err" ||
        fail "installed example trace does not replay: $(basename "$t"): $(cat "$tmp/err")"
    [ "$(wc -l <"$tmp/r.csv")" -ge 2 ] || fail "replay of $(basename "$t"): no result row"
done

# --- gpusim-convert: runs as a program, and converts as traces/convert.py does ---
"$bin/gpusim-convert" --help >"$tmp/h" 2>&1 || fail "gpusim-convert --help: $(cat "$tmp/h")"
grep -q "^usage:" "$tmp/h" || fail "gpusim-convert --help prints no usage"
snap=$src/traces/references/pytorch-2.11-h100/oomdie__default__1.5.pickle.gz
"$bin/gpusim-convert" "$snap" -o "$tmp/inst.gstrace.gz" --reference "$tmp/inst.ref.json" \
    2>"$tmp/err" || fail "gpusim-convert on the oomdie snapshot: $(cat "$tmp/err")"
python3 "$src/traces/convert.py" "$snap" -o "$tmp/src.gstrace.gz" --reference "$tmp/src.ref.json" \
    2>/dev/null || fail "traces/convert.py on the oomdie snapshot"
cmp -s "$tmp/inst.gstrace.gz" "$tmp/src.gstrace.gz" ||
    fail "gpusim-convert and traces/convert.py write different traces"
cmp -s "$tmp/inst.ref.json" "$tmp/src.ref.json" ||
    fail "gpusim-convert and traces/convert.py write different references"
"$bin/gpusim" replay "$tmp/inst.gstrace.gz" --reference "$tmp/inst.ref.json" -q >"$tmp/out" \
    2>"$tmp/err" || fail "the installed converter's trace does not replay: $(cat "$tmp/err")"
# The binary format: the installed converter finds its writer (DATADIR/gpusim/gsbin.py) and
# writes what gpusim convert writes (less the offline bound, which only gpusim computes).
"$bin/gpusim-convert" "$snap" -o "$tmp/inst.gsbin" 2>"$tmp/err" ||
    fail "gpusim-convert to a .gsbin: $(cat "$tmp/err")"
"$bin/gpusim" convert --no-bound "$tmp/inst.gstrace.gz" -o "$tmp/conv.gsbin" 2>"$tmp/err" ||
    fail "installed gpusim convert: $(cat "$tmp/err")"
cmp -s "$tmp/inst.gsbin" "$tmp/conv.gsbin" ||
    fail "gpusim-convert and gpusim convert write different binary traces"

# --- gpusim-synth: finds the converter as gpusim-convert, and writes the bundled trace ---
"$bin/gpusim-synth" batch-alternate -o "$tmp/alt.gstrace.gz" 2>"$tmp/err" ||
    fail "gpusim-synth batch-alternate: $(cat "$tmp/err")"
cmp -s "$tmp/alt.gstrace.gz" "$share/gpusim/traces/batch-alternate.gstrace.gz" ||
    fail "gpusim-synth batch-alternate differs from the bundled trace"
[ ! -e "$bin/__pycache__" ] || fail "gpusim-synth wrote a __pycache__ into bindir"

# --- gpusim whatif finds gpusim-convert beside it (GPUSIM_CONVERT is unset) ---
"$bin/gpusim" whatif "$snap" --format csv -q >"$tmp/w.csv" 2>"$tmp/err" ||
    fail "installed whatif on a snapshot: $(cat "$tmp/err")"
grep -Eq ",pytorch,1,161061273[56]," "$tmp/w.csv" ||
    fail "installed whatif: the recorded cap was not taken: $(cat "$tmp/w.csv")"
# ... and it is that one it ran, not the source tree's: a stand-in that notes it was run.
mv "$bin/gpusim-convert" "$bin/gpusim-convert.real"
cat >"$bin/gpusim-convert" <<EOF
#!/bin/sh
: >"$tmp/used"
exec "$bin/gpusim-convert.real" "\$@"
EOF
chmod +x "$bin/gpusim-convert"
"$bin/gpusim" whatif "$snap" --format csv -q >"$tmp/w2.csv" 2>"$tmp/err" ||
    fail "installed whatif through the stand-in: $(cat "$tmp/err")"
[ -e "$tmp/used" ] || fail "installed whatif did not run the gpusim-convert beside it"
cmp -s "$tmp/w.csv" "$tmp/w2.csv" || fail "installed whatif: different verdicts"
mv "$bin/gpusim-convert.real" "$bin/gpusim-convert"

# --- libgpusim_torch.so: exports what CUDAPluggableAllocator asks for (and loads, unless it was
# built with AddressSanitizer, whose runtime cannot be loaded into a python3 that lacks it) ---
if command -v nm >/dev/null 2>&1; then
    nm -D --defined-only "$lib/libgpusim_torch.so" >"$tmp/syms" 2>&1 || fail "nm: $(cat "$tmp/syms")"
    for s in gpusim_malloc gpusim_free; do
        grep -q " T $s\$" "$tmp/syms" || fail "libgpusim_torch.so does not export $s"
    done
fi
if ! ldd "$lib/libgpusim_torch.so" 2>/dev/null | grep -q libasan; then
    python3 - "$lib/libgpusim_torch.so" <<'PY' || fail "libgpusim_torch.so: does not load or lacks its functions"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.gpusim_malloc, lib.gpusim_free
PY
fi

# --- the man pages ---
if [ "$man_pages" = 1 ]; then
    for p in gpusim gpusim-convert gpusim-synth; do
        [ -s "$man/man1/$p.1" ] || fail "man page not installed: man1/$p.1"
    done
    for c in replay validate sweep plot whatif convert; do
        grep -q "^\.SS \"gpusim $c " "$man/man1/gpusim.1" || fail "gpusim.1 lacks the $c command"
    done
    if command -v groff >/dev/null 2>&1; then
        for p in gpusim gpusim-convert gpusim-synth; do
            groff -man -Tutf8 -ww -z "$man/man1/$p.1" >"$tmp/groff" 2>&1
            [ ! -s "$tmp/groff" ] || fail "$p.1: groff warns: $(cat "$tmp/groff")"
        done
    fi
fi

# --- the converter under Python 3.10, the oldest that PyTorch supports ---
py310=
if python3.10 -c pass >/dev/null 2>&1; then
    py310=python3.10
elif command -v pyenv >/dev/null 2>&1; then
    for p in "$(pyenv root)"/versions/3.10*/bin/python3; do
        [ -x "$p" ] && py310=$p
    done
fi
if [ -n "$py310" ]; then
    "$py310" "$bin/gpusim-convert" "$snap" -o "$tmp/py310.gstrace.gz" --reference "$tmp/py310.ref.json" \
        2>"$tmp/err" || fail "gpusim-convert under $py310: $(cat "$tmp/err")"
    cmp -s "$tmp/py310.gstrace.gz" "$tmp/src.gstrace.gz" && cmp -s "$tmp/py310.ref.json" "$tmp/src.ref.json" ||
        fail "gpusim-convert under $py310 writes other bytes than under python3"
    "$py310" "$bin/gpusim-synth" batch-alternate -o "$tmp/alt310.gstrace.gz" 2>"$tmp/err" ||
        fail "gpusim-synth under $py310: $(cat "$tmp/err")"
    cmp -s "$tmp/alt310.gstrace.gz" "$tmp/alt.gstrace.gz" || fail "gpusim-synth under $py310 writes other bytes"
else
    echo "no Python 3.10 found: the converter was run with $(python3 --version 2>&1) only"
fi

[ "$fails" -eq 0 ] && echo "all install tests passed"
[ "$fails" -eq 0 ]
