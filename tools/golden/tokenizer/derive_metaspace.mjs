// Derives a Metaspace-pre-tokenizer variant of a SentencePiece-style tokenizer.json (Llama 2's,
// which uses the legacy Prepend + Replace normalizer): normalizer null and pre_tokenizer
// Metaspace { replacement "▁", prepend_scheme "first", split false }, the layout Mistral and
// Mixtral files written by recent transformers use. Vocabulary, merges, added tokens, the
// post-processor and the decoder are kept as they are.
//
//   node derive_metaspace.mjs SOURCE_DIR DEST_DIR
import fs from "node:fs";
import path from "node:path";

const [source, dest] = process.argv.slice(2);
if (!source || !dest) {
  console.error("usage: node derive_metaspace.mjs SOURCE_DIR DEST_DIR");
  process.exit(2);
}
const tokenizer = JSON.parse(fs.readFileSync(path.join(source, "tokenizer.json"), "utf8"));
tokenizer.normalizer = null;
tokenizer.pre_tokenizer = {
  type: "Metaspace",
  replacement: "\u2581",
  prepend_scheme: "first",
  split: false,
};
fs.mkdirSync(dest, { recursive: true });
fs.writeFileSync(path.join(dest, "tokenizer.json"), JSON.stringify(tokenizer, null, 2));
fs.copyFileSync(path.join(source, "tokenizer_config.json"), path.join(dest, "tokenizer_config.json"));
