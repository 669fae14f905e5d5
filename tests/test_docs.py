#!/usr/bin/env python3
"""test_docs.py SRCDIR - the documentation stays self-contained and its citations resolve.

- Every comment that cites a page of docs/ ("docs/fidelity.md §1.3", "docs/fidelity.md section
  1.1") names a page that exists and a section that page has (a heading "### 1.3 ..." or
  "## 4. ..."). A bare "§1.7" cites the first docs/ page its file names (policies/pytorch.c names
  docs/pytorch-allocator.md in its header).
- No source, script or page cites the notes outside the repository (../shared/DESIGN.md,
  shared/reference/...): a clone from a forge has none of them.
- Every relative link in README.md and docs/*.md points to a file that exists, and its #anchor,
  if any, to a heading of that file (GitHub's anchor rules).
"""

import os
import re
import subprocess
import sys
import unittest

SRC = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                      os.path.join(os.path.dirname(__file__), ".."))
CITED_EXT = (".c", ".h", ".py", ".sh", ".build", ".txt", ".md", ".map")
CITE = re.compile(r"docs/([\w-]+\.md)(?:\s+(?:§\s*|section\s+)(\d+(?:\.\d+)*))?")
BARE = re.compile(r"(?<![\w/.])§\s*(\d+(?:\.\d+)*)")
OUTSIDE = re.compile(r"DESIGN\.md|shared/reference|fidelity-notes|pytorch-caching-allocator\.md|"
                     r"peer-allocators\.md|shared/calibration")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", SRC, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
        files = [f for f in out if f]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the tree
        files = []
        for d, dirs, names in os.walk(SRC):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
            files += [os.path.relpath(os.path.join(d, n), SRC) for n in names]
    # This file names the outside notes in order to look for them.
    return [f for f in files if f.endswith(CITED_EXT) and f != "tests/test_docs.py"
            and os.path.isfile(os.path.join(SRC, f))]


def read(rel):
    with open(os.path.join(SRC, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


def headings(rel):
    return [l for l in read(rel).split("\n") if l.startswith("#")]


def has_section(page, number):
    pat = re.compile(r"^#+\s+" + re.escape(number) + r"[.\s]")
    return any(pat.match(h) for h in headings(os.path.join("docs", page)))


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class Citations(unittest.TestCase):
    def test_every_cited_page_and_section_exists(self):
        problems, n = [], 0
        for rel in tracked_files():
            text = read(rel)
            first_page = None
            for m in CITE.finditer(text):
                page, section = m.group(1), m.group(2)
                first_page = first_page or page
                n += 1
                where = f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
                if not os.path.isfile(os.path.join(SRC, "docs", page)):
                    problems.append(f"{where}: docs/{page} does not exist")
                elif section and not has_section(page, section):
                    problems.append(f"{where}: docs/{page} has no section {section}")
            if rel.startswith("docs/") or not first_page:
                continue
            for m in BARE.finditer(text):
                # "docs/X.md §N" was checked above; a bare one cites the file's first page.
                before = text[max(0, m.start() - 40):m.start()]
                if re.search(r"docs/[\w-]+\.md\s*$", before) or re.search(r"section\s*$", before):
                    continue
                n += 1
                if not has_section(first_page, m.group(1)):
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{rel}:{line}: §{m.group(1)} is not a section of "
                                    f"docs/{first_page}")
        self.assertGreater(n, 20, "the sources cite docs/ about 30 times; the scan found fewer")
        self.assertEqual(problems, [])

    def test_nothing_cites_notes_outside_the_repository(self):
        problems = []
        for rel in tracked_files():
            for i, line in enumerate(read(rel).split("\n"), 1):
                if OUTSIDE.search(line):
                    problems.append(f"{rel}:{i}: {line.strip()}")
        self.assertEqual(problems, [])


class Links(unittest.TestCase):
    def test_relative_links_and_anchors_resolve(self):
        pages = ["README.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(SRC, "docs")))
                                 if f.endswith(".md")]
        problems = []
        for rel in pages:
            for m in LINK.finditer(read(rel)):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
                if not os.path.exists(os.path.join(SRC, dest)):
                    problems.append(f"{rel}: {target}: no such file")
                    continue
                if anchor and dest.endswith(".md"):
                    if anchor not in {slug(h) for h in headings(dest)}:
                        problems.append(f"{rel}: {target}: no such heading in {dest}")
        self.assertEqual(problems, [])


if __name__ == "__main__":
    unittest.main()
