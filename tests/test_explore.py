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
from refmodel.render.explore import explore_data, explore_html
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
