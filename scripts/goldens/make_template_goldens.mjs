#!/usr/bin/env node
// Renders the committed chat-template corpus with @huggingface/jinja (the engine transformers.js
// uses) and compares it with the committed goldens, which follow Python Jinja2 + transformers
// (scripts/goldens/make_template_goldens.py writes them). A second, independent engine catches
// mistakes in either reference; where the two disagree, Python/HF semantics win, and this script
// says which known difference explains the case.
//
//   cd scripts/npm && npm ci --ignore-scripts     # installs the pinned @huggingface/jinja
//   node scripts/goldens/make_template_goldens.mjs           # compare, report (exit 1 on unexplained diffs)
//   node scripts/goldens/make_template_goldens.mjs --write   # also write <case>.txt where no golden exists yet
//
// Known differences of @huggingface/jinja 0.5.x from Python Jinja2 as transformers configures it:
//   - printing values: JS prints true/false and "" for none, and lists/dicts as JSON; Python prints
//     True/False/None and repr() ([1, 'a'], {'k': 'v'}). Affects `{{ x }}` and `|string` of
//     non-strings (Qwen3.5 writes tool-call arguments with `args_value | string`).
//   - numbers: JSON 1.0 becomes the JS number 1, so tojson/printing writes 1 where Python writes 1.0.
//   - dict order: JS objects put integer-like keys ("2") first; Python keeps insertion order.
//   - `'a' ~ none` and other operations on null throw in JS; Python prints "aNone".
//   - whitespace control, tojson separators (", " / ": ") and ensure_ascii=False agree with HF.
import { readFileSync, readdirSync, writeFileSync, existsSync, mkdirSync } from "node:fs";
import { dirname, join, basename } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const require = createRequire(join(root, "scripts", "npm", "package.json"));
const { Template } = await import(require.resolve("@huggingface/jinja"));

const fixtures = join(root, "tests", "fixtures", "templates");
const write = process.argv.includes("--write");
const families = JSON.parse(readFileSync(join(fixtures, "families.json"), "utf8"));
const cases = readdirSync(join(fixtures, "conversations")).filter((f) => f.endsWith(".json")).sort();

// 2025-06-01 12:00:00, the instant the Python script pins.
const strftimeNow = (fmt) => fmt.replace("%Y", "2025").replace("%m", "06").replace("%d", "01");

// Why a case may legitimately differ: the JS engine sees one of the known differences' triggers.
function explain(conv) {
  const text = JSON.stringify(conv);
  const reasons = [];
  if (/"[^"]*":\s*-?\d+\.0\b/.test(readFileSync(conv.__path, "utf8"))) reasons.push("float 1.0 vs 1");
  if (/"\d+":/.test(text)) reasons.push("integer-like dict keys");
  if (/"content":\s*null/.test(text)) reasons.push("null content");
  if (/"arguments":\s*\{[^}]*(true|false|null|\[|\{)/.test(text)) reasons.push("non-string argument values printed");
  return reasons;
}

let same = 0, explained = 0, unexplained = 0, written = 0;
for (const [family, spec] of Object.entries(families)) {
  const source = readFileSync(join(fixtures, spec.template), "utf8");
  // strftime_now is predefined (real clock) and cannot be overridden: call a pinned twin instead.
  const template = new Template(source.replaceAll("strftime_now(", "ft_pinned_strftime_now("));
  const outdir = join(fixtures, "golden", family);
  mkdirSync(outdir, { recursive: true });
  for (const file of cases) {
    const path = join(fixtures, "conversations", file);
    const conv = JSON.parse(readFileSync(path, "utf8"));
    Object.defineProperty(conv, "__path", { value: path, enumerable: false });
    const ctx = {
      messages: conv.messages, tools: conv.tools ?? null, documents: null,
      add_generation_prompt: conv.add_generation_prompt ?? true,
      ...spec.special_tokens,
      ...(conv.enable_thinking !== undefined ? { enable_thinking: conv.enable_thinking } : {}),
      ...(conv.chat_template_kwargs ?? {}),
      ft_pinned_strftime_now: strftimeNow,  // raise_exception is predefined by @huggingface/jinja
    };
    let text = null, error = null;
    try { text = template.render(ctx); } catch (e) { error = e.message; }
    const stem = basename(file, ".json");
    const goldenTxt = join(outdir, stem + ".txt"), goldenErr = join(outdir, stem + ".error");
    if (!existsSync(goldenTxt) && !existsSync(goldenErr)) {
      if (write && text !== null) { writeFileSync(goldenTxt, text); written++; }
      continue;
    }
    const want = existsSync(goldenTxt) ? readFileSync(goldenTxt, "utf8") : null;
    if ((want === null && text === null) || want === text) { same++; continue; }
    const reasons = explain(conv);
    if (reasons.length) {
      explained++;
      console.log(`differs (known: ${reasons.join(", ")}): ${family}/${stem}`);
    } else {
      unexplained++;
      console.log(`DIFFERS: ${family}/${stem}${error ? " (js error: " + error + ")" : ""}`);
    }
  }
}
console.log(`${same} identical to the Python goldens, ${explained} differ for known reasons, ${unexplained} unexplained, ${written} written`);
process.exit(unexplained ? 1 : 0);
