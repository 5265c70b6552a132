#!/usr/bin/env node
// HellaSwag's validation set -> llm.c's eval file, for the trainers' -h 1 (llmc/hellaswag.h).
//
// usage: node dev/data/hellaswag.js [--local FILE] [--out FILE]
//
// Reads hellaswag_val.jsonl (one JSON object per line with `ctx`, `endings` (4 strings) and
// `label` (0..3)) from --local FILE, or downloads it from the HellaSwag repository (HELLASWAG_URL
// overrides the address; the download is kept beside the output as hellaswag_val.jsonl, so a
// rerun reads it instead). Tokenized as llm.c's dev/data/hellaswag.py does: GPT-2 BPE of the
// context as it is, and of each ending with a space in front (" " + ending), since the ending
// continues the context's last word; special-token text is plain text (encode_ordinary).
//
// The output (default dev/data/hellaswag/hellaswag_val.bin) is a 256-int32 header (magic
// 20240522, version 1, number of examples, longest example in bytes), then per example uint16s:
// 65535, the example's bytes (these fields included), its index, the label, 4, the context's
// length and tokens, each ending's length and tokens. Written to FILE.tmp, renamed when complete.
// A bad line (not JSON, a missing field, a label outside 0..3, not 4 endings, an empty context)
// stops it with one line naming the file and the line; nothing is written.
'use strict';

const fs = require('fs');
const path = require('path');
const { Tiktoken } = require('js-tiktoken/lite');
const gpt2 = require('js-tiktoken/ranks/gpt2');

const ROOT = path.resolve(__dirname, '../..');
const URL = process.env.HELLASWAG_URL || 'https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl';
const MAGIC = 20240522, VERSION = 1, DELIMITER = 65535, ENDINGS = 4;
const USAGE = 'usage: node dev/data/hellaswag.js [--local FILE] [--out FILE]';

function die(msg) { console.error(msg); process.exit(1); }

function parseArgs(argv) {
  const o = { local: null, out: path.join(ROOT, 'dev/data/hellaswag/hellaswag_val.bin') };
  for (let i = 0; i < argv.length; i += 2) {
    const key = { '--local': 'local', '--out': 'out' }[argv[i]];
    if (!key || i + 1 >= argv.length) die(USAGE);
    o[key] = path.resolve(argv[i + 1]);
  }
  return o;
}

// The jsonl's text: --local FILE, the kept download, or a fresh download (kept for next time).
async function readJsonl(o) {
  if (o.local) {
    if (!fs.existsSync(o.local)) die(`${o.local}: no such file`);
    return { name: o.local, text: fs.readFileSync(o.local, 'utf8') };
  }
  const kept = path.join(path.dirname(o.out), 'hellaswag_val.jsonl');
  if (fs.existsSync(kept)) return { name: kept, text: fs.readFileSync(kept, 'utf8') };
  let data;
  try {
    const res = await fetch(URL);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    data = Buffer.from(await res.arrayBuffer());
  } catch (e) {
    die(`could not download ${URL} (${e.message}); download it elsewhere and pass --local FILE`);
  }
  fs.mkdirSync(path.dirname(kept), { recursive: true });
  fs.writeFileSync(kept + '.tmp', data);
  fs.renameSync(kept + '.tmp', kept);
  console.log(`downloaded ${URL} -> ${kept}`);
  return { name: kept, text: data.toString('utf8') };
}

// One line's example, checked: { ctx, endings, label }.
function parseExample(line, where) {
  let ex;
  try { ex = JSON.parse(line); } catch (e) { die(`${where}: not JSON (${e.message})`); }
  if (ex === null || typeof ex !== 'object') die(`${where}: expected a JSON object`);
  if (typeof ex.ctx !== 'string' || ex.ctx.length === 0) die(`${where}: expected a non-empty string field 'ctx'`);
  if (!Array.isArray(ex.endings) || ex.endings.length !== ENDINGS || !ex.endings.every((e) => typeof e === 'string')) {
    die(`${where}: expected 'endings', an array of ${ENDINGS} strings`);
  }
  const label = ex.label; // an integer in the val file (a string "2" is refused, not guessed at)
  if (!Number.isInteger(label) || label < 0 || label >= ENDINGS) die(`${where}: expected 'label' an integer 0..${ENDINGS - 1}, got ${JSON.stringify(label)}`);
  return { ctx: ex.ctx, endings: ex.endings, label };
}

// One example's uint16 fields, as described at the top.
function exampleFields(index, label, ctxTokens, endingTokens) {
  const f = [DELIMITER, 0, index, label, ENDINGS, ctxTokens.length, ...ctxTokens];
  for (const e of endingTokens) f.push(e.length, ...e);
  f[1] = 2 * f.length;
  return f;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const { name, text } = await readJsonl(o);
  const enc = new Tiktoken(gpt2);
  const lines = text.split('\n');
  const examples = [];
  let longest = 0;
  lines.forEach((line, n) => {
    if (line.trim() === '') return;
    const where = `${name} line ${n + 1}`;
    const ex = parseExample(line, where);
    const ctx = enc.encode(ex.ctx, [], []);
    const ends = ex.endings.map((e) => enc.encode(' ' + e, [], []));
    const index = examples.length;
    if (index >= 65535) die(`${where}: more than 65535 examples do not fit the uint16 index`);
    const f = exampleFields(index, ex.label, ctx, ends);
    if (f[1] >= 65536) die(`${where}: the example is ${f[1]} bytes, more than the uint16 byte count holds`);
    longest = Math.max(longest, f[1]);
    examples.push(f);
  });
  if (examples.length === 0) die(`${name}: no examples`);
  const header = Buffer.alloc(256 * 4);
  [MAGIC, VERSION, examples.length, longest].forEach((v, i) => header.writeInt32LE(v, 4 * i));
  const fields = examples.flat();
  const body = Buffer.alloc(2 * fields.length);
  fields.forEach((v, i) => body.writeUInt16LE(v, 2 * i));
  fs.mkdirSync(path.dirname(o.out), { recursive: true });
  fs.writeFileSync(o.out + '.tmp', Buffer.concat([header, body]));
  fs.renameSync(o.out + '.tmp', o.out);
  console.log(`${name}: ${examples.length} examples, longest ${longest} bytes -> ${o.out}`);
}

main();
