# mkman.awk: the help texts that docs/mkman.sh saved, turned into a man page (troff) by shape.
# mkman.sh runs it with LC_ALL=C (bytes; where a column is counted it counts UTF-8 characters)
# and these in the environment (ENVIRON: no escapes are read in them, unlike -v):
#   MKMAN_MODE     commands: print the commands of 'gpusim help' (MKMAN_DIR/main) that have
#                  their own --help, one a line; scenarios: the scenarios of gpusim-synth --help;
#                  gpusim: the page of gpusim; script: the page of gpusim-convert or gpusim-synth
#   MKMAN_DIR      the folder of the help texts: main, and cmd.K (gpusim) or scen.K (the
#                  scenarios), K counting from 1 in the order the commands mode printed them
#   MKMAN_NAME, MKMAN_VERSION, MKMAN_DATADIR, MKMAN_LIBDIR, MKMAN_DOCDIR, MKMAN_PROG (the
#                  script's file name, convert.py or synth.py)
# The shapes: a paragraph flush left is filled text; an option list ("  -p, --policy=SPEC   what
# it does", or argparse's term line with its description indented below) becomes a .TP list;
# anything else indented (examples, tables) is kept as it is (.nf).

# ---- strings ------------------------------------------------------------------------------------

# Every FROM in S replaced by TO, left to right (no regular expression, no & or \ in TO read).
function rep(s, from, to,    out, i) {
    out = ""
    while ((i = index(s, from)) > 0) {
        out = out substr(s, 1, i - 1) to
        s = substr(s, i + length(from))
    }
    return out s
}

function strip(s) {
    sub(/^[[:space:]]+/, "", s)
    sub(/[[:space:]]+$/, "", s)
    return s
}

function startswith(s, p) { return substr(s, 1, length(p)) == p }

# Characters, not bytes: a UTF-8 continuation byte (0x80-0xBF) starts none.
function charlen(s,    t) {
    if (s !~ /[\200-\377]/) return length(s)
    t = s
    gsub(/[\200-\277]/, "", t)
    return length(t)
}

# The byte position (from 1) of character C (from 0) of S; past the end, length(S) + 1.
function cbyte(s, c,    i, n) {
    if (s !~ /[\200-\377]/) return c + 1
    n = -1
    for (i = 1; i <= length(s); i++)
        if (substr(s, i, 1) !~ /[\200-\277]/ && ++n == c) return i
    return length(s) + 1
}

# os.path.join(A, B) for a relative B
function pjoin(a, b) {
    if (a == "" || a ~ /\/$/) return a b
    return a "/" b
}

# ---- troff --------------------------------------------------------------------------------------

# Text for troff: backslashes, minus signs (\- so options copy and paste as typed).
function esc(s) { return rep(rep(s, "\\", "\\e"), "-", "\\-") }

# One output line of text; a leading '.' or "'" would be read as a request.
function line_out(s) {
    s = esc(s)
    return (substr(s, 1, 1) == "." || substr(s, 1, 1) == "'") ? "\\&" s : s
}

# An option term, '-p, --policy=[NAME=]SPEC' or '-o OUTPUT, --output OUTPUT': the option names
# bold, their arguments italic; a plain term (a scenario, INPUT) bold.
function term_out(term,    out, piece, i, s, rest) {
    out = ""
    while (1) {
        i = index(term, ", ")
        piece = i ? substr(term, 1, i - 1) : term
        if (substr(piece, 1, 1) == "-") {
            match(piece, /^-[^=[:space:]]*/)
            s = "\\fB" esc(substr(piece, 1, RLENGTH)) "\\fR"
            rest = substr(piece, RLENGTH + 1)
            if (length(rest) > 1)
                s = s esc(substr(rest, 1, 1)) "\\fI" esc(substr(rest, 2)) "\\fR"
        } else
            s = "\\fB" esc(piece) "\\fR"
        out = out s
        if (!i) break
        out = out ", "
        term = substr(term, i + 2)
    }
    return out
}

