// Writes tests/fixtures/tokenizers/golden/<name>.json: for every corpus.json string, the ids
// Hugging Face's JS tokenizers (@huggingface/tokenizers, the tokenizer code of
// @huggingface/transformers 4.x) give with and without special tokens, and the decoded text.
// tests/unit/tokenizer_golden_test.cc demands identical results from locus.
//
//   ../../../scripts/fetch_test_data.sh && npm ci && node golden_js.mjs [DATA_DIR]
//
// DATA_DIR defaults to build/test-data/tokenizers (LOCUS_TOKENIZER_DATA_DIR overrides it).
// golden_python.py writes the same format from the Python `tokenizers` library.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const dataDir = path.resolve(
  process.argv[2] ?? process.env.LOCUS_TOKENIZER_DATA_DIR ?? path.join(root, "build/test-data/tokenizers"),
);
const outDir = path.join(root, "tests/fixtures/tokenizers/golden");
const names = ["qwen3", "deepseek_v3", "llama3_1", "gptoss", "llama2", "llama2_metaspace"];
const engine = "@huggingface/tokenizers " +
  JSON.parse(fs.readFileSync(path.join(here, "node_modules/@huggingface/tokenizers/package.json"))).version;

const corpus = JSON.parse(fs.readFileSync(path.join(here, "corpus.json"), "utf8"));

function textOf(entry) {
  if (entry.bytes_hex === undefined) return entry.text;
  // WHATWG's decoder replaces maximal ill-formed subparts, like Rust's from_utf8_lossy.
  return new TextDecoder("utf-8").decode(Buffer.from(entry.bytes_hex, "hex"));
}

function decode(tokenizer, ids, skip) {
  if (ids.length === 0) return "";  // the JS port throws on an empty list
  return tokenizer.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
}

fs.mkdirSync(outDir, { recursive: true });
for (const name of names) {
  const dir = path.join(dataDir, name);
  const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const tokenizer = new Tokenizer(json, config);
  // transformers replaces the post-processor with "[bos] $A [eos]" when tokenizer_config.json
  // sets add_bos_token / add_eos_token (the JS port ignores these keys); mirror it.
  const configTemplate = "add_bos_token" in config || "add_eos_token" in config;
  const tokenId = (token) => {
    const content = typeof token === "string" ? token : token?.content;
    return content == null ? undefined : tokenizer.token_to_id(content);
  };
  const bos = config.add_bos_token ? tokenId(config.bos_token) : undefined;
  const eos = config.add_eos_token ? tokenId(config.eos_token) : undefined;

  const cases = corpus.cases.map((entry, index) => {
    const text = textOf(entry);
    const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
    const idsSpecial = configTemplate
      ? [...(bos === undefined ? [] : [bos]), ...ids, ...(eos === undefined ? [] : [eos])]
      : tokenizer.encode(text, { add_special_tokens: true }).ids;
    const out = { index, text };
    if (entry.bytes_hex !== undefined) out.bytes_hex = entry.bytes_hex;
    out.ids = ids;
    out.ids_special = idsSpecial;
    // Decodes are stored only when they differ from the input, to keep the files small.
    const decoded = decode(tokenizer, idsSpecial, false);
    const decodedSkip = decode(tokenizer, idsSpecial, true);
    if (decoded !== text) out.decoded = decoded;
    if (decodedSkip !== text) out.decoded_skip = decodedSkip;
    return out;
  });
  const header = {
    tokenizer: name,
    source: fs.existsSync(path.join(dir, ".source")) ? fs.readFileSync(path.join(dir, ".source"), "utf8").trim() : "",
    engine,
    special_tokens: configTemplate
      ? `tokenizer_config.json add_bos_token/add_eos_token template (bos ${bos}, eos ${eos})`
      : "tokenizer.json post_processor",
    note: "decoded / decoded_skip: decode(ids_special) without / with skip_special_tokens, omitted when equal to text",
  };
  const body =
    "{\n" +
    Object.entries(header).map(([k, v]) => `${JSON.stringify(k)}: ${JSON.stringify(v)},\n`).join("") +
    `"cases": [\n${cases.map((c) => JSON.stringify(c)).join(",\n")}\n]\n}\n`;
  fs.writeFileSync(path.join(outDir, `${name}.json`), body);
  console.log(`${name}: ${cases.length} cases -> ${path.relative(root, path.join(outDir, name + ".json"))} (${body.length} bytes)`);
}
