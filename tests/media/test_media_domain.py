"""The media domain's pure functions: duration, photo preparation, image tokens, locations,
languages, prices per audio minute."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from bot.config.tasks import parse_prices
from bot.llm.images import image_tokens
from bot.media.audio import UnreadableAudio, audio_duration, upload_name
from bot.media.images import MAX_PIXELS, UnreadableImage, prepare_image
from bot.media.language import language_code, photo_question
from bot.media.location import Location, location_line, place
from bot.storage.usage import Usage

VOICE = Path(__file__).resolve().parents[1] / "data" / "voice_ana.ogg"


def encoded(image: Image.Image, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def sent(data_url: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(data_url.partition(",")[2])))


def test_duration_is_read_from_the_file() -> None:
    assert audio_duration(VOICE.read_bytes()) == pytest.approx(3.93, abs=0.05)
    with pytest.raises(UnreadableAudio):
        audio_duration(b"not audio at all" * 100)
    assert upload_name("ogg") == "voice.ogg" and upload_name("mpeg") == "voice.mp3" and upload_name("x") == "voice.ogg"


@pytest.mark.parametrize(("size", "detail", "tokens"), [
    ((512, 512), "low", 85), ((4000, 3000), "low", 85),
    ((512, 512), "high", 255),  # one tile
    ((1024, 768), "high", 765),  # 2 x 2 tiles
    ((2048, 4096), "high", 1105),  # OpenAI's worked example: 768 x 1536, 6 tiles
])
def test_image_tokens_follow_openais_formula(size: tuple[int, int], detail: str, tokens: int) -> None:
    assert image_tokens(*size, detail) == tokens


def test_a_photo_is_downscaled_and_reencoded() -> None:
    photo = encoded(Image.new("RGB", (3000, 2000), (250, 10, 10)), "JPEG")
    low = prepare_image(photo, detail="low", max_side=512, max_tokens=400)
    assert (low.width, low.height, low.detail, low.tokens) == (512, 341, "low", 85)
    assert sent(low.data_url).size == (512, 341) and low.data_url.startswith("data:image/jpeg;base64,")


def test_high_detail_shrinks_to_the_room_left_else_goes_low() -> None:
    photo = encoded(Image.new("RGB", (2000, 1500)), "JPEG")
    roomy = prepare_image(photo, detail="high", max_side=1024, max_tokens=2000)
    assert (roomy.width, roomy.height, roomy.tokens) == (1024, 768, 765)
    middle = prepare_image(photo, detail="high", max_side=1024, max_tokens=430)
    assert middle.detail == "high" and middle.tokens == 425 and (middle.width, middle.height) == (672, 504)
    tight = prepare_image(photo, detail="high", max_side=1024, max_tokens=390)  # one tile: what low shows
    assert tight.detail == "low" and tight.tokens == 85 and (tight.width, tight.height) == (512, 384)
    none = prepare_image(photo, detail="high", max_side=1024, max_tokens=100)
    assert none.detail == "low" and none.tokens == 85 and max(none.width, none.height) == 512


def test_transparency_stays_png_and_exif_turns_it_upright() -> None:
    sticker = prepare_image(encoded(Image.new("RGBA", (300, 300), (0, 0, 0, 0)), "WEBP"), detail="low",
                            max_side=512, max_tokens=400)
    assert sticker.data_url.startswith("data:image/png;base64,") and sticker.format == "WEBP"
    portrait = Image.new("RGB", (400, 200))
    exif = portrait.getexif()
    exif[0x0112] = 6  # rotate 90° on display
    turned = prepare_image(encoded(portrait, "JPEG", exif=exif), detail="low", max_side=512, max_tokens=400)
    assert (turned.width, turned.height) == (200, 400)


@pytest.mark.parametrize("data", [
    b"\xff\xd8\xff\xe0 broken jpeg" * 10,
    encoded(Image.new("RGB", (10, 10)), "GIF"),  # not a photo format WhatsApp sends
    encoded(Image.new("RGB", (10, 10)), "BMP"),
])
def test_what_is_not_a_photo_is_unreadable(data: bytes) -> None:
    with pytest.raises(UnreadableImage):
        prepare_image(data, detail="low", max_side=512, max_tokens=400)


def test_a_decompression_bomb_is_refused_before_decoding() -> None:
    side = int(MAX_PIXELS ** 0.5) + 100
    bomb = encoded(Image.new("1", (side, side)), "PNG")  # a few KB that claim > 50 MP
    assert len(bomb) < 200_000
    with pytest.raises(UnreadableImage, match="pixels"):
        prepare_image(bomb, detail="low", max_side=512, max_tokens=400)


def test_a_location_is_one_line() -> None:
    named = Location(41.1496, -8.6109, label="Café Majestic", address="Rua de Santa Catarina 112")
    assert place(named) == "Café Majestic, Rua de Santa Catarina 112 (41.14960, -8.61090)"
    assert location_line(Location(1.0, 2.0), "lunch near here?") == "📍 Shared location: 1.00000, 2.00000\nlunch near here?"


@pytest.mark.parametrize(("value", "code"), [
    ("Portuguese", "pt"), ("português", "pt"), ("pt-BR", "pt"), ("Spanish, English", "es"), ("es", "es"),
    ("Klingon", None), ("", None), (None, None), ("xx", None),
])
def test_language_codes(value: str | None, code: str | None) -> None:
    assert language_code(value) == code


def test_the_photo_question_speaks_the_users_language() -> None:
    assert photo_question("es") == "¿Qué hay en esta foto?" and photo_question(None) == "What is in this photo?"
    assert photo_question("sw") == "What is in this photo?"  # no translation: English


def test_speech_is_priced_per_minute_and_tokens_per_million() -> None:
    prices = parse_prices('{"whisper-1": {"per_minute": 0.006}, "gpt-4o-mini": [0.15, 0.6]}')
    assert Usage("transcription", "whisper-1", 0, 0, 2, seconds=90).cost(prices) == pytest.approx(0.009)
    assert Usage("reply", "gpt-4o-mini", 1_000_000, 0, 1).cost(prices) == pytest.approx(0.15)
    with pytest.raises(ValueError):
        parse_prices('{"whisper-1": {"per_second": 1}}')