# ---- help text into blocks ----------------------------------------------------------------------

# FILE's lines into L[1..NL] (right-stripped, FROM replaced by TO where FROM is given) and its
# paragraphs, runs of non-blank lines, into L[BS[b]..BE[b]] for b in 1..NB.
function read_blocks(file, from, to,    line, r, open) {
    NL = 0; NB = 0; open = 0
    while ((r = (getline line < file)) > 0) {
        if (from != "") line = rep(line, from, to)
        if (line ~ /[^[:space:]]/) {
            sub(/[[:space:]]+$/, "", line)
            L[++NL] = line
            if (!open) { BS[++NB] = NL; open = 1 }
            BE[NB] = NL
        } else
            open = 0
    }
    if (r < 0) fail("cannot read " file)
    close(file)
}

function indent(s) { match(s, /^ */); return RLENGTH }

# An option list's entry: 2 to 4 spaces, a term, and maybe 2 or more spaces and a description.
# Sets E_TERM, E_DESC and E_COL (the description's column, in characters from 0).
function entry(line,    n, rest) {
    n = indent(line)
    if (n < 2 || n > 4) return 0
    rest = substr(line, n + 1)
    if (rest !~ /^[^[:space:]]/) return 0
    # The term ends at the first non-blank after its first character (a one-character term
    # takes no description) that 2 or more spaces and a non-blank follow; else it is all.
    if (match(substr(rest, 2), /[^[:space:]]  +[^[:space:]]/)) {
        E_TERM = substr(rest, 1, RSTART + 1)
        E_DESC = substr(rest, RSTART + RLENGTH)
        E_COL = charlen(substr(line, 1, n + RSTART + RLENGTH - 1))
    } else {
        E_TERM = rest; E_DESC = ""; E_COL = -1
    }
    return 1
}

