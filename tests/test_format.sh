#!/bin/sh
# test_format.sh SRCDIR - .ci/format, the check of the C lines a change touches, in a scratch git
# repository that has the source tree's .clang-format and .ci/format: a badly formatted change
# fails it (exit 1, the diff shown), a well-formatted one passes, a badly formatted line the
# change did not touch is left alone, an uncommitted change is checked too, BASE given names the
# range, and a first commit (nothing to compare against) passes. Exits 77 (skipped) where
# clang-format or git is missing (.ci/setup installs clang-format).
set -u
src=${1:-$(dirname "$0")/..}
. "$src/tests/clitest.sh"
command -v git >/dev/null 2>&1 || { echo "git is not installed: skipped"; exit 77; }
if ! { command -v clang-format-14 || command -v clang-format; } >/dev/null 2>&1 ||
    ! { command -v git-clang-format-14 || command -v git-clang-format; } >/dev/null 2>&1; then
    echo "clang-format is not installed: skipped"
    exit 77
fi

repo=$tmp/repo
mkdir -p "$repo/.ci"
cp "$src/.clang-format" "$repo/"
cp "$src/.ci/format" "$repo/.ci/"
cd "$repo" || exit 1
unset GIT_DIR GIT_WORK_TREE CLANG_FORMAT
git -c init.defaultBranch=master init -q .
git config user.email test@example.invalid
git config user.name test
git config commit.gpgsign false
commit() { git add -A && git commit -q -m "$1"; }
check() { .ci/format "$@" >"$tmp/out" 2>&1; }

# a file in the project's style, and one line in no style at all, which no change touches
cat >a.c <<'EOF'
static int twice(int x)
{
    if (x < 0) return 0;
    return 2 * x;
}

int   untouched( int y ){ return y; }
EOF
commit "first"
check || fail "a first commit (nothing to compare against): exit $?: $(cat "$tmp/out")"
grep -q "nothing to compare against" "$tmp/out" ||
    fail "a first commit: not said: $(cat "$tmp/out")"

# a well-formatted change
cat >>a.c <<'EOF'

static int thrice(int x)
{
    for (int i = 0; i < 3; i++) x += x;
    return x;
}
EOF
commit "good"
check || fail "a well-formatted change fails: $(cat "$tmp/out")"
grep -q ": ok" "$tmp/out" || fail "a well-formatted change: no ok: $(cat "$tmp/out")"

# a badly formatted change: brace on the signature's line, no spaces, a 2-space indent
cat >>a.c <<'EOF'

static int bad(int x){
  return x+1;
}
EOF
commit "bad"
check
rc=$?
[ "$rc" -eq 1 ] || fail "a badly formatted change: exit $rc, want 1: $(cat "$tmp/out")"
grep -q '^+    return x + 1;' "$tmp/out" ||
    fail "a badly formatted change: no diff shown: $(cat "$tmp/out")"
grep -q 'untouched' "$tmp/out" && fail "the line no change touched was checked: $(cat "$tmp/out")"

# BASE names the range: from the bad commit on, nothing changed
check HEAD || fail "BASE=HEAD with nothing changed since: exit $?: $(cat "$tmp/out")"

# fixed in a later commit: the range from the previous commit is clean again
git clang-format-14 -q HEAD~1 >/dev/null 2>&1 || git clang-format -q HEAD~1 >/dev/null 2>&1
git diff --quiet && fail "git clang-format changed nothing"
commit "fixed"
check || fail "the fix fails: $(cat "$tmp/out")"

# an uncommitted change is checked with the committed ones
printf 'int worse(void){return 0;}\n' >>a.c
check HEAD
rc=$?
[ "$rc" -eq 1 ] || fail "an uncommitted badly formatted line: exit $rc, want 1: $(cat "$tmp/out")"
git checkout -q a.c

# on a branch, the base is the merge-base with main
git branch -q -m main
git checkout -q -b topic
printf '\nint fine(void)\n{\n    return 1;\n}\n' >b.c
commit "topic: good"
printf 'int notfine(void){return 1;}\n' >>b.c
commit "topic: bad"
printf '\nint fine2(void)\n{\n    return 2;\n}\n' >c.c
commit "topic: good again"
check
rc=$?
[ "$rc" -eq 1 ] ||
    fail "a bad commit before the last on a branch: exit $rc, want 1: $(cat "$tmp/out")"

[ "$fails" -eq 0 ] && echo "all format tests passed"
[ "$fails" -eq 0 ]
