#!/usr/bin/env python3
"""Golden chat prompts for locus' chat-template tests, rendered the way Hugging Face transformers
renders them (tokenizer.apply_chat_template(..., tokenize=False)).

For every model in tests/fixtures/chat_templates/models.json and every conversation in
tests/fixtures/chat_templates/conversations.json this writes the rendered prompt (or the error
transformers raises) to tests/fixtures/chat_templates/golden/<model>.json.

Renderer, in order of preference (--renderer auto):
  1. transformers' own code: transformers.utils.chat_template_utils.render_jinja_template, or
     _compile_jinja_template on versions that predate it;
  2. "replica": jinja2 configured exactly as transformers configures it (ImmutableSandboxedEnvironment,
     trim_blocks, lstrip_blocks, loopcontrols, the {% generation %} tag, json.dumps-based tojson,
     raise_exception, strftime_now), for machines without transformers. The committed goldens
     record which renderer produced them.

strftime_now() sees a fixed time (NOW, in UTC) so that templates that print today's date (GPT-OSS)
stay reproducible; the C++ test renders with the same time and TZ=UTC.

  python3 tools/golden/chat_template/golden_python.py            # write the goldens
  python3 tools/golden/chat_template/golden_python.py --check    # compare, exit 1 on a difference
"""
import argparse
import datetime as _datetime
import json
import os
import sys
import time

NOW = 1736942400  # 2025-01-15 12:00:00 UTC
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "chat_templates")

os.environ["TZ"] = "UTC"
time.tzset()


class FixedDatetime(_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return _datetime.datetime.fromtimestamp(NOW, tz)


def replica_compile(template):
    """transformers.utils.chat_template_utils._compile_jinja_template, reproduced."""
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class AssistantTracker(Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FixedDatetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template)


def continue_final_message(rendered, messages):
    """The post-processing apply_chat_template does for continue_final_message=True."""
    final_message = messages[-1]["content"]
    if isinstance(final_message, (list, tuple)):
        for block in reversed(final_message):
            if "text" in block:
                final_message = block["text"]
                break
        else:
            raise ValueError("continue_final_message is set but we could not find any text to continue in the final message!")
    if final_message.strip() not in rendered:
        raise ValueError("continue_final_message is set but the final message does not appear in the chat after applying the chat template!")
    loc = rendered.rindex(final_message.strip())
    if rendered[loc : loc + len(final_message.lstrip())] == final_message:
        return rendered[: loc + len(final_message.lstrip())]
    return rendered[: loc + len(final_message.strip())]


def make_renderer(kind):
    """Returns (description, render(template, case, tokens) -> str)."""
    if kind in ("auto", "transformers"):
        try:
            import transformers
            from transformers.utils import chat_template_utils as ctu
        except ImportError:
            if kind == "transformers":
                raise
        else:
            ctu.datetime = FixedDatetime  # strftime_now() calls datetime.now()
            if hasattr(ctu, "render_jinja_template"):
                def render(template, case, tokens):
                    out, _ = ctu.render_jinja_template(
                        conversations=[case["messages"]], tools=case.get("tools"), documents=None,
                        chat_template=template, add_generation_prompt=case["add_generation_prompt"],
                        continue_final_message=case.get("continue_final_message", False),
                        **tokens, **case.get("kwargs", {}))
                    return out[0]
                return f"transformers {transformers.__version__} render_jinja_template", render

            def render(template, case, tokens):
                compiled = ctu._compile_jinja_template(template)
                out = compiled.render(messages=case["messages"], tools=case.get("tools"), documents=None,
                                      add_generation_prompt=case["add_generation_prompt"],
                                      **{**tokens, **case.get("kwargs", {})})
                if case.get("continue_final_message"):
                    out = continue_final_message(out, case["messages"])
                return out
            return f"transformers {transformers.__version__} _compile_jinja_template", render

    import jinja2

    def render(template, case, tokens):
        out = replica_compile(template).render(messages=case["messages"], tools=case.get("tools"), documents=None,
                                               add_generation_prompt=case["add_generation_prompt"],
                                               **{**tokens, **case.get("kwargs", {})})
        if case.get("continue_final_message"):
            out = continue_final_message(out, case["messages"])
        return out
    return f"jinja2 {jinja2.__version__} with transformers' chat-template environment (replica)", render


def golden_for(model, spec, conversations, description, render):
    with open(os.path.join(FIXTURES, spec["template"]), encoding="utf-8") as f:
        template = f.read()
    tokens = {k: spec[k] for k in ("bos_token", "eos_token") if spec.get(k) is not None}
    cases = []
    for case in conversations:
        entry = {"name": case["name"]}
        try:
            entry["output"] = render(template, case, tokens)
        except Exception as e:  # the golden records what transformers raises
            entry["error_type"] = type(e).__name__
            entry["error"] = str(e)
        cases.append(entry)
    return {"model": model, "template": spec["template"], "renderer": description, "now": NOW,
            "timezone": "UTC", "cases": cases}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed goldens")
    parser.add_argument("--renderer", choices=["auto", "transformers", "replica"], default="auto")
    parser.add_argument("--out", default=os.path.join(FIXTURES, "golden"))
    args = parser.parse_args()

    with open(os.path.join(FIXTURES, "models.json"), encoding="utf-8") as f:
        models = json.load(f)
    with open(os.path.join(FIXTURES, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    description, render = make_renderer(args.renderer)
    print(f"renderer: {description}")
    os.makedirs(args.out, exist_ok=True)
    differences = 0
    for model, spec in models.items():
        golden = golden_for(model, spec, conversations, description, render)
        path = os.path.join(args.out, f"{model}.json")
        if args.check:
            with open(path, encoding="utf-8") as f:
                committed = {c["name"]: c for c in json.load(f)["cases"]}
            for case in golden["cases"]:
                old = committed.get(case["name"], {})
                if case.get("output") != old.get("output") or ("error" in case) != ("error" in old):
                    differences += 1
                    print(f"DIFF {model}/{case['name']}:\n  now:       {case!r}\n  committed: {old!r}")
        else:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(golden, f, ensure_ascii=False, indent=1)
                f.write("\n")
        ok = sum("output" in c for c in golden["cases"])
        print(f"{model}: {ok} rendered, {len(golden['cases']) - ok} errors")
    if args.check:
        print(f"{differences} differences")
        sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
