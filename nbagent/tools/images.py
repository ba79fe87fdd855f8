"""Images a model is shown: recognised, measured from their headers, and shrunk to provider limits.

An image is measured before anything decodes it: the dimensions come from its header (PNG IHDR, GIF
logical screen, JPEG SOF, WebP VP8/VP8L/VP8X), or from Pillow's lazy `Image.open`, which reads the header
only. An image over `MAX_IMAGE_PIXELS` is refused with a clear error and never decoded, so a small file
that would decompress to gigabytes (a "decompression bomb") costs no memory. Only images within the
budget but over the providers' limits (`MAX_IMAGE_EDGE`, `MAX_IMAGE_BYTES`) are decoded, to be shrunk.

Pillow is imported only when an image must be shrunk or its header is one this module does not read.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ..messages import ImageBlock

__all__ = [
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_EDGE",
    "MAX_IMAGE_PIXELS",
    "ImageTooLarge",
    "check_image",
    "image_size",
    "sniff_image_type",
    "to_image_block",
]

MAX_IMAGE_EDGE = 1568
"""Images are shrunk so their longer edge is at most this many pixels (Anthropic's recommended size)."""
MAX_IMAGE_BYTES = 3_500_000
"""...and their encoded size at most this (below every provider's per-image limit once base64-encoded)."""
MAX_IMAGE_PIXELS = 25_000_000
"""Images with more pixels than this (a 6000 x 4000 photo has 24 million) are refused, never decoded:
decoding one costs about 4 bytes a pixel."""

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


class ImageTooLarge(ValueError):
    """An image has more pixels than `MAX_IMAGE_PIXELS`; it was not decoded."""


def sniff_image_type(data: bytes) -> str | None:
    """The media type of encoded image bytes, from their first bytes (None when not an image we send)."""
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_size(data: bytes, mime: str) -> tuple[int, int] | None:
    """(width, height) read from the header of encoded image bytes; None when the header is not readable."""
    try:
        if mime == "image/png":
            if data[12:16] != b"IHDR":
                return None
            return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        if mime == "image/gif":
            return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
        if mime == "image/jpeg":
            return _jpeg_size(data)
        if mime == "image/webp":
            return _webp_size(data)
    except Exception:
        return None
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i < len(data) - 9:
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in _JPEG_SOF:
            return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
        if marker == 0xFF or 0xD0 <= marker <= 0xD9 or marker == 0x01:  # fill byte, markers without length
            i += 1 if marker == 0xFF else 2
            continue
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8 ":
        return int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _check_pixels(size: tuple[int, int] | None, what: str = "image") -> None:
    if size is not None and size[0] * size[1] > MAX_IMAGE_PIXELS:
        raise ImageTooLarge(
            f"the {what} is {size[0]:,} x {size[1]:,} pixels, more than the {MAX_IMAGE_PIXELS:,} an image may "
            "have; it was not decoded. Make a smaller image (crop or downsample it) and show that instead"
        )


def _lazy_size(data: bytes) -> tuple[int, int] | None:
    """The size Pillow reads from the header (nothing is decoded), for headers `image_size` cannot read."""
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(data)) as img:
            return img.size
    except Image.DecompressionBombError:
        return (MAX_IMAGE_PIXELS + 1, 1)
    except Exception:
        return None


def check_image(block: ImageBlock) -> ImageBlock:
    """Check an image block is a real PNG/JPEG/GIF/WebP image within the pixel budget, and shrink it to
    provider limits (decoding it only then).

    Raises `ImageTooLarge` over `MAX_IMAGE_PIXELS`, `ValueError` when it is not an image, or when it is too
    large and Pillow is not installed to shrink it.
    """
    actual = sniff_image_type(block.data)
    if actual is None:
        raise ValueError(f"not a PNG, JPEG, GIF or WebP image ({len(block.data):,} bytes)")
    if actual != block.mime_type:
        block = ImageBlock(block.data, actual)
    size = image_size(block.data, actual)
    if size is None and len(block.data) > MAX_IMAGE_BYTES:
        size = _lazy_size(block.data)
    _check_pixels(size)
    too_big = len(block.data) > MAX_IMAGE_BYTES or (size is not None and max(size) > MAX_IMAGE_EDGE)
    if not too_big:
        return block
    try:
        from PIL import Image
    except ImportError:
        raise ValueError(
            f"image is too large for providers ({len(block.data):,} bytes, {size}) and Pillow is not installed to shrink it"
        ) from None
    img = Image.open(io.BytesIO(block.data))  # reads the header only
    _check_pixels(img.size)  # the header Pillow decodes from, whatever ours said
    img.draft("RGB", (MAX_IMAGE_EDGE, MAX_IMAGE_EDGE))  # JPEG: decode at a reduced scale where it can
    img.load()
    return _shrink(img)


def _shrink(img: Any) -> ImageBlock:
    img.thumbnail((MAX_IMAGE_EDGE, MAX_IMAGE_EDGE))
    fmt, mime = ("PNG", "image/png") if img.mode in ("RGBA", "LA", "P") else ("JPEG", "image/jpeg")
    quality = 90
    while True:
        buf = io.BytesIO()
        if fmt == "JPEG":
            img.convert("RGB").save(buf, format="JPEG", quality=quality)
        else:
            img.save(buf, format="PNG", optimize=True)
        data = buf.getvalue()
        if len(data) <= MAX_IMAGE_BYTES:
            return ImageBlock(data, mime)
        if fmt == "PNG":
            fmt, mime = "JPEG", "image/jpeg"
            continue
        if quality <= 40:
            img.thumbnail((img.width // 2, img.height // 2))
        quality = max(40, quality - 15)


def to_image_block(image: Any, mime_type: str | None = None) -> ImageBlock:
    """An `ImageBlock` from bytes, a file path, a PIL image or a matplotlib figure, checked by `check_image`
    (the pixel budget is checked before a PIL image or a figure is encoded)."""
    if isinstance(image, ImageBlock):
        return check_image(image)
    if isinstance(image, (str, Path)):
        data = Path(image).read_bytes()
    elif isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
    elif hasattr(image, "savefig"):  # a matplotlib figure
        width, height = (image.get_size_inches() * image.dpi) if hasattr(image, "get_size_inches") else (0, 0)
        _check_pixels((int(width), int(height)), "figure")
        buf = io.BytesIO()
        image.savefig(buf, format="png", bbox_inches="tight")
        data, mime_type = buf.getvalue(), "image/png"
    elif hasattr(image, "save") and hasattr(image, "size"):  # a PIL image (maybe opened lazily, not loaded)
        _check_pixels(tuple(image.size))
        if max(image.size) > MAX_IMAGE_EDGE:
            return _shrink(image.copy())  # a copy: the tool's own image (kept as `details`) stays as it is
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        data, mime_type = buf.getvalue(), "image/png"
    else:
        raise TypeError(f"cannot make an image from a {type(image).__name__}")
    return check_image(ImageBlock(data, mime_type or sniff_image_type(data) or "application/octet-stream"))
