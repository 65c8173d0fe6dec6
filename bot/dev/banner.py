"""What `make run` says: the block of what is in use, and the ready line."""

from __future__ import annotations

from bot.config import Settings
from bot.config.embeddings import LOCAL_EMBEDDING_MODEL
from bot.dev.dev_console import DevConsole
from bot.observability.logs import mask_url


def embedding_line(settings: Settings, env: dict[str, str]) -> str:
    """Return what embeds the messages, chunks and facts."""
    if not settings.embeddings_on:
        return "off (EMBEDDING_MODEL=off): words only"
    if settings.EMBEDDING_BASE_URL or settings.EMBEDDING_MODEL != LOCAL_EMBEDDING_MODEL:
        return f"{settings.EMBEDDING_MODEL} at {settings.embedding_base_url or 'https://api.openai.com/v1'}"
    port = env.get("EMBEDDING_PORT") or settings.EMBEDDING_PORT
    return f"{settings.EMBEDDING_MODEL}, local (the Procfile's embed process on 127.0.0.1:{port})"


def describe(settings: Settings, env: dict[str, str], chosen: dict[str, str], console: DevConsole | None) -> list[str]:
    """Return the block that says what is in use."""
    port = env.get("PORT", "5000")
    redis_url = env["REDIS_URL"]
    where = "embedded redis-server, data kept in .run/redis; `make clean` starts afresh" if "REDIS_URL" in chosen \
        else "REDIS_URL"
    if env.get("QUEUE_REDIS_URL"):
        where += f"; queues on {mask_url(env['QUEUE_REDIS_URL'])}"
    if env.get("MODEL_STANDIN") == "true":
        model = f"{env['OPENAI_BASE_URL']} (the offline STAND-IN: its replies say what it was given)"
    else:
        model = f"{env.get('OPENAI_BASE_URL') or 'https://api.openai.com/v1'} (OPENAI_BASE_URL)"
    token = "a development token: Twilio's own requests get 403" if "TWILIO_AUTH_TOKEN" in chosen else "TWILIO_AUTH_TOKEN"
    public = f"{settings.PUBLIC_BASE_URL}/whatsapp" if settings.PUBLIC_BASE_URL else "set PUBLIC_BASE_URL behind a tunnel or proxy"
    if "TWILIO_API_BASE_URL" in chosen:
        media = f"{chosen['TWILIO_API_BASE_URL']} (the local Twilio STAND-IN: chat's /voice and /photo)"
    elif settings.media_credentials and env.get("TWILIO_ACCOUNT_SID"):
        media = f"{env.get('TWILIO_API_BASE_URL') or 'https://api.twilio.com'} as {env['TWILIO_ACCOUNT_SID'][:6]}…"
    else:
        media = "off: set TWILIO_ACCOUNT_SID to read voice notes and photos"
    asked = settings.DEFERRED_REPLIES
    if asked and (env.get("TWILIO_ACCOUNT_SID") or "").startswith("AC"):
        replies = "voice notes and slow photos answered by a worker through the Messages API, typing… meanwhile"
    else:
        replies = "all on the webhook's clock" + ("" if not asked else ": set TWILIO_ACCOUNT_SID to defer voice notes")
    return [
        "=" * 72,
        f"  redis    {mask_url(redis_url)}  ({where})",
        f"  model    {model}",
        f"  models   reply {settings.OPENAI_MODEL}, extraction {settings.extraction_model}",
        f"  meaning  {embedding_line(settings, env)}",
        f"  twilio   signatures checked with {token}",
        f"  media    {media}",
        f"  replies  {replies}",
        f"  webhook  http://127.0.0.1:{port}/whatsapp  (public: {public})",
        f"  console  {console_line(env, console)}",
        *([f"  website  {env['OPENAI_BASE_URL'].removesuffix('/v1')}/site/  (the stand-in's bakery site: "
           f"kb add it; KB_ALLOW_PRIVATE_URLS is on for it)"] if env.get("MODEL_STANDIN") == "true" else []),
        f"  sizing   {sizing_line(env)}",
        "  waiting for the webhook, the workers and the console to answer…   stop: Ctrl-C",
        "=" * 72,
    ]


def console_line(env: dict[str, str], console: DevConsole | None) -> str:
    """Return how to reach the console, and as whom."""
    url = f"http://127.0.0.1:{env.get('PORT', '5000')}/console"
    if console is not None:
        return f"{url}  sign in as {console.operator!r}, password {console.password}  (kept in .run/console.env)"
    if env.get("ADMIN_TOKEN"):
        return f"{url}  (ADMIN_TOKEN: sign in with your operators, or the token as admin)"
    return "off: set ADMIN_TOKEN to turn it on (make run turns it on by itself only on 127.0.0.1)"


def sizing_line(env: dict[str, str]) -> str:
    """Return how many processes serve, and that production's are the Procfile's."""
    return (f"{env['WEB_CONCURRENCY']} web process x {env['WEB_THREADS']} threads, {env['WORKER_PROCESSES']} workers "
            "(development; production's are the Procfile's defaults: docs/scaling.md)")


def ready_lines(env: dict[str, str], console: bool) -> list[str]:
    """Return the ready line, with the URLs."""
    web = f"http://127.0.0.1:{env.get('PORT', '5000')}"
    shown = f"webhook {web}/whatsapp" + (f" · console {web}/console" if console else "")
    return [f"ready    {shown}", f"         metrics {web}/metrics · chat: .venv/bin/whatsapp-bot chat"]
