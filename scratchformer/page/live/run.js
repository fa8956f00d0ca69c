// scratchformer's live page, part 2 of 2: reading text into ids as the model's Hugging Face word-level tokenizer
// does, greedy decoding, and the engine the page calls (window.sfLive). Part 1, engine.js, computes the
// forward pass and must come first, and bpe.js (GPT-2's byte-level BPE) before this file where a model
// reads text with it. The model comes from scratchformer/page/live/model.py (live_model): config, tokenizers and weights
// packed as the page packs its maps. Nothing is fetched; no library is used.
//
//   const engine = await sfLive.load(liveModelJson);       // or sfLive.fromArrays(json, {name: Float32Array})
//   engine.tokenize("The girl eats an apple!", "src")      // {ids, tokens, unknown}
//   engine.translate("the girl eats an apple")             // {ids, tokens, text}
//   engine.trace("the girl eats an apple", null)           // {source_tokens, …, steps: [{name, shape, data}]}
//   sfLive.tokenizers(json)                                 // {src, tgt}: the specs (a shared one given once)
//   sfLive.vocabulary(spec)                                 // {tokens: pieces by id, labels: what a trace shows}
// Bad input never throws: every call answers {error: "one sentence"} instead.
"use strict";
(() => {
  const core = window.sfLiveCore;

  const unpack = window.sfUnpack.values; // packing.py's format (viewer_unpack.js)

  // ---- text → ids: tokenizers' WordLevel with scratchformer's pipeline (loading/tokenizers.py) -----------------
  // Added tokens (<s>, </s>, <sep>, …) are cut out of the raw text first, longest match leftmost; the rest is
  // split on white space, each piece NFC-normalised and lower-cased one character at a time (as Rust's
  // char::to_lowercase), punctuation dropped (ASCII punctuation and Unicode P*), and each word looked up.
  const RUST_SPACE = /[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
  const PUNCT = /^(?:[!-/:-@[-`{-~]|\p{P})$/u;
  const CLUSTER = /\P{M}\p{M}*|\p{M}+/gu; // a character and the combining marks NFC may fold into it
  const PY_SPACE = "[\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]+";
  const PY_EDGES = new RegExp(`^${PY_SPACE}|${PY_SPACE}$`, "g"); // what Python's str.isspace() calls space
  const PY_ONE_SPACE = new RegExp(PY_SPACE.slice(0, -1));
  const pyStrip = (text) => String(text ?? "").replace(PY_EDGES, ""); // Python's str.strip()
  const lower = (text) => { let out = ""; for (const ch of text) out += ch.toLowerCase(); return out; };
  const caseless = (text) => text.toLowerCase().toUpperCase().toLowerCase(); // near Python's str.casefold (ß → ss)
  // "The tokenizer could not keep all of the source: “pizza” → <unk>." (model_bundle.lost_note), invisible
  // characters written out as Python's ascii() writes them
  const SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"};
  const visible = (text) => text.replace(/(?! )[\p{C}\p{Z}]/gu, (ch) => {
    const n = ch.codePointAt(0), hex = n.toString(16);
    if (SHORT[ch]) return SHORT[ch];
    return n < 0x100 ? `\\x${hex.padStart(2, "0")}` : n < 0x10000 ? `\\u${hex.padStart(4, "0")}`
      : `\\U${hex.padStart(8, "0")}`;
  });
  function lostNote(side, lost, shown = 6) {
    const listed = lost.slice(0, shown).map(([a, b]) => `“${visible(a)}” → ${visible(b)}`).join(", ");
    const more = lost.length > shown ? ` and ${lost.length - shown} more` : "";
    return `The tokenizer could not keep all of the ${side}: ${listed}${more}.`;
  }

  function wordTokenizer(spec) {
    const byWord = new Map(spec.tokens.map((t, i) => [t, i]));
    for (const id of spec.not_words) if (byWord.get(spec.tokens[id]) === id) byWord.delete(spec.tokens[id]);
    const added = spec.added.slice().sort((a, b) => b[0].length - a[0].length); // longest first
    const starts = new Set(added.map(([t]) => t[0])), special = new Set(spec.special);
    // text → {ids, unknown: the words read as the unknown token, as typed; lost: [typed, what it became] for each
    // part the ids do not keep (TextTokenizer.losses: an unknown word, a word normalisation changed, dropped
    // punctuation)}
    function encode(text) {
      const ids = [], unknown = [], lost = [], covered = new Uint8Array(text.length);
      const cover = (a, b) => covered.fill(1, a, b);
      const word = (at0, raw) => { // one white-space-free piece of raw text, at text[at0]
        // normalised a letter and its marks at a time, so each normalised character knows its raw letter
        // (an unknown word is reported as typed: "İstanbul", not "i̇stanbul")
        let normal = "";
        const from = [], to = [];
        for (const m of raw.matchAll(CLUSTER)) {
          const part = lower(m[0].normalize("NFC"));
          for (let k = 0; k < part.length; k++) { from.push(at0 + m.index); to.push(at0 + m.index + m[0].length); }
          normal += part;
        }
        const whole = lower(raw.normalize("NFC")), aligned = whole === normal;
        if (!aligned) cover(at0, at0 + raw.length);
        let run = "", start = 0, at = 0;
        const flush = () => {
          if (!run) return;
          const id = byWord.has(run) ? byWord.get(run) : spec.unk;
          const typed = aligned ? text.slice(from[start], to[at - 1]) : run;
          if (aligned) cover(from[start], to[at - 1]);
          ids.push(id);
          if (id === spec.unk) { unknown.push(typed); lost.push([typed, spec.tokens[id]]); }
          else if (caseless(typed.trim()) !== caseless(run)) lost.push([typed, run]); // NFC changed it: é → é
          run = "";
        };
        for (const ch of whole) {
          if (PUNCT.test(ch)) flush();
          else { if (!run) start = at; run += ch; }
          at += ch.length;
        }
        flush();
      };
      const words = (from, to) => {
        let start = -1;
        for (let p = from; p <= to; p++) {
          if (p === to || RUST_SPACE.test(text[p])) { if (start >= 0) word(start, text.slice(start, p)); start = -1; }
          else if (start < 0) start = p;
        }
      };
      let last = 0;
      for (let i = 0; i < text.length;) {
        const hit = starts.has(text[i]) ? added.find(([t]) => text.startsWith(t, i)) : undefined;
        if (!hit) { i++; continue; }
        words(last, i);
        ids.push(hit[1]);
        cover(i, i + hit[0].length);
        if (hit[1] === spec.unk) { unknown.push(hit[0]); lost.push([hit[0], hit[0]]); }
        i = last = i + hit[0].length;
      }
      words(last, text.length);
      for (let i = 0; i < text.length;) { // runs of characters no token covers (white space is no loss)
        if (covered[i] || PY_ONE_SPACE.test(text[i])) { i++; continue; }
        let j = i;
        while (j < text.length && !covered[j] && !PY_ONE_SPACE.test(text[j])) j++;
        lost.push([text.slice(i, j), "nothing (dropped)"]);
        i = j;
      }
      const once = new Map(lost.map((pair) => [JSON.stringify(pair), pair])); // each part once, first place kept
      return {ids, unknown, lost: [...once.values()]};
    }
    const strings = (ids) => ids.map((i) => spec.tokens[i]);
    function decode(ids) { // special tokens skipped; WordPiece's decoder: words joined by spaces, "##" glued on
      return strings(ids.filter((i) => !special.has(i)))
        .map((t, k) => (k === 0 ? t : t.startsWith("##") ? t.slice(2) : " " + t)).join("");
    }
    return {encode, strings, decode};
  }

  // ---- which tokenizer a spec is ----------------------------------------------------------------------------
  const bytePairs = () => {
    if (!window.sfLiveBpe) throw new Error("the page lacks GPT-2's tokenizer (bpe.js)");
    return window.sfLiveBpe;
  };
  const tokenizer = (spec) => (spec.kind === "byte-bpe" ? bytePairs().tokenizer(spec) : wordTokenizer(spec));
  // every id's vocabulary piece and its label on a map (a word-level vocabulary's are the same)
  const vocabulary = (spec) => (spec.kind === "byte-bpe" ? bytePairs().vocabulary(spec)
    : {tokens: spec.tokens, labels: spec.tokens});
  // the source and target specs; model.py writes a target tokenizer that is the source's as {same_as: "src"}
  function tokenizers(json) {
    const {src, tgt} = json.tokenizers;
    return {src, tgt: tgt && tgt.same_as === "src" ? src : tgt};
  }

  // ---- the engine ---------------------------------------------------------------------------------------------
  function engine(json, arrays) {
    const c = json.config, tied = json.tied || {};
    const W = (name) => arrays[name] || arrays[tied[name]] || null;
    const m = core.model(c, W), d = c.d_model;
    const specs = tokenizers(json), src = tokenizer(specs.src);
    const tgt = specs.tgt === specs.src ? src : tokenizer(specs.tgt);
    const hasEncoder = c.n_encoder_layers > 0;
    const fail = (error) => ({error});

    // ids of one side, as ModelBundle.prepare makes them: the source between its prefix and suffix, the decoder
    // input behind the start token (and an encoder-decoder's target prefix); too many tokens is refused
    function read(text, side) {
      const tok = side === "source" ? src : tgt, {ids, unknown, lost} = tok.encode(text);
      const before = side === "source" ? c.src_prefix : [c.start_id, ...(side === "target" ? c.tgt_prefix : [])];
      const after = side === "source" ? c.src_suffix : [];
      const budget = c.max_len - before.length - after.length;
      if (ids.length > budget) {
        return fail(`The ${side} has ${ids.length} tokens but this model reads at most ${budget}; shorten the text.`);
      }
      const all = [...before, ...ids, ...after];
      if (!all.length) return fail(`The ${side} is empty; type at least one word.`);
      return {ids: all, tokens: tok.strings(all), unknown, lost, notes: lost.length ? [lostNote(side, lost)] : []};
    }
    function readSource(text) {
      const clean = pyStrip(text);
      if (!clean) return fail("The source text is empty; type a sentence first.");
      return read(clean, hasEncoder ? "source" : "text");
    }
    const argmax = (row) => {
      let best = 0;
      for (let j = 1; j < row.length; j++) if (row[j] > row[best]) best = j;
      return best;
    };
    // greedy decoding with a key/value cache (running/decoding.greedy, generation.continue_ids): after `ys` the
    // argmax of the last position's logits, up to `steps` tokens, stopping at the end token (left out)
    function greedy(ys, enc, steps) {
      const out = [], cache = m.newCache(c.max_len);
      let fresh = ys.slice(), fed = 0;
      for (let s = 0; s < steps; s++) {
        const hidden = m.decode(fresh, fed, enc, cache, null, null); // (T_new, d_model)
        fed += fresh.length;
        const next = argmax(m.generate(hidden.subarray((fresh.length - 1) * d), 1, null));
        if (next === c.end_id) break;
        out.push(next);
        fresh = [next];
      }
      return out;
    }
    // an encoder-decoder's translation: ModelBundle.generation_limit, 2n + 10 tokens at most (n the source's)
    function translateIds(source, enc, maxLen) {
      const limit = maxLen ?? Math.max(1, Math.max(1, Math.min(2 * source.ids.length + 10, c.generation_cap,
        c.max_len - 1)) - c.tgt_prefix.length);
      const start = [c.start_id, ...c.tgt_prefix];
      return greedy(start, enc, Math.max(0, Math.min(limit, c.max_len - start.length)));
    }
    // a decoder-only model's continuation of its text (generation.fitted: cut to the positions left, with a note)
    function continueIds(text, maxNew, notes) {
      const free = Math.max(0, c.max_len - text.ids.length), wanted = maxNew ?? c.new_tokens;
      if (free === 0) {
        notes.push(`The text fills this model's ${c.max_len} positions, so nothing was generated after it.`);
        return [];
      }
      if (wanted > free) notes.push(`Only ${free} new tokens fit after the text (this model reads at most ` +
        `${c.max_len} positions), not ${wanted}.`);
      const ids = greedy(text.ids, null, Math.min(wanted, free));
      if (!ids.length) notes.push("The model ended the text at once: it chose its end token first.");
      return ids;
    }
    function guarded(fn) {
      return (...args) => {
        try {
          return fn(...args);
        } catch (e) {
          return fail(`The page could not run the model: ${e && e.message ? e.message : e}.`);
        }
      };
    }

    function tokenize(text, side) {
      const which = {src: "source", source: "source", tgt: "target", target: "target", text: "text"}[side];
      if (!which) return fail(`Tokenize the source or the target, not ${JSON.stringify(side)}.`);
      if (!hasEncoder || which === "source") return readSource(text);
      return read(pyStrip(text), "target");
    }
    function translate(sourceText, options) {
      const maxLen = options ? options.maxLen ?? undefined : undefined;
      if (maxLen !== undefined && !(Number.isInteger(maxLen) && maxLen >= 1)) {
        return fail(`The number of new tokens must be at least 1, not ${JSON.stringify(maxLen)}.`);
      }
      const source = readSource(sourceText);
      if (source.error) return source;
      const notes = [...source.notes];
      const ids = hasEncoder ? translateIds(source, m.encode(source.ids, null), maxLen)
        : continueIds(source, maxLen, notes);
      return {ids, tokens: tgt.strings(ids), text: tgt.decode(ids), unknown: source.unknown, notes};
    }
    function trace(sourceText, targetText) {
      const source = readSource(sourceText), typed = pyStrip(targetText);
      if (source.error) return source;
      const target = hasEncoder && typed ? read(typed, "target") : null;
      if (target && target.error) return target;
      const notes = [...source.notes, ...(target ? target.notes : [])]; // what the tokenizer could not keep
      const steps = [], rec = (name, kind, dims, shape, data) => steps.push({name, kind, dims, shape, data});
      const enc = hasEncoder ? m.encode(source.ids, rec) : null; // the encoder's steps come first
      let ids, generated = [], mode = "typed";
      if (target) ids = target.ids;
      else if (hasEncoder) {
        generated = translateIds(source, enc, undefined);
        ids = [c.start_id, ...c.tgt_prefix, ...generated];
        mode = generated.length ? "generated" : "start_only";
      } else {
        generated = typed ? [] : continueIds(source, undefined, notes);
        ids = [...source.ids, ...generated];
        if (generated.length) mode = "generated";
      }
      const T = ids.length;
      const hidden = m.decode(ids, 0, enc, m.newCache(T), m.padOf(ids, true), rec); // the whole decoder input
      m.generate(hidden, T, rec);
      const tokens = tgt.strings(ids);
      return {source_tokens: hasEncoder ? source.tokens : [...tokens], target_tokens: tokens, // a decoder-only
        source_ids: hasEncoder ? source.ids : [...ids], target_ids: ids, decoder_input: mode, // model: its text
        translation: generated.length ? tgt.decode(generated) : "", generated,
        unknown: hasEncoder ? source.unknown : src.encode(pyStrip(sourceText)).unknown,
        unknown_target: target ? target.unknown : [], notes, steps};
    }
    return {config: c, steps: json.steps || null, tokenize: guarded(tokenize), translate: guarded(translate),
      trace: guarded(trace)};
  }

  function fromArrays(json, arrays) {
    try {
      const model = typeof json === "string" ? JSON.parse(json) : json;
      for (const [name, w] of Object.entries(model.weights)) {
        const n = w.shape.reduce((a, b) => a * b, 1);
        if (!arrays[name] || arrays[name].length !== n) throw new Error(`the weight ${name} is not ${n} numbers`);
      }
      return engine(model, arrays);
    } catch (e) {
      return {error: `The page could not read its model: ${e && e.message ? e.message : e}.`};
    }
  }
  async function load(json) {
    try {
      const model = typeof json === "string" ? JSON.parse(json) : json, arrays = {};
      await Promise.all(Object.entries(model.weights).map(async ([name, w]) => {
        arrays[name] = await unpack(w.data, w.dtype);
      }));
      return fromArrays(model, arrays);
    } catch (e) {
      return {error: `The page could not read its model: ${e && e.message ? e.message : e}.`};
    }
  }
  window.sfLive = {load, fromArrays, unpack, tokenizers, vocabulary,
    tokenizer: (spec) => tokenizer(spec)}; // tokenizer(spec).encode(text): a side's ids with no limit or frame
})();
