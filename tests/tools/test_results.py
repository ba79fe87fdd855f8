"""Result helpers and normalisation."""

from __future__ import annotations

import io

import pytest

from nbagent import ImageBlock, TextBlock, ToolResult, image_result, json_result, text_result
from nbagent.tools.results import check_image, faithful_text, to_tool_result, truncate_for_model


def test_helpers():
    r = json_result({"ok": True, "n": [1, 2]})
    assert r.text == '{\n  "ok": true,\n  "n": [\n    1,\n    2\n  ]\n}' and r.details == {"ok": True, "n": [1, 2]}
    assert text_result("hi", is_error=True).is_error
    assert ToolResult("plain").content == [TextBlock("plain")]


def test_to_tool_result_keeps_objects_as_details():
    import pandas as pd

    df = pd.DataFrame({"a": range(100), "b": ["x"] * 100})
    r = to_tool_result(df)
    assert r.details is df and "a" in r.text and len(r.text) < 3000
    assert to_tool_result(None).text == "(no output)"
    assert to_tool_result(b"\x00\x01").text == "<2 bytes of binary data>"
    assert faithful_text({"a": 1}) == '{\n  "a": 1\n}'
    assert faithful_text(3.5) == "3.5"
    import datetime
    assert faithful_text(datetime.date(2024, 1, 2)) == "2024-01-02"


def test_matplotlib_figures_become_images_with_the_figure_in_details():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    r = to_tool_result(fig)
    assert r.details is fig and r.images and r.images[0].mime_type == "image/png"
    plt.close(fig)


def test_images_are_checked_and_shrunk():
    from PIL import Image

    with pytest.raises(ValueError, match="not a PNG"):
        check_image(ImageBlock(b"GIF-ish but not", "image/png"))
    buf = io.BytesIO()
    Image.new("RGB", (3000, 2000), "blue").save(buf, format="PNG")
    block = image_result(buf.getvalue()).images[0]
    with Image.open(io.BytesIO(block.data)) as img:
        assert max(img.size) <= 1568
    # a JPEG labelled as PNG is relabelled
    buf = io.BytesIO()
    Image.new("RGB", (10, 10)).save(buf, format="JPEG")
    assert check_image(ImageBlock(buf.getvalue(), "image/png")).mime_type == "image/jpeg"


def test_truncation_keeps_head_and_tail_and_the_whole_in_details():
    text = "A" * 5000 + "B" * 5000
    r = truncate_for_model(ToolResult(text), 1000)
    assert r.text.startswith("A" * 750) and r.text.endswith("B" * 250)
    assert "9,000 of 10,000 characters cut" in r.text and r.details == text
    kept = ToolResult(text, details={"mine": 1})
    assert truncate_for_model(kept, 1000).details == {"mine": 1}
    assert truncate_for_model(kept, None) is kept
