"""Hostile inputs fixed by class (issue 34): one rule per class, each tested on the cases the hostile pass
found and on their neighbours."""

import numpy as np
import pytest

from refmodel.errors import InputError, WgrefError
from refmodel.layouts.swizzle import Swizzle, addresses, swizzle_address


@pytest.mark.parametrize("bad", [-16, np.array([-16, 32]), 2 ** 62, np.array([2 ** 62], np.uint64), True])
def test_swizzle_addresses_are_non_negative_byte_addresses(bad):
    with pytest.raises(WgrefError, match="address"):
        swizzle_address(bad, "128B")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int64])
def test_narrow_integer_addresses_are_widened_not_wrapped(dtype):
    a = np.array([0, 16, 100, 127], dtype)
    want = [Swizzle(3)(int(v)) for v in a]
    got = swizzle_address(a, "128B")
    assert got.dtype == np.int64 and got.tolist() == want
    assert addresses(np.uint8(200)) == 200 and swizzle_address(np.uint8(200), "none") == 200


def test_tma_load_of_an_empty_tensor_is_refused():
    import refmodel

    for shape in ((0, 64), (64, 0)):
        with pytest.raises(InputError, match="at least one row and one column"):
            refmodel.tma_load(np.zeros(shape, np.uint16), box=(8, 64), coords=(0, 0), mode="128B")


@pytest.mark.parametrize("rep", [None, "abc", 3, {"hazards": []}])
def test_pipeline_drawings_take_a_report_only(rep):
    from refmodel.machine.pipeline_draw import draw_ascii, draw_svg

    for draw in (draw_ascii, draw_svg):
        with pytest.raises(InputError, match="PipelineReport"):
            draw(rep)


@pytest.mark.parametrize("text", ["1_0", "0x1_0", "1_000.5", "-1_0"])
def test_numbers_on_the_command_line_take_no_digit_separators(text, capsys):
    from wgref.cli import main

    assert main(["cvt", text, "--to", "e4m3"]) == 2
    assert "'_' is not part of a number here" in capsys.readouterr().err
    assert main(["cvt", text.replace("_", ""), "--to", "e4m3"]) == 0


def test_the_command_line_draws_only_existing_forms(capsys):
    from wgref.cli import main

    assert main(["layout", "acc", "--n", "40", "--dtype", "s32"]) == 2
    assert "no m64n40 wgmma form has a s32 accumulator" in capsys.readouterr().err
    assert main(["layout", "acc", "--n", "48", "--dtype", "s32"]) == 0
    assert main(["layout", "acc", "--n", "40", "--dtype", "f32"]) == 0
