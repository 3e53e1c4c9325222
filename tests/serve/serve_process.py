"""A `kvforge serve` process for the serve tests: started on a free port, read until it serves
(or stops), and the calls those tests make of it and of `kvforge generate`."""
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


def post(base, path, body, timeout=120):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def generate_text(kvforge, *args):
    """The text `kvforge generate ... --json` continues the prompt with."""
    out = subprocess.run([kvforge, "generate", *args, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["text"]
