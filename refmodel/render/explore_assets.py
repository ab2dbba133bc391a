"""The explorer page's markup, style and script (inlined by :func:`refmodel.render.explore.explore_html`).

Kept as string constants so that an installed wheel needs no package-data entry.  The script
holds no layout data: every table comes from the JSON that :func:`~refmodel.render.explore.explore_data`
computes from refmodel; the script only indexes those tables, and ports the descriptor checks
of :func:`refmodel.render.diagrams.desc` (tests/test_explore.py compares the two, line by line).
The dot view only lays out the explanations embedded in that JSON.

The grid is an ARIA grid with one tab stop (roving tabindex): the arrow keys, Home / End, Page Up /
Page Down move a cursor that the info panel (aria-live) describes as hovering does; Enter / Space
select like a click.  The legend names the colours of the view; the overview draws one cell per
8 columns of a row (m64n256 fits 1600 px with 10 px labels).
"""

BODY = r"""
<header>
  <h1>wgref explore <span class="sub">Hopper (sm_90a) wgmma layouts, from refmodel's tables (H200-verified)</span></h1>
</header>
<div id="controls">
  <label>layout <select id="layout"></select></label>
  <label data-opt="dtype">dtype <select id="dtype"></select></label>
  <label data-opt="n"><span id="n-label">N</span> <select id="n"></select></label>
  <label data-opt="swizzle">swizzle <select id="swizzle"></select></label>
  <label data-opt="major">major <select id="major"><option value="K">K-major</option><option value="MN">MN-major</option></select></label>
  <label data-opt="sel">sp-sel <select id="sel"></select></label>
  <label data-opt="num">matrices <select id="num"><option value="1">.x1</option><option value="2">.x2</option><option value="4">.x4</option></select></label>
  <label data-opt="example">example <select id="example"></select></label>
  <label data-opt="form">form <select id="form"></select></label>
  <label data-opt="operand">operand <select id="operand"><option value="a">A (M x K)</option><option value="b">B (K x N)</option><option value="c">C (M x N)</option><option value="d">D (M x N)</option></select></label>
  <label data-opt="trans">trans <select id="trans"><option value="0">no .trans</option><option value="1">.trans</option></select></label>
  <label>zoom <select id="zoom"><option value="0">auto</option><option value="8">8 px</option><option value="12">12 px</option><option value="18">18 px</option><option value="26">26 px</option><option value="40">40 px</option><option value="56">56 px</option><option value="ov">overview: 8 columns a cell</option></select></label>
  <button id="clear" type="button">clear selection</button>
  <a id="permalink" href="#">link to this view</a>
</div>
<div id="descbox" hidden>
  <label>descriptor (hex or decimal) <input id="desc-input" size="24" spellcheck="false" autocomplete="off"></label>
  <button id="desc-go" type="button">decode</button>
  <span class="hint">fields, checks and the bytes read: the grid below is the operand tile (row x k, address read)</span>
  <div id="desc-error" class="error"></div>
  <ul id="desc-checks"></ul>
  <div class="descout"><table id="desc-fields"></table><pre id="desc-report"></pre></div>
</div>
<section id="dotbox" hidden aria-labelledby="dot-instr">
  <p id="dot-instr"></p>
  <ol id="dot-steps"></ol>
  <table id="dot-terms"></table>
  <p id="dot-command"></p>
</section>
<div id="title"></div>
<main>
  <div id="gridwrap"><table id="grid" role="grid" aria-labelledby="title"></table></div>
  <aside id="side">
    <h2>cell under the pointer or keyboard cursor</h2>
    <div id="infobox" aria-live="polite" aria-atomic="true"><table id="info"><tr><td>hover a cell</td></tr></table></div>
    <h2>selection</h2>
    <div id="picked" aria-live="polite"></div>
    <div id="actions"></div>
    <h2>legend</h2>
    <div id="legend"></div>
    <h2>notes</h2>
    <ul id="notes"></ul>
    <h2>keyboard</h2>
    <p id="keys">Tab into the grid (one stop); the arrow keys move the cursor and show its cell here, as hovering
      does; Home / End: start / end of the row, Ctrl+Home / Ctrl+End: first / last cell, Page Up / Page Down: one
      band of rows; Enter or Space selects as a click does, Escape clears the selection.</p>
  </aside>
</main>
<footer id="source"></footer>
"""

CSS = r"""
:root { --cw: 18px; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 14px; }
body { margin: 0; padding: 8px 12px; color: #222; background: #fafafa; }
h1 { font-size: 18px; margin: 2px 0 6px; } h1 .sub { font-size: 13px; font-weight: normal; color: #555; }
h2 { font-size: 13px; margin: 10px 0 4px; color: #555; text-transform: uppercase; letter-spacing: .04em; }
#controls { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; padding: 6px 0; }
#controls label { white-space: nowrap; } #controls label[hidden] { display: none; }
select, input, button { font: inherit; }
#descbox { background: #fff; border: 1px solid #ccc; border-radius: 4px; padding: 6px 10px; margin: 4px 0; }
#descbox .hint { color: #555; font-size: 12px; }
#desc-input { font-family: ui-monospace, Menlo, Consolas, monospace; }
#desc-fields { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
#desc-fields th, #desc-fields td { border: 1px solid #ddd; padding: 1px 6px; text-align: left; }
#desc-fields td.num { font-family: ui-monospace, Menlo, Consolas, monospace; }
#desc-checks { margin: 4px 0; padding-left: 18px; font-size: 12px; } #desc-checks .bad { color: #a04000; }
#desc-checks .ok { color: #1a7f37; }
.descout { display: flex; gap: 12px; align-items: flex-start; }
#desc-report { font-size: 11px; margin: 4px 0; white-space: pre-wrap; max-height: 11.5em; overflow: auto; flex: 1 1 auto;
               background: #f7f7f7; padding: 2px 6px; }
.error { color: #b00020; font-weight: 600; }
#title { font-weight: 600; margin: 4px 0; }
main { display: flex; gap: 12px; align-items: flex-start; }
#gridwrap { overflow: auto; max-width: calc(100vw - 380px); max-height: calc(100vh - 170px); border: 1px solid #bbb;
            background: #fff; position: relative; flex: 0 1 auto; }
#grid { border-collapse: separate; border-spacing: 0; font-family: ui-monospace, Menlo, Consolas, monospace; }
#gridwrap:focus-within { outline: 3px solid #1d4ed8; outline-offset: 1px; }
#grid td { width: var(--cw); min-width: var(--cw); max-width: var(--cw); height: calc(var(--cw) * 0.8);
           padding: 0; text-align: center; overflow: hidden; white-space: nowrap; cursor: pointer;
           font-size: calc(var(--cw) * 0.4); line-height: 1; border-right: 1px solid rgba(255,255,255,.5);
           border-bottom: 1px solid rgba(255,255,255,.5); }
#grid.tiny td { font-size: 0; }
#grid td.cb { border-left: 1px solid #666; } #grid tr.rb td, #grid tr.rb th { border-top: 2px solid #333; }
#grid th { position: sticky; background: #eee; font-weight: normal; font-size: 10px; color: #444; z-index: 1;
           padding: 0 3px; white-space: nowrap; }
#grid thead th { top: 0; z-index: 2; height: 16px; border-left: 1px solid #ddd; }
#grid thead th.span { text-align: left; }
#grid tbody th { left: 0; text-align: right; }
#grid thead th.corner { left: 0; z-index: 3; }
#grid.ov td { width: 30px; min-width: 30px; max-width: 30px; height: 26px; font-size: 10px; line-height: 12px; }
/* rings: black outside, white inside, so one of the two contrasts with any cell colour (tests/test_explore.py) */
#grid td.lit { box-shadow: inset 0 0 0 1px #000, inset 0 0 0 2px #fff; }
#grid td.hov { outline: 2px solid #000; outline-offset: -2px; box-shadow: inset 0 0 0 4px #fff; }
#grid td:focus { outline: 3px solid #000; outline-offset: -3px; box-shadow: inset 0 0 0 5px #fff; }
#side { width: 340px; flex: 0 0 340px; position: sticky; top: 0; font-size: 13px; }
#info { border-collapse: collapse; width: 100%; background: #fff; }
#info th, #info td { border: 1px solid #ddd; padding: 2px 5px; text-align: left; vertical-align: top; }
#info th { width: 40%; font-weight: 600; color: #444; background: #f4f4f4; }
#notes { padding-left: 18px; margin: 0; } #notes li { margin: 2px 0; }
#source { color: #555; font-size: 11px; margin-top: 8px; }
#keys { font-size: 12px; margin: 0; color: #333; }
#legend p { margin: 2px 0 4px; font-size: 12px; }
#legend table { border-collapse: separate; border-spacing: 1px; }
#legend th { font-weight: normal; font-size: 11px; padding: 0 3px 0 0; text-align: right; color: #333; }
#legend td.sw { width: 8px; height: 12px; padding: 0; }
#legend .chip { display: inline-block; min-width: 22px; padding: 1px 3px; margin: 1px; text-align: center;
                font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; border: 1px solid #888; }
#legend ul { margin: 0; padding-left: 0; list-style: none; } #legend li { margin: 3px 0; }
#dotbox { background: #fff; border: 1px solid #ccc; border-radius: 4px; padding: 6px 10px; margin: 4px 0; }
#dot-instr { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; margin: 2px 0; }
#dot-steps { margin: 4px 0; padding-left: 22px; } #dot-steps li { margin: 2px 0; }
#dot-terms { border-collapse: collapse; font-size: 12px; margin: 4px 0; }
#dot-terms th, #dot-terms td { border: 1px solid #ddd; padding: 1px 6px; text-align: right; }
#dot-terms th { background: #f4f4f4; } #dot-terms td:first-child, #dot-terms td:nth-child(2) { text-align: left; }
#dot-terms td, #dot-command code { font-family: ui-monospace, Menlo, Consolas, monospace; }
#dot-command { font-size: 12px; margin: 2px 0; }
#actions button { margin-top: 4px; }
"""

