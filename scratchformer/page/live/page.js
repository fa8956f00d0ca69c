// scratchformer's live page, the part the reader sees: the text boxes, and each run of the engine (run.js)
// turned into what viewer.js draws. Every step's map is made by the rules of scratchformer/plotdata/heatmap.py —
// which 2-D slice a step shows, colour levels and map by kind, the vocabulary's top columns, token labels, masked
// cells, levels shared across heads — so that the map of the recorded sentence equals the recorded page's.
// viewer.js calls window.sfLivePage(page) once its index is read; this file follows viewer.js and the engine.
//
// The page's chunk "live" (part.py) is {model: model.py's live_model, explain, derive}: the plug-ins' contexts,
// null where the package has no plug-in. Each plug-in is optional; without one the page says what it does not
// recompute for a typed sentence. They are called as
//   sfLiveExplain.explain(run, stepIndex, 0, explainCtx)          → {what, why, numbers, links: [[stepIndex, text]]}
//   sfLiveDerive.derive(run, stepIndex, head, row, col, deriveCtx, vocabIds) → derivations.py's compact()
//   sfLiveDerive.lens(run, 0, deriveCtx)                          → one item's lens as data.py's _lens
// `run` is the engine's trace(source, target|null) of the typed text, its one batch item 0; explainCtx is the
// chunk's explain (explain.explain_context) with `vocab` set to the target tokenizer's tokens; deriveCtx is
// sfLiveDerive.context(model, the chunk's derive, weights as Float32Arrays), made on the first click; row, col are
// the clicked cell of the map of head `head`, vocabIds the map's vocabulary columns (a vocab axis's token ids). A
// plug-in may answer {error: "one sentence"}, which the page shows where the answer would have been.
//
// <body data-run="N">: the runs drawn, 0 for the recorded run the page opens with, then 1, 2, … as each run of
// typed text is drawn. Each change of the text is run as soon as the browser is free (keys that come during a run
// make one run after it, of the latest text), so a run is drawn tens of milliseconds after the last keystroke. A
// refusal (no word known, too long, …) shows only once typing has paused for ERROR_WAIT, or at once on Enter, so
// half-typed words do not flash sentences; meanwhile the last good run stays.
"use strict";
(() => {
  const ERROR_WAIT = 400; // ms without a key before a refusal of what was typed is shown
  const HEAD_DIMS = ["head", "kv_head"];
  const PROBABILITY_KINDS = new Set(["attention_weights", "probabilities"]);
  const VOCAB_COLUMNS = 24; // plotdata.heatmap.VOCAB_COLUMNS
  const SEQUENTIAL = "viridis", DIVERGING = "RdBu_r", MASK = "mask";
  const $ = (id) => document.getElementById(id);

  // ---- one step as heatmaps (plotdata/heatmap.py) ------------------------------------------------------------
  function strides(shape) {
    const out = new Array(shape.length);
    let n = 1;
    for (let a = shape.length - 1; a >= 0; a--) { out[a] = n; n *= shape[a]; }
    return out;
  }
  // matrix_of: batch item 0, one head (the queries' or a shared key/value head's), the other axes as rows and
  // columns; one axis becomes a single "row", more than two are flattened into "rows"
  function matrixOf(step, head) {
    const {dims, shape, data} = step, st = strides(shape), free = [];
    let base = 0;
    dims.forEach((d, a) => {
      if (HEAD_DIMS.includes(d)) base += Math.min(head, shape[a] - 1) * st[a];
      else if (d !== "batch") free.push(a);
    });
    if (!free.length) return {values: Float32Array.of(data[base]), rows: 1, cols: 1, rowDim: "row", colDim: "value"};
    const last = free[free.length - 1], lead = free.slice(0, -1), cols = shape[last];
    const rows = lead.reduce((n, a) => n * shape[a], 1);
    const rowDim = lead.length === 0 ? "row" : lead.length === 1 ? dims[lead[0]] : "rows";
    const values = new Float32Array(rows * cols), at = new Array(lead.length).fill(0), step1 = st[last];
    for (let r = 0; r < rows; r++) {
      let off = base;
      for (let j = 0; j < lead.length; j++) off += at[j] * st[lead[j]];
      for (let c = 0; c < cols; c++) values[r * cols + c] = data[off + c * step1];
      for (let j = lead.length - 1; j >= 0 && ++at[j] === shape[lead[j]]; j--) at[j] = 0;
    }
    return {values, rows, cols, rowDim, colDim: dims[last]};
  }
  // levels_for: [0, 1] for attention weights, [0, top] for probabilities, symmetric around 0 for signed values
  function levelsFor(arrays, kind) {
    let lo = Infinity, hi = -Infinity;
    for (const values of arrays) for (const v of values) if (isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
    if (kind === "attention_weights" || lo > hi) return [[0, 1], SEQUENTIAL];
    if (kind === "probabilities") return [[0, Math.max(hi, 1e-6)], SEQUENTIAL];
    if (kind === "tokens") return [[lo, Math.max(hi, lo + 1)], SEQUENTIAL];
    if (lo < 0 && 0 < hi) { const m = Math.max(-lo, hi); return [[-m, m], DIVERGING]; }
    return [[lo, lo === hi ? lo + 1 : hi], SEQUENTIAL];
  }
  // top_columns: at most k columns, those in some row's top k, best ranks first (rank 1 of every row, then 2, …)
  function topColumns(values, rows, cols, k) {
    k = Math.min(k, cols);
    const at = (r, c) => { const v = values[r * cols + c]; return v === v ? v : -Infinity; };
    const ranked = [];
    for (let r = 0; r < rows; r++) {
      const best = []; // column ids, best first; ties keep the lower id first
      for (let c = 0; c < cols; c++) {
        const v = at(r, c);
        if (best.length === k && !(v > at(r, best[k - 1]))) continue;
        let p = best.length;
        while (p > 0 && at(r, best[p - 1]) < v) p--;
        best.splice(p, 0, c);
        if (best.length > k) best.pop();
      }
      ranked.push(best);
    }
    const ids = [], seen = new Set();
    for (let rank = 0; rank < k; rank++) for (const best of ranked) {
      if (!seen.has(best[rank])) { seen.add(best[rank]); ids.push(best[rank]); }
    }
    ids.length = Math.min(ids.length, k);
    const kept = new Float32Array(rows * ids.length);
    for (let r = 0; r < rows; r++) ids.forEach((c, j) => { kept[r * ids.length + j] = values[r * cols + c]; });
    return {values: kept, ids};
  }
  // axis_labels: the run's tokens along a position axis ("src_pos 12" past its end), "expert i" for a router
  function axisLabels(dim, n, run) {
    if (dim === "expert") return Array.from({length: n}, (_, i) => `expert ${i + 1}`);
    const tokens = dim === "src_pos" ? run.source_tokens : dim === "tgt_pos" ? run.target_tokens : null;
    if (!tokens) return null;
    return Array.from({length: n}, (_, i) => (i < tokens.length ? tokens[i] : `${dim} ${i}`));
  }
  // maps.label_ref: 'src' or 'tgt' where the labels are that token list, else the list itself
  function labelRef(labels, run) {
    if (!labels) return null;
    for (const [name, row] of [["src", run.source_tokens], ["tgt", run.target_tokens]]) {
      if (labels.length <= row.length && labels.every((t, i) => row[i] === t)) return name;
    }
    return labels;
  }
  // one head's heatmap (step_heatmap)
  function heatmap(step, head, run, vocab) {
    let {values, rows, cols, rowDim, colDim} = matrixOf(step, head), colLabels = axisLabels(colDim, cols, run);
    let ids = null;
    if (colDim === "vocab") {
      ({values, ids} = topColumns(values, rows, cols, VOCAB_COLUMNS));
      cols = ids.length;
      colLabels = ids.map((i) => (vocab[i] === undefined || vocab[i] === "" ? "None" : vocab[i]));
    }
    let [levels, cmap] = levelsFor([values], step.kind);
    if (step.kind === "mask") [levels, cmap] = [[0, 1], MASK];
    return {values, rows, cols, rowDim, colDim, levels, cmap, rowLabels: axisLabels(rowDim, rows, run), colLabels, ids};
  }
  // maps.build_maps' entry for a step of the run, every head (heads_grid: levels shared unless probabilities)
  function mapOf(step, key, run, vocab, titles) {
    const hd = step.dims.findIndex((d) => HEAD_DIMS.includes(d)), n = hd >= 0 ? step.shape[hd] : 1;
    const per = Array.from({length: n > 1 ? n : 1}, (_, h) => heatmap(step, h, run, vocab)), first = per[0];
    if (per.length > 1 && !PROBABILITY_KINDS.has(step.kind)) {
      const [shared] = levelsFor(per.map((m) => m.values), step.kind);
      for (const m of per) m.levels = shared;
    }
    const size = first.rows * first.cols, values = new Float32Array(per.length * size);
    per.forEach((m, h) => values.set(m.values, h * size));
    const map = {chunk: key, dtype: "f32", shape: [per.length, first.rows, first.cols], full: [first.rows, first.cols],
      block: [1, 1], levels: first.levels, cmap: first.cmap, row_dim: first.rowDim, col_dim: first.colDim,
      rows: labelRef(first.rowLabels, run), cols: labelRef(first.colLabels, run),
      heads: per.length > 1 ? per.map((_, h) => (titles && titles[h]) || `Head ${h + 1}`) : [],
      masked: step.kind === "mask" || step.kind === "masked_scores",
      gaps: step.kind === "router" && step.name.endsWith(".chosen_weights")};
    if (first.ids) map.vocab_ids = first.ids;
    return {map, values};
  }

  // ---- the command that repeats a typed run (data.run_arguments, shlex.join's quoting) ----------------------------
  const quote = (s) => (s === "" ? "''" : /[^A-Za-z0-9_@%+=:,./-]/.test(s) ? `'${s.replace(/'/g, `'"'"'`)}'` : s);
  function runArguments(model, source, target) {
    return ["--model", model, "--source", source, ...(target ? ["--target", target] : [])].map(quote).join(" ");
  }

  // ---- the page ------------------------------------------------------------------------------------------------
  window.sfLivePage = async function (page) {
    const D = page.index(), L = D.live, body = document.body;
    const source = $("sf-source"), target = $("sf-target"), status = $("sf-live-status"), shownLine = $("sf-live-shown");
    const say = (text, error) => { status.textContent = text; status.classList.toggle("sf-live-error", !!error); };
    const showing = (text) => { shownLine.textContent = `The page shows run ${runs}: “${text}”.`; };
    const node = document.querySelector('script[type="application/x-scratchformer"][data-chunk="live"]');
    let engine = null, json = null, chunk = null;
    const arrays = {}; // the weights, unpacked once for the engine and the derivations
    try {
      chunk = await page.unpackJson(node.textContent);
      json = chunk.model;
      await Promise.all(Object.entries(json.weights).map(async ([name, w]) => {
        arrays[name] = await window.sfLive.unpack(w.data, w.dtype);
      }));
      engine = window.sfLive.fromArrays(json, arrays);
    } catch (e) {
      engine = {error: `The page could not read its model: ${e && e.message ? e.message : e}.`};
    }
    body.dataset.run = "0";
    window.sfLivePage.engine = engine; // for tests and the curious: engine.trace(text, null) in the console
    if (engine.error) { say(engine.error, true); body.dataset.liveError = engine.error; return; }

    // what the recorded run had, for what a plug-in does not recompute
    const recorded = {explain: D.explain, item: D.item, text: L.source, lens: D.lens, heads: {}};
    D.steps.forEach((_, i) => { recorded.heads[i] = (D.maps[`${i}/${D.item}`] || {}).heads; });
    // the vocabulary as the maps and explanations label it (GPT-2's pieces as text: " world", not "Ġworld")
    const vocab = window.sfLive.vocabulary(window.sfLive.tokenizers(json).tgt).labels, config = engine.config;
    const explainer = window.sfLiveExplain && chunk.explain ? window.sfLiveExplain : null;
    const explainCtx = explainer ? {...chunk.explain, vocab} : null;
    const deriver = window.sfLiveDerive && chunk.derive ? window.sfLiveDerive : null;
    let deriveCtx = null;
    const derivation = () => (deriveCtx = deriveCtx || deriver.context(json, chunk.derive, arrays));
    const weights = `${L.weights.dtypes.map((t) => (t === "f16" ? "float16" : "float32")).join(" and ")}`;
    let runs = 0, shownText = L.source, current = null, typedAt = 0;
    let scheduled = false, busy = false, again = false, againAtOnce = false, errorTimer = 0; // one run at a time
    showing(shownText);

    function plugin(name, fn) { // a plug-in's answer, or {error} when it throws or has none
      try {
        const out = fn();
        return out === null || out === undefined ? {error: `The ${name} plug-in gave nothing for this.`} : out;
      } catch (e) {
        return {error: `The ${name} plug-in failed: ${e && e.message ? e.message : e}.`};
      }
    }
    // the viewer's hooks, once a typed run is shown
    function explain(step, item) {
      const cache = current.explained;
      if (cache.has(step)) return cache.get(step);
      const old = recorded.explain[`${step}/${recorded.item}`];
      let ex = null;
      const stale = `These words explain the recorded sentence (“${recorded.text}”): their numbers are not of this run.`;
      if (explainer) {
        ex = plugin("explanation", () => explainer.explain(current.run, step, item, explainCtx));
        if (ex.error) ex = old ? {what: old.what, why: old.why, links: old.links, note: `${ex.error} ${stale}`} : null;
      } else if (old) {
        ex = {what: old.what, why: old.why, links: old.links, note: stale};
      }
      cache.set(step, ex);
      return ex;
    }
    function derive(step, head, row, col, map) {
      if (!deriver) return undefined; // the viewer offers the command that derives the cell
      return plugin("derivation", () => deriver.derive(current.run, step, head, row, col, derivation(), map.vocab_ids || null));
    }
    function lensOf(run, args) {
      if (recorded.lens.note) return recorded.lens; // no output layer: the same for any text
      if (!deriver) {
        return {note: `The logit lens is read when the page is written, so it is not recomputed for a typed sentence; for this one run: scratchformer lens ${args}`};
      }
      const L0 = plugin("lens", () => deriver.lens(run, 0, derivation()));
      return L0.error ? {note: L0.error} : L0.note ? {note: L0.note} : {items: {0: L0}};
    }
    function stored() {
      const derived = deriver ? "derived in the browser on a click" : "not stored: a click shows the command that derives it";
      return `This run was computed in this browser from the model's weights as the page carries them (${weights}, ` +
        `${(L.weights.bytes / 1e6).toFixed(1)} MB), in float32 as Python computes; every map is whole; a cell's derivation is ${derived}.`;
    }

    // a typed run in place of the shown one: steps' shapes, tokens, translation, every map, and the hooks
    function adopt(run, text, targetText) {
      const maps = {}, values = new Map();
      run.steps.forEach((step, i) => {
        const key = `${i}/0`, made = mapOf(step, key, run, vocab, recorded.heads[i]);
        maps[key] = made.map;
        values.set(key, made.values);
        D.steps[i].shape = step.shape.slice();
      });
      D.input = {source: [run.source_tokens], target: [run.target_tokens], translation: run.translation,
        decoder_input: L.decoder_inputs[run.decoder_input] || run.decoder_input, notes: run.notes || []};
      D.maps = maps;
      D.items = [0]; D.n_items = 1; D.item = 0; page.state.item = 0;
      D.interventions = [];
      D.derive = {};
      D.run_args = runArguments(L.model, text, targetText);
      let lens = null; // made when the lens is opened
      const made = () => (lens = lens || lensOf(run, D.run_args));
      D.lens = {get note() { return made().note; }, get items() { return made().items; }};
      D.title = `${D.model.name} · ${run.source_tokens.slice(0, 12).join(" ")}${run.source_tokens.length > 12 ? " …" : ""}`;
      document.title = D.title;
      current = {run, explained: new Map()};
      Object.assign(page.hooks, {values: (key) => values.get(key), explain, derive, stored});
      page.forgetLens();
      const batch = $("sf-batch");
      batch.replaceChildren(page.el("option", {value: 0, textContent: "1"}));
      batch.value = "0";
      $("sf-batch-label").hidden = true;
      page.header();
    }

    // why the page will not run this text (checked before the engine reads it), or null
    function refusal(text, targetText) {
      for (const [what, t] of [["source", text], ["target", targetText]]) {
        if (t.length > L.max_chars) {
          return `The ${what} is ${t.length.toLocaleString("en")} characters long; this page reads at most ${L.max_chars.toLocaleString("en")}, so shorten it.`;
        }
      }
      const read = engine.tokenize(text, "src");
      if (read.error) return read.error;
      const frame = new Set(L.has_encoder ? [...config.src_prefix, ...config.src_suffix] : [config.start_id]);
      const words = read.ids.filter((id) => !frame.has(id)), unk = json.tokenizers.src.unk;
      if (words.length && words.every((id) => id === unk)) {
        return `None of the words typed is in the model's vocabulary (each would be ${json.tokenizers.src.tokens[unk] || "unknown"}), so there is nothing for it to read.`;
      }
      return null;
    }
    async function rerun(atOnce = false) {
      scheduled = false;
      if (busy) { again = true; againAtOnce ||= atOnce; return; } // being drawn: the latest text right after
      busy = true;
      try {
        await runOnce(atOnce);
      } finally {
        busy = false;
        if (again) {
          const enter = againAtOnce;
          again = againAtOnce = false;
          if (enter) rerun(true); else soon();
        }
      }
    }
    async function runOnce(atOnce) {
      clearTimeout(errorTimer);
      const started = performance.now(), text = source.value, targetText = target ? target.value : "";
      const key = text + "\u0000" + targetText;
      if (key === tried.key && !atOnce) return; // this very text was run last (a key that changed nothing); Enter
      // always runs: it asks for this text in so many words
      tried = {key, error: null};
      const why = refusal(text, targetText);
      const run = why ? {error: why} : engine.trace(text, L.has_encoder && targetText.trim() ? targetText : null);
      if (!run.error && (run.steps.length !== D.steps.length || run.steps.some((s, i) => s.name !== D.steps[i].name))) {
        run.error = "The page's model computed other steps than the page lists, so it cannot show this run.";
      }
      if (run.error) { // the last good run stays, and the line beside says which it is
        tried.error = run.error;
        const refuse = () => { say(run.error, true); body.dataset.liveError = run.error; };
        if (atOnce) refuse();
        else errorTimer = setTimeout(refuse, ERROR_WAIT); // unless another key comes first
        return;
      }
      adopt(run, text, targetText);
      await page.show(page.state.step);
      runs += 1;
      shownText = text.trim();
      showing(shownText);
      delete body.dataset.liveError;
      body.dataset.runMs = String(Math.round(performance.now() - started));
      window.sfLivePage.last = {typed: typedAt, started, drawn: performance.now()};
      body.dataset.run = String(runs);
      say(`Run ${runs}: computed in this browser in ${body.dataset.runMs} ms.`, false);
    }
    // a burst of input events delivered together makes one run (setTimeout 0 lets them all arrive first)
    const soon = () => { if (!scheduled) { scheduled = true; setTimeout(() => rerun(false), 0); } };
    const later = () => { typedAt = performance.now(); clearTimeout(errorTimer); soon(); };
    const now = (e) => { if (e.key === "Enter") { e.preventDefault(); typedAt = performance.now(); rerun(true); } };
    let tried = {key: source.value + "\u0000" + (target ? target.value : ""), error: null}; // the text run last
    for (const box of [source, target]) {
      if (!box) continue;
      box.addEventListener("input", later);
      box.addEventListener("keydown", now);
      box.disabled = false;
    }
    say(`Type ${L.has_encoder ? "a sentence" : "a text"}: the page reruns the model in this browser (${weights} weights).`, false);
  };
})();
