#!/usr/bin/env python3
"""Write a man page from a program's own --help, so the page never drifts from the program.

    mkman.py gpusim         OUT.1 VERSION DATADIR LIBDIR DOCDIR GPUSIM_EXECUTABLE
    mkman.py gpusim-convert OUT.1 VERSION DATADIR LIBDIR DOCDIR PYTHON traces/convert.py
    mkman.py gpusim-synth   OUT.1 VERSION DATADIR LIBDIR DOCDIR PYTHON traces/synth.py

meson runs it at build time (docs/meson.build). For gpusim it runs 'gpusim help' and
'gpusim COMMAND --help' for every command that help lists; for the two scripts, their argparse
--help (and, for gpusim-synth, each scenario's). The help texts are turned into troff by shape:
a paragraph flush left is filled text; an option list ("  -p, --policy=SPEC   what it does", or
argparse's term line with its description indented below) becomes a .TP list; anything else
indented (examples, tables) is kept as it is (.nf). ENVIRONMENT, FILES and SEE ALSO are written
here, from the installed paths (DATADIR, LIBDIR, DOCDIR: absolute, as configured).

Standard library only; runs on Python 3.10+. The output is the same for the same programs:
no date, COLUMNS and the locale fixed for the programs' help.
"""

import os
import re
import subprocess
import sys


def run_help(argv):
    env = dict(os.environ, COLUMNS="100", LC_ALL="C.UTF-8")
    env.pop("LANGUAGE", None)
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"mkman.py: {' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


# ---- troff ---------------------------------------------------------------------------------

