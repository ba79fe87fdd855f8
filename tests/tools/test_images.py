"""Images are measured before they are decoded: a small file that decompresses to gigabytes costs no memory.

The peak memory is measured in a fresh process (`ru_maxrss`, which also counts Pillow's own buffers, which
tracemalloc does not see), for every way an image reaches the model: read_file in plan mode and in
bypassPermissions mode, a tool returning an `ImageBlock`, a lazily opened PIL image, and `image_result`.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nbagent.messages import ImageBlock
from nbagent.tools.images import MAX_IMAGE_PIXELS, ImageTooLarge, check_image, image_size
from tests.helpers import zeros_png


def bomb_png(width: int = 50_000, height: int = 50_000) -> bytes:
    """A 1-bit grayscale PNG of zeros: a few hundred KB that decode to width x height pixels."""
    return zeros_png(width, height, bit_depth=1, color_type=0)


def test_the_size_is_read_from_the_header_and_an_image_over_the_budget_is_refused():
    data = bomb_png()
    assert len(data) < 1_000_000
    assert image_size(data, "image/png") == (50_000, 50_000)
    with pytest.raises(ImageTooLarge, match="50,000 x 50,000 pixels.*not decoded"):
        check_image(ImageBlock(data, "image/png"))


def test_webp_and_jpeg_headers_are_read():
    pil = pytest.importorskip("PIL.Image")
    import io

    for fmt, mime in (("WEBP", "image/webp"), ("JPEG", "image/jpeg"), ("GIF", "image/gif")):
        buf = io.BytesIO()
        pil.new("RGB", (321, 123)).save(buf, format=fmt)
        assert image_size(buf.getvalue(), mime) == (321, 123), fmt
    for mode in ("RGBA", "RGB"):  # lossless and lossy WebP
        buf = io.BytesIO()
        pil.new(mode, (77, 55)).save(buf, format="WEBP", lossless=mode == "RGBA")
        assert image_size(buf.getvalue(), "image/webp") == (77, 55)


_SCENARIOS = r'''
import resource, sys, asyncio
sys.path.insert(0, ROOT)
from pathlib import Path
from PIL import Image
from nbagent import Agent, ImageBlock, ScriptedModel, AssistantMessage, ToolCall, tool, toolbox
from nbagent.tools.results import image_result
from nbagent.tools.images import ImageTooLarge
Image.MAX_IMAGE_PIXELS = None  # as a notebook that turned off Pillow's own guard: only ours is left

ws = Path(WS)
data = (ws / "bomb.png").read_bytes()

@tool(read_only=True)
def as_block() -> ImageBlock:
    """An image block."""
    return ImageBlock(data, "image/png")

@tool(read_only=True)
def as_pil():
    """A lazily opened PIL image."""
    return Image.open(ws / "bomb.png")

def run(name, args, mode):
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name=name, arguments=args)]), AssistantMessage(text="ok")])
    agent = Agent(model=model, tools=[*toolbox.all(workspace=ws), as_block, as_pil], mode=mode, workspace=ws)
    r = agent.run_sync("x")
    return r.calls[0].result.text

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
texts = [run("read_file", {"path": "bomb.png"}, "plan"), run("read_file", {"path": "bomb.png"}, "bypassPermissions"),
         run("as_block", {}, "default"), run("as_pil", {}, "acceptEdits")]
try:
    image_result(data)
    texts.append("image_result accepted it")
except ImageTooLarge as exc:
    texts.append(str(exc))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for t in texts:
    print("TEXT", t.replace("\n", " ")[:300])
print("GROWTH_KB", after - before)
'''


def test_a_decompression_bomb_costs_no_memory_however_it_arrives(tmp_path: Path):
    pytest.importorskip("PIL")
    (tmp_path / "bomb.png").write_bytes(bomb_png())
    script = _SCENARIOS.replace("ROOT", repr(str(Path(__file__).resolve().parents[2]))).replace("WS", repr(str(tmp_path)))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    texts = [line[5:] for line in out.stdout.splitlines() if line.startswith("TEXT ")]
    assert len(texts) == 5
    for text in texts:
        assert "50,000 x 50,000 pixels" in text and "not decoded" in text, text
    growth_kb = int(out.stdout.split("GROWTH_KB")[1])
    # decoding it would take 2.5 GB (1 byte a pixel); reading the header takes nothing
    assert growth_kb < 100_000, f"peak memory grew by {growth_kb:,} KB"
    assert MAX_IMAGE_PIXELS < 50_000 * 50_000
