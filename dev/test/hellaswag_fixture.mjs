// The prep script's fixtures and checks, for dev/test/test_hellaswag.sh (no network):
//   node dev/test/hellaswag_fixture.mjs write DIR          DIR/val.jsonl (7 examples in HellaSwag's
//                                                          jsonl layout) and bad variants DIR/bad_*.jsonl
//   node dev/test/hellaswag_fixture.mjs check BIN JSONL TOKENIZER
//        decodes BIN on its own (not with dev/data/hellaswag.js's code): the header (magic, version,
//        count, longest example, the rest 0), every example's fields, its label, its tokens equal to
//        js-tiktoken's of the context and of " " + each ending, and those tokens' bytes in
//        gpt2_tokenizer.bin (TOKENIZER) spelling the text back
//   node dev/test/hellaswag_fixture.mjs serve FILE PORTFILE
//        a mock of the download URL on 127.0.0.1 serving FILE at any path; writes its port to
//        PORTFILE and logs each request path on stdout
import fs from 'fs';
import http from 'http';
import { createRequire } from 'module';
const require = createRequire(import.meta.url);
const { Tiktoken } = require('js-tiktoken/lite');
const enc = new Tiktoken(require('js-tiktoken/ranks/gpt2'));

const good = [
  { ctx: 'A man is sitting on a roof. He', endings: ['is using wrap to wrap a pair of skis.', 'is ripping level tiles off.', "is holding a rubik's cube.", 'starts pulling up roofing on a roof.'], label: 3 },
  { ctx: 'A woman pours coffee into a cup, then', endings: ['she adds milk.', 'the cup flies away.', 'she reads a newspaper about "tea".', 'it rains.'], label: 0 },
  { ctx: 'Ünïcödé: a café in Zürich — the barista', endings: ['smiles 😊.', 'writes 日本語 on the board.', 'drops the cup', 'tabs\tand\nnewlines'], label: 1 },
  { ctx: 'Numbers 12345 and spaces   at the end ', endings: ['x', '  two leading spaces', '', 'a'.repeat(40)], label: 2 },
  { ctx: 'Short', endings: ['a', 'b', 'c', 'd'], label: 3 },
  { ctx: 'The text <|endoftext|> is plain here, so', endings: ['it is split into tokens.', 'ok', 'fine', 'no'], label: 1 },
  { ctx: 'Last one.', endings: ['End.', 'Fin.', 'Ende.', 'Slut.'], label: 2 },
];
// HellaSwag's other fields, which the prep ignores
const line = (ex, i) => JSON.stringify({ ind: i, activity_label: 'Fixture', ctx_a: '', ctx_b: '', split: 'val', split_type: 'indomain', source_id: `fx~${i}`, ...ex });

function write(dir) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(`${dir}/val.jsonl`, good.map(line).join('\n') + '\n');
  const bad = {
    missing_endings: (ex) => { const { endings, ...rest } = ex; return rest; },
    missing_ctx: (ex) => { const { ctx, ...rest } = ex; return rest; },
    label_4: (ex) => ({ ...ex, label: 4 }),
    label_string: (ex) => ({ ...ex, label: '1' }),
    three_endings: (ex) => ({ ...ex, endings: ex.endings.slice(0, 3) }),
    five_endings: (ex) => ({ ...ex, endings: [...ex.endings, 'e'] }),
  };
  for (const [name, f] of Object.entries(bad)) {
    // the bad example third, after good ones: line 3 must be named
    fs.writeFileSync(`${dir}/bad_${name}.jsonl`, [good[0], good[1], f(good[2]), good[3]].map(line).join('\n') + '\n');
  }
  fs.writeFileSync(`${dir}/bad_not_json.jsonl`, [line(good[0]), line(good[1]), '{"ctx": "cut off', line(good[3])].join('\n') + '\n');
}

function check(bin, jsonl, tokenizer) {
  const want = fs.readFileSync(jsonl, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const tok = fs.readFileSync(tokenizer);
  const tokenText = [];
  for (let p = 1024; p < tok.length; p += 1 + tok[p]) tokenText.push(tok.subarray(p + 1, p + 1 + tok[p]));
  const spell = (ids) => Buffer.concat(ids.map((i) => tokenText[i])).toString('utf8');
  const b = fs.readFileSync(bin);
  const h = [...Array(256).keys()].map((i) => b.readInt32LE(4 * i));
  const u = (i) => b.readUInt16LE(1024 + 2 * i);
  const errors = [];
  const expect = (cond, what) => { if (!cond) errors.push(what); };
  expect(h[0] === 20240522 && h[1] === 1 && h[2] === want.length, `header ${h.slice(0, 4)}: expected 20240522, 1, ${want.length}`);
  expect(h.slice(4).every((x) => x === 0), 'header ints 4..255 not 0');
  let p = 0, longest = 0, tokens = 0;
  const n16 = (b.length - 1024) / 2;
  want.forEach((ex, i) => {
    if (p + 6 > n16) { errors.push(`example ${i}: file ends`); return; }
    const bytes = u(p + 1);
    expect(u(p) === 65535 && u(p + 2) === i && u(p + 3) === ex.label && u(p + 4) === 4, `example ${i}: fields ${[0, 1, 2, 3, 4].map((k) => u(p + k))}`);
    const seqs = [[ex.ctx, false], ...ex.endings.map((e) => [' ' + e, true])];
    let q = p + 5;
    for (const [text] of seqs) {
      const n = u(q);
      const ids = [...Array(n).keys()].map((k) => u(q + 1 + k));
      const ref = enc.encode(text, [], []);
      expect(JSON.stringify(ids) === JSON.stringify(ref), `example ${i}: tokens of ${JSON.stringify(text)}: ${ids} != js-tiktoken's ${ref}`);
      expect(spell(ids) === text, `example ${i}: tokens spell ${JSON.stringify(spell(ids))}, expected ${JSON.stringify(text)}`);
      tokens += n;
      q += 1 + n;
    }
    expect(bytes === 2 * (q - p), `example ${i}: claims ${bytes} bytes, has ${2 * (q - p)}`);
    longest = Math.max(longest, 2 * (q - p));
    p = q;
  });
  expect(p === n16, `file has ${n16 - p} uint16s after the last example`);
  expect(h[3] === longest, `header longest ${h[3]}, the longest example is ${longest} bytes`);
  if (errors.length) { console.log(errors.slice(0, 5).join('; ')); process.exit(1); }
  console.log(`${want.length} examples, ${tokens} tokens, longest ${longest} bytes`);
}

function serve(file, portfile) {
  const data = fs.readFileSync(file);
  const server = http.createServer((req, res) => {
    console.log(req.url);
    res.writeHead(200, { 'Content-Length': data.length });
    res.end(data);
  });
  server.listen(0, '127.0.0.1', () => fs.writeFileSync(portfile, String(server.address().port)));
}

const [cmd, ...args] = process.argv.slice(2);
({ write, check, serve })[cmd](...args);
