"""What an image costs in prompt tokens, by OpenAI's published formula for vision input.

low detail: a flat 85 tokens, whatever the size.
high detail: the image is scaled to fit 2048 x 2048, then so that its shortest side is at most
768 px (never up); it is then cut in 512 px tiles, each 170 tokens, plus the 85 of the base.
(OpenAI's "Images and vision" guide, "Calculating costs"; gpt-4o and gpt-4o-mini count so.)
"""

from __future__ import annotations

import math

LOW_DETAIL_TOKENS = 85
BASE_TOKENS = 85
TILE_TOKENS = 170
TILE_PX = 512
FIT_PX = 2048
SHORT_SIDE_PX = 768


def scaled_for_high_detail(width: int, height: int) -> tuple[int, int]:
    """Return the size the API works on at high detail (scaled down, never up)."""
    w, h = float(width), float(height)
    if max(w, h) > FIT_PX:
        ratio = FIT_PX / max(w, h)
        w, h = w * ratio, h * ratio
    if min(w, h) > SHORT_SIDE_PX:
        ratio = SHORT_SIDE_PX / min(w, h)
        w, h = w * ratio, h * ratio
    return max(1, math.floor(w)), max(1, math.floor(h))


def image_tokens(width: int, height: int, detail: str) -> int:
    """Return the prompt tokens of one image of this size at this detail ("low" or "high")."""
    if detail == "low":
        return LOW_DETAIL_TOKENS
    w, h = scaled_for_high_detail(width, height)
    tiles = math.ceil(w / TILE_PX) * math.ceil(h / TILE_PX)
    return BASE_TOKENS + TILE_TOKENS * tiles
