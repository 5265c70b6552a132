#!/usr/bin/env node
// FineWeb (sample-10BT) or FineWeb-Edu -> GPT-2 token shards in llm.c's format, resumable.
//
// usage: node dev/data/fineweb.js [--edu] [--local DIR] [--out DIR] [--shard-size N]
//                                 [--max-files K] [--workers N] [--stop-after-shards K]
//   --out DIR      default dev/data/fineweb10B (--edu: dev/data/edu_fineweb10B)
//   --shard-size N tokens per shard, default 100000000 (llm.c's)
//   --max-files K  only the first K source files
//   --workers N    tokenizer threads, default: the number of CPUs (the output does not depend on it)
//   --stop-after-shards K  test hook: SIGKILL itself halfway through writing the (K+1)-th shard
//
// Source: the parquet files of HuggingFaceFW/fineweb (or fineweb-edu) under sample/10BT, read
// for their `text` column in file-name order. --local DIR reads DIR/*.parquet instead of the
// network; without it, the files are downloaded one at a time into OUT/source/ (each to a .part
// name, renamed when its size matches the listing), so OUT/source can later be passed to --local.
//
// Output, as llm.c's dev/data/fineweb.py: every document is <|endoftext|> (50256) followed by
// its GPT-2 BPE tokens (encode_ordinary); the token stream is cut into shards of exactly
// --shard-size tokens (a document may straddle two shards), the last shard holds the rest.
// Shard 0 is val: fineweb_val_000000.bin, then fineweb_train_000001.bin, ... (edu_fineweb_* with
// --edu). Each shard: a 256 x int32 header (20240520, 1, token count, zeros), then uint16 tokens.
//
// Resume: each shard is written to NAME.tmp and renamed when complete, then OUT/<name>_state.json
// records where in the source (file, row, token within that row's document) each shard starts.
// A rerun checks the shards already written, starts at the first missing or wrong one, skips the
// source files before it, and writes the same bytes an uninterrupted run writes (the tokenizer is
// deterministic and the workers' results are consumed in document order).
//
// Codecs: whatever hyparquet + hyparquet-compressors read (UNCOMPRESSED, SNAPPY, GZIP, BROTLI,
// ZSTD, LZ4, LZ4_RAW).
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { Worker, isMainThread, parentPort } = require('worker_threads');

const EOT = 50256;
// where the Hugging Face API and files are; the tests point it at a local mock server
const HF = (process.env.FINEWEB_HF_URL || 'https://huggingface.co').replace(/\/$/, '');
const MAGIC = 20240520, VERSION = 1;
const HEADER_BYTES = 256 * 4;

if (!isMainThread) {
  // Worker: tokenize batches of documents, each as [EOT, ...encode_ordinary(text)].
  const { Tiktoken } = require('js-tiktoken/lite');
  const enc = new Tiktoken(require('js-tiktoken/ranks/gpt2'));
  parentPort.on('message', ({ id, texts }) => {
    const lengths = new Uint32Array(texts.length);
    const parts = [];
    let total = 0;
    texts.forEach((t, i) => {
      const toks = enc.encode(t, [], []);
      lengths[i] = toks.length + 1;
      total += toks.length + 1;
      parts.push(toks);
    });
    const tokens = new Uint16Array(total);
    let p = 0;
    for (const toks of parts) { tokens[p++] = EOT; tokens.set(toks, p); p += toks.length; }
    parentPort.postMessage({ id, tokens, lengths }, [tokens.buffer, lengths.buffer]);
  });
  return;
}

const ROOT = path.resolve(__dirname, '../..');
const USAGE = 'usage: node dev/data/fineweb.js [--edu] [--local DIR] [--out DIR] [--shard-size N] ' +
  '[--max-files K] [--workers N] [--stop-after-shards K]';

function die(msg) { process.stderr.write((progressShown ? '\n' : '') + msg + '\n'); process.exit(1); }

