// gpt2_tokenizer_ref.mjs — the reference ids of hpt's GPT-2 tokenizer tests:
// for every tests/fixtures/gpt2_tok/*.txt, writes *.ids (one id per line)
// with js-tiktoken's getEncoding("gpt2"), special tokens treated as text
// (encode(text, [], []): what hpt does). js-tiktoken comes from npm, as
// scripts/install-deps.sh installs it (HPT_NPM, default
// /usr/local/share/hpt/npm).
//
//   node tools/ref/gpt2_tokenizer_ref.mjs
import { createRequire } from "module";
import fs from "fs";
import path from "path";
import { fileURLToPath } from "url";

const npm = process.env.HPT_NPM || "/usr/local/share/hpt/npm";
const require = createRequire(path.join(npm, "node_modules", "noop.js"));
const { getEncoding } = require("js-tiktoken");
const pkg = JSON.parse(fs.readFileSync(path.join(npm, "node_modules", "js-tiktoken", "package.json"), "utf8"));
const enc = getEncoding("gpt2");
const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "tests", "fixtures", "gpt2_tok");
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".txt")).sort()) {
  // the bytes are UTF-8 (the fixtures are written so); a JS string holds them exactly
  const text = fs.readFileSync(path.join(dir, f), "utf8");
  const ids = enc.encode(text, [], []);
  fs.writeFileSync(path.join(dir, f.replace(/\.txt$/, ".ids")), ids.join("\n") + (ids.length ? "\n" : ""));
  if (enc.decode(ids) !== text) throw new Error(f + ": js-tiktoken does not round-trip it");
  console.log(`${f}: ${ids.length} ids`);
}
fs.writeFileSync(path.join(dir, "SOURCE"), `js-tiktoken ${pkg.version} getEncoding("gpt2"), node ${process.version}\n` +
                 "made by tools/ref/gpt2_tokenizer_ref.mjs\n");
