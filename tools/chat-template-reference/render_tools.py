#!/usr/bin/python3
"""Renders conversations with tools through Qwen2.5's real Jinja chat_template (its tools
branch) the way Hugging Face transformers does (tojson = json.dumps(ensure_ascii=False),
default separators ", " and ": ", keys in the order given), and writes the golden file
tests/data/tokenizer/chat_template_tool_cases.json that the server's rendering of OpenAI
requests with `tools`, `tool_calls` and `tool` messages is tested against byte for byte.

Each case stores the OpenAI request fields ("messages", "tools": function.arguments as a JSON
*string*, as clients send them) and the render. The template needs arguments as an object
(`tool_call.arguments | tojson` of a string would render a quoted string), so, as vLLM does,
the arguments string is parsed before rendering. Dev tool, run once; CI only reads its output.

usage: /usr/bin/python3 tools/chat-template-reference/render_tools.py   (needs python3-jinja2)
"""
import copy
import json
import pathlib

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = ROOT / "data/qwen2.5-0.5b-instruct/tokenizer_config.json"
OUT = ROOT / "tests/data/tokenizer/chat_template_tool_cases.json"


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, indent=None):
    return json.dumps(value, ensure_ascii=False, indent=indent)


def fn(name, description, parameters):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


WEATHER = fn("get_weather", "Get the current weather in a city.",
             {"type": "object",
              "properties": {"city": {"type": "string", "description": "The city, e.g. Paris"},
                             "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
              "required": ["city"]})
TIME = fn("get_time", "Current time (UTC).", {"type": "object", "properties": {}})
SEARCH = fn("search", "Search the web — naïve café 中文 \"quoted\" <b>tags</b> & more\nsecond line",
            {"type": "object",
             "properties": {"query": {"type": "string", "minLength": 1},
                            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
                            "filters": {"type": "object",
                                        "properties": {"lang": {"type": "string"}, "safe": {"type": "boolean"}},
                                        "additionalProperties": False},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "score": {"type": "number", "minimum": 0.5}},
             "required": ["query"]})
# Keys in an unusual order, no description: the render keeps the order it is given.
ODD = {"function": {"parameters": {"required": ["x"], "properties": {"x": {"type": "integer"}}, "type": "object"},
                    "name": "odd_order"}, "type": "function"}


def call(id_, name, arguments):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


def m(role, content, **extra):
    d = {"role": role, "content": content}
    d.update(extra)
    return d


CASES = [
    # one tool
    ([WEATHER], [m("user", "What is the weather in Paris?")]),
    # several tools
    ([WEATHER, TIME, SEARCH, ODD], [m("user", "Search for news.")]),
    # system message + tools
    ([WEATHER], [m("system", "You are a weather bot."), m("user", "Weather in Oslo?")]),
    # multi-turn: call -> tool result -> answer -> next question
    ([WEATHER], [m("user", "Weather in Paris?"),
                 m("assistant", None, tool_calls=[call("call_1", "get_weather", {"city": "Paris"})]),
                 m("tool", '{"temperature": 21, "sky": "clear"}', tool_call_id="call_1"),
                 m("assistant", "It is 21 °C and clear in Paris."),
                 m("user", "And in Oslo, in fahrenheit?")]),
    # two calls in one turn (with text before them), two consecutive tool messages
    ([WEATHER, TIME], [m("system", "Be brief."), m("user", "Weather in Paris and the time?"),
                       m("assistant", "Let me check both.",
                         tool_calls=[call("call_a", "get_weather", {"city": "Paris", "unit": "celsius"}),
                                     call("call_b", "get_time", {})]),
                       m("tool", "21", tool_call_id="call_a"),
                       m("tool", "12:00", tool_call_id="call_b")]),
    # arguments with nested values, unicode, quotes, newlines, numbers
    ([SEARCH], [m("user", "Find it."),
                m("assistant", "", tool_calls=[call("call_x", "search",
                                                    {"query": "café \"au lait\"\nline 2 </tool_call>",
                                                     "limit": 3, "filters": {"lang": "fr", "safe": True},
                                                     "tags": ["a", "b"], "score": 0.75, "none": None})]),
                m("tool", "no results", tool_call_id="call_x")]),
    # tool calls in the history of a request that no longer sends tools
    (None, [m("user", "Weather?"),
            m("assistant", None, tool_calls=[call("call_1", "get_weather", {"city": "Rome"})]),
            m("tool", "sunny", tool_call_id="call_1"),
            m("user", "thanks")]),
]


def for_template(messages):
    out = copy.deepcopy(messages)
    for msg in out:
        for tc in msg.get("tool_calls", []):
            tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
    return out


def main():
    config = json.loads(CONFIG.read_text(encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(config["chat_template"])
    cases = []
    for tools, messages in CASES:
        for add_generation_prompt in (False, True):
            rendered = template.render(messages=for_template(messages), tools=tools,
                                       add_generation_prompt=add_generation_prompt,
                                       bos_token="", eos_token=config["eos_token"])
            case = {"messages": messages, "add_generation_prompt": add_generation_prompt, "rendered": rendered}
            if tools is not None:
                case["tools"] = tools
            cases.append(case)
    OUT.write_text(json.dumps({"source": "data/qwen2.5-0.5b-instruct/tokenizer_config.json chat_template (tools branch), "
                                         f"rendered by jinja2 {jinja2.__version__} (tools/chat-template-reference/render_tools.py)",
                               "cases": cases}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