function parseArgs(argv) {
  const o = { edu: false, local: null, out: null, shardSize: 100000000, maxFiles: Infinity,
    workers: Math.max(1, (os.availableParallelism ? os.availableParallelism() : os.cpus().length)),
    stopAfter: 0 };
  const ints = { '--shard-size': 'shardSize', '--max-files': 'maxFiles', '--workers': 'workers',
    '--stop-after-shards': 'stopAfter' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--edu') { o.edu = true; continue; }
    if (a === '-h' || a === '--help') { console.log(USAGE); process.exit(0); }
    if (i + 1 >= argv.length) die(USAGE);
    const v = argv[++i];
    if (a === '--local') o.local = path.resolve(v);
    else if (a === '--out') o.out = path.resolve(v);
    else if (ints[a]) {
      if (!/^[0-9]+$/.test(v) || Number(v) < (a === '--stop-after-shards' ? 0 : 1)) die(`${a}: not a positive integer: ${v}`);
      o[ints[a]] = Number(v);
    } else die(USAGE);
  }
  // a shard's token count is an int32 in its header
  if (o.shardSize > 0x7fffffff) die(`--shard-size ${o.shardSize}: more than an int32 header can hold`);
  o.name = o.edu ? 'edu_fineweb' : 'fineweb';
  o.repo = o.edu ? 'HuggingFaceFW/fineweb-edu' : 'HuggingFaceFW/fineweb';
  o.out = o.out || path.join(ROOT, 'dev/data', o.edu ? 'edu_fineweb10B' : 'fineweb10B');
  return o;
}

const shardName = (o, k) => path.join(o.out, `${o.name}_${k === 0 ? 'val' : 'train'}_${String(k).padStart(6, '0')}.bin`);

function writeFileAtomic(file, data) {
  fs.writeFileSync(file + '.tmp', data);
  fs.renameSync(file + '.tmp', file);
}

// ---------- the source files: [{ name, size, path (local) or url }] in name order ----------

function listLocal(dir) {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) die(`${dir}: not a directory`);
  const names = fs.readdirSync(dir).filter(n => n.endsWith('.parquet')).sort();
  if (names.length === 0) die(`${dir}: no .parquet files`);
  return names.map(n => ({ name: n, size: fs.statSync(path.join(dir, n)).size, path: path.join(dir, n) }));
}

