"""``wgref explore``: the self-contained HTML explorer.

(a) The tables embedded in the page equal refmodel for every layout and option (the
generator tables — accumulator prefix, shared-memory coefficients, epilogue p + q N — are
checked against refmodel for every N / rows), checked by an independent route where there is
one (the epilogue by running the machine model's stmatrix; ldmatrix by the fragment map);
the file fetches nothing.
(b) In headless Chromium through selenium: real selects, hovers and clicks, the info panel and
the lit cells against refmodel, descriptors typed into the box against
:func:`refmodel.render.diagrams.desc`, the URL fragment, sticky headers at N = 256.
"""

from __future__ import annotations

import json
import re
import shutil

import ml_dtypes
import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.layouts.descriptor import MatrixDescriptor, make_descriptor, operand_addresses
from refmodel.layouts.fragment import a_fragment_layout, accumulator_layout, pack_accumulator
from refmodel.layouts.smem import SmemLayout, dense_strides, rowmajor_offsets
from refmodel.layouts.sparse_meta import meta_holders
from refmodel.layouts.stmatrix import address_givers, fragment_map
from refmodel.layouts.swizzle import MODES, atom_table, swizzle_address, swizzle_mode
from refmodel.machine.epilogue import epilogue_addresses, epilogue_stmatrix, pack_f16x2
from refmodel.render import diagrams
from refmodel.render.explore import DOT_EXAMPLES, explore_data, explore_html
from wgref.cli import main

NS = range(8, 257, 8)


@pytest.fixture(scope="module")
def page() -> str:
    return explore_html()


@pytest.fixture(scope="module")
def data(page) -> dict:
    m = re.search(r'<script id="wgref-data" type="application/json">(.*?)</script>', page, re.DOTALL)
    assert m, "the page embeds its tables in <script id=wgref-data>"
    return json.loads(m.group(1))


def _cell(table: dict, key: str, r: int, c: int, width: int = 256) -> int:
    return table[key][r * width + c]


# ----------------------------------------------------------------------------- (a) the tables

def test_page_is_self_contained_and_small(page, data):
    assert len(page.encode()) < 3 * 1024 * 1024
    low = page.lower()
    for bad in ("http", "//cdn", "@import", "<link", "src=", "url(", "fetch(", "xmlhttprequest"):
        assert bad not in low, f"the page must fetch nothing, found {bad!r}"
    assert data == json.loads(json.dumps(explore_data()))   # what is embedded is what refmodel computes


def test_accumulator_every_n_is_the_prefix_of_the_n256_table(data):
    for d in ("f32", "s32", "f16"):
        tab = data["acc"][d]
        for n in NS:
            rows, cols = accumulator_layout(n, d)
            assert cols.max() < n
            t, j, e = np.meshgrid(np.arange(128), np.arange(rows.shape[1]), np.arange(rows.shape[2]), indexing="ij")
            idx = (rows * 256 + cols).ravel()
            assert (np.asarray(tab["thread"])[idx] == t.ravel()).all(), (d, n)
            assert (np.asarray(tab["reg"])[idx] == j.ravel()).all(), (d, n)
            assert (np.asarray(tab["slot"])[idx] == e.ravel()).all(), (d, n)
            assert np.unique(idx).size == 64 * n     # every cell of m64nN held exactly once


def test_a_fragment_tables(data):
    for d in diagrams.A_DTYPES:
        tab = data["afrag"][d]
        rows, cols = a_fragment_layout(d)
        k = tab["k"]
        for t in range(0, 128, 7):
            for j in range(4):
                for e in range(rows.shape[2]):
                    r, c = int(rows[t, j, e]), int(cols[t, j, e])
                    assert (_cell(tab, "thread", r, c, k), _cell(tab, "reg", r, c, k), _cell(tab, "slot", r, c, k)) == (t, j, e)


