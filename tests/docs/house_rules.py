#!/usr/bin/python3
"""Rules the repository keeps as it grows, checked on the source tree:

1. Docs, comments, scripts and tests describe the product as it is, not the story of how
   it was built: no numbered work items, sessions or rounds (the HISTORY pattern below),
   no words about the tools the work was done with.
2. A model family is named in one place, models/registry.cpp: nothing else compares an
   architecture or model_type with a string literal.
3. Every relative link in the Markdown docs reaches a file, and its #anchor a heading there.

usage: house_rules.py REPOSITORY_ROOT   (prints one line per violation; exit 1 if any)
"""
import os
import re
import sys

HISTORY = re.compile(r"\b(issue|session|sprint)s?[ -]#?\d+|\bround \d+\b|\bdevice tool\b", re.IGNORECASE)
FAMILY_TEST = re.compile(r"\b(arch|model_type\(\))\s*[!=]=\s*\"")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")

TEXT_SUFFIXES = (".md", ".cpp", ".h", ".cu", ".cuh", ".sh", ".py", ".cmake", ".txt", ".gp", ".json", ".jsonl")
SKIP_DIRS = {".git", "node_modules", "fixtures", "__pycache__"}


def tracked_files(root):
    """Source and doc files under the tree, minus build outputs and raw benchmark logs."""
    for top in ("README.md", "Makefile", "CMakeLists.txt", ".ci", "docs", "src", "tests", "bench", "scripts",
                "tools", "fuzz", "models", "cmake"):
        path = os.path.join(root, top)
        if os.path.isfile(path):
            yield path
            continue
        for d, dirs, files in os.walk(path):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            for f in files:
                p = os.path.join(d, f)
                rel = os.path.relpath(p, root)
                # Raw logs are program output, kept as run; their READMEs are checked.
                if rel.startswith(os.path.join("bench", "results")) and not f.endswith(".md"):
                    continue
                if f.endswith(TEXT_SUFFIXES) or f in ("Makefile", "CMakeLists.txt", "run"):
                    yield p


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*|_(?=[^a-z0-9])", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    in_code = not in_code
                m = None if in_code else HEADING.match(line)
                if m:
                    s = slug(m.group(1))
                    n = seen.get(s, 0)
                    out.add(s if n == 0 else f"{s}-{n}")
                    seen[s] = n + 1
        cache[path] = out
    return cache[path]


def check_history(root, path, text, problems):
    for n, line in enumerate(text.splitlines(), 1):
        m = HISTORY.search(line)
        if m:
            problems.append(f"{os.path.relpath(path, root)}:{n}: tells the history ('{m.group(0)}'): {line.strip()[:100]}")


def check_family_names(root, path, text, problems):
    rel = os.path.relpath(path, root)
    if not rel.startswith("src" + os.sep) or rel == os.path.join("src", "models", "registry.cpp"):
        return
    for n, line in enumerate(text.splitlines(), 1):
        if FAMILY_TEST.search(line):
            problems.append(f"{rel}:{n}: names a family outside models/registry.cpp: {line.strip()[:100]}")


def check_links(root, path, text, problems):
    if not path.endswith(".md"):
        return
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        where = f"{os.path.relpath(path, root)}: link {target}"
        if not os.path.exists(dest):
            problems.append(f"{where}: no such file")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            problems.append(f"{where}: no heading with that anchor")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    problems = []
    for path in tracked_files(root):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue
        if os.path.basename(path) != "house_rules.py":
            check_history(root, path, text, problems)
        check_family_names(root, path, text, problems)
        check_links(root, path, text, problems)
    for p in problems:
        print(p)
    print(f"house rules: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
