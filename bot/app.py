"""The Flask app factory: settings in, the webhook, health and admin routes wired."""

from __future__ import annotations

import atexit
import uuid
from pathlib import Path

import structlog
from flask import Flask, request
from twilio.request_validator import RequestValidator
from werkzeug.middleware.proxy_fix import ProxyFix

from bot.channels.twilio import routes as twilio_routes
from bot.channels.twilio.deferred import Deferral
from bot.channels.twilio.media import MediaFetcher
from bot.channels.twilio.rest import RestReplier, make_twilio_client
from bot.channels.twilio.sender import make_message_sender
from bot.channels.twilio.templates import TemplateCatalog
from bot.config import Settings, load_settings
from bot.conversation.replies import BotWords
from bot.exceptions import ConfigError, StoreUnavailable
from bot.observability.logs import configure_logging
from bot.ops import admin, admin_knowledge, admin_reminders, health
from bot.ops.console import init_console
from bot.services import Services, build_services
from bot.users.memory import OperationError, load_org_file


def create_app(settings: Settings | None = None, services: Services | None = None) -> Flask:
    """Build the Flask app; settings come from the environment unless given."""
    settings = settings or load_settings()
    configure_logging(settings.LOG_LEVEL, settings.log_json)
    services = services or build_services(settings, media_source=make_media_fetcher(settings))
    if settings.ORG_FACTS_FILE is not None:
        load_org_facts(services, settings.ORG_FACTS_FILE)

    app = Flask("bot")
    app.config["BOT_SETTINGS"] = settings
    # Twilio posts small forms; anything bigger is not Twilio.
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    app.extensions["bot.validator"] = RequestValidator(settings.twilio_auth_token)
    app.extensions["bot.services"] = services
    app.extensions["bot.pipeline"] = services.pipeline
    words = BotWords(services.prompts.replies, settings.BOT_LANGUAGE)
    app.extensions["bot.words"] = words  # a reply no turn chose the language of (docs/languages.md)
    if settings.deferred_on and services.deferred is not None:  # voice notes answered by a worker
        app.extensions["bot.deferral"] = Deferral(settings, services.deferred, services.jobs)
    if settings.REPLY_MODE == "rest":
        replier = RestReplier(services.pipeline, make_twilio_client(settings), settings, words, services.users.window,
                              services.users.outbox, services.activity)
        app.extensions["bot.replier"] = replier
        atexit.register(replier.close)  # a graceful stop finishes the replies it started
    if settings.TRUST_FORWARDED_HEADERS:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1, x_port=1, x_prefix=1)  # type: ignore[method-assign]

    app.before_request(fresh_log_context)
    app.register_blueprint(twilio_routes.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(admin.bp)
    app.register_blueprint(admin_knowledge.bp)
    app.register_blueprint(admin_reminders.bp)
    # A person's replies during a handover go out through it (None without TWILIO_ACCOUNT_SID).
    app.extensions["bot.sender"] = make_message_sender(settings, services.users.window, services.users.outbox,
                                                          services.activity)
    # ...and the templates a person may send once the user's window is closed (docs/window.md).
    sender = app.extensions["bot.sender"]
    app.extensions["bot.templates"] = TemplateCatalog(sender.client if sender is not None else None, settings)
    init_console(app, services, settings)
    structlog.get_logger(__name__).info(
        "app.started",
        env=settings.APP_ENV,
        model=settings.OPENAI_MODEL,
        model_standin=settings.MODEL_STANDIN,
        reply_mode=settings.REPLY_MODE,
        deferred_replies=settings.deferred_on,
        strategy=settings.CONTEXT_STRATEGY,
    )
    return app


def fresh_log_context() -> None:
    """Start every request's log context afresh, with its own id: threads are reused, and a
    console page must not log the user and MessageSid of the webhook call before it."""
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(request_id=request.headers.get("X-Request-Id", "")[:64] or uuid.uuid4().hex[:16])


def make_media_fetcher(settings: Settings) -> MediaFetcher:
    """Build the client that downloads voice notes and photos from Twilio's Media URLs;
    without an account and credentials it refuses every URL (the user gets a polite reply)."""
    credentials = settings.media_credentials
    if credentials is None or not settings.TWILIO_ACCOUNT_SID:
        structlog.get_logger(__name__).warning(
            "media.not_configured",
            detail="set TWILIO_ACCOUNT_SID (with TWILIO_AUTH_TOKEN, or TWILIO_API_KEY_SID and TWILIO_API_KEY_SECRET) "
            "to read voice notes and photos",
        )
    username, password = credentials or ("", "")
    timeout = min(settings.MEDIA_FETCH_TIMEOUT_S, max(settings.media_room_s, 0.5))
    fetcher = MediaFetcher(
        settings.TWILIO_API_BASE_URL, settings.TWILIO_ACCOUNT_SID, username, password,
        connect_timeout_s=min(3.0, timeout), read_timeout_s=timeout,
    )
    atexit.register(fetcher.close)
    return fetcher


def load_org_facts(services: Services, path: Path) -> None:
    """Load ORG_FACTS_FILE at startup; a bad file stops the process, naming the setting."""
    try:
        load_org_file(services.facts, Path(str(path)))
    except (OSError, ValueError, OperationError) as err:
        raise ConfigError(f"ORG_FACTS_FILE: cannot load {path}: {err}") from err
    except StoreUnavailable as err:  # start anyway; /readyz reports Redis
        structlog.get_logger(__name__).error("org_facts.not_loaded", error=str(err))
