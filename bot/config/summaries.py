"""Settings of rolling summaries and the pairs waiting for them (docs/conversation.md), mixed
into Settings."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class SummarySettings(BaseModel):
    """Summary and pending-pair settings; each is documented in .env.example and
    docs/configuration.md."""

    # The summary's own cap, so system prompt + summary + recent pairs fit MAX_PROMPT_TOKENS.
    SUMMARY_MAX_TOKENS: int = Field(default=200, ge=50, le=1000)
    # The most conversation one summary call reads; a longer backlog is done in several runs.
    SUMMARY_INPUT_TOKENS: int = Field(default=3000, ge=500)
    # Seconds between retries of a failed summary job (needs the worker's scheduler).
    SUMMARY_RETRY_INTERVALS: str = "10,30,60"
    # When the user has been quiet this long, the pairs that left the recent window are folded
    # into the summary, so a user at rest holds only the summary and the recent window
    # (0: off). Below the 15-minute lease of a job trigger.
    SUMMARY_IDLE_S: int = Field(default=300, ge=0, le=600)
    # Pending pairs outside the recent window (not yet summarized): past this many bytes the
    # summary is due early and a fact extraction waiting for the user's pause runs now, so a
    # burst is read and folded while it comes instead of piling up.
    PENDING_HURRY_BYTES: int = Field(default=1500, ge=200)
    # The last resort against a runaway client or workers down for hours: past this, the
    # oldest pending pairs are dropped unsummarized (logged, and counted in
    # bot_pending_pairs_dropped_total). A burst of 20 long exchanges (the rate limit's minute)
    # stays well under it; a user at rest holds none (docs/conversation.md).
    PENDING_MAX_BYTES: int = Field(default=32000, ge=1000)

    @model_validator(mode="after")
    def _hurry_before_dropping(self) -> "SummarySettings":
        if self.PENDING_HURRY_BYTES >= self.PENDING_MAX_BYTES:
            raise ValueError("PENDING_HURRY_BYTES must be below PENDING_MAX_BYTES: the work is hurried before pairs drop")
        return self