def esc(text):
    """Text for troff: backslashes, minus signs (\\- so options copy and paste as typed)."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def line_out(text):
    """One output line of text; a leading '.' or "'" would be read as a request."""
    text = esc(text)
    return "\\&" + text if text[:1] in (".", "'") else text


def term_out(term):
    """An option term, '-p, --policy=[NAME=]SPEC' or '-o OUTPUT, --output OUTPUT': the option
    names bold, their arguments italic; a plain term (a scenario, INPUT) bold."""
    parts = []
    for piece in term.split(", "):
        m = re.match(r"^(-[^=\s]*)([=\s])?(.*)$", piece)
        if m:
            s = "\\fB" + esc(m.group(1)) + "\\fR"
            if m.group(3):
                s += esc(m.group(2)) + "\\fI" + esc(m.group(3)) + "\\fR"
            parts.append(s)
        else:
            parts.append("\\fB" + esc(piece) + "\\fR")
    return ", ".join(parts)


# ---- help text into blocks ----------------------------------------------------------------------

def blocks(text):
    """Paragraphs: runs of non-blank lines."""
    out, cur = [], []
    for line in text.rstrip("\n").split("\n"):
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def indent(line):
    return len(line) - len(line.lstrip(" "))


ENTRY = re.compile(r"^( {2,4})(\S(?:.*?\S)?)(?: {2,}(\S.*))?$")
# What a term may look like: options and their arguments, or a name followed by arguments
# ('replay TRACE...', 'batch-alternate', 'INPUT'); never code ('f(x, y)', '# comment').
TERM = re.compile(r"^(-|[A-Za-z])[^()#\"']*$")


def option_list(lines):
    """[(term, description)] when the lines are an option list, else None. A term that runs up
    to the descriptions' column with one space before it ('  validate TRACE... replay on') is
    split at that column."""
    items, cols = [], []
    for line in lines:
        n = indent(line)
        if n >= 16 and items:
            items[-1][1].append(line.strip())
            continue
        m = ENTRY.match(line)
        if not m or n > 4 or not TERM.match(m.group(2)):
            return None
        items.append((m.group(2), [m.group(3)] if m.group(3) else [], line))
        if m.group(3):
            cols.append(m.start(3))
    if not cols:
        return None
    col = max(set(cols), key=cols.count)
    out = []
    for term, desc, line in items:
        if not desc and len(line) > col and line[col - 1] == " " and line[col] != " ":
            term, desc = line[:col].strip(), [line[col:]]
        out.append((term, " ".join(desc)))
    return out


def render_list(items, out):
    for term, desc in items:
        out += [".TP", term_out(term)]
        if desc:
            out.append(line_out(desc))


def render_block(lines, out):
    """A paragraph by shape: an option list; else runs of flush-left lines (filled text) and of
    indented lines (an option list, indented, or kept as they are)."""
    items = option_list(lines)
    if items:
        render_list(items, out)
        return
    runs = []
    for line in lines:
        flush = indent(line) == 0
        if runs and runs[-1][0] == flush:
            runs[-1][1].append(line)
        else:
            runs.append((flush, [line]))
    for flush, run in runs:
        if flush:
            out.append(".PP")
            out += [line_out(l) for l in run]
            continue
        items = option_list(run)
        if items:
            out.append(".RS")
            render_list(items, out)
            out.append(".RE")
        else:
            out += [".PP", ".RS 4", ".nf"] + [line_out(l) for l in run] + [".fi", ".RE"]


def render_blocks(bs, out):
    for b in bs:
        render_block(list(b), out)


# ---- gpusim ---------------------------------------------------------------------------------

def gpusim_command(exe, cmd, out):
    """'gpusim CMD --help' (GLib's GOption layout) as a subsection."""
    bs = blocks(run_help([exe, cmd, "--help"]))
    usage = None
    for i, b in enumerate(bs):
        if b[0] == "Usage:" and len(b) > 1:
            usage = b[1].strip()
            bs.pop(i)
            break
    synopsis = usage.split(" - ")[0].replace("[OPTION?]", "[OPTION...]") if usage else cmd
    out += [".SS " + '"' + esc("gpusim " + synopsis) + '"']
    for b in bs:
        if b[0] == "Help Options:":
            continue
        if b[0] in ("Application Options:", "Options:"):
            out += [".PP", "Options:"]
            render_block(b[1:], out)
            continue
        render_block(list(b), out)


def gpusim_page(exe, paths):
    main = blocks(run_help([exe, "help"]))
    out = [".SH NAME",
           "gpusim \\- replay GPU memory\\-allocation traces through allocator policies",
           ".SH SYNOPSIS",
           ".B gpusim",
           ".I COMMAND",
           "[\\fIOPTION\\fR...] [\\fIARG\\fR...]",
           ".SH DESCRIPTION"]
    commands = []
    for b in main:
        if b[0].startswith("usage:"):
            continue
        if b[0] == "Commands:":
            items = option_list(b[1:])
            commands = [t.split()[0] for t, _ in items]
            out += [".SH COMMANDS"]
            for term, desc in items:
                out += [".TP", term_out(term), line_out(desc)]
            continue
        render_block(list(b), out)
    out += [".PP", "Each command's options follow; \\fBgpusim \\fICOMMAND\\fB \\-\\-help\\fR prints them."]
    for cmd in commands:
        if cmd in ("help", "version"):
            continue
        gpusim_command(exe, cmd, out)
    out += [
        ".SH EXIT STATUS",
        "As each command's text above says; in short:",
        ".TP", "0", "the reports were written (an OOM is a result, not a failure)",
        ".TP", "1", "a replay stopped on a device error (validate: the GPU failed or is missing)",
        ".TP", "2", "bad usage or bad input: one line on stderr (\\fIFILE\\fR:\\fILINE\\fR: "
                    "\\fImessage\\fR for traces)",
        ".TP", "3", "plots were asked for and gnuplot is missing or failed (the reports and the "
                    "plots' data are written all the same); validate: a check differs",
        ".SH ENVIRONMENT",
        ".TP", "\\fBGPUSIM_CONVERT\\fR",
        "The converter \\fBgpusim whatif\\fR runs on a snapshot; else \\fBgpusim\\-convert\\fR "
        "beside the \\fBgpusim\\fR executable, else the source tree's traces/convert.py.",
        ".TP", "\\fBGPUSIM_GNUPLOT\\fR",
        "The gnuplot to draw plots with; else \\fBgnuplot\\fR in \\fBPATH\\fR.",
        ".TP", "\\fBCUDA_VISIBLE_DEVICES\\fR",
        "\\fB\\-\\-backend cuda\\fR and \\fBvalidate\\fR use its device 0.",
        ".TP",
        "\\fBGPUSIM_POLICY\\fR, \\fBGPUSIM_CAPACITY\\fR, \\fBGPUSIM_STATS\\fR, "
        "\\fBGPUSIM_TRACE\\fR, \\fBGPUSIM_BACKEND\\fR",
        "Read by libgpusim_torch.so, the PyTorch pluggable allocator, not by gpusim: the "
        "policy (PYTORCH_CUDA_ALLOC_CONF syntax), the allocator's limit, a JSON file for the "
        "statistics at exit, a trace file to record every request in, and \\fBsim\\fR to run "
        "on the simulated device.",
        ".SH FILES",
        ".TP", line_out(os.path.join(paths["datadir"], "gpusim", "traces", "*.gstrace.gz")),
        "Example traces: ResNet\\-50 and GPT\\-2 training recorded with PyTorch 2.11 on an "
        "H100, and synthetic scenarios (their README.md beside them says which is which).",
        ".TP", line_out(os.path.join(paths["libdir"], "libgpusim_torch.so")),
        "gpusim's allocator as a PyTorch pluggable allocator "
        "(torch.cuda.memory.CUDAPluggableAllocator(PATH, \"gpusim_malloc\", \"gpusim_free\")).",
        ".TP", line_out(os.path.join(paths["docdir"], "")),
        "The trace format (trace\\-format.md), the metrics (metrics.md), the command line "
        "(cli.md), and the notes the code cites: PyTorch's allocator (pytorch\\-allocator.md), "
        "CuPy's pool (cupy\\-pool.md), fidelity and the cost model (fidelity.md).",
        ".SH SEE ALSO",
        "\\fBgpusim\\-convert\\fR(1), \\fBgpusim\\-synth\\fR(1), \\fBgnuplot\\fR(1)",
    ]
    return out


# ---- the Python scripts (argparse) -----------------------------------------------------------

def argparse_sections(text, prog, name, out, subsection=None):
    """An argparse --help: usage as SYNOPSIS (or a subsection title), the rest by shape."""
    # The examples' 'python3 traces/convert.py' and the usage's 'convert.py' become the installed
    # name; messages that name the script ('convert.py: FILE: message') stay as it prints them.
    bs = blocks(text.replace(f"python3 traces/{prog}", name))
    usage = []
    if bs and bs[0][0].startswith("usage: "):
        usage = [bs[0][0][len("usage: "):]] + [l.strip() for l in bs[0][1:]]
        usage[0] = usage[0].replace(prog, name, 1)
        bs = bs[1:]
    if subsection:
        out += [".SS " + '"' + esc(" ".join(usage)) + '"']
    else:
        out += [".SH SYNOPSIS", ".nf", line_out(" ".join(usage)), ".fi", ".SH DESCRIPTION"]
    for b in bs:
        if b[0] in ("options:", "optional arguments:", "positional arguments:"):
            out += [".PP", b[0][0].upper() + b[0][1:]]
            render_block(b[1:], out)
        else:
            render_block(list(b), out)


def script_page(name, python, script, paths):
    prog = os.path.basename(script)
    text = run_help([python, script, "--help"])
    if name == "gpusim-convert":
        what = "convert a PyTorch memory snapshot or an RMM log into a gpusim trace"
    else:
        what = "write synthetic gpusim traces of allocation scenarios"
    out = [".SH NAME", esc(f"{name} - {what}")]
    argparse_sections(text, prog, name, out)
    if name == "gpusim-synth":
        scenarios = []
        for b in blocks(text):
            if b[0] == "positional arguments:":
                scenarios = [l.split()[0] for l in b if indent(l) == 4]
        if scenarios:
            out += [".SH SCENARIOS"]
            for s in scenarios:
                argparse_sections(run_help([python, script, s, "--help"]), prog, name, out,
                                  subsection=True)
    out += [".SH FILES",
            ".TP", line_out(os.path.join(paths["datadir"], "gpusim", "traces")),
            "The example traces installed with gpusim.",
            ".SH SEE ALSO",
            "\\fBgpusim\\fR(1); " + line_out(os.path.join(paths["docdir"], "trace-format.md"))]
    return out


def main():
    if len(sys.argv) < 8:
        sys.exit(__doc__)
    name, output, version = sys.argv[1:4]
    paths = dict(zip(("datadir", "libdir", "docdir"), sys.argv[4:7]))
    if name == "gpusim":
        body = gpusim_page(sys.argv[7], paths)
    else:
        body = script_page(name, sys.argv[7], sys.argv[8], paths)
    head = ['.\\" Generated by docs/mkman.py from the program\'s --help: edit that, not this.',
            f'.TH {name.upper()} 1 "" "gpusim {version}" "User Commands"',
            ".nh", ".ad l"]
    text = "\n".join(head + body) + "\n"
    tmp = output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, output)


if __name__ == "__main__":
    main()
