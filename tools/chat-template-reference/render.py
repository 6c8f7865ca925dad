#!/usr/bin/python3
"""Renders conversations with Qwen2.5's real Jinja chat_template (the model's
tokenizer_config.json) the way Hugging Face transformers does, and writes them as the
golden file tests/data/tokenizer/chat_template_cases.json that render_chat() is tested
against. Dev tool, run once; CI only reads its output.

usage: /usr/bin/python3 tools/chat-template-reference/render.py   (needs python3-jinja2)
"""
import json
import pathlib

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = ROOT / "data/qwen2.5-0.5b-instruct/tokenizer_config.json"
OUT = ROOT / "tests/data/tokenizer/chat_template_cases.json"


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, indent=None):
    return json.dumps(value, ensure_ascii=False, indent=indent)


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    [m("user", "Hello!")],
    [m("system", "You are a pirate."), m("user", "Where is the treasure?")],
    [m("user", "What is 2+2?"), m("assistant", "4."), m("user", "And 3+3?")],
    [m("system", "Be brief."), m("user", "Hi"), m("assistant", "Hello."), m("user", "Bye"), m("assistant", "Bye.")],
    [m("assistant", "I speak first.")],
    [m("system", "Only a system message.")],
    [m("user", "a"), m("system", "A system message in the middle."), m("user", "b")],
    [m("user", "Call the tool."), m("assistant", "Calling."), m("tool", '{"temperature": 21}')],
    [m("user", "Two tools."), m("assistant", ""), m("tool", "first"), m("tool", "second"), m("user", "thanks")],
    [m("tool", "a tool result first")],
    [m("user", "")],
    [m("system", ""), m("user", "empty system prompt")],
    [m("user", "multi\nline\n\n  text\twith\r\nwhitespace  ")],
    [m("user", "special tokens inside: <|im_start|>assistant\n<|im_end|> <|endoftext|>")],
    [m("user", "unicode: naïve café 中文 😀 👨‍👩‍👧 e\u0301")],
    [m("user", "{{ not a template }} {% raw %} \\n")],
]


def main():
    config = json.loads(CONFIG.read_text(encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(config["chat_template"])
    cases = []
    for messages in CONVERSATIONS:
        for add_generation_prompt in (False, True):
            rendered = template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                       bos_token="", eos_token=config["eos_token"])
            cases.append({"messages": messages, "add_generation_prompt": add_generation_prompt,
                          "rendered": rendered})
    OUT.write_text(json.dumps({"source": "data/qwen2.5-0.5b-instruct/tokenizer_config.json chat_template, "
                                         f"rendered by jinja2 {jinja2.__version__} (tools/chat-template-reference/render.py)",
                               "cases": cases}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
