"""What the stand-in model sees in a photo: the image parts of a Chat Completions message.

A part is `{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,...",
"detail": "low"|"high"|"auto"}}`. Only base64 data URLs are taken (the stand-in has no network);
each is decoded with Pillow, so a broken image fails here as it would at OpenAI, and its size
gives its prompt tokens by OpenAI's formula (bot/llm/images.py).
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Any

from PIL import Image

from bot.llm.images import image_tokens

#: The image formats OpenAI's vision input takes (its "Images and vision" guide); a GIF
#: only if it is not animated.
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "GIF")


class InvalidImage(ValueError):
    """An image part that is not an image OpenAI would take."""


@dataclass(frozen=True)
class SeenImage:
    """One decoded image part: its size, format and the detail asked for."""

    width: int
    height: int
    format: str
    detail: str

    def describe(self) -> str:
        """Return how the canned reply names it."""
        return f"a {self.width}×{self.height} {self.format} image (detail {self.detail})"

    def tokens(self) -> int:
        """Return its prompt tokens; "auto" counts as high detail, the dearer case."""
        return image_tokens(self.width, self.height, self.detail)


def text_parts(content: Any) -> list[str]:
    """Return a message's texts: the string itself, or the text parts of a list."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return []


def see_image(part: dict[str, Any]) -> SeenImage:
    """Decode one image_url part, or raise InvalidImage."""
    image_url = part.get("image_url") if isinstance(part.get("image_url"), dict) else {}
    header, comma, encoded = str(image_url.get("url", "")).partition(",")
    if not (header.startswith("data:") and header.endswith(";base64") and comma):
        raise InvalidImage("the stand-in takes base64 data URLs only")
    try:
        with Image.open(io.BytesIO(base64.b64decode(encoded, validate=True))) as image:
            image.load()  # a truncated file opens fine and fails only here
            seen = SeenImage(image.width, image.height, str(image.format), str(image_url.get("detail") or "auto"))
            animated = bool(getattr(image, "is_animated", False))
    # ValueError: bad base64; OSError: not an image, or cut short.
    except (ValueError, OSError, Image.DecompressionBombError) as err:
        raise InvalidImage(f"the image could not be decoded ({type(err).__name__})") from err
    if seen.format not in IMAGE_FORMATS or animated:
        raise InvalidImage(f"unsupported image format {seen.format}{' (animated)' if animated else ''}")
    return seen


def message_images(message: dict[str, Any]) -> list[SeenImage]:
    """Decode the image parts of one message, or raise InvalidImage."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [see_image(p) for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
