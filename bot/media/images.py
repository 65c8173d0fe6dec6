"""Photos made ready for the model: checked, turned upright, downscaled, re-encoded, and
sized to fit the prompt's token budget.

The model gets a base64 data URL of what we downloaded (never Twilio's URL, which needs our
credentials and expires), so what it sees is exactly what we checked.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

from bot.exceptions import BotError
from bot.llm.images import LOW_DETAIL_TOKENS, image_tokens

#: Formats WhatsApp sends as photos and stickers.
ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP")
#: More pixels than this is not a phone photo but a decompression bomb (a 16 MB PNG can
#: claim 100,000 x 100,000 pixels): refused before decoding. 50 MP covers any phone camera.
MAX_PIXELS = 50_000_000
#: All a low-detail image is looked at with (OpenAI's vision guide): larger is wasted bytes.
LOW_DETAIL_PX = 512
#: JPEG quality of the re-encoded photo: small, and plenty for a model at 512-1024 px.
JPEG_QUALITY = 85


class UnreadableImage(BotError):
    """The bytes are not a photo we accept (not JPEG, PNG or WebP; broken; too many pixels)."""


@dataclass(frozen=True)
class PreparedImage:
    """A photo as the reply call gets it."""

    data_url: str
    width: int
    height: int
    format: str  # what it was sent as: JPEG, PNG, WEBP
    detail: str  # low or high
    tokens: int  # its prompt tokens at that detail and size
    original_bytes: int

    def part(self) -> dict[str, object]:
        """Return the Chat Completions content part."""
        return {"type": "image_url", "image_url": {"url": self.data_url, "detail": self.detail}}


def _open(data: bytes) -> tuple[Image.Image, str]:
    """Open and fully decode the image; return it, upright, with the format it came in;
    raise UnreadableImage."""
    try:
        image = Image.open(io.BytesIO(data))
        if image.format not in ACCEPTED_FORMATS:
            raise UnreadableImage(f"format {image.format}")
        if image.width * image.height > MAX_PIXELS:
            raise UnreadableImage("too many pixels")
        image.load()
        if getattr(image, "n_frames", 1) > 1:  # an animated sticker: its first frame
            image.seek(0)
        source_format = str(image.format)  # a transposed copy no longer knows it
        return ImageOps.exif_transpose(image) or image, source_format
    except UnreadableImage:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise UnreadableImage(type(err).__name__) from err


def _fit_high_detail(width: int, height: int, max_side: int, max_tokens: int) -> tuple[int, int] | None:
    """Return the largest size, longest side at most max_side, whose high-detail cost fits
    max_tokens; None when not even one tile does."""
    for side in range(max_side, 63, -16):  # arithmetic only: at most 60 sizes tried
        scale = min(1.0, side / max(width, height))
        w, h = max(1, round(width * scale)), max(1, round(height * scale))
        if image_tokens(w, h, "high") <= max_tokens:
            return w, h
    return None


def prepare_image(data: bytes, *, detail: str, max_side: int, max_tokens: int) -> PreparedImage:
    """Return the photo downscaled (longest side at most max_side) as a JPEG or PNG data URL.

    At high detail the photo is shrunk further until its tiles fit max_tokens (the room the
    prompt has for it), and sent at low detail when what fits is no larger than low detail's
    512 px (one tile costs 255 tokens for what 85 buy). Raise
    UnreadableImage for anything that is not a photo we accept.
    """
    image, source_format = _open(data)
    width, height = image.size
    size: tuple[int, int] | None
    if detail == "high":
        size = _fit_high_detail(width, height, max_side, max_tokens)
        if size is None or max(size) <= LOW_DETAIL_PX:
            # No room for more than low detail shows (512 px): the same pixels for 85 tokens.
            detail, size, max_side = "low", None, min(max_side, LOW_DETAIL_PX)
    if detail == "low" or size is None:
        scale = min(1.0, max_side / max(width, height))
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
    if size != (width, height):
        image = image.resize(size, Image.Resampling.LANCZOS)
    has_alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
    out = io.BytesIO()
    if has_alpha:  # stickers and screenshots with transparency stay PNG
        image.convert("RGBA").save(out, format="PNG", optimize=True)
        mime = "image/png"
    else:
        image.convert("RGB").save(out, format="JPEG", quality=JPEG_QUALITY, optimize=True)
        mime = "image/jpeg"
    encoded = base64.b64encode(out.getvalue()).decode("ascii")
    tokens = LOW_DETAIL_TOKENS if detail == "low" else image_tokens(size[0], size[1], "high")
    return PreparedImage(
        data_url=f"data:{mime};base64,{encoded}",
        width=size[0],
        height=size[1],
        format=source_format,
        detail=detail,
        tokens=tokens,
        original_bytes=len(data),
    )
