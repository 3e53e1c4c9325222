"""A `kvforge serve` process for the serve tests: started on a free port, read until it serves
(or stops), and the calls those tests make of it and of `kvforge generate`."""
import contextlib
import json
import re
import subprocess
import urllib.request


def start(kvforge, *args):
    """(process, base URL or None, stderr lines up to "serving" or the end)."""
    proc = subprocess.Popen([kvforge, "serve", "--port", "0", *args], stderr=subprocess.PIPE, text=True)
    base, log = None, []
    for line in proc.stderr:
        log.append(line)
        m = re.search(r"listening on (http:\S+)", line)
        if m:
            base = m.group(1)
        if "serving" in line:
            return proc, base, log
    return proc, None, log


@contextlib.contextmanager
def serving(kvforge, *args, stop_timeout=30):
    """start() for a with-block: yields (base URL or None, stderr lines); the server is
    terminated when the block ends, however it ends."""
    proc, base, log = start(kvforge, *args)
    try:
        yield base, log
    finally:
        proc.terminate()
        proc.wait(timeout=stop_timeout)


def post(base, path, body, timeout=120):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def greedy_completion(base, prompt, max_tokens):
    """The text /v1/completions continues the prompt with at temperature 0."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    return json.load(post(base, "/v1/completions", body))["choices"][0]["text"]


def generate_text(kvforge, *args):
    """The text `kvforge generate ... --json` continues the prompt with."""
    out = subprocess.run([kvforge, "generate", *args, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["text"]
