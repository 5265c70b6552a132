#!/usr/bin/env node
// Tiny Shakespeare -> GPT-2 token shards + GPT-2 tokenizer file, both in llm.c's
// binary formats, so the C trainer can read them without Python.
//
// usage: node dev/data/tinyshakespeare.js [--input PATH] [--outdir DIR] [--tokenizer PATH]
//
// Tokenization mirrors llm.c's dev/data/tinyshakespeare.py exactly, so the
// shards are byte-identical to the ones that script produces.
'use strict';

const fs = require('fs');
const path = require('path');
const { Tiktoken } = require('js-tiktoken/lite');
const gpt2 = require('js-tiktoken/ranks/gpt2');

const ROOT = path.resolve(__dirname, '../..');
const SRC_URL = 'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt';
const EOT = 50256;            // <|endoftext|>
const N_VOCAB = 50257;
const VAL_TOKENS = 32768;     // llm.c: the first 32768 tokens are the val split
// The standard file (1115394 bytes) must give exactly llm.c's counts; anything
// else means the tokenizer or the split logic drifted.
const STD_BYTES = 1115394, STD_TRAIN = 305260, STD_VAL = 32768;

function die(msg) { console.error(msg); process.exit(1); }

function parseArgs(argv) {
  const opts = {
    input: null,
    outdir: path.join(ROOT, 'dev/data/tinyshakespeare'),
    tokenizer: path.join(ROOT, 'gpt2_tokenizer.bin'),
  };
  for (let i = 0; i < argv.length; i++) {
    const key = { '--input': 'input', '--outdir': 'outdir', '--tokenizer': 'tokenizer' }[argv[i]];
    if (!key || i + 1 >= argv.length) {
      die('usage: node dev/data/tinyshakespeare.js [--input PATH] [--outdir DIR] [--tokenizer PATH]');
    }
    opts[key] = path.resolve(argv[++i]);
  }
  return opts;
}

// Returns the raw bytes of the input text (bytes, so the size check is exact).
async function readInput(input) {
  if (input) {
    if (!fs.existsSync(input)) die(`input file not found: ${input}`);
    return { name: input, data: fs.readFileSync(input) };
  }
  // the repository's copy (dev/data/README.md says where it comes from): no network needed
  const copy = path.join(ROOT, 'dev/data/tinyshakespeare.txt');
  if (fs.existsSync(copy)) return { name: copy, data: fs.readFileSync(copy) };
  try {
    const res = await fetch(SRC_URL);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return { name: SRC_URL, data: Buffer.from(await res.arrayBuffer()) };
  } catch (e) {
    die(`could not download ${SRC_URL} (${e.message}); pass --input PATH to a local copy`);
  }
}

// id -> bytes for every GPT-2 token, taken from js-tiktoken's rank table.
// Its bpe_ranks string is lines of "<marker> <first rank> <b64 token> <b64 token> ...",
// where consecutive tokens get consecutive ranks (= token ids).
function tokenBytes() {
  const table = new Array(N_VOCAB);
  for (const line of gpt2.bpe_ranks.split('\n').filter(Boolean)) {
    const [, offset, ...tokens] = line.split(' ');
    tokens.forEach((b64, i) => { table[Number(offset) + i] = Buffer.from(b64, 'base64'); });
  }
  for (const [text, id] of Object.entries(gpt2.special_tokens)) table[id] = Buffer.from(text, 'utf8');
  for (let id = 0; id < N_VOCAB; id++) {
    const b = table[id];
    if (!b) die(`tokenizer: no bytes for token id ${id}`);
    if (b.length < 1 || b.length > 255) die(`tokenizer: token ${id} has length ${b.length} (need 1..255)`);
  }
  return table;
}

function int32Header(values) {
  const h = Buffer.alloc(256 * 4);  // zero-filled: unused header slots must be 0
  values.forEach((v, i) => h.writeInt32LE(v, i * 4));
  return h;
}

function writeShard(file, tokens) {
  const body = Buffer.alloc(tokens.length * 2);
  tokens.forEach((t, i) => body.writeUInt16LE(t, i * 2));
  fs.writeFileSync(file, Buffer.concat([int32Header([20240520, 1, tokens.length]), body]));
}

function writeTokenizer(file, table) {
  const parts = [int32Header([20240328, 2, N_VOCAB, EOT])];
  for (const b of table) parts.push(Buffer.from([b.length]), b);
  fs.writeFileSync(file, Buffer.concat(parts));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { name, data } = await readInput(opts.input);
  const enc = new Tiktoken(gpt2);

  // Same as llm.c: every "\n\n"-separated section is prefixed by EOT and keeps its
  // trailing "\n\n" (except the last). encode(s, [], []) is tiktoken's
  // encode_ordinary: special-token text inside s is plain text, not token 50256.
  const sections = data.toString('utf8').split('\n\n');
  const tokens = [];
  sections.forEach((s, i) => {
    tokens.push(EOT);
    for (const t of enc.encode(i !== sections.length - 1 ? s + '\n\n' : s, [], [])) tokens.push(t);
  });
  const val = tokens.slice(0, VAL_TOKENS);
  const train = tokens.slice(VAL_TOKENS);

  if (data.length === STD_BYTES && (train.length !== STD_TRAIN || val.length !== STD_VAL)) {
    die(`token count mismatch for the standard ${STD_BYTES}-byte input: got train=${train.length} ` +
        `val=${val.length}, expected train=${STD_TRAIN} val=${STD_VAL}`);
  }

  fs.mkdirSync(opts.outdir, { recursive: true });
  const valFile = path.join(opts.outdir, 'tiny_shakespeare_val.bin');
  const trainFile = path.join(opts.outdir, 'tiny_shakespeare_train.bin');
  writeShard(valFile, val);
  writeShard(trainFile, train);
  fs.mkdirSync(path.dirname(opts.tokenizer), { recursive: true });
  writeTokenizer(opts.tokenizer, tokenBytes());

  console.log(`input:     ${name} (${data.length} bytes)`);
  console.log(`val:       ${valFile} (${val.length} tokens)`);
  console.log(`train:     ${trainFile} (${train.length} tokens)`);
  console.log(`tokenizer: ${opts.tokenizer} (${N_VOCAB} tokens)`);
}

main();
