// scratchformer's live derivations, part 1 of 3: what every rule shares (derive_rules.js, part 2,
// holds the rules; derive.js, part 3, the page's entry points). Numbers are written as Python's
// analyses.derive.result writes them (num, paren), sums are added up as numpy adds them (pairwise, in float64), and
// a Reader reads cells of a live run and entries of the model's parameters while keeping count of what it read, as
// analyses.derive.reader does, so the page lists the same inputs.
"use strict";
(() => {
  // ---- numbers as text: Python's f"{x:.4g}" (format.js), its exponent then written as int() writes it
  // ("1.2e-05" → "1.2e-5"), "−" for minus
  function general(x) {
    const [mantissa, exp] = window.sfPyFormat.general(x, 4).split("e");
    return exp === undefined ? mantissa : `${mantissa}e${Number(exp)}`;
  }
  // result.num: four significant figures, −∞ and ∞ as symbols: 0.41327 → "0.4133", -12.5 → "−12.5"
  function num(x) {
    if (Number.isNaN(x)) return "NaN";
    if (!Number.isFinite(x)) return x < 0 ? "−∞" : "∞";
    if (x === 0) return "0";
    return general(x).replace(/-/g, "−");
  }
  const paren = (x) => { const t = num(x); return t.startsWith("−") ? `(${t})` : t; }; // a factor: "(−0.31)"
  // packing.finite_or_text: a number for the page, rounded to float32's seven digits; −∞, ∞, NaN as text
  function finiteOrText(x) {
    if (Number.isNaN(x)) return "nan";
    if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
    return Number(x.toPrecision(7));
  }

  // ---- sums as numpy makes them: 0 + pairwise(a) (8 accumulators up to 128 numbers, halves beyond) ------------
  function pairwise(a, lo, n) {
    if (n < 8) {
      let r = -0;
      for (let i = 0; i < n; i++) r += a[lo + i];
      return r;
    }
    if (n <= 128) {
      const r = Array.from(a.subarray(lo, lo + 8));
      let i = 8;
      for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j] += a[lo + i + j];
      let res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
      for (; i < n; i++) res += a[lo + i];
      return res;
    }
    let n2 = Math.floor(n / 2);
    n2 -= n2 % 8;
    return pairwise(a, lo, n2) + pairwise(a, lo + n2, n - n2);
  }
  const sum = (a) => 0 + pairwise(Float64Array.from(a), 0, a.length); // np.sum of a float64 vector
  const mean = (a) => sum(a) / a.length; // np.mean
  function variance(a) { // np.var: the mean of the squared distances from the mean (biased)
    const mu = mean(a), sq = Float64Array.from(a, (v) => (v - mu) * (v - mu));
    return sum(sq) / a.length;
  }
  // indices by a key, largest first, equal keys in index order (np.argsort(-key, kind="stable"))
  const order = (n, key) => Array.from({length: n}, (_, i) => i).sort((i, j) => key(j) - key(i) || i - j);
  const argmax = (a) => { let best = 0; for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i; return best; };
  const max = (a) => { let top = -Infinity; for (const v of a) if (v > top) top = v; return top; };
  const count = (a, test) => { let n = 0; for (const v of a) if (test(v)) n++; return n; };

  const TOP_TERMS = 6; // result.TOP_TERMS: a long sum lists its largest terms and sums up the rest
  // result.summed: Σ left[j]·right[j] (+ extra terms, a bias) → {total, expression, terms}; `label(j)` names a term
  function summed(left, right, label, extra = []) {
    const n = left.length, products = new Float64Array(n);
    for (let j = 0; j < n; j++) products[j] = left[j] * right[j]; // float32 × float32: exact in float64
    const total = sum(products) + extra.reduce((s, t) => s + t[1], 0);
    const ranked = order(n, (j) => Math.abs(products[j])), top = ranked.slice(0, TOP_TERMS);
    const rest = ranked.slice(TOP_TERMS);
    const parts = top.map((j) => `${paren(left[j])}·${paren(right[j])}`);
    const terms = top.map((j) => [label(j), products[j]]);
    if (rest.length) {
      const restSum = sum(rest.map((j) => products[j]));
      parts.push(`${rest.length} smaller terms (${num(restSum)})`);
      terms.push([`${rest.length} smaller terms`, restSum]);
    }
    parts.push(...extra.map((t) => paren(t[1])));
    terms.push(...extra);
    return {total, expression: parts.join(" + ") + ` = ${num(total)}`, terms};
  }

  // ---- reading a run: reader.Reader's reads, each one counted ----------------------------------------------------
  const INPUT_LIMIT = 1024; // reader.INPUT_LIMIT: rows longer than this are counted, not listed
  const strides = (shape) => { const s = shape.map(() => 1); for (let i = shape.length - 2; i >= 0; i--) s[i] = s[i + 1] * shape[i + 1]; return s; };
  const offsetOf = (shape, index) => strides(shape).reduce((o, s, i) => o + s * index[i], 0);

  // run: the live engine's trace (steps [{name, shape, data}], batch axis of 1 first where a step has one);
  // param(name) → {shape, data} of the model's parameter. Every index has one entry per axis, batch first.
  function reader(run, param) {
    const steps = new Map(), params = new Map(); // step index / parameter name → cells read, in first-read order
    let unlisted = 0;
    const note = (map, key, n) => map.set(key, (map.get(key) || 0) + n);
    const record = (map, key, n, listed = true) => { if (listed && n <= INPUT_LIMIT) note(map, key, n); else unlisted += n; };
    // the n numbers along axis `axis` of a tensor at `index` (its entry on that axis ignored)
    function line(shape, data, index, axis) {
      const at = index.slice(); at[axis] = 0;
      const o = offsetOf(shape, at), s = strides(shape)[axis];
      return Float64Array.from({length: shape[axis]}, (_, j) => data[o + j * s]);
    }
    const step = (i) => run.steps[i];
    return {
      value: (i, index) => step(i).data[offsetOf(step(i).shape, index)],
      cell(i, index) { note(steps, i, 1); return this.value(i, index); },
      // the last axis at `prefix`: one position's vector (listed = false: counted only, as a logits row)
      row(i, prefix, listed = true) {
        const s = step(i), v = line(s.shape, s.data, [...prefix, 0], prefix.length);
        record(steps, i, v.length, listed);
        return v;
      },
      column(i, prefix, suffix) { // the second-to-last axis: every key's value v[b, g, :, e]
        const s = step(i), v = line(s.shape, s.data, [...prefix, 0, ...suffix], prefix.length);
        record(steps, i, v.length);
        return v;
      },
      paramCell(name, index) { const p = param(name); note(params, name, 1); return p.data[offsetOf(p.shape, index)]; },
      paramRow(name, prefix) {
        const p = param(name), v = line(p.shape, p.data, [...prefix, 0], prefix.length);
        record(params, name, v.length);
        return v;
      },
      has: (name) => Boolean(name) && Boolean(param(name)),
      inputs: () => ({steps: [...steps], params: [...params], unlisted}),
    };
  }

  // plotdata.cells.cell_index: the map's (head, row, col) → the tensor's index; a vocabulary axis shows chosen
  // columns, `vocabIds` (the map's vocab_ids) names the entry each column is
  const HEAD_DIMS = ["head", "kv_head"];
  function cellIndex(dims, batch, head, row, col, vocabIds) {
    const axes = dims.map((d, i) => i).filter((i) => dims[i] !== "batch" && !HEAD_DIMS.includes(dims[i]));
    const drawn = axes.length === 1 ? [col] : [row, col];
    if (vocabIds && dims[axes[axes.length - 1]] === "vocab") drawn[drawn.length - 1] = Number(vocabIds[col]);
    let k = 0;
    return dims.map((d) => (d === "batch" ? batch : HEAD_DIMS.includes(d) ? head : drawn[k++]));
  }

  window.sfDeriveKit = {num, paren, general, finiteOrText, pairwise, sum, mean, variance, order, argmax, max, count,
    summed, reader, cellIndex, offsetOf, INPUT_LIMIT};
})();
