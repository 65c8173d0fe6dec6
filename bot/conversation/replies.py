"""What the bot says when the model does not: apologies, refusals and command confirmations."""

FALLBACK_REPLY = "Sorry, I can't answer right now. Please try again in a minute."
NON_TEXT_REPLY = "Thanks! I can only read text messages for now. Could you type your question?"
EMPTY_MESSAGE_REPLY = "I received an empty message. What would you like to ask?"
RESET_REPLY = (
    "Done: I've cleared our conversation and we're starting fresh. "
    "Facts you asked me to remember are kept; say \"delete my data\" to erase everything."
)
OPERATOR_RESET_REPLY = "Reset done for {target}."
OPT_OUT_REPLY = (
    "Okay: from now on I won't learn new facts about you. What I already know stays until you "
    "say \"delete my data\"; say \"remember me again\" to turn memory back on."
)
OPT_IN_REPLY = "Okay: I'll remember useful facts about you again. Say \"stop remembering me\" to turn it off."
ERASE_CONFIRM_REPLY = (
    "This will permanently erase everything I have stored about you: our conversation and "
    "every fact I remember. Reply YES within {minutes} minutes to confirm; anything else cancels."
)
ERASED_REPLY = "Done: everything I had stored about you has been erased."
RATE_LIMITED_REPLY = (
    "You're sending messages faster than I can answer. I'll read new ones again in a minute."
)
BUSY_REPLY = "I'm getting a lot of messages right now. Please send yours again in a minute."
COMMAND_UNAVAILABLE_REPLY = (
    "Sorry, I couldn't do that right now: my memory is unreachable for a moment, so nothing was "
    "changed. Please send the same message again in a few minutes."
)

MEDIA_FAILED_REPLY = (
    "Sorry, I couldn't download your attachment. Could you send it again, or type your question?"
)
PHOTO_TOO_LARGE_REPLY = "That photo is too large for me. Could you send a smaller one, or describe it in words?"
PHOTO_UNREADABLE_REPLY = "Sorry, I couldn't open that image. Could you send it as a photo (JPEG or PNG)?"
VOICE_TOO_LONG_REPLY = (
    "Your voice message is longer than I can listen to ({limit} at most). Could you send a shorter "
    "one, or type your question?"
)
VOICE_FAILED_REPLY = "I couldn't make out your voice message — could you type it, or send it again?"
#: For an attachment the bot cannot read while it reads voice notes or photos (a video, a PDF).
UNSUPPORTED_MEDIA_REPLY = (
    "Thanks! I can read text, {what}, but not this kind of attachment yet. Could you type your question?"
)


def unsupported_media_reply(voice: bool, vision: bool) -> str:
    """Return the polite reply to an attachment the bot cannot read, naming what it can."""
    if not (voice or vision):
        return NON_TEXT_REPLY  # text only, as before voice notes and photos
    what = "voice messages and photos" if voice and vision else "voice messages" if voice else "photos"
    return UNSUPPORTED_MEDIA_REPLY.format(what=what)

#: Placeholder stored for media when MEDIA_PLACEHOLDERS is on, by MIME type family.
MEDIA_PLACEHOLDERS = {
    "image": "[Image received]",
    "audio": "[Voice message received]",
    "video": "[Video received]",
    "application": "[Document received]",
}


def media_placeholder(media_types: tuple[str, ...]) -> str:
    """Return the placeholder text that stands for attachments (a shared location is never
    one: it is read as a line of text, bot/media/location.py)."""
    return " ".join(MEDIA_PLACEHOLDERS.get(t.split("/", 1)[0], "[Attachment received]") for t in media_types)

#: /task:off and /task:on (task extraction for this user).
TASK_OFF_REPLY = "OK: I'll answer your messages directly, with the whole conversation. Send /task:on to switch back."
TASK_ON_REPLY = "OK: I'll work out exactly what you're asking before I answer. Send /task:off to switch back."