JS = r"""
(function () {
"use strict";
const D = JSON.parse(document.getElementById("wgref-data").textContent);
const $ = (id) => document.getElementById(id);
const NS8 = range(8, D.n_max + 1, 8);
const DEFAULT_DTYPE = {acc: "f32", afrag: "f16", swizzle: "f16", smem: "f16", desc: "f16", sparse: "f16", epilogue: "bf16"};
const GROUP = {acc: "thread", afrag: "thread", sparse: "thread", epilogue: "thread", ldmatrix: "lane", stmatrix: "lane", mmasync: "lane",
               swizzle: "atom", smem: "line", desc: "line", dot: "term row"};
const st = {layout: "acc", dtype: "f32", n: 64, swizzle: "128B", major: "K", sel: 0, num: 4, trans: 0, zoom: 0,
            form: D.mmasync.forms[0], operand: "a",
            pick: null, desc: D.desc.default, example: D.dot.examples[0].id};
let cur = null, tds = [], cursor = 0, hovTd = null;

function range(a, b, s) { const o = []; for (let x = a; x < b; x += s) o.push(x); return o; }
function hex(x) { return "0x" + x.toString(16); }
function hex18(v) { return "0x" + v.toString(16).padStart(16, "0"); }
function mode(name) { return D.modes.find((m) => m.name === name); }
function modeByCode(code) { return D.modes.find((m) => m.desc_code === code); }
function layoutInfo(id) { return D.layouts.find((l) => l.id === id); }
function esc(s) { return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;"); }

// ---------------------------------------------------------------- swizzle and shared-memory tables
// the stored atom of address a: refmodel's atom table, on the phase (line - base offset) of the pattern
function swz(a, m, base) {
  if (!m.bits) return a;
  const L = 1 << m.bits, line = Math.floor(a / 128), ph = (((line - base) % L) + L) % L, atom = (a >> 4) & 7;
  return a + (m.atoms[ph][atom] - atom) * 16;
}
function smemTable(major, m, e) { return D.smem[major + "/" + m.name + "/" + e]; }
// offset of byte kb of row r = a*SBO + b*LBO + c (generator table: rows 0..P-1 and the step per P rows)
function coef(t, r, kb) {
  const q = Math.floor(r / t.period), i = (r % t.period) * t.kbytes + kb;
  return [t.a[i] + q * t.step[0], t.b[i] + q * t.step[1], t.c[i] + q * t.step[2]];
}
function offset(t, r, kb, lbo, sbo) { const k = coef(t, r, kb); return k[0] * sbo + k[1] * lbo + k[2]; }
function dense(t, rows) { return t.dense[rows / 8 - 1]; }
function coefText(k) {
  const parts = [];
  if (k[0]) parts.push(k[0] + "×SBO");
  if (k[1]) parts.push(k[1] + "×LBO");
  if (k[2] || !parts.length) parts.push(String(k[2]));
  return parts.join(" + ");
}

// ---------------------------------------------------------------- descriptors (BigInt: 64 bits)
const FIELDS = D.desc.fields;
const FIELD_MASK = FIELDS.reduce((acc, f) => acc | (((1n << BigInt(f.hi - f.lo + 1)) - 1n) << BigInt(f.lo)), 0n);
function pyRepr(s) {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let o = "";
  for (const ch of s) {
    if (ch === "\\") o += "\\\\"; else if (ch === q) o += "\\" + q; else if (ch === "\n") o += "\\n";
    else if (ch === "\r") o += "\\r"; else if (ch === "\t") o += "\\t"; else o += ch;
  }
  return q + o + q;
}
function excerptStr(s) {
  const r = pyRepr(s.slice(0, 60));
  return s.length <= 60 ? r : r.slice(0, -1) + "..." + r.slice(-1) + " (" + s.length + " characters)";
}
function showInt(v) {
  const a = v < 0n ? -v : v, bits = a.toString(2).length;
  if (a === 0n || bits <= 64) return v.toString();
  return "an integer of about 10**" + Math.floor(bits * Math.log10(2));
}
function parseDescriptor(text) {
  const t = String(text).trim().replace(/_/g, "");
  const bad = "cannot parse " + excerptStr(String(text)) + " as a 64-bit descriptor (give hex like 0x4000004000010040)";
  if (t.length > 24 || !/^[+-]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0+|[1-9][0-9]*)$/.test(t)) throw new Error(bad);
  const neg = t[0] === "-", body = t.replace(/^[+-]/, "");
  let v = /^0[oO]/.test(body) ? BigInt("0o" + body.slice(2)) : BigInt(body.replace(/^0+(?=\d)/, ""));
  if (neg) v = -v;
  if (v < 0n || v >= (1n << 64n)) throw new Error("a descriptor must fit in 64 unsigned bits, got " + showInt(v));
  if (v & ~FIELD_MASK & ((1n << 64n) - 1n)) {
    throw new Error("descriptor " + hex18(v) + " sets reserved bits " + hex(v & ~FIELD_MASK & ((1n << 64n) - 1n)) +
                    "; reserved bits must be zero");
  }
  const d = {value: v};
  for (const f of FIELDS) d[f.key] = Number((v >> BigInt(f.lo)) & ((1n << BigInt(f.hi - f.lo + 1)) - 1n)) * f.unit;
  return d;
}
function encodeDescriptor(d) {
  let v = 0n;
  for (const f of FIELDS) v |= BigInt(Math.floor(d[f.key] / f.unit)) << BigInt(f.lo);
  return v;
}
// in words, the way of writing a rows x k tile that gives these LBO/SBO (diagrams._packing), null if none
function packing(major, m, e, rows, k, lbo, sbo) {
  const t = 16 / e, cdiv = (a, b) => Math.ceil(a / b);
  if (major === "K" && m.bits) return sbo === 8 * m.width ? "8-row groups of " + 8 * m.width + " B back to back" : null;
  let unit, lDir, nL, sDir, nS;
  if (major === "K") { unit = "core matrices (128 B)"; lDir = "K"; nL = cdiv(k * e, 16); sDir = "M/N"; nS = cdiv(rows, 8); }
  else if (!m.bits) { unit = "core matrices (128 B)"; lDir = "K"; nL = cdiv(k, 8); sDir = "M/N"; nS = cdiv(rows, t); }
  else { unit = "swizzle atoms (" + 8 * m.width + " B)"; lDir = "M/N"; nL = cdiv(rows * e, m.width); sDir = "K"; nS = cdiv(k, 8); }
  const size = m.bits && major === "MN" ? 8 * m.width : 128;
  if (lbo === size && sbo === size * nL) return unit + " adjacent along " + lDir + " (" + nL + " x " + size + " B = SBO)";
  if (sbo === size && lbo === size * nS) {
    let txt = unit + " adjacent along " + sDir + " (" + nS + " x " + size + " B = LBO)";
    if (m.bits && major === "MN") {
      txt += ": each block of " + m.width / e + " MN elements stored whole, as " + nL + " TMA boxes of " + m.width / e +
             " (MN) x " + k + " (K) write it";
    }
    return txt;
  }
  return null;
}
// what the hardware reads for each byte of a rows x k operand: diagrams.desc, line by line
function analyseDescriptor(text, dtype, rows, major) {
  const d = parseDescriptor(text), e = D.elem_bytes[dtype], k = 32 / e, kb = k * e;
  if (major === "MN" && e !== 2) throw new Error("an MN-major (transposed) operand must be f16/bf16; " + dtype + " must be K-major");
  const m = modeByCode(d.swizzle), t = smemTable(major, m, e), dn = dense(t, rows), dl = dn[0], ds = dn[1];
  const start = d.start_address, bo = d.base_offset;
  const addr = [], rel = [], canon = [];
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < kb; b++) {
      addr.push(swz(start + offset(t, r, b, d.lbo, d.sbo), m, bo));
      rel.push(start + swz(offset(t, r, b, d.lbo, d.sbo), m, 0));
      canon.push(start + swz(offset(t, r, b, dl, ds), m, 0));
    }
  }
  const first = (arr, r, c) => arr[r * kb + c * e];
  const txt = t.text, lboTxt = txt[0], sboTxt = txt[1];
  const fl = {}; for (const f of FIELDS) fl[f.key] = f;
  const bits = (key) => ("bits " + fl[key].hi + ":" + fl[key].lo).padEnd(12);
  const report = [
    "descriptor " + hex18(d.value) + "  (" + rows + " x " + k + " " + dtype + ", " + major + "-major)",
    "  " + bits("start_address") + "start address >> 4 = " + hex(start >> 4) + "  -> " + hex(start) + " (" + start + " B)",
    "  " + bits("lbo") + "LBO >> 4           = " + hex(d.lbo >> 4) + "  -> " + d.lbo + " B: " + lboTxt,
    "  " + bits("sbo") + "SBO >> 4           = " + hex(d.sbo >> 4) + "  -> " + d.sbo + " B: " + sboTxt,
    "  " + bits("base_offset") + "base offset        = " + bo,
    "  " + bits("swizzle") + "swizzle            = " + d.swizzle + "  -> " + m.name,
    "notes:"];
  const notes = ["start address " + hex(start) + " (" + start + " bytes)",
                 "LBO " + d.lbo + " bytes, SBO " + d.sbo + " bytes, base offset " + bo + ", swizzle " + m.name];
  if (m.bits && start % m.period && bo === 0) {
    notes.push("the start is " + (start % m.period) + " bytes into a " + m.period + "-byte " + m.name +
               " pattern: fine for a K step inside a swizzle row (+32 B), otherwise check the tile was written " +
               "with the same absolute-address swizzle");
  }
  if (m.bits === 0 && bo) notes.push("base offset is only meaningful for swizzled modes");
  if (d.sbo === 0) notes.push("SBO is 0: every 8-row group reads the same bytes");
  for (const n of notes) report.push("  " + n);
  const issues = [], lboUsed = !(major === "K" && m.bits);
  if ((d.lbo !== dl && lboUsed) || d.sbo !== ds) {
    const denseTxt = packing(major, m, e, rows, k, dl, ds), givenTxt = packing(major, m, e, rows, k, d.lbo, d.sbo);
    let head = lboUsed ? "LBO = " + d.lbo + " B, SBO = " + d.sbo + " B differ" : "SBO = " + d.sbo + " B differs";
    head += " from the dense packing this check assumes (LBO = " + dl + (lboUsed ? "" : " (unused)") + ", SBO = " + ds + ": " +
            (denseTxt === null ? "None" : denseTxt) + ")";
    if (givenTxt) {
      issues.push(head + "; right if the tile was written as " + givenTxt +
                  (lboUsed && d.lbo === ds && d.sbo === dl ? "; if it was written densely, LBO and SBO are swapped" : ""));
    } else {
      issues.push(head + ": fine if the tile was written with these strides");
    }
  }
  const dup = addr.length - new Set(addr).size;
  if (dup) issues.push(dup + " of " + addr.length + " bytes are read by more than one element: the strides make core matrices overlap");
  if (m.bits && start % m.period) {
    const baseFix = (start >> 7) & ((1 << m.bits) - 1);
    let okFix = true, nDiff = 0, at = null;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < k; c++) {
        const fx = swz(start + offset(t, r, c * e, d.lbo, d.sbo), m, baseFix);
        if (fx !== first(rel, r, c)) okFix = false;
        if (first(rel, r, c) !== first(addr, r, c)) { nDiff++; if (!at) at = [r, c]; }
      }
    }
    if (nDiff) {
      const fix = okFix && baseFix !== bo ? " or set base offset = " + baseFix : "";
      const [r, c] = at;
      issues.push("the " + m.name + " swizzle acts on the absolute address (phase = (address >> 7) - base offset): the start is " +
        (start % m.period) + " B into its " + m.period + "-byte pattern, so " + nDiff + " of " + (rows * k) +
        " elements are read from other bytes than a tile laid out from the start would hold, e.g. (row " + r + ", k " + c +
        ") from " + hex(first(addr, r, c)) + ", not " + hex(first(rel, r, c)) + ". " +
        (start % 128 === 0 ? "If the tile was placed at the start, align it to " + m.period + " B" + fix + "."
          : "Right if this is a K step inside the swizzled rows of a tile written at an aligned address (start % 128 = " +
            (start % 128) + "); if the tile itself starts here, align it to " + m.period + " B" + fix + "."));
    }
  }
  report.push("checks:");
  if (issues.length) for (const i of issues) report.push("  ! " + i);
  else report.push("  ok: dense canonical strides, no overlap, start on the swizzle pattern");
  return {d, m, t, e, k, kb, rows, major, addr, canon, rel, report, notes, issues, mark: start % 128 === 0, dl, ds};
}

// ---------------------------------------------------------------- the layouts: size, cells, hover text
function accModel() {
  const a = D.acc[st.dtype], n = st.n, per = a.per;
  const regs = n / 2 / per, noForm = !a.forms.includes(n);
  const idx = (r, c) => r * D.n_max + c;
  return {
    rows: D.rows, cols: n, rowBands: 16,
    title: "wgmma accumulator m64n" + n + " ." + st.dtype + ": " + regs + " registers per thread" +
           (per > 1 ? " (two f16 elements a register)" : "") + (noForm ? " — no wgmma form" : ""),
    legend: "thread",
    cell(r, c) { const i = idx(r, c), t = a.thread[i]; return {label: t, key: "t" + t, group: t}; },
    say(r, c) { const i = idx(r, c); return "thread " + a.thread[i] + ", register r" + a.reg[i] + (per > 1 ? ", half " + a.slot[i] : ""); },
    info(r, c) {
      const i = idx(r, c), t = a.thread[i], j = a.reg[i], h = a.slot[i], lane = t & 31;
      const out = [["element", "D[" + r + ", " + c + "]"], ["thread", t], ["warp", t >> 5],
                   ["lane", lane + " (group g = " + (lane >> 2) + ", quad lane q = " + (lane & 3) + ")"], ["register", "r" + j]];
      if (per > 1) out.push(["half", h + " (bits " + (h ? "31:16" : "15:0") + ")"]);
      out.push(["element index", "i = " + (j * per + h) + " of thread " + t]);
      return out;
    },
    notes: [(noForm ? "No wgmma form accumulates m64n" + n + " into ." + st.dtype + " (the form table's N: " + a.forms.join(", ") +
             "); the map is drawn anyway. " : "") + "Warp w owns rows 16w..16w+15 (thick lines); click a cell to see one thread's " +
            regs * per + " elements.", "Row headers and column headers stay put while the grid scrolls; zoom changes the cell size" +
            (n > 128 ? "; the labels are too small at this width: zoom → overview shows one cell per 8 columns, labelled with its threads."
                     : ".")],
    source: D.sources.fragment,
  };
}
function afragModel() {
  const a = D.afrag[st.dtype], per = a.per;
  const idx = (r, c) => r * a.k + c;
  return {
    rows: D.rows, cols: a.k, rowBands: 16,
    title: "A fragment of the RS form, " + st.dtype + ": 64 x " + a.k + ", 4 registers per thread",
    legend: "thread",
    cell(r, c) { const t = a.thread[idx(r, c)]; return {label: t, key: "t" + t, group: t}; },
    say(r, c) {
      const i = idx(r, c);
      return "thread " + a.thread[i] + ", register r" + a.reg[i] + (per === 2 ? ", half " : per === 4 ? ", byte " : "") + (per > 1 ? a.slot[i] : "");
    },
    info(r, c) {
      const i = idx(r, c), t = a.thread[i], j = a.reg[i], s = a.slot[i], lane = t & 31;
      const out = [["element", "A[" + r + ", " + c + "]"], ["thread", t], ["warp", t >> 5],
                   ["lane", lane + " (group g = " + (lane >> 2) + ", quad lane q = " + (lane & 3) + ")"], ["register", "r" + j]];
      if (per === 2) out.push(["half", s + " (bits " + (s ? "31:16" : "15:0") + ")"]);
      if (per === 4) out.push(["byte", s + " (bits " + (8 * s + 7) + ":" + (8 * s) + ")"]);
      return out;
    },
    notes: ["Every A type takes 4 registers per thread and 32 bytes of K per row (K = " + a.k + " for " + st.dtype + ")."],
    source: D.sources.fragment,
  };
}
function matrixModel() {
  const key = "x" + st.num + (st.trans ? "t" : ""), a = D.matrix[key], op = st.layout;
  const instr = op + ".sync.aligned.m8n8.x" + st.num + (st.trans ? ".trans" : "") + ".shared.b16";
  return {
    rows: a.rows, cols: a.cols, rowBands: 8, colBands: 8,
    title: instr + ": which lane holds each element (colour = lane)",
    legend: "lane",
    cell(r, c) { const l = a.lane[r * a.cols + c]; return {label: l, key: "l" + l, group: l}; },
    say(r, c) { const i = r * a.cols + c; return "lane " + a.lane[i] + ", register r" + a.reg[i] + ", half " + a.half[i]; },
    info(r, c) {
      const i = r * a.cols + c, g = a.giver[i];
      return [["element", "tile row " + r + ", column " + c], ["lane", a.lane[i]], ["register", "r" + a.reg[i]],
              ["half", a.half[i] + " (bits " + (a.half[i] ? "31:16" : "15:0") + ")"], ["matrix", g >> 3],
              ["row in matrix", g & 7], ["column in matrix", a.byte[i] / 2],
              ["address from lane", g + " (lanes 0.." + (8 * st.num - 1) + " give one 16-byte row each)"],
              ["byte in the row", a.byte[i] + ".." + (a.byte[i] + 1)]];
    },
    notes: [(op === "ldmatrix" ? "memory -> registers" : "registers -> memory") + ": lane L in 0.." + (8 * st.num - 1) +
            " gives the address of row L%8 of matrix L/8; every lane holds one register per matrix (two 16-bit halves).",
            "The matrices are drawn as the epilogue's tile (0 top-left, 1 bottom-left, 2 top-right, 3 bottom-right)."],
    source: D.sources.matrix,
  };
}
function mmasyncModel() {
  const T = D.mmasync.tables[st.form], a = T[st.operand], per = a.per, w = a.bits;
  const idx = (r, c) => r * a.cols + c;
  const names = {a: "A", b: "B", c: "C", d: "D"}, what = names[st.operand];
  return {
    rows: a.rows, cols: a.cols, rowBands: 8, colBands: Math.min(a.cols, 8),
    title: T.name + ": " + what + " (" + a.rows + " x " + a.cols + " " + a.type + "), which lane holds each element" +
           (T.quad_pair ? " (quad pair 0: lanes 0-3 and 16-19)" : ""),
    legend: "lane",
    cell(r, c) { const l = a.lane[idx(r, c)]; return {label: l, key: "l" + l, group: l}; },
    say(r, c) { const i = idx(r, c); return "lane " + a.lane[i] + ", register r" + a.reg[i] + (per > 1 ? ", slot " + a.slot[i] : ""); },
    info(r, c) {
      const i = idx(r, c), l = a.lane[i], s = a.slot[i];
      const out = [["element", what + "[" + r + ", " + c + "]"], ["lane", l],
                   ["group g / thread-in-group t", (l >> 2) + " / " + (l & 3)], ["register", "r" + a.reg[i]]];
      if (per > 1) out.push(["slot", s + " (bits " + (w * s + w - 1) + ":" + (w * s) + ")"]);
      return out;
    },
    notes: ["A warp's mma.sync: 32 lanes; registers are 32-bit (64-bit for f64), elements fill them from the low bits.",
            "The same map as wgref layout mma-sync --form " + st.form + " --operand " + st.operand +
            " (refmodel.layouts.mma_fragment); the H200 fixtures (fixtures/mma_sync) hold it."],
    source: "PTX ISA, Matrix Fragments for mma.m16n8k*/m8n8k*; CuTe mma_traits_sm70/80/89/90",
  };
}
function swizzleModel() {
  const m = mode(st.swizzle), e = D.elem_bytes[st.dtype], cols = 128 / e;
  return {
    rows: D.swizzle_lines, cols, rowBands: Math.max(1, 1 << m.bits), colBands: 16 / e,
    title: m.name + " swizzle: where each " + st.dtype + " element of a 128-byte line is stored (colour/label = stored atom)",
    rowHead: (r) => "line " + r,
    legend: "atom",
    cell(r, c) { const p = swz(128 * r + c * e, m, 0), at = (p >> 4) & 7; return {label: "a" + at, key: "i" + at, group: at}; },
    say(r, c) { const a = 128 * r + c * e, p = swz(a, m, 0); return "address " + hex(a) + " stored at " + hex(p) + ", atom " + ((p >> 4) & 7); },
    info(r, c) {
      const a = 128 * r + c * e, p = swz(a, m, 0);
      return [["element", "line " + r + ", element " + c + " (" + st.dtype + ")"], ["address before swizzle", hex(a) + " (atom " + ((a >> 4) & 7) + ")"],
              ["address after swizzle", hex(p) + " (atom " + ((p >> 4) & 7) + ")"], ["128-byte line", r],
              ["pattern line", m.bits ? (r % (1 << m.bits)) + " of " + (1 << m.bits) : "none"], ["byte in atom", a & 15]];
    },
    notes: [m.bits ? "Swizzle<" + m.bits + ",4,3>: the 16-byte atom moves inside its line; the pattern repeats every " + m.period + " bytes."
                   : "none: nothing moves.", "Click a cell: every element stored in the same atom column lights up."],
    source: D.sources.swizzle,
  };
}
function smemModel() {
  const e = D.elem_bytes[st.dtype], m = mode(st.swizzle), rows = st.n;
  if (st.major === "MN" && e !== 2) return errorModel("an MN-major (transposed) operand must be f16/bf16; " + st.dtype + " must be K-major");
  const t = smemTable(st.major, m, e), dn = dense(t, rows), lbo = dn[0], sbo = dn[1];
  const desc = {start_address: 0, lbo, sbo, base_offset: 0, swizzle: m.desc_code};
  const dv = hex18(encodeDescriptor(desc));
  const first = (r, c) => offset(t, r, c * e, lbo, sbo);
  return {
    rows, cols: t.k, rowBands: 8, colBands: 16 / e,
    title: rows + " x " + t.k + " " + st.dtype + " operand, " + st.major + "-major, " + m.name + ": stored byte address of each element",
    legend: "atom",
    cell(r, c) { const p = swz(first(r, c), m, 0); return {label: p.toString(16), key: "i" + ((p >> 4) & 7), group: p >> 7}; },
    say(r, c) { const p = swz(first(r, c), m, 0); return "k " + c + ", stored at " + hex(p) + ", atom " + ((p >> 4) & 7) + ", line " + (p >> 7); },
    info(r, c) {
      const kb = c * e, o = first(r, c), p = swz(o, m, 0);
      return [["element", "row " + r + ", k " + c + " (bytes " + kb + ".." + (kb + e - 1) + " of the row)"],
              ["address before swizzle", hex(o) + " = " + coefText(coef(t, r, kb))], ["address after swizzle", hex(p)],
              ["128-byte line", p >> 7], ["16-byte atom", (p >> 4) & 7],
              ["descriptor", dv], ["descriptor fields", "LBO " + lbo + " B, SBO " + sbo + " B, swizzle " + m.name +
               " (field " + m.desc_code + "), start 0x0"]];
    },
    notes: [t.text[0], t.text[1], "Dense canonical strides for this tile: LBO " + lbo + " B, SBO " + sbo + " B; descriptor " + dv + " (start 0).",
            "Click a cell: every element stored in the same 128-byte line lights up."],
    action: {label: "open this descriptor in the descriptor view", run() { st.desc = dv; setLayout("desc"); }},
    source: D.sources.smem,
  };
}
function descModel() {
  let res;
  try { res = analyseDescriptor(st.desc, st.dtype, st.n, st.major); } catch (err) { showDesc(null, err.message); return errorModel(err.message); }
  showDesc(res, "");
  const {d, m, kb, e} = res;
  return {
    rows: res.rows, cols: res.k, rowBands: 8, colBands: 16 / e,
    title: "descriptor " + hex18(d.value) + ": address read for each element (" + res.rows + " x " + res.k + " " + st.dtype + ", " +
           res.major + "-major, " + m.name + ")",
    cell(r, c) {
      const p = res.addr[r * kb + c * e], bad = res.mark && res.canon[r * kb + c * e] !== p;
      return {label: p.toString(16) + (bad ? "!" : ""), key: "i" + ((p >> 4) & 7), group: p >> 7};
    },
    legend: "atom",
    say(r, c) {
      const p = res.addr[r * kb + c * e], bad = res.mark && res.canon[r * kb + c * e] !== p;
      return "k " + c + ", read from " + hex(p) + ", atom " + ((p >> 4) & 7) + (bad ? ", not where a dense tile holds it" : "");
    },
    info(r, c) {
      const b = r * kb + c * e, p = res.addr[b], lg = d.start_address + offset(res.t, r, c * e, d.lbo, d.sbo);
      const out = [["element", "row " + r + ", k " + c], ["address before swizzle", hex(lg) + " = start + " + coefText(coef(res.t, r, c * e))],
                   ["address after swizzle", hex(p) + (e > 1 ? " .. " + hex(res.addr[b + e - 1]) : "")],
                   ["swizzle phase", m.bits ? "(" + hex(lg) + " >> 7) - base offset " + d.base_offset + " = " + ((lg >> 7) - d.base_offset) : "none"],
                   ["descriptor fields", "start " + hex(d.start_address) + ", LBO " + d.lbo + " B, SBO " + d.sbo + " B, base offset " +
                    d.base_offset + ", swizzle " + m.name]];
      if (res.mark) out.push(["dense tile at this start", res.canon[b] === p ? "same byte" : "would hold it at " + hex(res.canon[b]) + " (!)"]);
      return out;
    },
    notes: ["Grid: the hex address of each element's first byte, colour = its 16-byte atom; ! = another byte than a dense canonical tile at this start holds."].concat(res.issues.length ? res.issues : ["checks ok"]),
    source: D.sources.desc,
  };
}
function showDesc(res, error) {
  $("desc-error").textContent = error;
  $("desc-report").textContent = res ? res.report.join("\n") : "";
  $("desc-checks").innerHTML = !res ? "" : res.issues.length ? res.issues.map((i) => '<li class="bad">' + esc(i) + "</li>").join("")
    : '<li class="ok">ok: dense canonical strides, no overlap, start on the swizzle pattern</li>';
  let h = "<tr><th>field</th><th>bits</th><th>raw</th><th>value</th></tr>";
  if (res) {
    for (const f of FIELDS) {
      const v = res.d[f.key], raw = v / f.unit;
      const val = f.key === "swizzle" ? res.m.name : f.unit > 1 ? v + " B" : String(v);
      h += '<tr data-k="' + f.key + '"><td>' + esc(f.label) + "</td><td>" + f.hi + ":" + f.lo + '</td><td class="num">' + hex(raw) +
           '</td><td class="num">' + esc(val) + "</td></tr>";
    }
    const lo = Math.min(...res.addr), hi = Math.max(...res.addr);
    h += '<tr data-k="bytes"><td>bytes read</td><td></td><td class="num">' + res.addr.length + '</td><td class="num">' + hex(lo) + " .. " + hex(hi) + "</td></tr>";
  }
  $("desc-fields").innerHTML = h;
}
function sparseModel() {
  const s = D.sparse[st.dtype], tab = s[String(st.sel)], cols = s.cols, w = s.width;
  return {
    rows: D.rows, cols, rowBands: 16, colBands: 4,
    title: "sparse wgmma sp-meta, " + st.dtype + ", sp-sel " + st.sel + ": which thread and nibble hold the metadata of each row and " +
           (st.dtype === "tf32" ? "pair" : "chunk"),
    colHead: (c) => "k" + w * c,
    legend: "thread",
    cell(r, c) { const i = r * cols + c, t = tab.thread[i]; return {label: t + ":" + tab.pos[i], key: "t" + t, group: t}; },
    say(r, c) { const i = r * cols + c; return "thread " + tab.thread[i] + ", nibble " + tab.pos[i]; },
    info(r, c) {
      const i = r * cols + c, t = tab.thread[i], p = tab.pos[i];
      return [["element", "row " + r + ", " + (st.dtype === "tf32" ? "pair " : "chunk ") + c + " (k " + w * c + ".." + (w * c + w - 1) + ")"],
              ["thread", t], ["warp", t >> 5], ["lane", t & 31], ["nibble", p], ["bits", (4 * p + 3) + ":" + 4 * p + " of the sp-meta register"],
              ["sp-sel", st.sel]];
    },
    notes: ["Warp w supplies rows 16w..16w+15. Label = thread:nibble.", "Nibbles no row/chunk maps to are ignored by the hardware."],
    source: D.sources.sparse,
  };
}
function epilogueModel() {
  const ep = D.epilogue, n = st.n, m = mode(st.swizzle), tab = ep[m.name], acc = D.acc.f32;
  const idx = (r, c) => r * D.n_max + c;
  return {
    rows: D.rows, cols: n, rowBands: 16, colBands: 16,
    title: "epilogue m64n" + n + ": f32 accumulator -> cvt.rn." + st.dtype + "x2.f32 -> " + n / 16 + " x " + ep.instr + " per warp, " + m.name + " tile",
    legend: "thread",
    cell(r, c) { const t = acc.thread[idx(r, c)]; return {label: t, key: "t" + t, group: t}; },
    say(r, c) {
      const i = idx(r, c);
      return "thread " + acc.thread[i] + ", register d" + acc.reg[i] + ", stored at " + hex(swz(tab.p[i] + tab.q[i] * n, m, 0));
    },
    info(r, c) {
      const i = idx(r, c), t = acc.thread[i], ri = acc.reg[i], j = ri >> 1, h = ri & 1, s = ep.slice[i], g = ep.giver[i];
      const pre = tab.p[i] + tab.q[i] * n, post = swz(pre, m, 0);
      return [["element", "D[" + r + ", " + c + "]"], ["thread", t], ["warp", t >> 5], ["lane", t & 31],
              ["accumulator register", "d" + ri + " (f32)"], ["packed register", "p" + j + " half " + h + " (bits " + (h ? "31:16" : "15:0") +
               ") = cvt.rn." + st.dtype + "x2.f32 p" + j + ", d" + (2 * j + 1) + ", d" + 2 * j],
              ["stmatrix", "#" + s + " of warp " + (t >> 5) + " (columns " + 16 * s + ".." + (16 * s + 15) + "), matrix " + (j - 4 * s)],
              ["address from", "thread " + g + " (lane " + (g & 31) + ")"],
              ["address before swizzle", hex(pre)], ["address after swizzle", hex(post)], ["128-byte line", post >> 7]];
    },
    notes: ["The destination is the row-major tile a TMA store of the same swizzle reads back (column blocks of the swizzle width)."],
    source: D.sources.smem,
  };
}
// ---------------------------------------------------------------- the FP8 dot product (explain-dot)
// every number, bit and sentence below was computed by refmodel.numerics.explain.explain_dot when the page was made
const REGION = {w: "window: kept", x: "cut: below the window, truncated toward zero", y: "carry: above the window, only the sum reaches here",
                s: "kept by the final rounding", d: "dropped by the final rounding"};
function dotExample() { return D.dot.examples.find((x) => x.id === st.example) || D.dot.examples[0]; }
function dotModel() {
  const x = dotExample();
  showDot(x);
  const title = "explain-dot: one output element of " + x.instr + " — " + x.label;
  if (x.special) {
    return {rows: 0, cols: 0, title, legend: "dot", cell() { return null; }, info() { return []; },
            notes: ["Special path (" + x.special + "): no alignment; the grid of bits is empty."], source: D.dot.source};
  }
  const rows = x.rows, w = (c) => x.hi - c;
  const reg = (r, c) => rows[r].reg[c], bit = (r, c) => rows[r].bits[c];
  return {
    rows: rows.length, cols: x.hi - x.lo + 1, legend: "dot",
    title,
    rowHead: (r) => rows[r].name, colHead: (c) => String(w(c)), corner: "term \\ 2^k",
    rowBreak: (r) => rows[r].kind === "sum", colBreak: (c) => c > 0 && (w(c) === x.floor - 1 || w(c) === x.e_max + 1),
    cell(r, c) { const b = bit(r, c); return {label: b === "." ? "" : b, key: b === "." ? "e" : reg(r, c) + b, group: r}; },
    where(r, c) { return [["term", rows[r].name], ["bit weight", "2^" + w(c)]]; },
    say(r, c) { const b = bit(r, c); return b === "." ? "no bit" : "bit " + b + " (" + REGION[reg(r, c)] + ")"; },
    info(r, c) {
      const t = rows[r], b = bit(r, c), out = [["bit", b === "." ? "none (no bit of this row has this weight)" : b]];
      if (b !== ".") out.push(["region", REGION[reg(r, c)]]);
      if (t.kind === "term" || t.kind === "zero" || t.kind === "pad") {
        if (t.kind === "pad") out.push(["products", t.count + " x 0·0 (the K columns not given), each a zero term"]);
        out.push(["value", t.value], ["exponent", t.exp + (t.kind === "term" ? "" : " (e_zero: a zero term)")],
                 ["shift", t.shift + " = e_max " + x.e_max + " - exponent"], ["kept", t.kept + " x 2^" + x.floor],
                 ["cut", t.cut || "nothing"]);
      } else if (t.kind === "sum") {
        out.push(["sum of the kept terms", t.kept + " x 2^" + x.floor]);
      } else {
        out.push(["final rounding", x.rounding + " to " + x.mbits + " mantissa bits"], ["result", x.result_line]);
      }
      return out;
    },
    notes: ["Rows: the products a_k·b_k (exact), C, the exact sum of the kept integers and the rounded result; columns: bit " +
            "weights 2^k. The thick lines mark the window 2^" + (x.e_max + 1) + " .. 2^" + x.floor + ": bits right of it are cut.",
            "Bits are magnitudes; a term's sign is applied after its truncation (− before a name)."],
    source: D.dot.source,
  };
}
function showDot(x) {
  $("dot-instr").textContent = x.instr + " — " + x.params;
  const li = (k, html) => '<li data-step="' + k + '">' + html + "</li>";
  let h = li("inputs", "<b>inputs</b>: " + x.inputs.map(esc).join("; ") + x.notes.map((n) => " (note: " + esc(n) + ")").join(""));
  if (x.special) {
    h += li("special", "<b>special path</b>: " + esc(x.special) + ". No alignment is done: the accumulator's NaN/Inf rule decides the result.");
  } else {
    h += li("products", "<b>products</b>: each a_k·b_k is exact (the significands multiplied, exponent e_a + e_b, not renormalised); " +
                        "C is one more term; a zero term takes the exponent e_zero = " + x.e_zero + " (the table below)");
    h += li("align", "<b>alignment</b>: " + esc(x.window_line) + " (columns shift, kept, cut; the bits in the grid)");
    h += li("sum", "<b>sum</b>: " + x.lines.slice(0, x.total ? 2 : 1).map(esc).join("; "));
    if (x.total) h += li("round", "<b>rounding</b>: " + x.lines.slice(2).map(esc).join("; "));
  }
  h += li("result", "<b>output</b>: " + esc(x.result_line));
  $("dot-steps").innerHTML = h;
  let t = "";
  if (!x.special) {
    t = "<tr><th>term</th><th>value</th><th>exponent</th><th>shift</th><th>kept (x 2^" + x.floor + ")</th><th>cut</th></tr>";
    for (const r of x.rows) {
      if (r.kind === "sum" || r.kind === "rounded") continue;
      t += '<tr data-name="' + esc(r.name) + '"><td>' + esc(r.name) + "</td><td>" + esc(r.value) + "</td><td>" + r.exp + "</td><td>" +
           r.shift + "</td><td>" + r.kept + "</td><td>" + esc(r.cut) + "</td></tr>";
    }
    t += '<tr data-name="sum"><td>sum</td><td></td><td></td><td></td><td>' + x.total + "</td><td></td></tr>";
  }
  $("dot-terms").innerHTML = t;
  $("dot-command").innerHTML = "the same on the command line: <code>" + esc(x.command) + "</code>";
}

// ---------------------------------------------------------------- the overview: one cell per 8 columns of a row
const OV = 8;
function overviewOk(m) { return !m.error && m.cols >= 2 * OV && m.cols % OV === 0 && ["thread", "lane"].includes(GROUP[st.layout]); }
function spans(gs) {    // sorted distinct numbers as runs [lo, hi]
  const out = [];
  for (const g of gs) { const last = out[out.length - 1]; if (last && g === last[1] + 1) last[1] = g; else out.push([g, g]); }
  return out;
}
function spanText(gs) { return spans(gs).map(([a, b]) => (a === b ? String(a) : a + "–" + b)).join(", "); }
function overview(m) {
  const kind = GROUP[st.layout];
  const sets = (r, cb) => {
    const gs = [];
    for (let c = OV * cb; c < OV * cb + OV; c++) { const g = m.cell(r, c).group; if (!gs.includes(g)) gs.push(g); }
    return gs.sort((a, b) => a - b);
  };
  return {
    rows: m.rows, cols: m.cols / OV, rowBands: m.rowBands, colBands: m.colBands ? Math.max(1, m.colBands / OV) : 0,
    overview: true, legend: m.legend, rowHead: m.rowHead,
    title: m.title + " — overview: one cell = 8 columns of a row, labelled with the " + kind + "s holding them",
    colHead: (cb) => (m.colHead ? m.colHead(OV * cb) : String(OV * cb)),
    cell(r, cb) {
      const gs = sets(r, cb), sp = spans(gs), first = sp[0];
      let c0 = OV * cb; while (m.cell(r, c0).group !== gs[0]) c0++;
      const label = first[0] === first[1] ? String(first[0]) : first[0] + "–<br>" + first[1];
      return {label: label + (sp.length > 1 ? "<br>+" + (gs.length - (first[1] - first[0] + 1)) : ""), html: true,
              key: m.cell(r, c0).key, group: gs[0], groups: gs};
    },
    where(r, cb) { return [["row", r], ["columns", OV * cb + ".." + (OV * cb + OV - 1)]]; },
    say(r, cb) { return kind + "s " + spanText(sets(r, cb)); },
    info(r, cb) {
      const out = [[kind + "s", spanText(sets(r, cb))]];
      for (let c = OV * cb; c < OV * cb + OV; c++) out.push(["column " + c, m.say(r, c)]);
      return out;
    },
    notes: ["Overview: each cell is 8 columns of one row; the label names the " + kind + "s holding them (lowest–highest), the colour " +
            "is the lowest one's. A click, Enter or Space selects its lowest " + kind + ", again the next one, after the last none."].concat(m.notes),
    source: m.source,
  };
}

function errorModel(msg) {
  return {rows: 0, cols: 0, title: msg, error: true, legend: "", cell() { return null; }, info() { return []; }, notes: [msg], source: ""};
}
const MODELS = {acc: accModel, afrag: afragModel, ldmatrix: matrixModel, stmatrix: matrixModel, swizzle: swizzleModel,
                smem: smemModel, desc: descModel, sparse: sparseModel, epilogue: epilogueModel, dot: dotModel,
                mmasync: mmasyncModel};

// ---------------------------------------------------------------- controls
function fill(sel, values, labels) {
  sel.innerHTML = values.map((v, i) => '<option value="' + esc(v) + '">' + esc(labels ? labels[i] : v) + "</option>").join("");
}
function nChoices() { return st.layout === "epilogue" ? D.epilogue[st.swizzle].ns : NS8; }
function syncControls() {
  const L = layoutInfo(st.layout);
  for (const lab of document.querySelectorAll("#controls label[data-opt]")) lab.hidden = !L.opts.includes(lab.dataset.opt);
  if (D.dtypes[st.layout]) {
    const ds = D.dtypes[st.layout];
    if (!ds.includes(st.dtype)) st.dtype = DEFAULT_DTYPE[st.layout];
    fill($("dtype"), ds);
  }
  const ns = nChoices();
  if (!ns.includes(st.n)) st.n = ns.includes(64) ? 64 : ns[0];
  fill($("n"), ns);
  $("n-label").textContent = st.layout === "smem" || st.layout === "desc" ? "rows (M, or N of B)" : "N";
  if (st.layout === "sparse") {
    const sels = D.sparse[st.dtype].sels;
    if (!sels.includes(st.sel)) st.sel = sels[0];
    fill($("sel"), sels);
  }
  if (!D.dot.examples.some((x) => x.id === st.example)) st.example = D.dot.examples[0].id;
  $("layout").value = st.layout; $("dtype").value = st.dtype; $("n").value = String(st.n); $("swizzle").value = st.swizzle;
  $("major").value = st.major; $("sel").value = String(st.sel); $("num").value = String(st.num); $("trans").value = String(st.trans);
  $("example").value = st.example;
  if (!D.mmasync.forms.includes(st.form)) st.form = D.mmasync.forms[0];
  if (!["a", "b", "c", "d"].includes(st.operand)) st.operand = "a";
  $("form").value = st.form; $("operand").value = st.operand;
  $("descbox").hidden = st.layout !== "desc";
  $("dotbox").hidden = st.layout !== "dot";
  if ($("desc-input").value !== st.desc) $("desc-input").value = st.desc;
}

// ---------------------------------------------------------------- the legend (the colours of the view)
function renderLegend(kind) {
  let h = "";
  if (kind === "thread") {
    h = "<p>Colour = thread (128): the hue band is the warp (w0 red, w1 green, w2 blue, w3 purple), the hue shifts with the " +
        "quad lane q = lane % 4 and the lightness grows with the group g = lane / 4. Row w below: threads 32w .. 32w + 31.</p>" +
        '<table aria-hidden="true"><tr><th></th><th colspan="32" style="text-align:left">lane 0 … 31</th></tr>';
    for (let w = 0; w < 4; w++) {
      h += '<tr><th>w' + w + "</th>";
      for (let l = 0; l < 32; l++) {
        const t = 32 * w + l;
        h += '<td class="sw k-t' + t + '" data-k="t' + t + '" data-g="' + t + '" title="thread ' + t + " (warp " + w + ", lane " + l + ')"></td>';
      }
      h += "</tr>";
    }
    h += "</table>";
  } else if (kind === "lane") {
    h = "<p>Colour = lane (32): 8 hues for lane % 8, 4 lightness levels for lane / 8.</p><div>";
    for (let l = 0; l < 32; l++) h += '<span class="chip k-l' + l + '" data-k="l' + l + '" data-g="' + l + '">' + l + "</span>" + (l % 8 === 7 ? "<br>" : "");
    h += "</div>";
  } else if (kind === "atom") {
    h = "<p>Colour = the 16-byte atom (address bits 6:4) the element is stored in:</p><div>";
    for (let i = 0; i < 8; i++) h += '<span class="chip k-i' + i + '" data-k="i' + i + '" data-g="' + i + '">a' + i + "</span>";
    h += "</div>";
  } else if (kind === "dot") {
    h = "<ul>";
    for (const [key, text] of dotExample().legend) {
      const sw = key ? '<span class="chip k-' + key[0] + '0" data-k="' + key[0] + '0">0</span><span class="chip k-' + key + '" data-k="' +
                       key + '">1</span> ' : "";
      h += "<li>" + sw + esc(text) + "</li>";
    }
    if (!dotExample().special) h += '<li><span class="chip k-e" data-k="e">&nbsp;</span> no bit of that row at this weight</li>';
    h += "</ul>";
  }
  $("legend").innerHTML = h;
  $("legend").dataset.kind = kind || "";
}

// ---------------------------------------------------------------- the grid
function render() {
  syncControls();
  const base = MODELS[st.layout]();
  const ovOk = overviewOk(base);
  $("zoom").querySelector('option[value="ov"]').disabled = !ovOk;
  if (st.zoom === "ov" && !ovOk) st.zoom = 0;
  $("zoom").value = String(st.zoom);
  cur = st.zoom === "ov" ? overview(base) : base;
  const g = $("grid"), rows = cur.rows, cols = cur.cols, hadFocus = g.contains(document.activeElement);
  $("title").textContent = cur.title;
  const wide = st.layout === "smem" || st.layout === "desc";   // hex addresses: 4-5 characters a cell
  const cw = cur.overview ? 30 : st.zoom || (wide ? 40 : cols > 128 ? 12 : cols > 64 ? 18 : cols > 16 ? 28 : 40);
  g.style.setProperty("--cw", cw + "px");
  g.classList.toggle("tiny", cw < 16);
  g.classList.toggle("ov", !!cur.overview);
  const rowBreak = cur.rowBreak || ((r) => cur.rowBands && r && r % cur.rowBands === 0);
  const colBreak = cur.colBreak || ((c) => cur.colBands && c && c % cur.colBands === 0);
  const where = cur.where || ((r, c) => [["row", r], ["column", c]]);
  const corner = rows ? (cur.corner || (cur.rowHead ? "" : "row \\ col")) : "";
  const parts = ['<thead><tr role="row"><th class="corner" role="columnheader">' + esc(corner) + "</th>"];
  const span = cw < 16 && cols % 8 === 0 ? 8 : 1;   // narrow cells: one header per 8 columns
  for (let c = 0; c < cols; c += span) {
    parts.push('<th role="columnheader"' + (span > 1 ? ' colspan="' + span + '" class="span"' : "") + ">" + esc(cur.colHead ? cur.colHead(c) : c) + "</th>");
  }
  parts.push("</tr></thead><tbody>");
  const sets = new Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    parts.push('<tr role="row"' + (rowBreak(r) ? ' class="rb"' : "") + '><th role="rowheader">' + esc(cur.rowHead ? cur.rowHead(r) : r) + "</th>");
    for (let c = 0; c < cols; c++) {
      const x = cur.cell(r, c), i = r * cols + c;
      sets[i] = x.groups || [x.group];
      const aria = where(r, c).map(([k, v]) => k + " " + v).join(", ") + ": " + cur.say(r, c);
      parts.push('<td role="gridcell" data-r="' + r + '" data-c="' + c + '" class="k-' + x.key + (colBreak(c) ? " cb" : "") +
                 '" aria-label="' + esc(aria) + '">' + (x.html ? x.label : esc(x.label)) + "</td>");
    }
    parts.push("</tr>");
  }
  parts.push("</tbody>");
  g.innerHTML = parts.join("");
  cur.sets = sets;
  tds = Array.from(g.getElementsByTagName("td"));
  $("notes").innerHTML = cur.notes.map((n) => "<li>" + esc(n) + "</li>").join("");
  $("source").textContent = cur.source ? "mirrors: " + cur.source : "";
  $("actions").innerHTML = "";
  if (cur.action) {
    const b = document.createElement("button"); b.type = "button"; b.id = "action"; b.textContent = cur.action.label;
    b.addEventListener("click", cur.action.run); $("actions").appendChild(b);
  }
  renderLegend(cur.legend);
  $("info").innerHTML = "<tr><td>hover a cell, or Tab into the grid and use the arrow keys</td></tr>";
  cursor = Math.min(cursor, Math.max(0, tds.length - 1));
  if (tds.length) {
    tds[cursor].tabIndex = 0;                // the grid's one tab stop (roving tabindex)
    if (hadFocus) setCursor(cursor, 2);
  }
  applyPick();
  writeHash();
}
function applyPick() {
  const g = $("grid"), p = st.pick;
  let n = 0;
  for (let i = 0; i < tds.length; i++) { const on = p !== null && cur.sets[i].includes(p); tds[i].classList.toggle("lit", on); if (on) n++; }
  g.classList.toggle("picking", p !== null && n > 0);
  const what = cur.overview ? "overview cells" : "cells";
  $("picked").textContent = p === null ? "click a cell (or press Enter on it) to light every cell of its " + GROUP[st.layout]
                                       : GROUP[st.layout] + " " + p + ": " + n + " " + what + " lit";
}
// a click / Enter / Space on cell i: its group, again to clear; an overview cell steps through its groups
function pickAt(i) {
  const s = cur.sets[i];
  if (s.length === 1) st.pick = st.pick === s[0] ? null : s[0];
  else { const k = s.indexOf(st.pick); st.pick = k < 0 ? s[0] : k + 1 < s.length ? s[k + 1] : null; }
  applyPick(); writeHash();
}
function showInfo(td) {
  const r = +td.dataset.r, c = +td.dataset.c;
  if (hovTd && hovTd !== td) hovTd.classList.remove("hov");
  hovTd = td; td.classList.add("hov");
  const where = cur.where ? cur.where(r, c) : [["row", r], ["column", c]];
  $("info").innerHTML = where.concat(cur.info(r, c))
    .map(([k, v]) => '<tr data-k="' + esc(k) + '"><th>' + esc(k) + "</th><td>" + esc(v) + "</td></tr>").join("");
}
// the cursor: the cell with the grid's tab stop, outlined, shown in the info panel (hover moves it too);
// focus: 0 leave the focus, 1 focus the cell, 2 focus it and scroll it into view
function setCursor(i, focus) {
  if (!tds.length) return;
  i = Math.max(0, Math.min(tds.length - 1, i));
  const td = tds[i];
  if (tds[cursor] && cursor !== i) tds[cursor].removeAttribute("tabindex");
  cursor = i;
  td.tabIndex = 0;
  showInfo(td);
  if (focus && document.activeElement !== td) td.focus({preventScroll: true});
  if (focus === 2) reveal(td);
}
// scroll the grid so that the cell is clear of the sticky headers, and the page so that it is in the window
function reveal(td) {
  const w = $("gridwrap"), wb = w.getBoundingClientRect(), r = td.getBoundingClientRect();
  const head = $("grid").tHead.getBoundingClientRect().height, side = td.parentElement.firstElementChild.getBoundingClientRect().width;
  const top = wb.top + w.clientTop + head, bottom = wb.top + w.clientTop + w.clientHeight;
  const left = wb.left + w.clientLeft + side, right = wb.left + w.clientLeft + w.clientWidth;
  if (r.top < top) w.scrollTop -= top - r.top; else if (r.bottom > bottom) w.scrollTop += r.bottom - bottom;
  if (r.left < left) w.scrollLeft -= left - r.left; else if (r.right > right) w.scrollLeft += r.right - right;
  const r2 = td.getBoundingClientRect();
  if (r2.top < 0) window.scrollBy(0, r2.top - 8); else if (r2.bottom > window.innerHeight) window.scrollBy(0, r2.bottom - window.innerHeight + 8);
}
function onKey(e) {
  if (!tds.length || !e.target.closest("td") || e.altKey || e.metaKey) return;
  const R = cur.rows, C = cur.cols, r = Math.floor(cursor / C), c = cursor % C;
  const band = Math.max(1, cur.rowBands || 8);
  let n;
  switch (e.key) {
    case "ArrowLeft": n = c > 0 ? cursor - 1 : cursor; break;
    case "ArrowRight": n = c < C - 1 ? cursor + 1 : cursor; break;
    case "ArrowUp": n = r > 0 ? cursor - C : cursor; break;
    case "ArrowDown": n = r < R - 1 ? cursor + C : cursor; break;
    case "Home": n = e.ctrlKey ? 0 : r * C; break;
    case "End": n = e.ctrlKey ? R * C - 1 : r * C + C - 1; break;
    case "PageUp": n = Math.max(0, r - band) * C + c; break;
    case "PageDown": n = Math.min(R - 1, r + band) * C + c; break;
    case "Enter": case " ": e.preventDefault(); pickAt(cursor); return;
    case "Escape": st.pick = null; applyPick(); writeHash(); return;
    default: return;
  }
  e.preventDefault();
  setCursor(n, 2);
}

// ---------------------------------------------------------------- URL fragment
const KEYS = ["dtype", "n", "swizzle", "major", "sel", "num", "trans", "example", "form", "operand"];
function writeHash() {
  const L = layoutInfo(st.layout), q = ["layout=" + st.layout];
  for (const k of KEYS) if (L.opts.includes(k)) q.push(k + "=" + encodeURIComponent(st[k]));
  if (st.layout === "desc") q.push("desc=" + encodeURIComponent(st.desc));
  if (st.pick !== null) q.push(GROUP[st.layout].replace(/ /g, "_") + "=" + st.pick);
  if (st.zoom) q.push("zoom=" + st.zoom);
  const h = "#" + q.join("&");
  $("permalink").href = h;
  if (location.hash !== h) history.replaceState(null, "", h);
}
function readHash() {
  const q = new URLSearchParams(location.hash.replace(/^#/, ""));
  const lay = q.get("layout");
  st.layout = layoutInfo(lay) ? lay : "acc";
  if (q.has("dtype")) st.dtype = q.get("dtype");
  for (const k of ["n", "sel", "num", "trans", "zoom"]) if (q.has(k) && /^\d+$/.test(q.get(k))) st[k] = +q.get(k);
  if (q.get("zoom") === "ov") st.zoom = "ov";
  if (q.has("swizzle") && mode(q.get("swizzle"))) st.swizzle = q.get("swizzle");
  if (q.has("major") && ["K", "MN"].includes(q.get("major"))) st.major = q.get("major");
  if (![1, 2, 4].includes(st.num)) st.num = 4;
  st.trans = st.trans ? 1 : 0;
  if (q.has("desc")) st.desc = q.get("desc");
  if (q.has("example")) st.example = q.get("example");
  if (q.has("form")) st.form = q.get("form");
  if (q.has("operand")) st.operand = q.get("operand");
  const p = q.get(GROUP[st.layout].replace(/ /g, "_"));
  st.pick = p !== null && /^\d+$/.test(p) ? +p : null;
}

// ---------------------------------------------------------------- wiring
function setLayout(id) { st.layout = id; st.pick = null; render(); }
function init() {
  fill($("layout"), D.layouts.map((l) => l.id), D.layouts.map((l) => l.label));
  fill($("swizzle"), D.modes.map((m) => m.name));
  fill($("example"), D.dot.examples.map((x) => x.id), D.dot.examples.map((x) => x.label));
  fill($("form"), D.mmasync.forms, D.mmasync.forms.map((f) => D.mmasync.tables[f].name));
  $("layout").addEventListener("change", (e) => setLayout(e.target.value));
  for (const k of KEYS) {
    $(k).addEventListener("change", (e) => {
      const v = e.target.value;
      st[k] = ["n", "sel", "num", "trans"].includes(k) ? +v : v;
      if (k === "example") st.pick = null;
      render();  // the selection stays: the same thread under another option
    });
  }
  $("zoom").addEventListener("change", (e) => { st.zoom = e.target.value === "ov" ? "ov" : +e.target.value; render(); });
  $("clear").addEventListener("click", () => { st.pick = null; applyPick(); writeHash(); });
  const decode = () => { st.desc = $("desc-input").value.trim(); st.pick = null; render(); };
  $("desc-go").addEventListener("click", decode);
  $("desc-input").addEventListener("keydown", (e) => { if (e.key === "Enter") decode(); });
  const g = $("grid");
  const indexOf = (td) => +td.dataset.r * cur.cols + +td.dataset.c;
  g.addEventListener("mouseover", (e) => {
    const td = e.target.closest("td"); if (!td || !cur || cur.error) return;
    setCursor(indexOf(td), g.contains(document.activeElement) ? 1 : 0);   // a focused grid moves its focus along
  });
  g.addEventListener("focusin", (e) => { const td = e.target.closest("td"); if (td && cur && !cur.error) setCursor(indexOf(td), 0); });
  g.addEventListener("keydown", onKey);
  g.addEventListener("click", (e) => {
    const td = e.target.closest("td"); if (!td || !cur || cur.error) return;
    pickAt(indexOf(td));
  });
  window.addEventListener("hashchange", () => { readHash(); render(); });
  readHash();
  render();
  document.body.dataset.ready = "1";
}
init();
})();
"""
