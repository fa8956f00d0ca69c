// scratchformer's interactive page: the viewer, written once for the page file and for notebooks.
// It reads the data inline in the page (base64 of gzip, see packing.py), unpacks one step at a time with the
// browser's own DecompressionStream, and draws the maps on <canvas>. It loads nothing from anywhere.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  function el(tag, props, ...kids) {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    for (const kid of kids) if (kid !== null && kid !== undefined) node.append(kid);
    return node;
  }

  // ---- unpacking (viewer_unpack.js) ---------------------------------------------------------------------------
  const unpackJson = window.sfUnpack.json;
  const chunkText = new Map();
  for (const node of document.querySelectorAll('script[type="application/x-scratchformer"][data-chunk]')) {
    chunkText.set(node.dataset.chunk, node);
  }
  const cache = new Map(); // chunk key → Promise<Float32Array>, the last few steps shown
  function values(key, dtype) {
    const own = hooks.values && hooks.values(key); // a live page's map of a typed sentence, already in memory
    if (own) return Promise.resolve(own);
    if (!cache.has(key)) {
      cache.set(key, window.sfUnpack.values(chunkText.get(key).textContent, dtype));
      if (cache.size > 24) cache.delete(cache.keys().next().value);
    }
    return cache.get(key);
  }

  // ---- colours: the window's own tables (scratchformer/plotdata/colours.py), carried in the page's data ---------
  let SPECIAL = null;
  const luts = {};
  function lut(name) {
    if (luts[name]) return luts[name];
    const hex = D.colours.tables[name] || D.colours.tables.viridis, t = new Uint8ClampedArray(256 * 4);
    for (let i = 0; i < 256; i++) {
      for (let c = 0; c < 3; c++) t[4 * i + c] = parseInt(hex.slice(6 * i + 2 * c, 6 * i + 2 * c + 2), 16);
      t[4 * i + 3] = 255;
    }
    return (luts[name] = t);
  }
  function colour(v, lo, hi, table, map) {
    if (v !== v) return SPECIAL.nan;
    if (v === -Infinity) return map.masked ? SPECIAL.masked : SPECIAL.neginf;
    if (v === Infinity) return SPECIAL.posinf;
    if (map.gaps && v === 0) return SPECIAL.gap;
    const i = hi > lo ? Math.max(0, Math.min(255, Math.floor(((v - lo) / (hi - lo)) * 255))) : 0;
    return table.subarray(4 * i, 4 * i + 4);
  }
  function darkText(rgba) {
    const lin = (c) => { c /= 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    const a = rgba[3] / 255, mix = (c) => lin(c * a + 255 * (1 - a));
    return 0.2126 * mix(rgba[0]) + 0.7152 * mix(rgba[1]) + 0.0722 * mix(rgba[2]) > 0.179;
  }

  // ---- numbers and labels --------------------------------------------------------------------------------------
  function num(v) {
    v = typeof v === "string" ? { "-inf": -Infinity, inf: Infinity, nan: NaN }[v] : v;
    if (v !== v) return "NaN";
    if (v === -Infinity) return "−∞";
    if (v === Infinity) return "+∞";
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-4 || a >= 1e6)) return v.toExponential(3).replace(/\.?0+e/, "e");
    return String(Number(v.toPrecision(4)));
  }
  function short(v, integer) {
    if (!isFinite(v)) return num(v);
    if (integer) return String(Math.round(v));
    const a = Math.abs(v);
    if (a >= 1000 && a < 1e6) return v.toFixed(0);
    return a !== 0 && a < 1e-3 ? v.toExponential(0) : String(Number(v.toPrecision(3)));
  }
  function abbreviate(s, n) {
    s = String(s).replace(/\n/g, "⏎").replace(/^ /, "␣");
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }
  function tokens(ref, item) {
    if (ref === "src") return D.input.source[item] || [];
    if (ref === "tgt") return D.input.target[item] || [];
    return ref;
  }
  function axisLabel(map, axis, i, item) {
    const ref = axis === 0 ? map.rows : map.cols, dim = axis === 0 ? map.row_dim : map.col_dim;
    const block = map.block[axis], full = map.full[axis];
    const name = (k) => (ref ? `“${tokens(ref, item)[k] ?? k}” (${k})` : `${dim} ${k}`);
    if (block === 1) return name(i);
    const a = i * block, b = Math.min(full, a + block) - 1;
    return ref ? `${name(a)} … ${name(b)}` : `${dim} ${a}–${b}`;
  }
  function tickLabel(map, axis, i, item) {
    const ref = axis === 0 ? map.rows : map.cols;
    const k = i * map.block[axis];
    return ref ? abbreviate(tokens(ref, item)[k] ?? k, 8) : String(k);
  }

  // ---- state -----------------------------------------------------------------------------------------------
  let D = null; // the index: steps, maps, explanations, derivations, lens (data.py)
  const state = { step: 0, item: 0, head: 0, token: 0 };
  // what a live page (live/page.js) puts in place of the recorded run's: values(key) → Float32Array of a
  // map it made; explain(step, item) → {what, why, numbers?, links, note?}; derive(step, head, row, col, map) →
  // a derivation (derivations.py's compact), {error} or undefined; stored() → the line on how values are stored
  const hooks = {};
  let shown = null; // the map drawn last: {step, head, item, map, vals}

  // ---- one heatmap on a canvas ------------------------------------------------------------------------------
  function drawMap(box, vals, map, head, width, height, caption) {
    const [, rows, cols] = map.shape, offset = head * rows * cols;
    const [lo, hi] = map.levels.map((v) => (typeof v === "string" ? Number(v.replace("inf", "Infinity")) : v));
    const ctx0 = document.createElement("canvas").getContext("2d");
    ctx0.font = "11px system-ui, sans-serif";
    const rowLabels = map.rows || rows > 1, colLabels = true;
    let left = 0, top = 0;
    const widest = (axis, n) => {
      let w = 0;
      for (let i = 0; i < Math.min(n, 600); i++) w = Math.max(w, ctx0.measureText(tickLabel(map, axis, i, state.item)).width);
      return Math.min(Math.ceil(w) + 6, 80);
    };
    if (rowLabels) left = widest(0, rows);
    if (colLabels) top = widest(1, cols);
    // the colour bar: 8 px gap, 10 px of colours, its end values written 12 px from its left edge (a token id
    // like 50256 needs more than the 46 px that suit most maps)
    const bar = Math.max(46, 8 + 12 + Math.ceil(Math.max(ctx0.measureText(short(hi)).width, ctx0.measureText(short(lo)).width)) + 4);
    const cs = Math.max(0.05, Math.min((width - left - bar) / cols, (height - top) / rows, 44));
    const w = Math.max(1, Math.round(cs * cols)), h = Math.max(1, Math.round(cs * rows));
    const canvas = el("canvas");
    const dpr = window.devicePixelRatio || 1;
    const cssW = left + w + bar, cssH = top + h + 4;
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    canvas.style.width = cssW + "px";
    canvas.style.height = cssH + "px";
    const ctx = canvas.getContext("2d");
    ctx.scale(dpr, dpr);
    // the cells: one pixel per cell in an image, or per block of cells when there are more cells than pixels
    // (the block's largest value, or for a diverging map the one farthest from 0, as the window reduces them)
    const step = cs >= 1 ? 1 : Math.ceil(1 / cs);
    const ir = Math.ceil(rows / step), ic = Math.ceil(cols / step);
    const img = new ImageData(ic, ir), table = lut(map.cmap), extreme = map.cmap === "RdBu_r";
    for (let r = 0; r < ir; r++) {
      for (let c = 0; c < ic; c++) {
        let best = NaN;
        for (let rr = r * step; rr < Math.min(rows, (r + 1) * step); rr++) {
          for (let cc = c * step; cc < Math.min(cols, (c + 1) * step); cc++) {
            const v = vals[offset + rr * cols + cc];
            if (best !== best || (extreme ? (isFinite(v) && (!isFinite(best) || Math.abs(v) > Math.abs(best))) : v > best)) best = v;
          }
        }
        img.data.set(colour(best, lo, hi, table, map), 4 * (r * ic + c));
      }
    }
    const tmp = el("canvas", { width: ic, height: ir });
    tmp.getContext("2d").putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(tmp, left, top, w, h);
    // the numbers inside the cells of a small map, dark on light cells and white on dark ones
    if (cs >= 30 && rows * cols <= 600) {
      const integer = Array.from(vals.subarray(offset, offset + rows * cols)).every((v) => !isFinite(v) || v === Math.round(v));
      const decimals = !integer && map.cmap === "viridis" && lo === 0 && hi === 1 ? 3 : null; // weights: "0.321"
      ctx.font = `${Math.min(12, Math.floor(cs / 3.2))}px system-ui, sans-serif`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
        const v = vals[offset + r * cols + c];
        if (map.gaps && v === 0) continue;
        ctx.fillStyle = darkText(colour(v, lo, hi, table, map)) ? "#141414" : "#fff";
        ctx.fillText(decimals && isFinite(v) ? v.toFixed(decimals) : short(v, integer), left + (c + 0.5) * cs, top + (r + 0.5) * cs);
      }
    }
    // tick labels: every k-th one where they would overlap (the full token shows on hover)
    ctx.fillStyle = "#333";
    ctx.font = "11px system-ui, sans-serif";
    const every = Math.max(1, Math.ceil(12 / cs));
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    if (rowLabels) for (let r = 0; r < rows; r += every) ctx.fillText(tickLabel(map, 0, r, state.item), left - 4, top + (r + 0.5) * cs);
    ctx.save();
    ctx.translate(left, top - 4);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left";
    for (let c = 0; c < cols; c += every) ctx.fillText(tickLabel(map, 1, c, state.item), 0, (c + 0.5) * cs);
    ctx.restore();
    // the colour bar with its explicit levels
    const bx = left + w + 8;
    if (map.cmap === "mask") {
      ctx.fillStyle = "#e3eef9"; ctx.fillRect(bx, top, 12, 12);
      ctx.fillStyle = `rgb(${SPECIAL.masked.slice(0, 3)})`; ctx.fillRect(bx, top + 18, 12, 12);
      ctx.fillStyle = "#333"; ctx.textAlign = "left";
      ctx.fillText("0", bx + 15, top + 6); ctx.fillText("−∞", bx + 15, top + 24);
    } else {
      for (let y = 0; y < h; y++) {
        const c = table.subarray(4 * Math.floor((1 - y / h) * 255), 4 * Math.floor((1 - y / h) * 255) + 4);
        ctx.fillStyle = `rgb(${c[0]},${c[1]},${c[2]})`;
        ctx.fillRect(bx, top + y, 10, 1);
      }
      ctx.fillStyle = "#333"; ctx.textAlign = "left";
      ctx.textBaseline = "top"; ctx.fillText(short(hi), bx + 12, top);
      ctx.textBaseline = "bottom"; ctx.fillText(short(lo), bx + 12, top + h);
    }
    canvas.sf = { map, vals, head, rows, cols, left, top, cs };
    canvas.addEventListener("mousemove", hover);
    canvas.addEventListener("mouseleave", () => { $("sf-tip").hidden = true; });
    canvas.addEventListener("click", pick);
    box.append(el("div", { className: "sf-map" }, caption ? el("div", { className: "sf-caption", textContent: caption }) : null, canvas));
    return canvas;
  }
  function cellAt(canvas, event) {
    const s = canvas.sf, rect = canvas.getBoundingClientRect();
    const c = Math.floor((event.clientX - rect.left - s.left) / s.cs), r = Math.floor((event.clientY - rect.top - s.top) / s.cs);
    return r >= 0 && c >= 0 && r < s.rows && c < s.cols ? [r, c] : null;
  }
  function cellText(s, r, c) {
    const v = s.vals[s.head * s.rows * s.cols + r * s.cols + c];
    const heads = s.map.heads.length ? `${s.map.heads[s.head].split(" · ")[0]} · ` : "";
    const reduced = s.map.block[0] > 1 || s.map.block[1] > 1 ? ` (block of ${s.map.block[0]} × ${s.map.block[1]} cells)` : "";
    return `${heads}${axisLabel(s.map, 0, r, state.item)} · ${axisLabel(s.map, 1, c, state.item)} = ${num(v)}${reduced}`;
  }
  function hover(event) {
    const cell = cellAt(event.currentTarget, event), tip = $("sf-tip");
    if (!cell) { tip.hidden = true; return; }
    const text = cellText(event.currentTarget.sf, ...cell);
    $("sf-readout").textContent = text;
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = Math.min(event.clientX + 14, window.innerWidth - 300) + "px";
    tip.style.top = event.clientY + 14 + "px";
  }

  // ---- derivations of clicked cells ------------------------------------------------------------------------
  function fullIndex(stepIndex, map, head, r, c) {
    const s = D.steps[stepIndex], drawn = s.dims.filter((d) => d !== "batch" && d !== "head" && d !== "kv_head");
    const at = drawn.length === 1 ? [c] : [r, c];
    if (map.vocab_ids && drawn[drawn.length - 1] === "vocab") at[at.length - 1] = map.vocab_ids[c];
    let k = 0;
    return s.dims.map((d) => (d === "batch" ? state.item : d === "head" || d === "kv_head" ? head : at[k++]));
  }
  function stepLink(i, text) {
    const a = el("a", { textContent: text || `step ${i + 1} (${D.steps[i].name})` });
    a.addEventListener("click", () => show(i));
    return a;
  }
  function pick(event) {
    const canvas = event.currentTarget, cell = cellAt(canvas, event);
    if (!cell) return;
    const s = canvas.sf, [r, c] = cell, box = $("sf-derivation");
    box.replaceChildren();
    $("sf-readout").textContent = cellText(s, r, c);
    const title = el("div", {}, el("b", { textContent: "How this cell was computed: " }), cellText(s, r, c));
    box.append(title);
    if (s.map.block[0] > 1 || s.map.block[1] > 1) {
      box.append(el("p", { textContent: "This map was reduced to blocks to keep the page small, so its cells cannot be derived one by one here." }));
      return;
    }
    const d = hooks.derive ? hooks.derive(state.step, s.head, r, c, s.map)
      : state.item === D.derive_batch ? (D.derive[String(state.step)] || {})[`${s.head},${r},${c}`] : undefined;
    if (d && d.error) { box.append(el("p", { className: "sf-note", textContent: d.error })); return; }
    if (!d) {
      const index = fullIndex(state.step, s.map, s.head, r, c).join(" ");
      const steps = Object.keys(D.derive).map(Number);
      const held = steps.length ? `This page holds derivations for the first batch item of ${steps.length} steps (${steps.map((i) => i + 1).join(", ")}).` : "This page holds no derivations of this run.";
      box.append(el("p", { textContent: `${held} To derive this cell, run:` }),
        el("code", { textContent: `scratchformer derive ${D.run_args || "--model MODEL --source TEXT"} ${D.steps[state.step].name} ${index}` }));
      return;
    }
    box.append(el("p", {}, el("code", { textContent: d.f })), el("p", {}, "With this run's numbers: ", el("code", { textContent: d.e })),
      el("p", { textContent: `Value ${num(d.v)}; recomputed from its inputs ${num(d.r)} (${d.ok ? "equal" : "they differ"}).` }));
    if (d.n) box.append(el("p", { textContent: d.n }));
    if (d.t.length) {
      const table = el("table");
      for (const [label, v] of d.t) table.append(el("tr", {}, el("td", { textContent: label }), el("td", { textContent: num(v) })));
      box.append(table);
    }
    const reads = el("p", {}, "Reads: ");
    d.in.forEach(([i, n], k) => reads.append(k ? "; " : "", `${n} cell${n > 1 ? "s" : ""} of `, stepLink(i)));
    d.p.forEach(([name, n], k) => reads.append(k || d.in.length ? "; " : "", `${n} entr${n > 1 ? "ies" : "y"} of parameter ${name}`));
    if (d.u) reads.append(`; ${d.u} more cells not listed`);
    if (d.in.length || d.p.length) box.append(reads);
  }

  // ---- the page around the map ------------------------------------------------------------------------------
  function visibleSteps() {
    return $("sf-major").checked ? D.steps.map((s, i) => (s.major ? i : -1)).filter((i) => i >= 0) : D.steps.map((_, i) => i);
  }
  const UNKNOWN = new Set(["<unk>", "[UNK]", "<UNK>"]); // the unknown-word tokens of the vocabularies we read
  function header() {
    const run = $("sf-run"), inp = D.input, item = state.item;
    $("sf-heading").textContent = `scratchformer · ${D.model.name}`;
    run.replaceChildren(el("p", { className: "sf-small", textContent: D.model.describe + (D.model.untrained ? " · untrained: random weights, the attention carries no meaning yet" : "") }));
    // a word the vocabulary lacks is marked as the window's source field marks it (red, wavy underline)
    const chip = (t) => UNKNOWN.has(t) ? el("span", { textContent: t, className: "sf-unk", title: "a word the model's vocabulary does not have" }) : el("span", { textContent: t });
    const chips = (label, toks) => el("p", { className: "sf-tokens" }, el("b", { textContent: label + " " }), ...toks.map(chip));
    const line = (label, toks) => {
      const p = chips(label, toks.slice(0, 80));
      if (toks.length > 80) p.append(el("span", { className: "sf-small", textContent: ` … ${toks.length} tokens in all` }));
      run.append(p);
    };
    if (inp.source[item] && inp.source[item].length) line("Source", inp.source[item]);
    const same = JSON.stringify(inp.target[item]) === JSON.stringify(inp.source[item]); // a decoder alone reads its text
    if (inp.target[item] && inp.target[item].length && !same) line("Decoder input", inp.target[item]);
    if (inp.decoder_input) run.append(el("p", { className: "sf-small", textContent: `The decoder reads ${inp.decoder_input}.` }));
    if (inp.translation) run.append(el("p", {}, el("b", { textContent: "Translation (the model's own output): " }), el("span", { id: "sf-translation", textContent: inp.translation })));
    for (const note of inp.notes || []) run.append(el("p", { className: "sf-note", textContent: note }));
    if (D.interventions.length) run.append(el("p", { className: "sf-note", textContent: "This run changed the model on purpose: " + D.interventions.join("; ") }));
    const maps = Object.values(D.maps), reduced = maps.filter((m) => m.block[0] > 1 || m.block[1] > 1);
    const wide = maps.some((m) => m.dtype === "f32");
    let text = `Values stored as float16 (about 3 significant digits)${wide ? ", float32 where float16 would change them (token ids, very large values)" : ""}. `;
    text += reduced.length ? `${reduced.length} of ${maps.length} maps were reduced to blocks of cells to keep the page small (each block shows its largest value, or the one farthest from 0); every attention weight of the first batch item is kept whole${reduced.some((m) => D.steps[+m.chunk.split("/")[0]].kind === "attention_weights" && m.chunk.endsWith("/0")) ? " where it fitted" : ""}. `
      : "Every map is stored whole. ";
    const derived = Object.keys(D.derive).length;
    text += `Derivations of clicked cells are stored for ${derived} step${derived === 1 ? "" : "s"} (first batch item)`;
    text += D.items.length < D.n_items ? `; the page holds batch items 1–${D.items.length} of ${D.n_items}.` : ".";
    $("sf-stored").textContent = hooks.stored ? hooks.stored() : text;
  }
  const SHORT = { embedding: "Embed", positional: "PE", ffn: "FFN", linear: "Linear", softmax: "Softmax", norm: "Norm" };
  function strip() {
    const nav = $("sf-strip"), lanes = {};
    for (const b of D.blocks) {
      if (!lanes[b.column]) nav.append((lanes[b.column] = el("div", { className: "sf-lane" }, el("b", { textContent: b.column }))));
      let label = SHORT[b.kind] || b.label;
      if (b.kind === "attention") label = b.label.replace("Multi-head ", "").replace("attention", "attn");
      if (b.kind === "add_norm") label = b.label;
      if (b.layer !== null) label = `${b.layer + 1}·${label}`;
      const node = el("button", { className: `sf-block ${b.kind}${b.steps.length ? "" : " empty"}`, textContent: label, title: `${b.label}${b.layer !== null ? ", layer " + (b.layer + 1) : ""}` });
      node.dataset.key = b.key;
      if (b.steps.length) node.addEventListener("click", () => show(b.steps[0]));
      lanes[b.column].append(node);
    }
  }
  function stepList() {
    const list = $("sf-steps");
    D.steps.forEach((s, i) => {
      const li = el("li", { className: s.major ? "major" : "", title: `${s.path}\n${s.name}` }, el("span", { className: "n", textContent: i + 1 }), s.title);
      li.addEventListener("click", () => show(i));
      list.append(li);
    });
  }
  function explain() {
    const ex = hooks.explain ? hooks.explain(state.step, state.item) : D.explain[`${state.step}/${state.item}`];
    const box = $("sf-explain"), s = D.steps[state.step];
    box.replaceChildren(el("h2", { textContent: "What this step does" }));
    if (s.formula) box.append(el("p", {}, el("code", { textContent: s.formula })));
    if (!ex) return;
    box.append(el("p", { textContent: ex.what }), el("p", {}, el("b", { textContent: "Why: " }), ex.why));
    if (ex.numbers) box.append(el("p", {}, el("b", { textContent: "In this run: " }), ex.numbers));
    if (ex.note) box.append(el("p", { className: "sf-note", textContent: ex.note }));
    for (const [i, text] of ex.links || []) box.append(el("p", { className: "sf-small" }, "See ", stepLink(i), `: ${text}`));
  }
  let lensDrawn = -1;
  function lens() {
    const box = $("sf-lens");
    if (!$("sf-lens-box").open) return; // read when opened (a live page's lens is made then)
    if (D.lens.note) { box.textContent = D.lens.note; return; }
    const L = D.lens.items[String(state.item)];
    if (!L) {
      lensDrawn = -1;
      box.textContent = `The lens is stored for batch item ${Object.keys(D.lens.items).map((b) => +b + 1).join(" and ")} only.`;
      return;
    }
    if (lensDrawn !== state.item) {
      lensDrawn = state.item;
      const table = el("table"), headRow = el("tr", {}, el("th", { textContent: L.stack === "encoder" ? "point \\ position holds → head predicts" : "point \\ position reads → emits" }));
      L.positions.forEach((p, j) => headRow.append(el("th", { textContent: `${abbreviate(p, 10)} → ${abbreviate(L.emitted[j], 10)}` })));
      table.append(headRow);
      L.labels.forEach((label, i) => {
        const tr = el("tr", {}, el("th", {}, stepLink(L.steps[i], label)));
        tr.dataset.step = L.steps[i];
        L.top[i].forEach((top, j) => {
          const [p, rank] = L.final[i][j], shade = Math.round(255 - 120 * Math.min(1, Number(top[0][1])));
          tr.append(el("td", { textContent: `${abbreviate(top[0][0], 10)} ${Number(top[0][1]).toFixed(2)}`, style: `background: rgb(${shade},${shade},255)`,
            title: top.map(([t, q]) => `${t}: ${Number(q).toFixed(3)}`).join("\n") + `\n“${L.emitted[j]}”: p ${Number(p).toFixed(3)}, rank ${rank}` }));
        });
        table.append(tr);
      });
      box.replaceChildren(...L.notes.map((n) => el("p", { className: "sf-note", textContent: n })), table);
    }
    for (const tr of box.querySelectorAll("tr[data-step]")) tr.querySelectorAll("td").forEach((td) => td.classList.toggle("here", +tr.dataset.step === state.step));
  }

  // ---- showing a step ----------------------------------------------------------------------------------------
  async function show(i) {
    i = Math.max(0, Math.min(D.steps.length - 1, i));
    const token = ++state.token;
    state.step = i;
    const s = D.steps[i], map = D.maps[`${i}/${state.item}`];
    document.querySelectorAll("#sf-steps li").forEach((li, k) => li.classList.toggle("current", k === i));
    const list = $("sf-steps"), current = list.children[i];
    if (current && (current.offsetTop < list.scrollTop || current.offsetTop + current.offsetHeight > list.scrollTop + list.clientHeight)) {
      list.scrollTop = current.offsetTop - list.clientHeight / 2; // only the list scrolls, never the page
    }
    document.querySelectorAll(".sf-block").forEach((b) => b.classList.toggle("current", b.dataset.key === s.block));
    const vis = visibleSteps(), at = vis.indexOf(i);
    $("sf-counter").textContent = `Step ${i + 1} of ${D.steps.length}`;
    $("sf-prev").disabled = at === 0 || (at < 0 && i <= vis[0]);
    $("sf-next").disabled = at === vis.length - 1 || (at < 0 && i >= vis[vis.length - 1]);
    $("sf-title").textContent = s.path;
    $("sf-subtitle").textContent = `${s.name} · ${s.shape.map((n, k) => `${n} ${s.dims[k]}`).join(" × ")} · batch item ${state.item + 1}`;
    const heads = map.heads.length, select = $("sf-head");
    select.replaceChildren(...(heads ? map.heads : ["—"]).map((t, k) => el("option", { value: k, textContent: t })));
    if (heads > 1) select.append(el("option", { value: "all", textContent: "All heads" }));
    if (state.head !== "all") state.head = Math.min(state.head, Math.max(heads - 1, 0));
    if (state.head === "all" && heads < 2) state.head = 0;
    select.value = String(state.head);
    select.disabled = heads < 2;
    $("sf-derivation").replaceChildren();
    const reduced = map.block[0] > 1 || map.block[1] > 1;
    $("sf-reduced").textContent = reduced ? `Reduced for this page: each cell is a block of ${map.block[0]} × ${map.block[1]} of the step's ${map.full[0]} × ${map.full[1]} cells, showing its ${map.cmap === "RdBu_r" ? "value farthest from 0" : "largest value"}.` : "";
    explain();
    lens();
    const vals = await values(map.chunk, map.dtype);
    if (token !== state.token) return; // a later step was asked for meanwhile
    shown = { step: i, head: state.head, item: state.item, map, vals };
    const box = $("sf-maps");
    box.replaceChildren();
    const room = Math.max(320, box.clientWidth || 700);
    if (state.head === "all") {
      const per = Math.max(200, Math.min(340, Math.floor(room / Math.min(heads, 4)) - 12));
      for (let h = 0; h < heads; h++) drawMap(box, vals, map, h, per, per, map.heads[h]);
    } else {
      drawMap(box, vals, map, state.head, Math.min(room, 900), Math.max(260, Math.min(560, window.innerHeight - 260)), "");
    }
    document.body.dataset.step = String(i);
    document.body.dataset.head = String(state.head);
    try { history.replaceState(null, "", `#${encodeURIComponent(s.name)}`); } catch (e) { /* a frame may refuse */ }
    if (!document.body.dataset.ready) document.body.dataset.readyMs = String(Math.round(performance.now())); // since navigation
    document.body.dataset.ready = "1";
  }
  function move(delta) {
    const vis = visibleSteps();
    let at = vis.indexOf(state.step);
    if (at < 0) at = delta > 0 ? vis.findIndex((k) => k > state.step) - 1 : vis.findIndex((k) => k > state.step);
    const next = vis[Math.max(0, Math.min(vis.length - 1, at + delta))];
    if (next !== undefined && next !== state.step) show(next);
  }

  // What the page offers a live page's script (live/page.js) and tests: the index, the state, drawing a
  // step again, and the values of the map shown (currentValues: one head, or every head with "All heads")
  function currentValues() {
    if (!shown) return null;
    const { map, vals, step, item } = shown, [heads, rows, cols] = map.shape, head = shown.head;
    const part = head === "all" ? vals : vals.subarray(head * rows * cols, (head + 1) * rows * cols);
    return { step, name: D.steps[step].name, head, item, shape: head === "all" ? [heads, rows, cols] : [rows, cols],
      values: Array.from(part, (v) => (isFinite(v) ? v : String(v))), levels: map.levels, cmap: map.cmap,
      rows: map.rows, cols: map.cols, vocab_ids: map.vocab_ids || null };
  }
  const page = { index: () => D, state, hooks, show, header, lens, el, num, unpackJson, currentValues,
    forgetLens: () => { lensDrawn = -1; } };
  window.sfPage = page;

  // ---- start -------------------------------------------------------------------------------------------------
  async function start() {
    D = await unpackJson(document.getElementById("sf-index").textContent);
    SPECIAL = D.colours.special;
    state.item = D.item;
    header();
    strip();
    stepList();
    const batch = $("sf-batch");
    batch.replaceChildren(...D.items.map((b) => el("option", { value: b, textContent: `${b + 1}` })));
    batch.value = String(state.item);
    $("sf-batch-label").hidden = D.items.length < 2;
    batch.addEventListener("change", () => { state.item = +batch.value; header(); show(state.step); });
    $("sf-head").addEventListener("change", (e) => { state.head = e.target.value === "all" ? "all" : +e.target.value; show(state.step); });
    $("sf-prev").addEventListener("click", () => move(-1));
    $("sf-next").addEventListener("click", () => move(1));
    $("sf-major").addEventListener("change", (e) => { document.body.classList.toggle("major-only", e.target.checked); show(state.step); });
    $("sf-lens-box").addEventListener("toggle", lens);
    if (D.graph && window.sfGraph) window.sfGraph(D.graph); // viewer_graph.js
    document.addEventListener("keydown", (e) => {
      if (e.target.closest && e.target.closest("select, input, textarea")) return;
      const keys = { ArrowRight: () => move(1), ArrowLeft: () => move(-1), Home: () => show(visibleSteps()[0]), End: () => show(visibleSteps().slice(-1)[0]) };
      if (keys[e.key]) { e.preventDefault(); keys[e.key](); }
    });
    let resized = 0;
    window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(() => show(state.step), 150); });
    // a link may name a step: page.html#decoder.1.cross_attn.weights opens there (and the address follows the steps)
    const named = () => D.steps.findIndex((s) => s.name === decodeURIComponent(location.hash.slice(1)));
    window.addEventListener("hashchange", () => { const k = named(); if (k >= 0 && k !== state.step) show(k); });
    // a live page reads its model first, so that data-ready comes with data-run: the boxes work once it is set
    if (D.live && window.sfLivePage) await window.sfLivePage(page); // live/page.js
    await show(Math.max(0, named()));
  }
  start().catch((err) => {
    document.body.dataset.error = String(err);
    $("sf-readout").textContent = `The page could not be drawn: ${err}`;
  });
})();