def test_ldmatrix_tables_agree_with_the_fragment_map(data):
    for num in (1, 2, 4):
        gm, gr = address_givers(num)
        for trans in (False, True):
            tab = data["matrix"][f"x{num}{'t' if trans else ''}"]
            _, row, col = fragment_map(num, trans)
            w = tab["cols"]
            for lane in range(32):
                for j in range(num):
                    for h in range(2):
                        r, c = 8 * (j % 2) + int(row[lane, j, h]), 8 * (j // 2) + int(col[lane, j, h])
                        got = [_cell(tab, k, r, c, w) for k in ("lane", "reg", "half", "byte")]
                        assert got == [lane, j, h, 2 * int(col[lane, j, h])], (num, trans, lane, j, h)
                        giver = _cell(tab, "giver", r, c, w)
                        assert (gm[giver], gr[giver]) == (j, row[lane, j, h])


def _lookup_swizzle(addr: np.ndarray, m: dict, base: int = 0) -> np.ndarray:
    """The page's swizzle: refmodel's atom table indexed by the pattern line (line - base)."""
    if not m["bits"]:
        return addr
    lines = 1 << m["bits"]
    ph = ((addr >> 7) - base) % lines
    atom = (addr >> 4) & 7
    return addr + (np.asarray(m["atoms"])[ph, atom] - atom) * 16


def test_swizzle_atom_tables_reproduce_every_address(data):
    a = np.arange(1 << 14)
    for m, mode in zip(data["modes"], MODES):
        assert m["name"] == mode.name and m["atoms"] == atom_table(mode, 1 << mode.bits).tolist()
        assert (_lookup_swizzle(a, m) == swizzle_address(a, mode.name)).all()


def _offsets(tab: dict, rows: int, lbo: int, sbo: int) -> np.ndarray:
    p, kb = tab["period"], tab["kbytes"]
    r = np.arange(rows)[:, None]
    i = (r % p) * kb + np.arange(kb)[None, :]
    q = r // p
    a = np.asarray(tab["a"])[i] + q * tab["step"][0]
    b = np.asarray(tab["b"])[i] + q * tab["step"][1]
    c = np.asarray(tab["c"])[i] + q * tab["step"][2]
    return a * sbo + b * lbo + c


def test_smem_generator_tables_reproduce_refmodel_for_every_rows(data):
    rng = np.random.default_rng(18)
    for key, tab in data["smem"].items():
        major, mode, e = key.split("/")
        e = int(e)
        k = tab["k"]
        assert tab["kbytes"] == k * e
        for rows in NS:
            dl, ds = dense_strides(major, mode, rows, 32 if major == "K" else None)
            assert tab["dense"][rows // 8 - 1] == [dl, ds]
            strides = [(dl, ds)] + [tuple(int(x) for x in 16 * rng.integers(0, 400, 2)) for _ in range(2)]
            for lbo, sbo in strides:
                want = SmemLayout(major, mode, e, lbo, sbo).offsets(rows, k)
                assert (_offsets(tab, rows, lbo, sbo) == want).all(), (key, rows, lbo, sbo)
        assert tab["text"] == list(diagrams._stride_meaning(major, swizzle_mode(mode), e)[:2])


def test_descriptor_field_table_encodes_like_refmodel(data):
    rng = np.random.default_rng(7)
    fields = data["desc"]["fields"]
    for _ in range(200):
        d = MatrixDescriptor(*(int(x) for x in 16 * rng.integers(0, 1 << 14, 3)), int(rng.integers(0, 8)),
                             int(rng.integers(0, 4)))
        v = sum((getattr(d, f["key"]) // f["unit"]) << f["lo"] for f in fields)
        assert v == d.encode()
        assert all(((v >> f["lo"]) & ((1 << (f["hi"] - f["lo"] + 1)) - 1)) * f["unit"] == getattr(d, f["key"])
                   for f in fields)


def test_sparse_tables(data):
    for d in diagrams.SPARSE_DTYPES:
        tab = data["sparse"][d]
        assert tab["sels"] == ([0] if d in ("e4m3", "e5m2", "s8", "u8") else [0, 1])
        for s in tab["sels"]:
            thread, pos = meta_holders(d, s)
            assert tab[str(s)]["thread"] == thread.ravel().tolist() and tab[str(s)]["pos"] == pos.ravel().tolist()


def test_epilogue_tables_for_every_n_and_swizzle(data):
    ep = data["epilogue"]
    acc = data["acc"]["f32"]
    for m in MODES:
        tab = ep[m.name]
        for n in sorted(set(range(16, 257, 16)) - set(tab["ns"])):
            with pytest.raises(InputError):          # the page offers exactly the N refmodel defines
                epilogue_addresses(n, m)
        for n in tab["ns"]:
            idx = (np.arange(64)[:, None] * 256 + np.arange(n)[None, :])
            pre = np.asarray(tab["p"])[idx] + np.asarray(tab["q"])[idx] * n
            post = _lookup_swizzle(pre, data["modes"][MODES.index(m)])
            assert (post == rowmajor_offsets(64, n, 2, m)).all(), (m.name, n)
            addrs = epilogue_addresses(n, m)
            seg = post[:, (np.arange(n) // 8) * 8]
            assert (addrs[np.asarray(ep["slice"])[idx], np.asarray(ep["giver"])[idx]] == seg).all(), (m.name, n)
    # independent route: run the epilogue, read the bf16 bytes back where the page says they are
    rng = np.random.default_rng(3)
    for m in MODES:
        for n in (ep[m.name]["ns"][0], 192, 256):
            a = rng.standard_normal((64, n)).astype(np.float32)
            img, _ = epilogue_stmatrix(a, "bf16", m)
            idx = (np.arange(64)[:, None] * 256 + np.arange(n)[None, :])
            post = _lookup_swizzle(np.asarray(ep[m.name]["p"])[idx] + np.asarray(ep[m.name]["q"])[idx] * n,
                                   data["modes"][MODES.index(m)])
            got = img[post].astype(np.uint16) | (img[post + 1].astype(np.uint16) << 8)
            want = a.astype(ml_dtypes.bfloat16).view(np.uint16)
            assert (got == want).all(), (m.name, n)
            # the page's thread t, register d[i] -> packed p[i >> 1] half i & 1 (what cvt.rn.bf16x2 makes)
            packed = pack_f16x2(pack_accumulator(a, "f32").view(np.float32), "bf16")
            t, i = np.asarray(acc["thread"])[idx], np.asarray(acc["reg"])[idx]
            assert ((packed[t, i >> 1] >> (16 * (i & 1)).astype(np.uint32)) & 0xFFFF == want).all(), (m.name, n)


def test_cli_writes_the_page(tmp_path, capsys):
    out = tmp_path / "explore.html"
    assert main(["explore", "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert out.read_text() == explore_html()
    assert main(["explore", "-o", str(tmp_path)]) == 2       # a directory is refused, one line
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


# ----------------------------------------------------------------------------- (b) the browser

CHROMIUM, DRIVER = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser(tmp_path_factory, page):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install '.[test]')")
    if not CHROMIUM or not DRIVER:
        pytest.skip("chromium and chromedriver are needed (Debian: apt-get install chromium chromium-driver)")
    path = tmp_path_factory.mktemp("explore") / "explore.html"
    path.write_text(page)
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900"):
        opts.add_argument(a)
    opts.binary_location = CHROMIUM
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.url_of_page = path.as_uri()
    yield drv
    drv.quit()


def _open(drv, fragment: str = "") -> None:
    drv.get("about:blank")
    drv.get(drv.url_of_page + fragment)
    assert drv.execute_script("return document.body.dataset.ready") == "1"


def _select(drv, sid: str, value) -> None:
    from selenium.webdriver.support.ui import Select

    Select(drv.find_element("id", sid)).select_by_value(str(value))


def _td(drv, r: int, c: int):
    td = drv.find_element("css selector", f'#grid td[data-r="{r}"][data-c="{c}"]')
    drv.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", td)
    return td


def _hover(drv, r: int, c: int) -> dict[str, str]:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(drv).move_to_element(_td(drv, r, c)).perform()
    return drv.execute_script(
        "const o = {}; for (const tr of document.querySelectorAll('#info tr[data-k]')) "
        "o[tr.dataset.k] = tr.querySelector('td').textContent; return o;")


def _lit(drv) -> set[tuple[int, int]]:
    cells = drv.execute_script("return Array.from(document.querySelectorAll('#grid td.lit'), "
                               "(td) => [+td.dataset.r, +td.dataset.c]);")
    return {tuple(x) for x in cells}


def test_browser_accumulator_hover_click_and_fragment(browser):
    drv = browser
    _open(drv)
    _select(drv, "layout", "acc")
    _select(drv, "dtype", "f16")
    _select(drv, "n", 256)
    assert drv.find_elements("css selector", "#grid td").__len__() == 64 * 256
    rows, cols = accumulator_layout(256, "f16")
    rng = np.random.default_rng(1)
    for t, j, e in [(37, 5, 1), (0, 0, 0), (127, 63, 1)] + [tuple(int(x) for x in rng.integers(0, (128, 64, 2)))
                                                          for _ in range(3)]:
        r, c = int(rows[t, j, e]), int(cols[t, j, e])
        info = _hover(drv, r, c)
        assert info["thread"] == str(t) and info["register"] == f"r{j}" and info["half"].startswith(str(e)), info
        assert info["warp"] == str(t // 32) and info["lane"].startswith(str(t % 32))
    r, c = int(rows[37, 0, 0]), int(cols[37, 0, 0])
    _td(drv, r, c).click()
    assert _lit(drv) == {(int(a), int(b)) for a, b in zip(rows[37].ravel(), cols[37].ravel())}
    assert "thread=37" in drv.execute_script("return location.hash")
    # f32 keeps the selection: thread 37's 128 elements
    _select(drv, "dtype", "f32")
    rows, cols = accumulator_layout(256, "f32")
    assert _lit(drv) == {(int(a), int(b)) for a, b in zip(rows[37].ravel(), cols[37].ravel())}
    info = _hover(drv, int(rows[37, 77, 0]), int(cols[37, 77, 0]))
    assert info["register"] == "r77" and "half" not in info
    # sticky axes at N = 256: scrolled to the far corner, both headers are still what the eye sees
    seen = drv.execute_script("""
        const w = document.getElementById('gridwrap'); w.scrollTop = w.scrollHeight; w.scrollLeft = w.scrollWidth;
        const b = w.getBoundingClientRect();
        const top = document.elementFromPoint(b.left + b.width / 2, b.top + 4);
        const left = document.elementFromPoint(b.left + 4, b.top + b.height / 2);
        return [top.tagName, top.closest('thead') !== null, left.tagName, left.closest('tbody') !== null, w.scrollTop > 0,
                w.scrollLeft > 0];""")
    assert seen == ["TH", True, "TH", True, True, True]
    # the URL fragment brings the view back on a fresh load
    _open(drv, "#layout=acc&dtype=f16&n=128&thread=90")
    assert [drv.find_element("id", i).get_attribute("value") for i in ("layout", "dtype", "n")] == ["acc", "f16", "128"]
    rows, cols = accumulator_layout(128, "f16")
    assert _lit(drv) == {(int(a), int(b)) for a, b in zip(rows[90].ravel(), cols[90].ravel())}


def test_browser_other_layouts_hover(browser):
    drv = browser
    _open(drv, "#layout=afrag&dtype=e4m3")
    rows, cols = a_fragment_layout("e4m3")
    info = _hover(drv, int(rows[45, 3, 2]), int(cols[45, 3, 2]))
    assert (info["thread"], info["register"], info["byte"][:1]) == ("45", "r3", "2")
    _select(drv, "layout", "ldmatrix")
    _select(drv, "num", 2)
    _select(drv, "trans", 1)
    _, row, col = fragment_map(2, True)
    info = _hover(drv, 8 * 1 + int(row[13, 1, 0]), int(col[13, 1, 0]))
    assert (info["lane"], info["register"], info["matrix"]) == ("13", "r1", "1")
    _select(drv, "layout", "sparse")
    _select(drv, "dtype", "bf16")
    _select(drv, "sel", 1)
    thread, pos = meta_holders("bf16", 1)
    info = _hover(drv, 41, 6)
    assert (info["thread"], info["nibble"]) == (str(thread[41, 6]), str(pos[41, 6]))
    _select(drv, "layout", "swizzle")
    _select(drv, "swizzle", "64B")
    _select(drv, "dtype", "f16")
    info = _hover(drv, 5, 19)
    a = 128 * 5 + 19 * 2
    assert info["address before swizzle"].startswith(hex(a))
    assert info["address after swizzle"].startswith(hex(int(swizzle_address(a, "64B"))))


def test_browser_smem_and_epilogue_addresses(browser):
    drv = browser
    _open(drv)
    _select(drv, "layout", "smem")
    _select(drv, "major", "MN")
    _select(drv, "swizzle", "128B")
    _select(drv, "dtype", "bf16")
    _select(drv, "n", 192)
    lbo, sbo = dense_strides("MN", "128B", 192)
    off = SmemLayout("MN", "128B", 2, lbo, sbo).offsets(192, 16)
    for r, c in ((0, 0), (70, 9), (191, 15)):
        info = _hover(drv, r, c)
        assert info["address before swizzle"].split()[0] == hex(int(off[r, 2 * c]))
        assert info["address after swizzle"] == hex(int(swizzle_address(off[r, 2 * c], "128B")))
        want = make_descriptor(0, major="MN", swizzle="128B", rows=192, k=16, elem_bytes=2)
        assert info["descriptor"] == f"{want.encode():#018x}"
    # the tile's descriptor, opened in the descriptor view, reads what refmodel says it reads
    drv.find_element("id", "action").click()
    assert drv.find_element("id", "layout").get_attribute("value") == "desc"
    report = drv.find_element("id", "desc-report").get_attribute("textContent").split("\n")
    assert report == diagrams.desc(want.encode(), dtype="bf16", rows=192, major="MN").text_before
    assert "  ok: dense canonical strides, no overlap, start on the swizzle pattern" in report
    _select(drv, "layout", "epilogue")
    _select(drv, "swizzle", "32B")
    _select(drv, "n", 80)
    post = rowmajor_offsets(64, 80, 2, "32B")
    addrs = epilogue_addresses(80, "32B")
    rows, cols = accumulator_layout(80, "f32")
    for r, c in ((0, 0), (33, 77), (63, 41)):
        info = _hover(drv, r, c)
        t, i = (int(x[0]) for x in np.nonzero((rows[:, :, 0] == r) & (cols[:, :, 0] == c)))
        assert info["thread"] == str(t) and info["accumulator register"].startswith(f"d{i} ")
        assert info["address after swizzle"] == hex(int(post[r, c]))
        giver = int(info["address from"].split()[1])
        assert addrs[c // 16, giver] == post[r, c - c % 8]


DESCRIPTORS = [
    # (text, dtype, rows, major)
    ("0x4000004000010040", "f16", 64, "K"),                      # 128B, dense, aligned
    (f"{make_descriptor(0x400, swizzle='none', rows=64, k=16, elem_bytes=2).encode():#x}", "f16", 64, "K"),
    (f"{MatrixDescriptor(0x480, 16, 1024, 0, 1).encode():#x}", "f16", 64, "K"),   # 128B start inside the pattern
    (f"{MatrixDescriptor(0x520, 16, 1024, 0, 1).encode():#x}", "e4m3", 64, "K"),  # a K step (+32 B)
    (f"{MatrixDescriptor(0x600, 16, 512, 4, 2).encode():#x}", "f16", 64, "K"),    # 64B with a base offset
    (f"{MatrixDescriptor(0, 256, 128, 0, 0).encode():#x}", "f16", 64, "K"),       # LBO/SBO swapped, overlapping
    (f"{MatrixDescriptor(0, 1024, 2048, 0, 1).encode():#x}", "bf16", 128, "MN"),  # MN-major 128B, dense
    (f"{MatrixDescriptor(0, 2048, 1024, 0, 1).encode():#x}", "bf16", 128, "MN"),  # ... LBO/SBO swapped
    (f"{MatrixDescriptor(0, 1024, 128, 0, 0).encode():#x}", "f16", 64, "K"),      # core matrices along M/N
    (f"{MatrixDescriptor(0x100, 48, 0, 3, 0).encode():#x}", "tf32", 64, "K"),     # odd LBO, SBO 0, base offset
    (f"{MatrixDescriptor(0, 64, 64, 0, 0).encode():#x}", "f16", 32, "K"),         # overlapping core matrices
    ("0x4000004000010041_", "f16", 64, "K"),                     # underscores are ignored
    ("0x8000000000000001", "f16", 64, "K"),                      # swizzle field 2 (64B), start 0x10
    ("0x0001000000000000", "f16", 64, "K"),                      # reserved bit 48
    ("hello", "f16", 64, "K"),
    ("0x" + "f" * 20, "f16", 64, "K"),
    ("12345678901234567890123", "f16", 64, "K"),
    ("0x40000040000100400", "f16", 64, "K"),                     # 68 bits
    ("0x4000004000010040", "e4m3", 64, "MN"),                    # 8-bit MN-major refused
]


def test_browser_descriptor_box_agrees_with_python(browser):
    drv = browser
    _open(drv)
    _select(drv, "layout", "desc")
    box = drv.find_element("id", "desc-input")
    for text, dtype, rows, major in DESCRIPTORS:
        _select(drv, "dtype", dtype)
        _select(drv, "n", rows)
        _select(drv, "major", major)
        box = drv.find_element("id", "desc-input")
        box.clear()
        box.send_keys(text)
        drv.find_element("id", "desc-go").click()
        report = drv.find_element("id", "desc-report").get_attribute("textContent")
        error = drv.find_element("id", "desc-error").get_attribute("textContent")
        try:
            d = diagrams.desc(text.strip(), dtype=dtype, rows=rows, major=major)
        except InputError as e:
            assert (error, report) == (str(e), ""), text
            continue
        assert error == "" and report.split("\n") == d.text_before, text
        checks = drv.execute_script("return Array.from(document.querySelectorAll('#desc-checks li'), (li) => li.textContent)")
        py_checks = d.text_before[d.text_before.index("checks:") + 1:]
        assert checks == [c[4:] if c.startswith("  ! ") else c[2:] for c in py_checks], text
        v = MatrixDescriptor.decode(diagrams.parse_descriptor(text))
        fields = drv.execute_script("const o = {}; for (const tr of document.querySelectorAll('#desc-fields tr[data-k]')) "
                                    "o[tr.dataset.k] = tr.children[2].textContent; return o;")
        assert fields["start_address"] == hex(v.start_address >> 4) and fields["lbo"] == hex(v.lbo >> 4)
        assert fields["sbo"] == hex(v.sbo >> 4) and fields["base_offset"] == hex(v.base_offset)
        assert fields["swizzle"] == hex(v.swizzle)
        e = 4 if dtype == "tf32" else 1 if dtype == "e4m3" else 2
        addr = operand_addresses(v, rows, 32 // e, e, major=major)
        info = _hover(drv, rows - 1, 32 // e - 1)
        assert info["address after swizzle"].split()[0] == hex(int(addr[rows - 1, 32 - e])), text
    # the descriptor survives a reload through the URL fragment
    frag = drv.execute_script("return location.hash")
    _open(drv, frag)
    assert drv.find_element("id", "desc-input").get_attribute("value") == DESCRIPTORS[-1][0]


def test_inline_json_is_valid_json_that_cannot_close_the_script():
    import json

    from refmodel.render.explore import _json_for_script

    data = {"tag": "</script><!-- hidden -->", "nested": ["<b>", "a < b"]}
    text = _json_for_script(data)
    assert "<" not in text and json.loads(text) == data      # was '<\\!--', which JSON.parse rejects


# ----------------------------------------------------------------------------- (c) every learner: keyboard, legend,
# contrast, the N = 256 overview, the FP8 dot product view

def _holders(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Invert a (thread, register, slot) -> (row, col) map: thread, register and slot of every cell."""
    out = tuple(np.full(shape, -1) for _ in range(3))
    t, j, e = np.meshgrid(*(np.arange(n) for n in rows.shape), indexing="ij")
    for o, v in zip(out, (t, j, e)):
        o[rows, cols] = v
    assert (out[0] >= 0).all()
    return out


def _keys(drv, *keys, ctrl: bool = False) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    chain = ActionChains(drv)
    if ctrl:
        chain = chain.key_down(Keys.CONTROL)
    chain = chain.send_keys(*keys)
    if ctrl:
        chain = chain.key_up(Keys.CONTROL)
    chain.perform()


def _info(drv) -> dict[str, str]:
    return drv.execute_script("const o = {}; for (const tr of document.querySelectorAll('#info tr[data-k]')) "
                              "o[tr.dataset.k] = tr.querySelector('td').textContent; return o;")


def _active(drv):
    """(row, col) of the focused grid cell, else the focused element's id or tag."""
    return drv.execute_script("const a = document.activeElement; return a.tagName === 'TD' && a.closest('#grid') ? "
                              "[+a.dataset.r, +a.dataset.c] : (a.id || a.tagName);")


def _tab_into_grid(drv) -> None:
    from selenium.webdriver.common.keys import Keys

    drv.execute_script("document.getElementById('permalink').focus()")   # the last control before the grid
    _keys(drv, Keys.TAB)


def test_browser_keyboard_moves_the_cursor_and_picks_like_the_mouse(browser):
    """One tab stop; arrows / Home / End / Page keys move the cursor, and the info panel then says what
    refmodel says of that cell, the same as hovering it; Enter and Space select the thread as a click does."""
    from selenium.webdriver.common.keys import Keys

    drv = browser
    _open(drv, "#layout=acc&dtype=f16&n=64")
    T, J, E = _holders(*accumulator_layout(64, "f16"), (64, 64))
    grid = drv.find_element("id", "grid")
    assert grid.aria_role == "grid"
    assert drv.find_element("id", "infobox").get_attribute("aria-live") == "polite"
    assert drv.execute_script("return document.querySelectorAll('#grid [tabindex]').length") == 1   # one tab stop
    _tab_into_grid(drv)
    assert _active(drv) == [0, 0]

    def check(r: int, c: int) -> dict:
        assert _active(drv) == [r, c]
        info = _info(drv)
        t, j, e = int(T[r, c]), int(J[r, c]), int(E[r, c])
        assert (info["element"], info["thread"], info["register"], info["warp"]) == \
            (f"D[{r}, {c}]", str(t), f"r{j}", str(t // 32))
        assert info["half"].startswith(f"{e} ") and info["lane"].startswith(f"{t % 32} ")
        td = drv.switch_to.active_element
        assert td.aria_role == "gridcell"
        assert td.get_attribute("aria-label") == f"row {r}, column {c}: thread {t}, register r{j}, half {e}"
        assert drv.execute_script("return document.querySelectorAll('#grid [tabindex]').length") == 1
        return info

    check(0, 0)
    # a seeded walk over every navigation key, the expected cursor computed here
    moves = {Keys.ARROW_RIGHT: lambda r, c: (r, min(63, c + 1)), Keys.ARROW_LEFT: lambda r, c: (r, max(0, c - 1)),
             Keys.ARROW_DOWN: lambda r, c: (min(63, r + 1), c), Keys.ARROW_UP: lambda r, c: (max(0, r - 1), c),
             Keys.HOME: lambda r, c: (r, 0), Keys.END: lambda r, c: (r, 63),
             Keys.PAGE_DOWN: lambda r, c: (min(63, r + 16), c), Keys.PAGE_UP: lambda r, c: (max(0, r - 16), c)}
    rng = np.random.default_rng(34)
    names = list(moves)
    weights = np.array([4, 2, 4, 2, 1, 1, 1, 1], float)
    r = c = 0
    for step in range(48):
        key = names[rng.choice(len(names), p=weights / weights.sum())]
        _keys(drv, key)
        r, c = moves[key](r, c)
        if step % 6 == 5:
            check(r, c)
    _keys(drv, Keys.END, ctrl=True)
    check(63, 63)
    _keys(drv, Keys.HOME, ctrl=True)
    check(0, 0)
    for key in [Keys.ARROW_DOWN] * 19 + [Keys.ARROW_RIGHT] * 45:
        _keys(drv, key)
    by_keys = check(19, 45)
    # the visible focus indicator: a ring on the cell, another around the grid
    ring = drv.execute_script("""
        const s = getComputedStyle(document.activeElement), w = getComputedStyle(document.getElementById('gridwrap'));
        return [s.outlineStyle, parseFloat(s.outlineWidth), w.outlineStyle, parseFloat(w.outlineWidth), w.outlineColor,
                getComputedStyle(document.body).backgroundColor];""")
    assert ring[0] == "solid" and ring[1] >= 2 and ring[2] == "solid" and ring[3] >= 2
    assert _ratio(ring[4], ring[5]) >= 3, ring
    # Enter picks as a click does: the thread's cells light, the URL says so; Enter again clears; Space; Escape
    t = int(T[19, 45])
    want = {(int(a), int(b)) for a, b in zip(*np.nonzero(T == t))}
    _keys(drv, Keys.ENTER)
    assert _lit(drv) == want and f"thread={t}" in drv.execute_script("return location.hash")
    assert drv.find_element("id", "picked").text == f"thread {t}: {len(want)} cells lit"
    _keys(drv, Keys.ENTER)
    assert _lit(drv) == set()
    _keys(drv, Keys.SPACE)
    assert _lit(drv) == want
    _keys(drv, Keys.ESCAPE)
    assert _lit(drv) == set()
    assert _active(drv) == [19, 45]             # Space did not scroll the page away from the cell
    # hovering the same cell shows the same panel; a click there selects the same cells
    assert _hover(drv, 19, 45) == by_keys
    _td(drv, 19, 45).click()
    assert _lit(drv) == want
    # Tab leaves the grid: it is one stop
    _keys(drv, Keys.TAB)
    assert not isinstance(_active(drv), list)


def _ratio(a: str, b: str) -> float:
    """WCAG contrast of two computed CSS colours rgb(...) (opaque)."""
    from refmodel.render.core import contrast

    def hexof(s):
        v = [float(x) for x in re.findall(r"[\d.]+", s)[:3]]
        return "#" + "".join(f"{round(x):02x}" for x in v)

    return contrast(hexof(a), hexof(b))


# every text node and form control on the page: (its colour composited on the backgrounds below it) vs those
# backgrounds, WCAG 2 relative luminance; and every grid cell's background colour
CONTRAST_JS = r"""
const parse = (s) => { const p = s.match(/[\d.]+/g).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
const over = (t, b) => [0, 1, 2].map((i) => t[i] * t[3] + b[i] * (1 - t[3])).concat([1]);
const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                     return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
const cache = new Map();
function bg(el) {
  if (!el) return [255, 255, 255, 1];
  if (cache.has(el)) return cache.get(el);
  const s = getComputedStyle(el);
  if (parseFloat(s.opacity) < 1) throw new Error("opacity below 1 on " + el.tagName + "#" + el.id);
  const own = parse(s.backgroundColor), v = own[3] >= 1 ? own : over(own, bg(el.parentElement));
  cache.set(el, v);
  return v;
}
let min = 99, worst = "", n = 0;
function check(el, what) {
  if (!el.getClientRects().length || getComputedStyle(el).visibility !== "visible") return;
  const b = bg(el), f = over(parse(getComputedStyle(el).color), b), q = ratio(f, b);
  n++;
  if (q < min) { min = q; worst = what + " in " + el.tagName + (el.id ? "#" + el.id : "") + "." + el.className + ": " +
                 getComputedStyle(el).color + " on " + JSON.stringify(b); }
}
const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let t = walk.nextNode(); t; t = walk.nextNode()) {
  const el = t.parentElement;
  if (!t.textContent.trim() || el.closest("script, style, option")) continue;
  check(el, JSON.stringify(t.textContent.trim().slice(0, 30)));
}
for (const el of document.querySelectorAll("select, input, button")) check(el, "control");
const cells = new Set();
for (const td of document.querySelectorAll("#grid td")) cells.add(getComputedStyle(td).backgroundColor);
return [min, worst, n, Array.from(cells)];
"""


def _views(drv):
    """Every view the page offers (layout x dtype, the other options at one or two values), and a few with a
    selection (faded cells) and the overview; yields a name after each render."""
    layouts = [o.get_attribute("value") for o in drv.find_elements("css selector", "#layout option")]
    assert "dot" in layouts and "acc" in layouts
    for lay in layouts:
        _select(drv, "layout", lay)
        if lay == "dot":
            for ex in [o.get_attribute("value") for o in drv.find_elements("css selector", "#example option")]:
                _select(drv, "example", ex)
                yield f"dot/{ex}"
                if drv.find_elements("css selector", "#grid td"):
                    _td(drv, 0, 0).click()
                    yield f"dot/{ex}/picked"
            continue
        dtypes = [o.get_attribute("value") for o in drv.find_elements("css selector", "#dtype option")]
        for d in (dtypes if drv.find_element("id", "dtype").is_displayed() else [None]):
            if d is not None:
                _select(drv, "dtype", d)
            yield f"{lay}/{d}"
        if lay in ("ldmatrix", "stmatrix"):
            _select(drv, "num", 4)
            yield f"{lay}/x4"
        if lay == "swizzle":
            for m in ("32B", "64B", "none"):
                _select(drv, "swizzle", m)
                yield f"swizzle/{m}"
        if drv.find_elements("css selector", "#grid td"):
            _td(drv, 1, 1).click()                      # a selection: the other cells faded
            yield f"{lay}/picked"
        if lay == "acc":
            drv.find_element("id", "clear").click()
            _select(drv, "dtype", "f32")
            _select(drv, "n", 256)
            yield "acc/f32/256"
            _td(drv, 20, 33).click()                    # a selection: every other cell faded
            yield "acc/f32/256/picked"
            _select(drv, "zoom", "ov")
            yield "acc/f32/256/overview/picked"
            drv.find_element("id", "clear").click()
            yield "acc/f32/256/overview"
            _select(drv, "zoom", 0)


def test_browser_contrast_of_every_text_and_of_the_cell_outlines(browser):
    """Every text / background pair on the page >= 4.5 (the cell labels on all 128 thread colours, faded ones,
    lanes, atoms, the dot view's bit boxes, the side panel, the controls), in every view; the cursor, focus
    and selection rings >= 3 against every cell colour they can sit on."""
    drv = browser
    _open(drv)
    mins, bgs, acc_bgs = {}, set(), {}
    for view in _views(drv):
        q, worst, n, cells = drv.execute_script(CONTRAST_JS)
        assert n > 20, view
        assert len(drv.find_element("id", "legend").text) > 20, f"{view}: no legend"
        mins[view] = (q, worst)
        bgs.update(cells)
        if view.startswith("acc/"):
            acc_bgs[view] = set(cells)
    low = {v: m for v, m in mins.items() if m[0] < 4.5}
    assert not low, low
    # the sweep did see every thread colour: 128 distinct fills, and with a selection 127 faded + 1
    assert len(acc_bgs["acc/f32/256"]) == 128
    picked = acc_bgs["acc/f32/256/picked"]
    assert len(picked) == 128 and len(picked & acc_bgs["acc/f32/256"]) == 1     # 127 faded, the picked thread's own
    assert len(bgs) >= 2 * (128 + 32 + 8)
    # the rings: outline and box-shadow colours of the cursor, the focused cell and a selected cell
    _open(drv, "#layout=acc&dtype=f32&n=64&thread=5")
    _hover(drv, 3, 3)
    _tab_into_grid(drv)
    rings = drv.execute_script("""
        const cols = (s) => [s.outlineStyle === 'none' ? null : s.outlineColor]
                             .concat(s.boxShadow.match(/rgba?\\([^)]*\\)/g) || []).filter((x) => x);
        const hov = document.querySelector('#grid td.hov'), lit = document.querySelector('#grid td.lit:not(.hov)');
        const foc = document.activeElement;
        return {cursor: cols(getComputedStyle(foc)), lit: cols(getComputedStyle(lit)),
                hover: (foc.blur(), cols(getComputedStyle(hov)))};""")
    measured = {}
    for kind, colours in rings.items():
        assert len(colours) >= 2, (kind, colours)              # a dark and a light ring
        assert max(_ratio(a, b) for a in colours for b in colours) >= 3, (kind, colours)
        worst = min(max(_ratio(r, bg) for r in colours) for bg in bgs)
        measured[kind] = worst
        assert worst >= 3, (kind, colours, worst)
    print("min text contrast", min(mins.values()), "rings", measured)


def test_browser_legend_in_every_view_matches_the_cells(browser):
    """Every view has a legend; a cell's colour is the legend's colour of the thread / lane / atom refmodel
    says holds it (or stores it)."""
    drv = browser
    read = """const o = {}; for (const e of document.querySelectorAll('#legend [data-k]'))
                  o[e.dataset.k] = getComputedStyle(e).backgroundColor;
              const cells = Array.from(document.querySelectorAll('#grid td'), (td) => [+td.dataset.r, +td.dataset.c,
                  getComputedStyle(td).backgroundColor]);
              const L = document.getElementById('legend');
              return [o, cells, L.dataset.kind, L.getBoundingClientRect().height, L.textContent.length];"""

    def check(frag: str, kind: str, holder) -> None:
        _open(drv, frag)
        legend, cells, got_kind, height, text = drv.execute_script(read)
        assert got_kind == kind and height > 20 and text > 20, frag
        assert len(set(legend.values())) == len(legend), f"{frag}: two legend entries share a colour"
        for r, c, colour in cells:
            assert colour == legend[holder(r, c)], (frag, r, c)

    T, _, _ = _holders(*accumulator_layout(64, "f32"), (64, 64))
    check("#layout=acc&dtype=f32&n=64", "thread", lambda r, c: f"t{T[r, c]}")
    check("#layout=epilogue&dtype=bf16&n=64&swizzle=128B", "thread", lambda r, c: f"t{T[r, c]}")
    A, _, _ = _holders(*a_fragment_layout("e4m3"), (64, 32))
    check("#layout=afrag&dtype=e4m3", "thread", lambda r, c: f"t{A[r, c]}")
    thread, _ = meta_holders("bf16", 1)
    check("#layout=sparse&dtype=bf16&sel=1", "thread", lambda r, c: f"t{thread[r, c]}")
    _, row, col = fragment_map(4, False)
    lanes = {}
    for lane in range(32):
        for j in range(4):
            for h in range(2):
                lanes[8 * (j % 2) + int(row[lane, j, h]), 8 * (j // 2) + int(col[lane, j, h])] = lane
    check("#layout=ldmatrix&num=4&trans=0", "lane", lambda r, c: f"l{lanes[r, c]}")
    check("#layout=swizzle&swizzle=128B&dtype=f16", "atom",
          lambda r, c: f"i{(int(swizzle_address(128 * r + 2 * c, '128B')) >> 4) & 7}")
    lbo, sbo = dense_strides("K", "64B", 64, 32)
    off = SmemLayout("K", "64B", 2, lbo, sbo).offsets(64, 32)      # one 64-byte swizzle row of K
    check("#layout=smem&major=K&swizzle=64B&dtype=f16&n=64", "atom",
          lambda r, c: f"i{(int(swizzle_address(off[r, 2 * c], '64B')) >> 4) & 7}")
    read_at = operand_addresses(MatrixDescriptor.decode(0x4000004000010040), 64, 16, 2)    # the default descriptor
    check("#layout=desc&dtype=f16&n=64&major=K", "atom", lambda r, c: f"i{(int(read_at[r, 2 * c]) >> 4) & 7}")
    # the dot view: each bit box has the legend's colour of its region and bit (window / cut / sum / dropped)
    for key, _, kw in DOT_EXAMPLES:
        _open(drv, f"#layout=dot&example={key}")
        legend, cells, got_kind, height, text = drv.execute_script(read)
        assert got_kind == "dot" and height > 20 and text > 20, key
        assert {colour for _, _, colour in cells} <= set(legend.values()), key


def test_browser_overview_at_n256_fits_1600_px_with_readable_labels(browser):
    """At N = 256 the overview (one cell per 8 columns of a row) fits a 1600 px window with labels of at least
    9 px, fully inside their cells; each label names the threads refmodel says hold those 8 elements, and the
    keyboard and the selection work on it."""
    from selenium.webdriver.common.keys import Keys

    drv = browser
    size = drv.get_window_size()
    inner = drv.execute_script("return window.innerWidth")
    drv.set_window_size(size["width"] + 1600 - inner, size["height"])
    try:
        _open(drv, "#layout=acc&dtype=f32&n=256&zoom=ov")
        assert drv.execute_script("return window.innerWidth") == 1600
        m = drv.execute_script("""
            const g = document.getElementById('grid'), w = document.getElementById('gridwrap');
            const b = g.getBoundingClientRect();
            const bad = [], labels = [];
            let minFont = 99;
            for (const td of g.querySelectorAll('td')) {
              const s = getComputedStyle(td), r = td.getBoundingClientRect(), range = document.createRange();
              range.selectNodeContents(td);
              const inside = Array.from(range.getClientRects()).every((q) =>
                  q.left >= r.left - 0.5 && q.right <= r.right + 0.5 && q.top >= r.top - 0.5 && q.bottom <= r.bottom + 0.5);
              minFont = Math.min(minFont, parseFloat(s.fontSize));
              if (!inside || s.visibility !== 'visible' || s.display === 'none' || !td.innerText.trim()) {
                bad.push([td.dataset.r, td.dataset.c]);
              }
              labels.push([+td.dataset.r, +td.dataset.c, td.innerText]);
            }
            return {width: b.width, right: b.right, scroll: w.scrollWidth - w.clientWidth, minFont, bad, labels,
                    cells: labels.length};""")
        print(f"overview at N = 256: grid {m['width']:.0f} px wide, right edge {m['right']:.0f}, labels {m['minFont']} px")
        assert m["width"] <= 1600 and m["right"] <= 1600 and m["scroll"] <= 0, m["width"]
        assert m["minFont"] >= 9 and not m["bad"] and m["cells"] == 64 * 32
        T, J, _ = _holders(*accumulator_layout(256, "f32"), (64, 256))
        for r, cb, text in m["labels"]:
            want = sorted(set(T[r, 8 * cb:8 * cb + 8].tolist()))
            nums = [int(x) for x in re.findall(r"\d+", text)]
            assert list(range(nums[0], nums[-1] + 1)) == want, (r, cb, text)
        # the keyboard on the overview: the panel lists the 8 columns with their holders
        _tab_into_grid(drv)
        for key in [Keys.ARROW_RIGHT] * 5 + [Keys.ARROW_DOWN] * 21:
            _keys(drv, key)
        assert _active(drv) == [21, 5]
        info = _info(drv)
        want = sorted(set(T[21, 40:48].tolist()))
        assert info["threads"] == f"{want[0]}–{want[-1]}" and info["columns"] == "40..47"
        for c in range(40, 48):
            assert info[f"column {c}"] == f"thread {T[21, c]}, register r{J[21, c]}"
        for t in want + [None]:                  # Enter steps through the cell's threads, then clears
            _keys(drv, Keys.ENTER)
            lit = _lit(drv)
            if t is None:
                assert lit == set()
            else:
                assert lit == {(r, cb) for r in range(64) for cb in range(32) if t in T[r, 8 * cb:8 * cb + 8]}, t
    finally:
        drv.set_window_size(size["width"], size["height"])


# the dot view's axes: bit weights (column headers) and row names
HEADS_JS = """return [Array.from(document.querySelectorAll('#grid thead th:not(.corner)'), (t) => +t.textContent),
                      Array.from(document.querySelectorAll('#grid tbody th'), (t) => t.textContent)];"""


def _dot_reference(kw: dict):
    from refmodel.numerics.explain import explain_dot

    kw = dict(kw)
    return explain_dot(kw.pop("a"), kw.pop("b"), kw.pop("c", None), **kw)


def test_browser_dot_view_shows_what_explain_dot_computes(browser, capsys):
    """Every worked FP8 example of the dot view: the terms (value, exponent, shift, kept), every bit box of
    every term, the sum and the rounded result, the output bits — each equal to refmodel's explain_dot of
    the same inputs; the command line printed under it gives the same D."""
    import shlex

    drv = browser
    for key, label, kw in DOT_EXAMPLES:
        ex = _dot_reference(kw)
        _open(drv, f"#layout=dot&example={key}")
        assert drv.find_element("id", "example").get_attribute("value") == key
        steps = drv.execute_script("const o = {}; for (const li of document.querySelectorAll('#dot-steps li')) "
                                   "o[li.dataset.step] = li.textContent; return o;")
        assert steps["result"] == f"output: D = {ex.result_hex} = {ex.result!r}", key
        assert ex.instr in drv.find_element("id", "dot-instr").text
        command = drv.find_element("css selector", "#dot-command code").text
        assert main(["explain-dot", *shlex.split(command.removeprefix("wgref explain-dot "))]) == 0
        assert f"D = {ex.result_hex} = {ex.result!r}" in capsys.readouterr().out, key
        cells = drv.execute_script("return Array.from(document.querySelectorAll('#grid td'), (td) => [+td.dataset.r, "
                                   "+td.dataset.c, td.textContent])")
        if ex.special:
            assert "special" in steps and ex.special in steps["special"] and cells == [], key
            continue
        floor = ex.e_max - ex.F
        assert f"e_max = {ex.e_max} " in steps["align"] and f"2^{ex.e_max + 1} .. 2^{floor}" in steps["align"], key
        heads, names = drv.execute_script(HEADS_JS)
        assert heads == list(range(heads[0], heads[0] - len(heads), -1)), key
        assert heads[0] >= ex.e_max + 1 and floor in heads, key
        grid = {(names[r], heads[c]): text for r, c, text in cells}
        table = drv.execute_script("return Array.from(document.querySelectorAll('#dot-terms tr[data-name]'), "
                                   "(tr) => Array.from(tr.children, (td) => td.textContent))")
        shown = [t for t in ex.terms if not t.padding]
        want_rows = []
        for t in shown:
            name = ("−" if t.sign and not t.zero else "") + t.name
            want_rows.append([name, "0" if t.zero else repr(t.value), str(t.exp), str(t.shift), str(t.kept)])
            for w in heads:
                bit = str(t.bit(w)) if not t.zero and t.lsb <= w <= t.top else ""
                assert grid[name, w] == bit, (key, name, w)
        got_rows = [row[:5] for row in table if not row[0].endswith("x 0·0") and row[0] != "sum"]
        assert got_rows == want_rows, key
        if ex.given < ex.k:
            pad = [row for row in table if row[0].endswith("x 0·0")]
            pad_want = [f"{ex.k - ex.given} x 0·0", "0", str(ex.e_zero), str(ex.e_max - ex.e_zero), "0", ""]
            assert pad == [pad_want], key
        assert table[-1][4] == str(ex.total), key
        sums = [n for n in names if n.startswith("sum")]
        if ex.total == 0:
            assert not sums and "+0" in steps["sum"], key
            continue
        mag, r = abs(ex.total), ex.round
        for w in heads:
            bit = str((mag >> (w - floor)) & 1) if floor <= w < floor + mag.bit_length() else ""
            assert grid[sums[0], w] == bit, (key, "sum", w)
            if r.top - r.mbits <= w <= r.top:
                assert grid["rounded", w] == str((r.mant >> (w - r.top + r.mbits)) & 1), (key, "rounded", w)
        assert f"{ex.total} x 2^{floor}" in steps["sum"], key
    # the keyboard reads a bit box like hovering it: the 'four' example, row c, the first cut bit
    ex = _dot_reference(next(kw for k, _, kw in DOT_EXAMPLES if k == "four"))
    _open(drv, "#layout=dot&example=four")
    heads, names = drv.execute_script(HEADS_JS)
    c_term = ex.terms[-1]
    r, c = names.index("c"), heads.index(ex.e_max - ex.F - 1)
    from selenium.webdriver.common.keys import Keys

    _tab_into_grid(drv)
    for k in [Keys.ARROW_DOWN] * r + [Keys.ARROW_RIGHT] * c:
        _keys(drv, k)
    info = _info(drv)
    assert info["term"] == "c" and info["bit weight"] == f"2^{ex.e_max - ex.F - 1}"
    assert info["bit"] == str(c_term.bit(ex.e_max - ex.F - 1)) and info["region"].startswith("cut")
    assert info["kept"] == f"{c_term.kept} x 2^{ex.e_max - ex.F}" and info["exponent"] == str(c_term.exp)
    assert _hover(drv, r, c) == info


def test_mma_sync_tables_agree_with_the_fragment_lookup(data):
    from refmodel.layouts.mma_fragment import holder
    from refmodel.mma_sync_forms import parse_mma_sync

    view = data["mmasync"]
    assert len(view["forms"]) == 16 and {parse_mma_sync(f).family for f in view["forms"]} == \
        {"f16", "f16q", "bf16", "tf32", "fp8", "f64", "int8", "int4", "b1"}
    for form in view["forms"]:
        for op in "abcd":
            t = view["tables"][form][op]
            for r in range(t["rows"]):
                for c in range(t["cols"]):
                    h = holder(form, op, r, c)
                    i = r * t["cols"] + c
                    assert (t["lane"][i], t["reg"][i], t["slot"][i]) == (h["lane"], h["register"], h["slot"]), (form, op)


def test_browser_mma_sync_view(browser):
    from refmodel.layouts.mma_fragment import holder

    drv = browser
    form = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
    _open(drv, f"#layout=mmasync&form={form}&operand=a")
    info = _hover(drv, 9, 21)
    assert (info["lane"], info["register"], info["slot"][:1]) == ("5", "r3", "1")
    _select(drv, "operand", "d")
    h = holder(form, "d", 10, 5)
    info = _hover(drv, 10, 5)
    assert (info["lane"], info["register"]) == (str(h["lane"]), f"r{h['register']}")
    legend, cells, kind, _, _ = drv.execute_script(
        """const o = {}; for (const e of document.querySelectorAll('#legend [data-k]'))
               o[e.dataset.k] = getComputedStyle(e).backgroundColor;
           const cells = Array.from(document.querySelectorAll('#grid td'), (td) => [+td.dataset.r, +td.dataset.c,
               getComputedStyle(td).backgroundColor]);
           const L = document.getElementById('legend');
           return [o, cells, L.dataset.kind, 0, 0];""")
    assert kind == "lane" and len(cells) == 16 * 8
    for r, c, colour in cells:
        assert colour == legend[f"l{holder(form, 'd', r, c)['lane']}"]
    assert "layout=mmasync" in drv.find_element("id", "permalink").get_attribute("href")
