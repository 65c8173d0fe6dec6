"""Attachments as the conversation handles them: a voice note's length, a photo made ready
for the model, a shared location as a line of text. Pure functions; no network, no Redis."""
