#!/usr/bin/env python3
"""Reference renders of the committed chat-template corpus with Python Jinja2, configured exactly as
transformers' apply_chat_template configures it (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, HF's tojson/raise_exception/strftime_now). These are the goldens the
C++ renderer must match byte for byte (tests/protocol/chat_template_golden_test.cpp).

    python3 scripts/goldens/make_template_goldens.py            # (re)write the goldens
    python3 scripts/goldens/make_template_goldens.py --check    # compare only; exit 1 on a diff

Needs only jinja2 (3.1.x). When transformers is importable, every case is also rendered with
transformers' own render_jinja_template and any difference is reported, so a machine with
transformers confirms that this environment is HF's.

Inputs: tests/fixtures/templates/families.json (template file + special tokens per family) and
tests/fixtures/templates/conversations/*.json ({"messages", "tools", "add_generation_prompt"
(default true), "enable_thinking", "chat_template_kwargs"}). Output: golden/<family>/<case>.txt, or
<case>.error holding the exception text when the template itself refuses the conversation.
strftime_now is pinned to 2025-06-01 12:00:00 so gpt-oss's "Current date" is reproducible.
"""
import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "templates"
FIXED_NOW = datetime(2025, 6, 1, 12, 0, 0)


class TemplateError(Exception):
    pass


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: transformers' AssistantTracker, render-only."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # transformers overrides Jinja's tojson: no HTML escaping, no key sorting, non-ASCII kept.
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def template_kwargs(case, special_tokens):
    # apply_chat_template: render(messages=..., tools=..., documents=..., add_generation_prompt=...,
    # **special_tokens_map, **kwargs)
    kw = dict(special_tokens)
    if "enable_thinking" in case:
        kw["enable_thinking"] = case["enable_thinking"]
    kw.update(case.get("chat_template_kwargs", {}))
    return kw


def render(env, source, case, special_tokens):
    try:
        out = env.from_string(source).render(
            messages=case["messages"], tools=case.get("tools"), documents=None,
            add_generation_prompt=case.get("add_generation_prompt", True), **template_kwargs(case, special_tokens))
        return out, None
    except Exception as e:  # the template refused the conversation: that is the golden too
        return None, f"{type(e).__name__}: {e}"


def render_with_transformers(source, case, special_tokens):
    try:
        from transformers.utils import chat_template_utils as ctu
    except Exception:
        return None
    if not hasattr(ctu, "render_jinja_template"):
        return None
    import transformers.utils.chat_template_utils as m
    m.strftime_now = lambda fmt: FIXED_NOW.strftime(fmt)  # best effort: pin the clock
    try:
        rendered, _ = ctu.render_jinja_template(
            conversations=[case["messages"]], tools=case.get("tools"), chat_template=source,
            add_generation_prompt=case.get("add_generation_prompt", True), **template_kwargs(case, special_tokens))
        return rendered[0], None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare with the committed goldens, write nothing")
    args = ap.parse_args()
    env = make_env()
    families = json.loads((FIXTURES / "families.json").read_text(encoding="utf-8"))
    cases = sorted((FIXTURES / "conversations").glob("*.json"))
    diffs = rendered_ok = errors = 0
    for family, spec in families.items():
        source = (FIXTURES / spec["template"]).read_text(encoding="utf-8")
        outdir = FIXTURES / "golden" / family
        outdir.mkdir(parents=True, exist_ok=True)
        for path in cases:
            case = json.loads(path.read_text(encoding="utf-8"))
            text, err = render(env, source, case, spec.get("special_tokens", {}))
            hf = render_with_transformers(source, case, spec.get("special_tokens", {}))
            if hf is not None and hf != (text, err) and not (err and hf[1]):
                print(f"transformers disagrees: {family}/{path.stem}", file=sys.stderr)
                diffs += 1
            txt, erf = outdir / f"{path.stem}.txt", outdir / f"{path.stem}.error"
            if args.check:
                want = txt.read_bytes().decode("utf-8") if txt.exists() else None
                if (err is None and want != text) or (err is not None and not erf.exists()):
                    print(f"golden differs: {family}/{path.stem}", file=sys.stderr)
                    diffs += 1
                rendered_ok, errors = rendered_ok + (err is None), errors + (err is not None)
                continue
            for stale in (txt, erf):
                stale.unlink(missing_ok=True)
            if err is None:
                txt.write_bytes(text.encode("utf-8"))
                rendered_ok += 1
            else:
                erf.write_text(err + "\n", encoding="utf-8")
                errors += 1
    print(f"{len(families)} families x {len(cases)} conversations: {rendered_ok} rendered, {errors} refused, {diffs} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
