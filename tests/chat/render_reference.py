#!/usr/bin/env python3
"""Reference renders of chat templates with Python jinja2, set up as SOURCES.md says.

Usage: render_reference.py TEMPLATE_DIR CONVERSATIONS_JSON
Writes {"<template file>": {"<conversation name>": {"text": str} | {"error": str}}} to stdout.
Not the engine under test: src/chat/ is; this is only its oracle (tests/chat/differential_test.cpp).
"""
import datetime
import json
import os
import sys

import jinja2

FIXED_NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


# transformers' tojson: plain json.dumps, no HTML escaping.
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_env():
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_all(template_path, conversations, env):
    out = {}
    with open(template_path, encoding="utf-8") as f:
        source = f.read()
    try:
        template = env.from_string(source)
    except Exception as e:  # a template Python cannot parse errors on every conversation
        return {c["name"]: {"error": f"{type(e).__name__}: {e}"} for c in conversations}
    for c in conversations:
        ctx = {"messages": c["messages"], "bos_token": "<s>", "eos_token": "</s>",
               "add_generation_prompt": c["add_generation_prompt"]}
        if "tools" in c:
            ctx["tools"] = c["tools"]
        try:
            out[c["name"]] = {"text": template.render(**ctx)}
        except Exception as e:
            out[c["name"]] = {"error": f"{type(e).__name__}: {e}"}
    return out


def main():
    template_dir, conversations_path = sys.argv[1], sys.argv[2]
    with open(conversations_path, encoding="utf-8") as f:
        conversations = json.load(f)
    env = make_env()
    result = {}
    for name in sorted(os.listdir(template_dir)):
        if name.endswith(".jinja"):
            result[name] = render_all(os.path.join(template_dir, name), conversations, env)
    json.dump(result, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
