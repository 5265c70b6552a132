// Helpers for dev/test/test_fineweb.sh.
//   node dev/test/fineweb_fixture.mjs write DIR        3 parquet files in FineWeb's layout (a `text`
//                                                      column among others; snappy, gzip, none;
//                                                      several pages per row group; a dictionary)
//                                                      + DIR/../docs.json
//   node dev/test/fineweb_fixture.mjs notext FILE      a parquet file without a `text` column
//   node dev/test/fineweb_fixture.mjs serve DIR PORTFILE  a mock of the Hugging Face API and file
//                                                      URLs serving DIR/*.parquet (Range requests;
//                                                      the first GET of the second file breaks off
//                                                      halfway); writes its port to PORTFILE
//   node dev/test/fineweb_fixture.mjs check OUT NAME DOCS.json SHARD_SIZE
//                                                      shards decode to the documents, headers right
import fs from 'fs';
import path from 'path';
import zlib from 'zlib';
import { parquetWriteFile } from 'hyparquet-writer';
import { createRequire } from 'module';
const require = createRequire(import.meta.url);
const { Tiktoken } = require('js-tiktoken/lite');
const enc = new Tiktoken(require('js-tiktoken/ranks/gpt2'));

const [mode, a, b, c, d] = process.argv.slice(2);

// Deterministic documents of varied length and content: ASCII prose, newlines, non-ASCII
// (accents, CJK, emoji), the literal text "<|endoftext|>" (must stay ordinary tokens), empty.
function makeDocs(n) {
  let s = 12345;
  const rnd = k => { s = (s * 1103515245 + 12345) % 2147483648; return s % k; };
  const words = ['the', 'data', 'shard', 'token', 'Shakespeare', 'naïve', 'café', '東京', '🙂', 'GPT-2',
    'of', 'and', '  spaces', '\n', '\n\n', 'x'.repeat(40), '<|endoftext|>', '3.14159', "don't", 'a'];
  const docs = [];
  for (let i = 0; i < n; i++) {
    if (i === 7) { docs.push(''); continue; }
    if (i === 150) { docs.push('a long document, longer than a test shard: ' + 'lorem ipsum dolor sit amet '.repeat(900)); continue; }
    const len = 5 + rnd(60);
    const w = [];
    for (let j = 0; j < len; j++) w.push(words[rnd(words.length)]);
    docs.push(`doc ${i}: ` + w.join(' '));
  }
  return docs;
}