# What a term may look like: options and their arguments, or a name followed by arguments
# ('replay TRACE...', 'batch-alternate', 'INPUT'); never code ('f(x, y)', '# comment').
function is_term(t) { return t ~ /^(-|[A-Za-z])[^()#"']*$/ }

# L[lo..hi] as an option list: 1, with the entries in IT_TERM[k], IT_DESC[k] for k in 1..NIT,
# else 0. A term that runs up to the descriptions' column with one space before it
# ('  validate TRACE... replay on') is split at that column (the most common one; a tie goes to
# the one seen first).
function option_list(lo, hi,    i, k, n, line, ndesc, ncol, cnt, seen, col, best, b) {
    NIT = 0; ncol = 0
    split("", cnt); split("", seen); split("", ndesc)
    for (i = lo; i <= hi; i++) {
        line = L[i]
        n = indent(line)
        if (n >= 16 && NIT > 0) {
            IT_DESC[NIT] = (ndesc[NIT]++ ? (IT_DESC[NIT] " " strip(line)) : strip(line))
            continue
        }
        if (!entry(line) || !is_term(E_TERM)) return 0
        NIT++
        IT_TERM[NIT] = E_TERM; IT_DESC[NIT] = E_DESC; IT_LINE[NIT] = line
        ndesc[NIT] = E_DESC != ""
        if (E_DESC != "") {
            if (!(E_COL in cnt)) seen[++ncol] = E_COL
            cnt[E_COL]++
        }
    }
    if (!ncol) return 0
    col = seen[1]; best = cnt[col]
    for (k = 2; k <= ncol; k++)
        if (cnt[seen[k]] > best) { col = seen[k]; best = cnt[col] }
    for (k = 1; k <= NIT; k++) {
        line = IT_LINE[k]
        if (ndesc[k] || charlen(line) <= col) continue
        b = cbyte(line, col)
        if (substr(line, b - 1, 1) == " " && substr(line, b, 1) != " ") {
            IT_TERM[k] = strip(substr(line, 1, b - 1))
            IT_DESC[k] = substr(line, b)
        }
    }
    return 1
}

function render_list(    k) {
    for (k = 1; k <= NIT; k++) {
        print ".TP"
        print term_out(IT_TERM[k])
        if (IT_DESC[k] != "") print line_out(IT_DESC[k])
    }
}

# A paragraph by shape: an option list; else runs of flush-left lines (filled text) and of
# indented lines (an option list, indented, or kept as they are).
function render_block(lo, hi,    i, s, e, flush) {
    if (option_list(lo, hi)) { render_list(); return }
    for (s = lo; s <= hi; s = e + 1) {
        flush = indent(L[s]) == 0
        for (e = s; e < hi && (indent(L[e + 1]) == 0) == flush; e++) ;
        if (flush) {
            print ".PP"
            for (i = s; i <= e; i++) print line_out(L[i])
        } else if (option_list(s, e)) {
            print ".RS"; render_list(); print ".RE"
        } else {
            print ".PP"; print ".RS 4"; print ".nf"
            for (i = s; i <= e; i++) print line_out(L[i])
            print ".fi"; print ".RE"
        }
    }
}

# ---- gpusim -------------------------------------------------------------------------------------

# The commands of 'gpusim help' (MKMAN_DIR/main, read into L): CMD[1..NCMD], the first word of
# each term of the "Commands:" list; TERM_OF and DESC_OF its entries, NLIST of them.
function gpusim_commands(    b, k, w) {
    NCMD = 0; NLIST = 0
    for (b = 1; b <= NB; b++) {
        if (L[BS[b]] != "Commands:") continue
        if (!option_list(BS[b] + 1, BE[b])) fail("gpusim help: the Commands: paragraph is not a list")
        NCMD = 0; NLIST = NIT
        for (k = 1; k <= NIT; k++) {
            split(IT_TERM[k], w, " ")
            CMD[++NCMD] = w[1]
            TERM_OF[k] = IT_TERM[k]; DESC_OF[k] = IT_DESC[k]
        }
    }
}

# 'gpusim CMD --help' (GLib's GOption layout, MKMAN_DIR/cmd.K) as a subsection.
function gpusim_command(cmd, file,    b, usage, synopsis, skip, i) {
    read_blocks(file)
    skip = 0
    for (b = 1; b <= NB; b++)
        if (L[BS[b]] == "Usage:" && BE[b] > BS[b]) { usage = strip(L[BS[b] + 1]); skip = b; break }
    if (skip) {
        i = index(usage, " - ")
        synopsis = rep(i ? substr(usage, 1, i - 1) : usage, "[OPTION?]", "[OPTION...]")
    } else
        synopsis = cmd
    # the usage line names the program ("gpusim replay [OPTION...]"); older builds gave the command alone
    if (!startswith(synopsis, "gpusim ")) synopsis = "gpusim " synopsis
    print ".SS \"" esc(synopsis) "\""
    for (b = 1; b <= NB; b++) {
        if (b == skip || L[BS[b]] == "Help Options:") continue
        if (L[BS[b]] == "Application Options:" || L[BS[b]] == "Options:") {
            print ".PP"; print "Options:"
            render_block(BS[b] + 1, BE[b])
        } else
            render_block(BS[b], BE[b])
    }
}

function gpusim_page(    b, k, n) {
    read_blocks(DIR "/main")
    gpusim_commands()
    print ".SH NAME"
    print "gpusim \\- replay GPU memory\\-allocation traces through allocator policies"
    print ".SH SYNOPSIS"
    print ".B gpusim"
    print ".I COMMAND"
    print "[\\fIOPTION\\fR...] [\\fIARG\\fR...]"
    print ".SH DESCRIPTION"
    for (b = 1; b <= NB; b++) {
        if (startswith(L[BS[b]], "usage:")) continue
        if (L[BS[b]] == "Commands:") {
            option_list(BS[b] + 1, BE[b])
            print ".SH COMMANDS"
            for (k = 1; k <= NIT; k++) {
                print ".TP"; print term_out(IT_TERM[k]); print line_out(IT_DESC[k])
            }
            continue
        }
        render_block(BS[b], BE[b])
    }
    print ".PP"
    print "Each command's options follow; \\fBgpusim \\fICOMMAND\\fB \\-\\-help\\fR prints them."
    n = 0
    for (k = 1; k <= NCMD; k++)
        if (CMD[k] != "help" && CMD[k] != "version")
            gpusim_command(CMD[k], DIR "/cmd." ++n)
    print ".SH EXIT STATUS"
    print "As each command's text above says; in short:"
    print ".TP"; print "0"; print "the reports were written (an OOM is a result, not a failure)"
    print ".TP"; print "1"
    print "a replay stopped on a device error (validate: the GPU failed or is missing)"
    print ".TP"; print "2"
    print "bad usage or bad input: one line on stderr (\\fIFILE\\fR:\\fILINE\\fR: \\fImessage\\fR for traces)"
    print ".TP"; print "3"
    print "plots were asked for and gnuplot is missing or failed (the reports and the plots' data are written all the same); validate: a check differs"
    print ".SH ENVIRONMENT"
    print ".TP"; print "\\fBGPUSIM_CONVERT\\fR"
    print "The converter \\fBgpusim whatif\\fR runs on a snapshot; else \\fBgpusim\\-convert\\fR beside the \\fBgpusim\\fR executable, else the source tree's traces/convert.py."
    print ".TP"; print "\\fBGPUSIM_GNUPLOT\\fR"
    print "The gnuplot to draw plots with; else \\fBgnuplot\\fR in \\fBPATH\\fR."
    print ".TP"; print "\\fBCUDA_VISIBLE_DEVICES\\fR"
    print "\\fB\\-\\-backend cuda\\fR and \\fBvalidate\\fR use its device 0."
    print ".TP"
    print "\\fBGPUSIM_POLICY\\fR, \\fBGPUSIM_CAPACITY\\fR, \\fBGPUSIM_STATS\\fR, \\fBGPUSIM_TRACE\\fR, \\fBGPUSIM_BACKEND\\fR"
    print "Read by libgpusim_torch.so, the PyTorch pluggable allocator, not by gpusim: the policy (PYTORCH_CUDA_ALLOC_CONF syntax), the allocator's limit, a JSON file for the statistics at exit, a trace file to record every request in, and \\fBsim\\fR to run on the simulated device."
    print ".SH FILES"
    print ".TP"; print line_out(pjoin(pjoin(pjoin(DATADIR, "gpusim"), "traces"), "*.gstrace.gz"))
    print "Example traces: ResNet\\-50 and GPT\\-2 training recorded with PyTorch 2.11 on an H100, and synthetic scenarios (their README.md beside them says which is which)."
    print ".TP"; print line_out(pjoin(LIBDIR, "libgpusim_torch.so"))
    print "gpusim's allocator as a PyTorch pluggable allocator (torch.cuda.memory.CUDAPluggableAllocator(PATH, \"gpusim_malloc\", \"gpusim_free\"))."
    print ".TP"; print line_out(pjoin(DOCDIR, ""))
    print "The trace format (trace\\-format.md), the metrics (metrics.md), the command line (cli.md), and the notes the code cites: PyTorch's allocator (pytorch\\-allocator.md), CuPy's pool (cupy\\-pool.md), fidelity and the cost model (fidelity.md)."
    print ".SH SEE ALSO"
    print "\\fBgpusim\\-convert\\fR(1), \\fBgpusim\\-synth\\fR(1), \\fBgnuplot\\fR(1)"
}

# ---- the Python scripts (argparse) --------------------------------------------------------------

# The scenarios of gpusim-synth --help (read into L): SCEN[1..NSCEN], the first word of each line
# indented 4 in "positional arguments:".
function scenarios(    b, i, w) {
    NSCEN = 0
    for (b = 1; b <= NB; b++) {
        if (L[BS[b]] != "positional arguments:") continue
        NSCEN = 0
        for (i = BS[b]; i <= BE[b]; i++)
            if (indent(L[i]) == 4) { split(L[i], w); SCEN[++NSCEN] = w[1] }
    }
}

# An argparse --help (FILE): usage as SYNOPSIS (or a subsection title), the rest by shape. The
# examples' 'python3 traces/convert.py' and the usage's 'convert.py' become the installed name;
# messages that name the script ('convert.py: FILE: message') stay as it prints them.
function argparse_sections(file, subsection,    b, first, usage, i, h) {
    read_blocks(file, "python3 traces/" PROG, NAME)
    usage = ""; first = 1
    if (NB > 0 && startswith(L[BS[1]], "usage: ")) {
        usage = substr(L[BS[1]], 8)
        if ((i = index(usage, PROG)) > 0)
            usage = substr(usage, 1, i - 1) NAME substr(usage, i + length(PROG))
        for (i = BS[1] + 1; i <= BE[1]; i++) usage = usage " " strip(L[i])
        first = 2
    }
    if (subsection)
        print ".SS \"" esc(usage) "\""
    else {
        print ".SH SYNOPSIS"; print ".nf"; print line_out(usage); print ".fi"
        print ".SH DESCRIPTION"
    }
    for (b = first; b <= NB; b++) {
        h = L[BS[b]]
        if (h == "options:" || h == "optional arguments:" || h == "positional arguments:") {
            print ".PP"; print toupper(substr(h, 1, 1)) substr(h, 2)
            render_block(BS[b] + 1, BE[b])
        } else
            render_block(BS[b], BE[b])
    }
}

function script_page(    what, k) {
    if (NAME == "gpusim-convert")
        what = "convert a PyTorch memory snapshot or an RMM log into a gpusim trace"
    else
        what = "write synthetic gpusim traces of allocation scenarios"
    print ".SH NAME"
    print esc(NAME " - " what)
    argparse_sections(DIR "/main", 0)
    if (NAME == "gpusim-synth") {
        read_blocks(DIR "/main")
        scenarios()
        if (NSCEN) {
            print ".SH SCENARIOS"
            for (k = 1; k <= NSCEN; k++) argparse_sections(DIR "/scen." k, 1)
        }
    }
    print ".SH FILES"
    print ".TP"; print line_out(pjoin(pjoin(DATADIR, "gpusim"), "traces"))
    print "The example traces installed with gpusim."
    print ".SH SEE ALSO"
    print "\\fBgpusim\\fR(1); " line_out(pjoin(DOCDIR, "trace-format.md"))
}

function fail(msg) {
    print "mkman.awk: " msg > "/dev/stderr"
    exit 1
}

BEGIN {
    MODE = ENVIRON["MKMAN_MODE"]; DIR = ENVIRON["MKMAN_DIR"]; NAME = ENVIRON["MKMAN_NAME"]
    PROG = ENVIRON["MKMAN_PROG"]; DATADIR = ENVIRON["MKMAN_DATADIR"]
    LIBDIR = ENVIRON["MKMAN_LIBDIR"]; DOCDIR = ENVIRON["MKMAN_DOCDIR"]
    if (MODE == "commands") {
        read_blocks(DIR "/main")
        gpusim_commands()
        for (k = 1; k <= NCMD; k++)
            if (CMD[k] != "help" && CMD[k] != "version") print CMD[k]
        exit 0
    }
    if (MODE == "scenarios") {
        read_blocks(DIR "/main")
        scenarios()
        for (k = 1; k <= NSCEN; k++) print SCEN[k]
        exit 0
    }
    print ".\\\" Generated by docs/mkman.sh from the program's --help: edit that, not this."
    print ".TH " toupper(NAME) " 1 \"\" \"gpusim " ENVIRON["MKMAN_VERSION"] "\" \"User Commands\""
    print ".nh"
    print ".ad l"
    if (MODE == "gpusim") gpusim_page()
    else if (MODE == "script") script_page()
    else fail("MKMAN_MODE is " MODE ": commands, scenarios, gpusim or script")
}
