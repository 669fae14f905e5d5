#!/bin/sh
# test_docs.sh SRCDIR - the documentation stays self-contained and its citations resolve.
#
# - Every comment that cites a page of docs/ ("docs/fidelity.md §1.3", "docs/fidelity.md section
#   1.1") names a page that exists and a section that page has (a heading "### 1.3 ..." or
#   "## 4. ..."). A bare "§1.7" cites the first docs/ page its file names (policies/pytorch.c names
#   docs/pytorch-allocator.md in its header).
# - No source, script or page cites the notes outside the repository (../shared/DESIGN.md,
#   shared/reference/...): a clone from a forge has none of them.
# - Every relative link in README.md and docs/*.md points to a file that exists, and its #anchor,
#   if any, to a heading of that file (GitHub's anchor rules).
# - No source, script or page cites an issue by its number ("issue 15", "Issue 16's"): a clone
#   cannot open the tracker; the why is named by its note or docs/ section instead.
# - README.md stays the users' page: under 400 lines (what gpusim answers, the flow, the commands,
#   the pictures), everything else in docs/ and linked from it. It grew to 1,500 lines once, the
#   layout of the tree, the fidelity runs and the fuzzing figures among the commands.
#
# The files scanned for citations are git's (git ls-files; where SRCDIR is no git checkout, the
# tree less the folders named .* and build*) that end in .c .h .py .sh .awk .build .txt .md .map,
# this one excepted: it names the outside notes in order to look for them. POSIX sh and awk, which
# reads bytes (LC_ALL=C). Exits 0 when all the checks pass, else 1, each failure listed.
set -u
LC_ALL=C
export LC_ALL
src=${1:-$(dirname "$0")/..}
src=$(cd "$src" && pwd) || exit 1
TEST_DOCS_SRC=$src  # to awk through ENVIRON, where no escapes are read (unlike -v)
export TEST_DOCS_SRC

# The files to scan, "C path" a line, then the pages whose links to check, "L path" a line.
{
    { git -C "$src" ls-files 2>/dev/null ||
        (cd "$src" && find . \( -type d \( -name '.?*' -o -name 'build*' \) -prune \) -o \
            ! -type d -print | sed 's|^\./||'); } |
    while IFS= read -r f; do
        case $f in
            tests/test_docs.sh) ;;
            *.c | *.h | *.py | *.sh | *.awk | *.build | *.txt | *.md | *.map)
                if [ -f "$src/$f" ]; then printf 'C %s\n' "$f"; fi ;;
        esac
    done
    echo "L README.md"
    ls -a "$src/docs" | grep '\.md$' | sort | sed 's|^|L docs/|'
} | awk '
function slurp(rel,    path, line, r, t) {
    path = rel ~ /^\// ? rel : src "/" rel
    t = ""
    while ((r = (getline line < path)) > 0) {
        sub(/\r$/, "", line)
        t = t line "\n"
    }
    close(path)
    return t
}

function nlines(s) { return gsub(/\n/, "", s) }

function strip(s) {
    sub(/^[[:space:]]+/, "", s)
    sub(/[[:space:]]+$/, "", s)
    return s
}

# S quoted for sh: in single quotes, each of its own as quote, backslash, quote, quote.
function shq(s,    out, i) {
    out = ""
    while ((i = index(s, "\047")) > 0) {
        out = out substr(s, 1, i - 1) "\047\\\047\047"
        s = substr(s, i + 1)
    }
    return "\047" out s "\047"
}

function isfile(path) {
    if (!(path in ISFILE)) ISFILE[path] = system("test -f " shq(path)) == 0
    return ISFILE[path]
}

function exists(path) {
    if (!(path in EXISTS)) EXISTS[path] = system("test -e " shq(path)) == 0
    return EXISTS[path]
}