// Network (never run by the tests): the listing of sample/10BT from the Hugging Face API.
async function listRemote(o) {
  const api = `${HF}/api/datasets/${o.repo}/tree/main/sample/10BT`;
  let entries;
  try {
    const res = await fetch(api);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    entries = await res.json();
  } catch (e) { die(`could not list ${api} (${e.message}); download the files elsewhere and pass --local DIR`); }
  const files = entries.filter(e => e.type === 'file' && e.path.endsWith('.parquet'))
    .map(e => ({ name: path.basename(e.path), size: e.size,
      url: `${HF}/datasets/${o.repo}/resolve/main/${e.path}` }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (files.length === 0) die(`${api}: no .parquet files listed`);
  return files;
}

// Download one file into OUT/source/ (resuming a .part with a Range request), once.
async function fetchFile(o, f) {
  const dir = path.join(o.out, 'source');
  const dest = path.join(dir, f.name), part = dest + '.part';
  if (fs.existsSync(dest) && fs.statSync(dest).size === f.size) return dest;
  fs.mkdirSync(dir, { recursive: true });
  const { Readable } = require('stream');
  const { pipeline } = require('stream/promises');
  for (let attempt = 1; ; attempt++) {
    const have = fs.existsSync(part) ? fs.statSync(part).size : 0;
    try {
      const res = await fetch(f.url, { headers: have ? { Range: `bytes=${have}-` } : {} });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const append = have > 0 && res.status === 206;
      note(`downloading ${f.name} (${(f.size / 1e6).toFixed(1)} MB${append ? `, from byte ${have}` : ''})`);
      await pipeline(Readable.fromWeb(res.body), fs.createWriteStream(part, { flags: append ? 'a' : 'w' }));
      const size = fs.statSync(part).size;
      if (size !== f.size) throw new Error(`got ${size} bytes, the listing says ${f.size}`);
      fs.renameSync(part, dest);
      return dest;
    } catch (e) {
      if (attempt >= 5) die(`${f.url}: download failed (${e.message}); rerun to resume it`);
      note(`${f.name}: ${e.message}; retrying`);
      await new Promise(r => setTimeout(r, 1000 * attempt));
    }
  }
}

// ---------- parquet ----------

// Row groups of FineWeb's files may be large (pyarrow's default is up to 1M rows: gigabytes of
// text, more than V8's heap), so the `text` column is read one page at a time: the column chunk
// through a 64 MB window, each page decoded by hyparquet's own page reader (its internal modules,
// pinned by the exact version in package.json), the dictionary page kept for the pages after it.
let hp, compressors, pq;
async function loadParquet() {
  hp = await import('hyparquet');
  ({ compressors } = await import('hyparquet-compressors'));
  const [column, convert, schema] = await Promise.all(['column', 'convert', 'schema'].map(m => import(`hyparquet/src/${m}.js`)));
  pq = { parquetHeader: column.parquetHeader, readPage: column.readPage, convert: convert.convert,
    DEFAULT_PARSERS: convert.DEFAULT_PARSERS, getTreePath: schema.getTreePath };
}

// Footer + schema: dies with one line naming the file when it is not parquet or has no `text`.
async function openParquet(file) {
  const buf = await hp.asyncBufferFromFile(file);
  let metadata;
  try { metadata = await hp.parquetMetadataAsync(buf); } catch (e) { die(`${file}: not a readable parquet file (${e.message})`); }
  const cols = metadata.schema.slice(1).map(s => s.name);
  if (!cols.includes('text')) die(`${file}: no 'text' column (columns: ${cols.join(', ') || 'none'})`);
  return { buf, metadata };
}

// Yields { row, texts } batches (at most BATCH documents) from row `fromRow` on, in row order.
const BATCH = 512;
async function* readTexts(file, fromRow) {
  const { buf, metadata } = await openParquet(file);
  const schemaTree = hp.parquetSchema(metadata);
  let groupStart = 0;
  for (const rg of metadata.row_groups) {
    const nRows = Number(rg.num_rows), groupEnd = groupStart + nRows;
    if (groupEnd <= fromRow) { groupStart = groupEnd; continue; }
    const chunk = rg.columns.find(c => c.meta_data && c.meta_data.path_in_schema.join('.') === 'text');
    if (!chunk) die(`${file}: a row group without a 'text' column chunk`);
    const md = chunk.meta_data;
    const schemaPath = pq.getTreePath(schemaTree, md.path_in_schema);
    const decoder = { pathInSchema: md.path_in_schema, element: schemaPath[schemaPath.length - 1].element, schemaPath,
      compressors, ...md, parsers: pq.DEFAULT_PARSERS };
    const dictAt = md.dictionary_page_offset !== undefined ? Number(md.dictionary_page_offset) : Infinity;
    let pos = Math.min(dictAt, Number(md.data_page_offset));
    const end = pos + Number(md.total_compressed_size);
    let win = null, winStart = 0, dictionary, row = groupStart;
    const load = async (at, n) => {  // make [at, at + n) readable in the window
      if (win && at >= winStart && at + n <= winStart + win.byteLength) return;
      const len = Math.min(end - at, Math.max(n, 64 << 20));
      win = new DataView(await buf.slice(at, at + len)); winStart = at;
    };
    try {
      while (pos < end && row < groupEnd) {
        let reader, header;
        for (let want = 1 << 16; ; want *= 4) {  // the page header (thrift), then its page
          await load(pos, Math.min(end - pos, want));
          reader = { view: win, offset: pos - winStart };
          try { header = pq.parquetHeader(reader); break; } catch (e) {
            if (!(e instanceof RangeError) || want >= end - pos) throw e;
          }
        }
        const headerLen = reader.offset - (pos - winStart), pageLen = headerLen + header.compressed_page_size;
        if (pos + pageLen > end) throw new Error(`page at byte ${pos} runs past its column chunk`);
        await load(pos, pageLen);
        reader = { view: win, offset: pos - winStart + headerLen };
        pos += pageLen;
        if (header.type === 'DICTIONARY_PAGE') {
          dictionary = pq.convert(pq.readPage(reader, header, decoder, undefined, undefined, 0).data, decoder);
          continue;
        }
        if (header.type !== 'DATA_PAGE' && header.type !== 'DATA_PAGE_V2') continue;  // index pages
        const pageRows = header.type === 'DATA_PAGE' ? header.data_page_header.num_values : header.data_page_header_v2.num_rows;
        if (row + pageRows > fromRow) {
          let texts = pq.readPage(reader, header, decoder, dictionary, undefined, 0).data;
          if (texts.length !== pageRows) throw new Error(`a page of ${pageRows} rows decoded to ${texts.length}`);
          const skip = Math.max(0, fromRow - row);
          for (let i = skip; i < texts.length; i += BATCH) {
            const part = Array.prototype.slice.call(texts, i, i + BATCH);
            part.forEach((t, j) => {
              if (typeof t !== 'string') die(`${file}: row ${row + i + j}: text is ${t === null || t === undefined ? 'null' : typeof t}, not a string`);
            });
            yield { row: row + i, texts: part };
          }
        }
        row += pageRows;
      }
    } catch (e) { die(`${file}: row group at row ${groupStart}: ${e.message}`); }
    if (row !== groupEnd) die(`${file}: row group at row ${groupStart}: ${row - groupStart} rows in its pages, ${nRows} in the footer`);
    groupStart = groupEnd;
  }
}

// ---------- progress ----------

let progressShown = false;
const tty = process.stderr.isTTY;
function note(msg) { process.stderr.write((progressShown ? '\n' : '') + msg + '\n'); progressShown = false; }
function progress(o, k, filled, fileIdx, nFiles, rate) {
  if (!tty) return;
  const w = 30, n = Math.floor(w * filled / o.shardSize);
  process.stderr.write(`\r[${'#'.repeat(n)}${'.'.repeat(w - n)}] shard ${k} ${(100 * filled / o.shardSize).toFixed(1)}% ` +
    `| file ${fileIdx + 1}/${nFiles} | ${(rate / 1e6).toFixed(2)}M tok/s   `);
  progressShown = true;
}

// ---------- main ----------

// the last shard: a valid header whose token count matches the file's size
function lastShardOk(file, size) {
  if (size < HEADER_BYTES) return false;
  const h = Buffer.alloc(12), fd = fs.openSync(file, 'r');
  fs.readSync(fd, h, 0, 12, 0); fs.closeSync(fd);
  const n = h.readInt32LE(8);
  return h.readInt32LE(0) === MAGIC && h.readInt32LE(4) === VERSION && n >= 0 && size === HEADER_BYTES + 2 * n;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  await loadParquet();
  let files = o.local ? listLocal(o.local) : await listRemote(o);
  files = files.slice(0, o.maxFiles);
  // local files: check every footer and schema before any work
  if (o.local) for (const f of files) await openParquet(f.path);

  fs.mkdirSync(o.out, { recursive: true });
  const stateFile = path.join(o.out, `${o.name}_state.json`);
  const sources = files.map(f => ({ name: f.name, size: f.size }));
  let state = { version: 1, name: o.name, shardSize: o.shardSize, sources, starts: [[0, 0, 0]], shards: 0, done: false };
  if (fs.existsSync(stateFile)) {
    let old;
    try { old = JSON.parse(fs.readFileSync(stateFile, 'utf8')); } catch (e) { die(`${stateFile}: unreadable (${e.message}); delete it to start over`); }
    if (old.shardSize !== o.shardSize || old.name !== o.name || JSON.stringify(old.sources) !== JSON.stringify(sources)) {
      die(`${stateFile}: written for other settings (shard size ${old.shardSize}, ${old.sources && old.sources.length} source files); ` +
        'use another --out, or delete the state file and the shards to start over');
    }
    state = old;
  }
  // Resume from the first shard that is missing or has the wrong size (all but the last are full).
  const expectBytes = k => (state.done && k === state.shards - 1 ? null : HEADER_BYTES + 2 * o.shardSize);
  let k = 0;
  for (; k < state.shards; k++) {
    const f = shardName(o, k);
    if (!fs.existsSync(f)) break;
    const want = expectBytes(k), size = fs.statSync(f).size;
    if (want !== null ? size !== want : !lastShardOk(f, size)) break;
  }
  if (k === state.shards && state.done) {
    console.log(`${o.out}: complete, ${state.shards} shards (nothing to do)`);
    return;
  }
  if (k < state.shards) { state.done = false; state.shards = k; state.starts = state.starts.slice(0, k + 1); }
  if (k > 0) note(`resuming at shard ${k} (${k} complete shards kept)`);
  let [fileIdx, row, skip] = state.starts[k];

  const pool = [];
  const nWorkers = o.workers;
  for (let i = 0; i < nWorkers; i++) {
    const w = new Worker(__filename);
    w.on('error', e => die(`tokenizer worker: ${e.message}`));
    pool.push(w);
  }
  const pending = new Map();
  pool.forEach(w => w.on('message', m => { pending.get(m.id)(m); pending.delete(m.id); }));
  let nextId = 0;
  const tokenize = texts => new Promise(resolve => {
    const id = nextId++;
    pending.set(id, resolve);
    pool[id % nWorkers].postMessage({ id, texts });
  });

  const shard = new Uint16Array(o.shardSize);
  let filled = 0, written = 0, lastDraw = 0;
  const t0 = Date.now();
  let tokensThisRun = 0;

  const flush = (final, cursor) => {
    const header = Buffer.alloc(HEADER_BYTES);
    header.writeInt32LE(MAGIC, 0); header.writeInt32LE(VERSION, 4); header.writeInt32LE(filled, 8);
    const body = Buffer.from(shard.buffer, 0, filled * 2);
    const file = shardName(o, k);
    if (o.stopAfter && written === o.stopAfter) {
      // test hook: die by SIGKILL in the middle of writing this shard
      fs.writeFileSync(file + '.tmp', Buffer.concat([header, body.subarray(0, body.length >> 1)]));
      process.kill(process.pid, 'SIGKILL');
    }
    const fd = fs.openSync(file + '.tmp', 'w');  // header then body, without a 200 MB copy
    for (const b of [header, body]) for (let at = 0; at < b.length;) at += fs.writeSync(fd, b, at, b.length - at);
    fs.closeSync(fd);
    fs.renameSync(file + '.tmp', file);
    k++; written++;
    state.shards = k;
    if (final) state.done = true; else state.starts.push(cursor);
    writeFileAtomic(stateFile, JSON.stringify(state));
    note(`${path.basename(file)}: ${filled} tokens`);
    filled = 0;
  };

  // Documents flow through the workers in order; up to 4 batches per worker in flight.
  const inflight = [];
  const consume = async () => {
    const { f, row: r0, promise } = inflight.shift();
    const { tokens, lengths } = await promise;
    let pos = 0;
    for (let d = 0; d < lengths.length; d++) {
      let len = lengths[d], off = 0;
      if (skip) { off = skip; skip = 0; }  // the first document of a resumed run: its head is in the shard before
      while (off < len) {
        const n = Math.min(len - off, o.shardSize - filled);
        shard.set(tokens.subarray(pos + off, pos + off + n), filled);
        filled += n; off += n; tokensThisRun += n;
        if (filled === o.shardSize) flush(false, [f, r0 + d, off]);
      }
      pos += len;
    }
    const now = Date.now();
    if (now - lastDraw > 200) { lastDraw = now; progress(o, k, filled, f, files.length, tokensThisRun / Math.max(1e-3, (now - t0) / 1000)); }
  };

  for (let f = fileIdx; f < files.length; f++) {
    const file = o.local ? files[f].path : await fetchFile(o, files[f]);
    note(`${files[f].name} (${f + 1}/${files.length})${f === fileIdx && row ? `: from row ${row}` : ''}`);
    for await (const b of readTexts(file, f === fileIdx ? row : 0)) {
      inflight.push({ f, row: b.row, promise: tokenize(b.texts) });
      if (inflight.length >= 4 * nWorkers) await consume();
    }
  }
  while (inflight.length) await consume();
  if (filled > 0 || k === 0) flush(true, null);
  else { state.done = true; writeFileAtomic(stateFile, JSON.stringify(state)); }
  for (const w of pool) await w.terminate();
  const secs = (Date.now() - t0) / 1000;
  console.log(`${o.out}: ${state.shards} shards (${o.name}_val_000000.bin + ${state.shards - 1} train), ` +
    `${tokensThisRun} tokens this run in ${secs.toFixed(1)} s`);
}

main().catch(e => die(`fineweb: ${e.stack || e.message}`));
