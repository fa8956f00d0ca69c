// scratchformer's live page: GPT-2's byte-level BPE, read as scratchformer's gpt2_tokenizer reads text through
// Hugging Face `tokenizers` (loading/tokenizers.py): no normaliser; added tokens (<|endoftext|>) cut out of the raw
// text first; the rest split by GPT-2's pattern (ByteLevel, add_prefix_space off), each piece written as UTF-8
// bytes, each byte as one of 256 base tokens, then pairs merged by rank (tokenizers' BPE, Word::merge_all). Labels
// and decoded text are the bytes read back as UTF-8 with U+FFFD for broken sequences (ByteLevel's decoder, Rust's
// from_utf8_lossy), as TextTokenizer.token_strings and decode give them. It comes before run.js, which
// calls it for a tokenizer whose spec (page/live/model.py, _byte_level) says kind "byte-bpe":
//
//   spec = {kind: "byte-bpe", size, first, width, merges: base64 of the merged pairs' ids in byte planes,
//           added: [[text, id]], special: [id], unk: null}
//   sfLiveBpe.tokenizer(spec)   // {encode(text) → {ids, unknown, lost}, strings(ids), decode(ids)}
//   sfLiveBpe.vocabulary(spec)  // {tokens: the vocabulary's pieces ("Ġworld"), labels: as a trace shows (" world")}
// A byte always has a token, so nothing is ever unknown or lost.
"use strict";
(() => {
  // ---- the 256 base tokens: each byte as a printable character (GPT-2's bytes_to_unicode) -----------------------
  // Printable Latin-1 bytes stand for themselves; the others (controls, space, …) become U+0100 onwards in byte
  // order. The base tokens' ids are these characters sorted by code point, as GPT-2's vocabulary lays them out.
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const BYTE_CHAR = [], CHAR_BYTE = new Map();
  for (let b = 0, extra = 0; b < 256; b++) {
    BYTE_CHAR[b] = String.fromCharCode(printable(b) ? b : 256 + extra++);
    CHAR_BYTE.set(BYTE_CHAR[b], b);
  }
  const BY_CODE = BYTE_CHAR.slice().sort((a, b) => a.charCodeAt(0) - b.charCodeAt(0)); // id → character
  const BYTE_ID = BYTE_CHAR.map((ch) => BY_CODE.indexOf(ch)); // byte → id

  // ---- GPT-2's pattern, as tokenizers' regex engine (Oniguruma) reads it ------------------------------------------
  // Its \s is Unicode's White_Space: U+0085 is in it and U+FEFF is not, unlike JavaScript's \s; so it is spelt out.
  const WS = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
  const PIECES = new RegExp(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", " ?\\p{L}+", " ?\\p{N}+",
    ` ?[^${WS}\\p{L}\\p{N}]+`, `[${WS}]+(?![^${WS}])`, `[${WS}]+`].join("|"), "gu");
  // text → its pieces in order; a stretch the pattern misses (none can) would be a piece of its own, as the
  // pre-tokenizer's split (Isolated) keeps it
  function pieces(text) {
    const out = [];
    let last = 0;
    for (const m of text.matchAll(PIECES)) {
      if (m.index > last) out.push(text.slice(last, m.index));
      out.push(m[0]);
      last = m.index + m[0].length;
    }
    if (last < text.length) out.push(text.slice(last));
    return out;
  }

  // ---- the merges: pairs of ids, each making the next id from `first` on --------------------------------------
  const base64Bytes = window.sfUnpack.base64Bytes; // viewer_unpack.js
  // base64 of `width`-byte little-endian integers gathered into byte planes (every first byte, then every
  // second …) → the integers
  function integers(text, width) {
    const bytes = base64Bytes(text), n = bytes.length / width, out = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      let v = 0;
      for (let b = width - 1; b >= 0; b--) v = v * 256 + bytes[b * n + i];
      out[i] = v;
    }
    return out;
  }
  const read = new WeakMap(); // spec → {pairs, rank: Map(pair key → rank)}, once per spec
  function merges(spec) {
    if (read.has(spec)) return read.get(spec);
    const pairs = integers(spec.merges, spec.width), rank = new Map();
    for (let r = 0; r < pairs.length / 2; r++) rank.set(pairs[2 * r] * spec.size + pairs[2 * r + 1], r);
    const out = {pairs, rank};
    read.set(spec, out);
    return out;
  }

  // ---- one piece's ids: tokenizers' Word::merge_all ---------------------------------------------------------------
  // The pair of lowest rank is merged first, the leftmost of equals first; a queue entry whose pair has changed
  // since it was queued is dropped. Symbols are a linked list; the queue a binary heap of rank·2³² + position.
  function heap() {
    const a = [];
    const push = (x) => {
      let i = a.push(x) - 1;
      while (i > 0) {
        const up = (i - 1) >> 1;
        if (a[up] <= x) break;
        a[i] = a[up];
        i = up;
      }
      a[i] = x;
    };
    const pop = () => {
      const top = a[0], x = a.pop();
      if (a.length) {
        let i = 0;
        for (;;) {
          let c = 2 * i + 1;
          if (c >= a.length) break;
          if (c + 1 < a.length && a[c + 1] < a[c]) c++;
          if (a[c] >= x) break;
          a[i] = a[c];
          i = c;
        }
        a[i] = x;
      }
      return top;
    };
    return {push, pop, size: () => a.length};
  }
  const SHIFT = 2 ** 32;
  function mergeAll(start, spec, table) {
    const n = start.length, sym = Int32Array.from(start), next = new Int32Array(n), prev = new Int32Array(n);
    for (let i = 0; i < n; i++) { next[i] = i + 1 < n ? i + 1 : -1; prev[i] = i - 1; }
    const gone = new Uint8Array(n), queue = heap();
    const rankAt = (i) => table.rank.get(sym[i] * spec.size + sym[next[i]]);
    const enqueue = (i) => { const r = rankAt(i); if (r !== undefined) queue.push(r * SHIFT + i); };
    for (let i = 0; i + 1 < n; i++) enqueue(i);
    while (queue.size()) {
      const top = queue.pop(), r = Math.floor(top / SHIFT), i = top - r * SHIFT;
      if (gone[i] || next[i] < 0 || rankAt(i) !== r) continue; // merged away, last, or a stale entry
      const right = next[i];
      sym[i] = spec.first + r;
      gone[right] = 1;
      next[i] = next[right];
      if (next[i] >= 0) prev[next[i]] = i;
      if (prev[i] >= 0) enqueue(prev[i]);
      if (next[i] >= 0) enqueue(i);
    }
    const out = [];
    for (let i = 0; i >= 0; i = next[i]) out.push(sym[i]);
    return out;
  }

  // ---- ids → bytes → text (ByteLevel's decoder) -----------------------------------------------------------------
  // not fatal: U+FFFD as Rust's from_utf8_lossy; a leading byte-order mark is text, not dropped
  const utf8 = new TextEncoder(), lossy = new TextDecoder("utf-8", {ignoreBOM: true});
  // a vocabulary piece's bytes: each character's byte, or — when any character is not a byte's (an added token
  // such as "a b") — the piece's own UTF-8
  function pieceBytes(piece) {
    const out = [];
    for (const ch of piece) {
      const b = CHAR_BYTE.get(ch);
      if (b === undefined) return Array.from(utf8.encode(piece));
      out.push(b);
    }
    return out;
  }
  // what a piece reads as: its bytes as UTF-8 (ASCII, most of GPT-2's pieces, without the decoder's cost)
  function pieceText(piece) {
    const bytes = pieceBytes(piece);
    return bytes.every((b) => b < 0x80) ? String.fromCharCode(...bytes) : lossy.decode(Uint8Array.from(bytes));
  }
  const vocabularies = new WeakMap();
  // every id's piece (tokens) and what a trace shows for it (labels, TextTokenizer.token_strings), once per spec
  function vocabulary(spec) {
    if (vocabularies.has(spec)) return vocabularies.get(spec);
    const {pairs} = merges(spec), tokens = new Array(spec.size).fill("");
    BY_CODE.forEach((ch, id) => { tokens[id] = ch; });
    for (let r = 0; r < pairs.length / 2; r++) tokens[spec.first + r] = tokens[pairs[2 * r]] + tokens[pairs[2 * r + 1]];
    for (const [text, id] of spec.added) tokens[id] = text;
    const labels = tokens.map(pieceText);
    const out = {tokens, labels};
    vocabularies.set(spec, out);
    return out;
  }

  function tokenizer(spec) {
    const table = merges(spec), special = new Set(spec.special);
    const added = spec.added.slice().sort((a, b) => b[0].length - a[0].length); // longest first
    const starts = new Set(added.map(([t]) => t[0]));
    const cache = new Map(); // piece → ids (tokenizers keeps such a cache too; it changes nothing)
    function pieceIds(piece) {
      let ids = cache.get(piece);
      if (!ids) {
        ids = mergeAll(Array.from(utf8.encode(piece), (b) => BYTE_ID[b]), spec, table);
        if (cache.size < 10000) cache.set(piece, ids);
      }
      return ids;
    }
    const plain = (text, ids) => { for (const p of pieces(text)) for (const id of pieceIds(p)) ids.push(id); };
    // text → {ids}: added tokens first, longest match leftmost, the text between them piece by piece
    function encode(text) {
      const ids = [];
      let last = 0;
      for (let i = 0; i < text.length;) {
        const hit = starts.has(text[i]) ? added.find(([t]) => text.startsWith(t, i)) : undefined;
        if (!hit) { i++; continue; }
        plain(text.slice(last, i), ids);
        ids.push(hit[1]);
        i = last = i + hit[0].length;
      }
      plain(text.slice(last), ids);
      return {ids, unknown: [], lost: []};
    }
    const labels = new Map(); // id → label, made as asked for (the whole vocabulary is read only for the maps)
    const label = (id) => {
      if (!labels.has(id)) labels.set(id, pieceText(token(id)));
      return labels.get(id);
    };
    // one id's piece, without building the whole vocabulary
    function token(id) {
      if (id < spec.first) return BY_CODE[id] ?? "";
      const r = id - spec.first;
      if (r < table.pairs.length / 2) return token(table.pairs[2 * r]) + token(table.pairs[2 * r + 1]);
      const found = spec.added.find(([, i]) => i === id);
      return found ? found[0] : "";
    }
    const strings = (ids) => ids.map(label);
    // the special tokens left out, the other pieces' bytes joined and read as UTF-8
    function decode(ids) {
      const bytes = [];
      for (const id of ids) if (!special.has(id)) bytes.push(...pieceBytes(token(id)));
      return lossy.decode(Uint8Array.from(bytes));
    }
    return {encode, strings, decode};
  }

  window.sfLiveBpe = {tokenizer, vocabulary};
})();