# The heading lines (those that start with "#") of REL, in H[REL, 1..NH[REL]].
function headings(rel,    t, n, i, line, lines) {
    if (rel in NH) return
    n = split(slurp(rel), lines, "\n")
    NH[rel] = 0
    for (i = 1; i <= n; i++)
        if (lines[i] ~ /^#/) H[rel, ++NH[rel]] = lines[i]
}

# Whether docs/PAGE has a heading "#... NUMBER" followed by "." or a blank.
function has_section(page, number,    rel, re, i) {
    rel = "docs/" page
    headings(rel)
    re = number
    gsub(/\./, "\\.", re)
    re = "^#+[[:space:]]+" re "[.[:space:]]"
    for (i = 1; i <= NH[rel]; i++)
        if (H[rel, i] ~ re) return 1
    return 0
}

# The anchor GitHub makes of a heading: lower case, punctuation dropped, spaces to hyphens. Letters
# and digits beyond ASCII are kept (those of Latin-1 lowered), the usual punctuation dropped.
function slug(h,    out, i, c, n) {
    sub(/^#+/, "", h)
    h = tolower(strip(h))
    out = ""
    for (i = 1; i <= length(h); i += n) {
        c = substr(h, i, 1)
        n = 1
        if (c ~ /[\300-\377]/) {
            while (substr(h, i + n, 1) ~ /^[\200-\277]$/) n++
            c = substr(h, i, n)
            if (c in PUNCT) continue
            if (c ~ /^\303[\200-\236]$/ && c != "\303\227")
                c = "\303" sprintf("%c", index(HI, substr(c, 2, 1)) + 159)
            out = out c
        } else if (c ~ /[a-z0-9_ -]/)
            out = out c
    }
    gsub(/ /, "-", out)
    return out
}

function normpath(p,    lead, n, parts, out, k, i, s) {
    if (p == "") return "."
    lead = ""
    if (p ~ /^\//) lead = p ~ /^\/\/([^\/]|$)/ ? "//" : "/"
    n = split(p, parts, "/")
    k = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "" || parts[i] == ".") continue
        if (parts[i] != ".." || (lead == "" && (k == 0 || out[k] == "..")))
            out[++k] = parts[i]
        else if (k > 0)
            k--
    }
    s = ""
    for (i = 1; i <= k; i++) s = s (i > 1 ? "/" : "") out[i]
    s = lead s
    return s == "" ? "." : s
}

function problem(test, msg) { P[test, ++NP[test]] = msg }

function cite(rel,    text, t, off, m, page, sec, nl, first, start, before, num, b) {
    text = slurp(rel)
    first = ""
    t = text; nl = 0
    while (match(t, CITE)) {
        m = substr(t, RSTART, RLENGTH)
        nl += nlines(substr(t, 1, RSTART - 1))
        t = substr(t, RSTART + RLENGTH)
        match(m, /^docs\/[[:alnum:]_-]+\.md/)
        page = substr(m, 6, RLENGTH - 5)
        sec = ""
        if (RLENGTH < length(m) && match(m, /[0-9]+(\.[0-9]+)*$/)) sec = substr(m, RSTART, RLENGTH)
        if (first == "") first = page
        NCITE++
        if (!isfile(src "/docs/" page))
            problem(1, rel ":" (nl + 1) ": docs/" page " does not exist")
        else if (sec != "" && !has_section(page, sec))
            problem(1, rel ":" (nl + 1) ": docs/" page " has no section " sec)
        nl += nlines(m)
    }
    if (rel ~ /^docs\// || first == "") return
    # A bare § cites the first page the file names; one after "docs/X.md" or "section" was
    # checked above.
    t = text; off = 0
    while (match(t, BARE)) {
        start = off + RSTART
        m = substr(t, RSTART, RLENGTH)
        off += RSTART + RLENGTH - 1
        t = substr(t, RSTART + RLENGTH)
        if (word_before(text, start)) continue
        b = start > 40 ? start - 40 : 1
        before = substr(text, b, start - b)
        if (before ~ /docs\/[[:alnum:]_-]+\.md[[:space:]]*$/ || before ~ /section[[:space:]]*$/)
            continue
        num = m
        sub(/^§[[:space:]]*/, "", num)
        NCITE++
        if (!has_section(first, num))
            problem(1, rel ":" (nlines(substr(text, 1, start - 1)) + 1) ": §" num \
                " is not a section of docs/" first)
    }
}

# Whether the character before byte START of TEXT is a letter, a digit, "_", "/" or ".": of
# those beyond ASCII, any but the usual punctuation.
function word_before(text, start,    i, c) {
    if (start == 1) return 0
    c = substr(text, start - 1, 1)
    if (c !~ /[\200-\277]/) return c ~ "[[:alnum:]_./]"
    for (i = start - 2; i >= 1 && start - i <= 4 && substr(text, i, 1) ~ /[\200-\277]/; i--) ;
    c = substr(text, i, start - i)
    return c ~ /^[\300-\377]/ && !(c in PUNCT)
}

function outside(rel,    n, i, lines) {
    n = split(slurp(rel), lines, "\n")
    for (i = 1; i < n; i++) {
        if (lines[i] ~ OUTSIDE) problem(2, rel ":" i ": " strip(lines[i]))
        if (lines[i] ~ ISSUE) problem(4, rel ":" i ": " strip(lines[i]))
    }
}

function links(rel,    t, m, target, i, path, anchor, dest, dir, k, ok) {
    t = slurp(rel)
    dir = rel ~ /\// ? rel : ""
    sub(/\/[^\/]*$/, "", dir)
    while (match(t, LINK)) {
        m = substr(t, RSTART, RLENGTH)
        t = substr(t, RSTART + RLENGTH)
        target = substr(m, 3, length(m) - 3)
        NLINK++
        if (target ~ /^[a-z]+:/) continue
        i = index(target, "#")
        path = i ? substr(target, 1, i - 1) : target
        anchor = i ? substr(target, i + 1) : ""
        if (path == "") dest = rel
        else if (path ~ /^\// || dir == "") dest = normpath(path)
        else dest = normpath(dir "/" path)
        if (!exists(dest ~ /^\// ? dest : src "/" dest)) {
            problem(3, rel ": " target ": no such file")
            continue
        }
        if (anchor != "" && dest ~ /\.md$/) {
            headings(dest)
            ok = 0
            for (k = 1; k <= NH[dest] && !ok; k++) ok = slug(H[dest, k]) == anchor
            if (!ok) problem(3, rel ": " target ": no such heading in " dest)
        }
    }
}

function report(test, name, what,    i) {
    if (!NP[test]) { print name ": ok (" what ")"; return }
    print name ": FAIL"
    for (i = 1; i <= NP[test]; i++) print "    " P[test, i]
    FAILED = 1
}

BEGIN {
    src = ENVIRON["TEST_DOCS_SRC"]
    CITE = "docs/[[:alnum:]_-]+\\.md([[:space:]]+(§[[:space:]]*|section[[:space:]]+)[0-9]+(\\.[0-9]+)*)?"
    BARE = "§[[:space:]]*[0-9]+(\\.[0-9]+)*"
    OUTSIDE = "DESIGN\\.md|shared/reference|fidelity-notes|pytorch-caching-allocator\\.md|" \
              "peer-allocators\\.md|shared/calibration"
    LINK = "[]][(][^)[:space:]]+[)]"
    ISSUE = "[Ii]ssue[[:space:]]+[0-9]"
    README_MAX = 400
    HI = "\200\201\202\203\204\205\206\207\210\211\212\213\214\215\216\217" \
         "\220\221\222\223\224\225\226\227\230\231\232\233\234\235\236"
    np = split("§ — – ‐ ‑ ’ ‘ “ ” … × ÷ ± · • ° « » © ® ™ → ← ↔ ≤ ≥ ≈ ≠ ∞ √ \302\240", p, " ")
    for (i = 1; i <= np; i++) PUNCT[p[i]] = 1
}

/^C / { rel = substr($0, 3); cite(rel); outside(rel); NFILES++ }
/^L / { links(substr($0, 3)); NPAGES++ }

END {
    if (NCITE <= 20)
        problem(1, NCITE " citations: the sources cite docs/ about 30 times; the scan found fewer")
    report(1, "test_every_cited_page_and_section_exists", NCITE " citations in " NFILES " files")
    report(2, "test_nothing_cites_notes_outside_the_repository", NFILES " files")
    report(3, "test_relative_links_and_anchors_resolve", NLINK " links in " NPAGES " pages")
    report(4, "test_no_issue_numbers", NFILES " files")
    n = nlines(slurp("README.md"))
    if (n >= README_MAX)
        problem(5, "README.md: " n " lines (at most " README_MAX - 1 "): move what is not for users to docs/ and link it")
    report(5, "test_readme_is_short", n " lines, under " README_MAX)
    exit FAILED ? 1 : 0
}'
