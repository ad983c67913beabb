#!/usr/bin/env python3
"""Renders a chat template with Python's jinja2 exactly as transformers' apply_chat_template does:
the reference the C++ chat-template interpreter is tested against (tests/python/test_chat_template.py).

transformers compiles templates in an ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks on, the loopcontrols extension and its own {% generation %} tag, replaces `tojson`
with json.dumps(ensure_ascii=False, ...), and adds raise_exception() and strftime_now().

Usage:
  tools/render_chat_template.py --config models/qwen3-tokenizer/tokenizer_config.json \
      --messages chat.json [--no-generation-prompt] [--enable-thinking true|false] [--variables extra.json]
"""

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: transformers uses it to mark assistant text for
    training masks; for rendering its body simply appears in place."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.now().strftime(format)


def hf_environment():
    """The jinja2 environment transformers renders chat templates in."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def hf_variables(messages, add_generation_prompt=True, enable_thinking=None, bos_token="", eos_token="", extra=None):
    """The variables apply_chat_template passes (special tokens only when the tokenizer has them)."""
    variables = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": add_generation_prompt}
    if enable_thinking is not None:
        variables["enable_thinking"] = enable_thinking
    if bos_token:
        variables["bos_token"] = bos_token
    if eos_token:
        variables["eos_token"] = eos_token
    variables.update(extra or {})
    return variables


def special_tokens(config_path):
    """bos_token / eos_token of a tokenizer_config.json (a string or an AddedToken dict; absent when null)."""
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    tokens = {}
    for name in ("bos_token", "eos_token"):
        token = config.get(name)
        tokens[name] = token.get("content", "") if isinstance(token, dict) else (token or "")
    return tokens


def template_from_config(config_path):
    """The template of a tokenizer_config.json (a chat_template.jinja next to it wins, as in transformers)."""
    config_path = Path(config_path)
    sidecar = config_path.parent / "chat_template.jinja"
    if sidecar.is_file():
        return sidecar.read_text(encoding="utf-8")
    template = json.loads(config_path.read_text(encoding="utf-8"))["chat_template"]
    if isinstance(template, list):
        template = {entry["name"]: entry["template"] for entry in template}["default"]
    return template


def render(template_source, variables):
    return hf_environment().from_string(template_source).render(**variables)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="tokenizer_config.json holding chat_template")
    parser.add_argument("--messages", required=True, help="JSON file with the list of messages")
    parser.add_argument("--no-generation-prompt", action="store_true")
    parser.add_argument("--enable-thinking", choices=["true", "false"])
    parser.add_argument("--variables", help="JSON file with extra template variables (e.g. tools)")
    args = parser.parse_args()
    messages = json.loads(Path(args.messages).read_text(encoding="utf-8"))
    extra = json.loads(Path(args.variables).read_text(encoding="utf-8")) if args.variables else None
    thinking = None if args.enable_thinking is None else args.enable_thinking == "true"
    variables = hf_variables(messages, not args.no_generation_prompt, thinking, **special_tokens(args.config),
                             extra=extra)
    sys.stdout.write(render(template_from_config(args.config), variables))


if __name__ == "__main__":
    main()
