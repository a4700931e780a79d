// Second opinion on the chat-template goldens: renders every conversation with every template
// using @huggingface/jinja (what transformers.js' apply_chat_template uses) and reports where it
// disagrees with the committed goldens, which come from Python (golden_python.py). Python is the
// reference; the disagreements are documented in README.md.
//
//   cd tools/golden/chat_template && npm ci && node golden_node.mjs [--out out/]
//
// --out DIR also writes the Node renderings in the golden file format, for inspection.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

process.env.TZ = "UTC";
const here = dirname(fileURLToPath(import.meta.url));
const fixtures = join(here, "..", "..", "..", "tests", "fixtures", "chat_templates");
const readJson = (path) => JSON.parse(readFileSync(path, "utf8"));

const outIndex = process.argv.indexOf("--out");
const outDir = outIndex > 0 ? process.argv[outIndex + 1] : null;

const models = readJson(join(fixtures, "models.json"));
const conversations = readJson(join(fixtures, "conversations.json"));

// The goldens pin "now"; @huggingface/jinja's strftime_now formats `new Date()`, so freeze the
// clock at the goldens' time for argument-less Date construction.
function freezeClock(seconds) {
  const RealDate = Date;
  const fixed = seconds * 1000;
  globalThis.Date = class extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(fixed);
      else super(...args);
    }
    static now() {
      return fixed;
    }
  };
}

function continueFinalMessage(rendered, messages) {
  let final = messages[messages.length - 1].content;
  if (Array.isArray(final)) final = [...final].reverse().find((b) => "text" in b).text;
  const loc = rendered.lastIndexOf(final.trim());
  if (loc < 0) throw new Error("final message not found in the rendered chat");
  const lstripped = final.trimStart();
  if (rendered.slice(loc, loc + lstripped.length) === final) return rendered.slice(0, loc + lstripped.length);
  return rendered.slice(0, loc + final.trim().length);
}

let agree = 0;
let disagree = 0;
for (const [model, spec] of Object.entries(models)) {
  const source = readFileSync(join(fixtures, spec.template), "utf8");
  const golden = readJson(join(fixtures, "golden", `${model}.json`));
  freezeClock(golden.now);
  const goldenByName = Object.fromEntries(golden.cases.map((c) => [c.name, c]));
  const cases = [];
  let template = null;
  let parseError = null;
  try {
    template = new Template(source);
  } catch (e) {
    parseError = String(e.message ?? e);
  }
  for (const conversation of conversations) {
    const entry = { name: conversation.name };
    try {
      if (parseError) throw new Error(`parse: ${parseError}`);
      const variables = {
        messages: conversation.messages,
        tools: conversation.tools ?? null,
        documents: null,
        add_generation_prompt: conversation.add_generation_prompt,
        ...(spec.bos_token != null ? { bos_token: spec.bos_token } : {}),
        ...(spec.eos_token != null ? { eos_token: spec.eos_token } : {}),
        ...(conversation.kwargs ?? {}),
      };
      let output = template.render(variables);
      if (conversation.continue_final_message) output = continueFinalMessage(output, conversation.messages);
      entry.output = output;
    } catch (e) {
      entry.error = String(e.message ?? e);
    }
    cases.push(entry);
    const expected = goldenByName[conversation.name];
    const same = expected && (("output" in expected && entry.output === expected.output) ||
                              ("error" in expected && "error" in entry));
    if (same) {
      agree++;
    } else {
      disagree++;
      console.log(`DIFF ${model}/${conversation.name}`);
      console.log(`  python: ${JSON.stringify(expected?.output ?? `error: ${expected?.error}`).slice(0, 400)}`);
      console.log(`  node:   ${JSON.stringify(entry.output ?? `error: ${entry.error}`).slice(0, 400)}`);
    }
  }
  if (outDir) {
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, `${model}.json`),
                  JSON.stringify({ model, template: spec.template, renderer: "@huggingface/jinja", now: golden.now, cases }, null, 1) + "\n");
  }
}
console.log(`${agree} agree, ${disagree} differ`);
