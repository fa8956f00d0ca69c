// scratchformer's live page: numbers written as Python writes them, for the plug-ins that must print what Python
// prints (explain.js as explain/format.py, derive_kit.js as analyses.derive.result.num).
// JavaScript's toFixed/toPrecision round ties up; Python's format() rounds the double's exact decimal value, half to
// even, which is done here with BigInt.
//
//   sfPyFormat.fixed(x, p), .expo(x, p), .general(x, p)   // format(x, f".{p}f" / ".{p}e" / ".{p}g")
//   sfPyFormat.repr(x), .group(n), .sig3(x), .pct(f), .term(x)   // repr(float), explain.format's helpers
"use strict";
(() => {
  // ---- numbers as Python prints them ------------------------------------------------------------------------
  // Every double is a finite binary fraction, so it has an exact decimal value: |x| = D · 10^(−s), D a BigInt.
  // Rounding that exactly, half to even, is what Python's format() and round() do (JS's toFixed rounds ties up).
  const bits = new DataView(new ArrayBuffer(8));
  function exact(x) {
    if (x === 0) return {D: 0n, s: 0};
    bits.setFloat64(0, Math.abs(x));
    const hi = bits.getUint32(0), lo = bits.getUint32(4), biased = (hi >>> 20) & 0x7ff;
    let m = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo), e = biased === 0 ? -1074 : biased - 1075;
    if (biased !== 0) m |= 1n << 52n;
    while (e < 0 && m % 2n === 0n) { m >>= 1n; e++; } // fewer digits to carry
    return e >= 0 ? {D: m << BigInt(e), s: 0} : {D: m * 5n ** BigInt(-e), s: -e};
  }
  // |x| rounded half to even to p decimals (p < 0: to tens, hundreds …) as a BigInt R: |x| ≈ R · 10^(−p)
  function roundAt(x, p) {
    const {D, s} = exact(x);
    if (p >= s) return D * 10n ** BigInt(p - s);
    const unit = 10n ** BigInt(s - p), r2 = 2n * (D % unit);
    let q = D / unit;
    if (r2 > unit || (r2 === unit && q % 2n === 1n)) q += 1n;
    return q;
  }
  const magnitude = (x) => { const {D, s} = exact(x); return D.toString().length - 1 - s; }; // ⌊log10 |x|⌋, exactly
  const negative = (x) => x < 0 || Object.is(x, -0);
  const special = (x) => (Number.isNaN(x) ? "nan" : x < 0 ? "-inf" : "inf");
  function fixed(x, p) { // format(x, f".{p}f")
    if (!Number.isFinite(x)) return special(x);
    const digits = roundAt(x, p).toString().padStart(p + 1, "0");
    return (negative(x) ? "-" : "") + (p ? `${digits.slice(0, -p)}.${digits.slice(-p)}` : digits);
  }
  function expo(x, p) { // format(x, f".{p}e"): d.ddde±XX
    if (!Number.isFinite(x)) return special(x);
    let e = x === 0 ? 0 : magnitude(x), digits = roundAt(x, p - e).toString().padStart(p + 1, "0");
    if (digits.length > p + 1) { e += 1; digits = digits.slice(0, p + 1); } // 9.995 → 1.00e+01
    const mantissa = p ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${negative(x) ? "-" : ""}${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  const trim = (t) => (t.includes(".") ? t.replace(/0+$/, "").replace(/\.$/, "") : t);
  function general(x, p = 6) { // format(x, f".{p}g"), "g" alone being p = 6
    if (!Number.isFinite(x)) return special(x);
    if (x === 0) return negative(x) ? "-0" : "0";
    p = Math.max(p, 1);
    let e = magnitude(x);
    if (roundAt(x, p - 1 - e).toString().length > p) e += 1; // the exponent after rounding
    if (e >= -4 && e < p) return trim(fixed(x, p - 1 - e));
    const [mantissa, exponent] = expo(x, p - 1).split("e");
    return `${trim(mantissa)}e${exponent}`;
  }
  function repr(x) { // repr(float): the shortest digits that read back, in Python's layout
    if (!Number.isFinite(x)) return special(x);
    if (x === 0) return negative(x) ? "-0.0" : "0.0";
    const [mantissa, exponent] = x.toExponential().split("e"), e = Number(exponent);
    if (e < -4 || e >= 16) return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
    const text = String(x); // JS writes these without an exponent, as Python does
    return text.includes(".") ? text : `${text}.0`;
  }
  const GROUP = "\u202f"; // format.py's narrow no-break space between thousands
  function group(n) { // format.group: int(round(n)), grouped from 10 000 on
    const digits = roundAt(n, 0).toString(), sign = negative(n) && digits !== "0" ? "-" : "";
    return sign + (BigInt(digits) >= 10000n ? digits.replace(/\B(?=(\d{3})+(?!\d))/g, GROUP) : digits);
  }
  function sig3(x) { // format.sig3: three significant figures
    if (Number.isNaN(x)) return "nan";
    if (!Number.isFinite(x)) return x < 0 ? "−∞" : "∞";
    if (x === 0) return "0";
    const m = magnitude(x);
    if (m >= 3) return group(Number(`${x < 0 ? "-" : ""}${roundAt(x, 2 - m)}e${m - 2}`)); // round(x, 2 − m): a float
    if (m < -3) return expo(x, 2);
    const text = trim(fixed(x, 2 - m));
    return text === "-0" || text === "" ? "0" : text;
  }
  const pct = (fraction) => `${sig3(100 * fraction)}%`;
  const term = (x) => (x < 0 ? `(${sig3(x)})` : sig3(x)); // a number after a '+'

  window.sfPyFormat = {exact, roundAt, fixed, expo, general, repr, group, sig3, pct, term};
})();
