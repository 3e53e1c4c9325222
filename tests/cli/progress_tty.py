#!/usr/bin/python3
"""Long work shows progress on a terminal and nowhere else: `kvforge batch` with stderr on a
pseudo-terminal draws "generating ... tokens" lines (with the rate) and clears them, and its
--json stdout is the same JSON it prints with stderr on a pipe, where stderr gets no
progress at all.

usage: progress_tty.py KVFORGE REQUESTS.jsonl
"""
import json
import os
import pty
import subprocess
import sys


def run(cmd, stderr_on_tty):
    """(stdout, stderr) of cmd, stderr on a fresh pseudo-terminal or a pipe."""
    if not stderr_on_tty:
        p = subprocess.run(cmd, capture_output=True, timeout=300)
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        return p.stdout.decode(), p.stderr.decode()
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal's other end closed with the process
            break
        if not data:
            break
        chunks.append(data)
    out = p.stdout.read().decode()
    assert p.wait(timeout=300) == 0, b"".join(chunks).decode(errors="replace")
    os.close(master)
    return out, b"".join(chunks).decode(errors="replace")


def ids_by_request(stdout):
    lines = [json.loads(line) for line in stdout.splitlines()]
    return {j["id"]: j["ids"] for j in lines if "id" in j}


def main():
    kvforge, requests = sys.argv[1], sys.argv[2]
    cmd = [kvforge, "batch", "-m", "synthetic:llama-260k", "--requests", requests, "--json"]
    tty_out, tty_err = run(cmd, stderr_on_tty=True)
    pipe_out, pipe_err = run(cmd, stderr_on_tty=False)
    problems = []
    if "generating" not in tty_err or "tokens" not in tty_err:
        problems.append(f"no progress line on the terminal: {tty_err!r}")
    if "\r\x1b[K" not in tty_err:
        problems.append("the progress line is never cleared")
    if "\r" in pipe_err or "generating" in pipe_err:
        problems.append(f"progress on a pipe: {pipe_err!r}")
    if "\r" in tty_out or "\x1b" in tty_out:
        problems.append("progress reached stdout")
    if ids_by_request(tty_out) != ids_by_request(pipe_out) or not ids_by_request(pipe_out):
        problems.append("the --json results differ with stderr on a terminal")
    for p in problems:
        print(p)
    print(f"progress: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