if (mode === 'write') {
  const docs = makeDocs(300);
  fs.mkdirSync(a, { recursive: true });
  const cuts = [0, 110, 200, 300];  // 3 files; several row groups each
  for (let f = 0; f < 3; f++) {
    const part = docs.slice(cuts[f], cuts[f + 1]);
    parquetWriteFile({
      filename: path.join(a, `00${f}_00000.parquet`),
      columnData: [
        // file 1: a dictionary page + dictionary-encoded pages, as pyarrow writes by default
        { name: 'text', data: part, type: 'STRING', ...(f === 1 ? { encoding: 'RLE_DICTIONARY' } : {}) },
        { name: 'id', data: part.map((_, i) => `<urn:uuid:${f}-${i}>`), type: 'STRING' },
        { name: 'token_count', data: part.map(t => BigInt(t.length)), type: 'INT64' },
      ],
      rowGroupSize: f === 0 ? [60, 50] : 40,
      pageSize: f === 0 ? 1500 : 1048576,  // file 0: many pages per row group
      codec: ['SNAPPY', 'GZIP', 'UNCOMPRESSED'][f],  // the reader's codecs: built-in snappy, gzip via hyparquet-compressors
      compressors: { GZIP: bytes => new Uint8Array(zlib.gzipSync(bytes)) },
    });
  }
  fs.writeFileSync(path.join(path.dirname(a), 'docs.json'), JSON.stringify(docs));
} else if (mode === 'notext') {
  parquetWriteFile({ filename: a, columnData: [{ name: 'content', data: ['a', 'b'], type: 'STRING' }] });
} else if (mode === 'serve') {
  const http = await import('http');
  const names = fs.readdirSync(a).filter(n => n.endsWith('.parquet')).sort();
  const broken = new Set([names[1]]);
  const prefix = '/datasets/HuggingFaceFW/fineweb/resolve/main/sample/10BT/';
  const server = http.createServer((req, res) => {
    console.log(req.method, req.url, req.headers.range || '');
    if (req.url === '/api/datasets/HuggingFaceFW/fineweb/tree/main/sample/10BT') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify([{ type: 'directory', path: 'sample/10BT/sub' }, ...names.map(n =>
        ({ type: 'file', path: `sample/10BT/${n}`, size: fs.statSync(path.join(a, n)).size }))]));
      return;
    }
    const name = req.url.startsWith(prefix) ? req.url.slice(prefix.length) : null;
    if (!names.includes(name)) { res.statusCode = 404; res.end('not found'); return; }
    const data = fs.readFileSync(path.join(a, name));
    const m = /^bytes=(\d+)-$/.exec(req.headers.range || '');
    const from = m ? Number(m[1]) : 0;
    res.statusCode = m ? 206 : 200;
    res.setHeader('content-length', data.length - from);
    if (broken.delete(name)) {  // send half, then drop the connection
      res.write(data.subarray(from, from + (data.length >> 1)), () => setTimeout(() => res.destroy(), 50));
      return;
    }
    res.end(data.subarray(from));
  });
  server.listen(0, '127.0.0.1', () => fs.writeFileSync(b, String(server.address().port)));
} else if (mode === 'check') {
  const [out, name, docsFile, shardSize] = [a, b, c, Number(d)];
  const docs = JSON.parse(fs.readFileSync(docsFile, 'utf8'));
  const files = fs.readdirSync(out).filter(f => f.startsWith(name + '_') && f.endsWith('.bin')).sort((x, y) =>
    Number(x.match(/_(\d+)\.bin$/)[1]) - Number(y.match(/_(\d+)\.bin$/)[1]));
  const fail = msg => { console.log(msg); process.exit(1); };
  if (files.length < 2) fail(`only ${files.length} shards`);
  const all = [];
  files.forEach((f, k) => {
    const want = `${name}_${k === 0 ? 'val' : 'train'}_${String(k).padStart(6, '0')}.bin`;
    if (f !== want) fail(`shard ${k} is ${f}, expected ${want}`);
    const buf = fs.readFileSync(path.join(out, f));
    const h = [0, 1, 2].map(i => buf.readInt32LE(4 * i));
    if (h[0] !== 20240520 || h[1] !== 1) fail(`${f}: header ${h[0]} ${h[1]}`);
    for (let i = 3; i < 256; i++) if (buf.readInt32LE(4 * i) !== 0) fail(`${f}: header slot ${i} not 0`);
    if (buf.length !== 1024 + 2 * h[2]) fail(`${f}: ${buf.length} bytes for ${h[2]} tokens`);
    if (k < files.length - 1 ? h[2] !== shardSize : (h[2] < 1 || h[2] > shardSize)) fail(`${f}: ${h[2]} tokens (shard size ${shardSize})`);
    for (let i = 0; i < h[2]; i++) all.push(buf.readUInt16LE(1024 + 2 * i));
  });
  // split the stream at EOT: exactly one EOT before each document, none inside
  if (all[0] !== 50256) fail('stream does not start with <|endoftext|>');
  const got = [];
  let cur = null;
  for (const t of all) {
    if (t === 50256) { if (cur) got.push(cur); cur = []; } else cur.push(t);
  }
  got.push(cur);
  if (got.length !== docs.length) fail(`${got.length} documents decoded, expected ${docs.length}`);
  for (let i = 0; i < docs.length; i++) {
    const text = enc.decode(got[i]);
    if (text !== docs[i]) fail(`document ${i} differs: ${JSON.stringify(text).slice(0, 80)} vs ${JSON.stringify(docs[i]).slice(0, 80)}`);
  }
  console.log(`${files.length} shards, ${all.length} tokens, ${docs.length} documents decoded exactly`);
} else {
  console.error('usage: see the top of dev/test/fineweb_fixture.mjs');
  process.exit(2);
}
