#!/usr/bin/python3
"""docs/cli.md and `kvforge ... --help` agree: every flag the doc names for a command exists
in that command's --help, every flag in a command's --help is named in the doc, and every
subcommand --help lists is documented.
    docs_flags.py KVFORGE CLI_MD

How the doc is read:
- A `## ` heading naming `kvforge ...` starts that command's section; the usage lines of its code
  blocks (`kvforge bench memory [...]`, continued on indented lines) name more commands.
- A section whose usage lines name only its own command documents that command with all its
  text (usage, prose, tables). A section whose usage lines name subcommands (bench, ahbm)
  documents each subcommand with its usage lines; its prose may only name flags that one of
  them has.
- Any other `## ` section (Models, Runtime options) is shared: a command section that links
  to it (`](#runtime-options)`) takes its flags, and each of them must be in that command's
  --help. The text before the first `## ` heading applies to every command (`-h, --help`).
"""
import os
import re
import subprocess
import sys

# A flag: `--name` or `-x`, not part of a longer word (decode-sp, -ctk) and not ending in
# a dash, so that a wildcard such as `--ahbm-*` names no flag.
FLAG = re.compile(r"(?<![\w-])(--[a-z](?:[a-z0-9-]*[a-z0-9])?|-[a-zA-Z])(?![\w-])")
COMMAND_HEADING = re.compile(r"^`kvforge((?: [a-z][\w-]*)*)")
LINK = re.compile(r"\]\(#([\w-]+)\)")


def flags_in(text):
    return set(FLAG.findall(text))


def anchor(heading):
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def split_sections(doc):
    """[(heading, text)] for every `## ` section (its text starts with the heading line, which
    may name a flag: `kvforge --version`); the preamble has the heading None."""
    sections, heading, lines = [], None, []
    for line in doc.splitlines():
        if line.startswith("## "):
            sections.append((heading, "\n".join(lines)))
            heading, lines = line[3:].strip(), []
        lines.append(line)
    sections.append((heading, "\n".join(lines)))
    return sections


def usages(text):
    """{command words: usage text} for the `kvforge ...` lines of the section's code blocks."""
    found, current, in_code = {}, None, False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code, current = not in_code, None
        elif in_code and line.startswith("kvforge "):
            words = []
            for token in line.split()[1:]:
                if not re.fullmatch(r"[a-z][\w-]*", token):
                    break
                words.append(token)
            current = tuple(words)
            found[current] = found.get(current, "") + line + "\n"
        elif in_code and current is not None and line[:1].isspace():
            found[current] += line + "\n"  # a usage continued on an indented line
        else:
            current = None
    return found


class Doc:
    """What cli.md documents: per command, the flags it names and the shared sections it links."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            sections = split_sections(f.read())
        self.common = flags_in(sections[0][1])  # the preamble: every command
        self.shared = {}  # anchor -> flags of a section that documents no command
        self.commands = {(): (set(), set())}  # words -> (flags, anchors linked); () is `kvforge`
        self.prose = []  # (parent words, flags, [subcommand words]) of sections with subcommands
        for heading, text in sections[1:]:
            m = COMMAND_HEADING.match(heading)
            if not m:
                self.shared[anchor(heading)] = flags_in(text)
                continue
            own = tuple(m.group(1).split())
            links = set(LINK.findall(text))
            subs = {words: usage for words, usage in usages(text).items() if words != own}
            if not subs:
                self.add(own, flags_in(text), links)
                continue
            self.add(own, set(), links)
            in_usages = set()
            for words, usage in subs.items():
                self.add(words, flags_in(usage), links)
                in_usages |= flags_in(usage)
            self.prose.append((own, flags_in(text) - in_usages, list(subs)))

    def add(self, words, flags, links):
        old_flags, old_links = self.commands.get(words, (set(), set()))
        self.commands[words] = (old_flags | flags, old_links | links)

    def shared_flags(self, words):
        flags = set(self.common)
        for a in self.commands[words][1]:
            flags |= self.shared.get(a, set())
        return flags


def read_help(kvforge, words):
    """(flags, subcommands) of `kvforge WORDS --help`, or None when that is no command."""
    r = subprocess.run([kvforge, *words, "--help"], capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    usage = next((line.split() for line in lines if line.startswith("Usage:")), [])
    # An unknown word is not an error to CLI11 when --help follows: it prints the parent's help.
    if r.returncode != 0 or usage[2:2 + len(words)] != list(words):
        return None
    flags, subs, part = set(), set(), None
    for line in lines:
        if line and not line[0].isspace():
            # Usage, Options, Subcommands, "[Option Group" (or the description)
            part = line.split(":")[0]
            continue
        # An entry starts two spaces in ("  -m,--model TEXT  ..."), or four in an option group's
        # "  Options:" list; wrapped descriptions further.
        m = re.match(r"  (\S+)", line)
        g = re.match(r"    (-\S+)", line)
        if m and part == "Options":
            flags.update(m.group(1).split(","))
        elif g and part == "[Option Group":
            flags.update(g.group(1).split(","))
        elif m and part == "Subcommands":
            subs.add(m.group(1))
    return flags, subs


def check_command(doc, words, help_):
    """The disagreements between the doc and one command's --help."""
    name = " ".join(words) or "kvforge"
    if help_ is None:
        return [f"{name}: documented but `kvforge {' '.join(words)} --help` does not know it"]
    in_help, subs = help_
    documented = doc.commands[words][0] | doc.shared_flags(words)
    problems = [f"{name}: {flag} documented but not in --help" for flag in sorted(documented - in_help)]
    problems += [f"{name}: {flag} in --help but not documented" for flag in sorted(in_help - documented)]
    problems += [f"{name}: subcommand {sub} in --help but not documented"
                 for sub in sorted(subs) if words + (sub,) not in doc.commands]
    return problems


def check(kvforge, doc):
    helps = {words: read_help(kvforge, words) for words in sorted(doc.commands)}
    problems = []
    for words, help_ in helps.items():
        problems += check_command(doc, words, help_)
    for parent, flags, subs in doc.prose:
        known = set().union(*(helps[s][0] for s in subs if helps[s] is not None))
        for flag in sorted(flags - known - doc.shared_flags(parent)):
            problems.append(f"{' '.join(parent)}: {flag} documented but not in the --help of any subcommand")
    return problems


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kvforge, doc_path = sys.argv[1], sys.argv[2]
    problems = check(kvforge, Doc(doc_path))
    prefix = os.path.basename(doc_path)
    for p in problems:
        print(f"{prefix}: {p}")
    if problems:
        return 1
    print(f"{prefix} agrees with --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
