"""Settings of pass 2 of extraction and entity matching (docs/entities.md), mixed into Settings."""

from __future__ import annotations

from pydantic import BaseModel, Field


class EntitySettings(BaseModel):
    """ENTITY_* settings; each is documented in .env.example and README."""

    # Pass 2 (the entities in the facts) runs after each fact extraction that changed facts.
    # false: no entities are read or matched (memory is picked by category alone).
    ENTITIES_ENABLED: bool = True
    # The model of pass 2; defaults to EXTRACTION_MODEL (then OPENAI_MODEL).
    ENTITY_MODEL: str | None = None
    # A new entity this close in spelling to a known one of its type is that one (an alias).
    ENTITY_MERGE_SIMILARITY: float = Field(default=0.9, ge=0.5, le=1)
    # A message's words this close to a known name match it (level 3, fuzzy; 0.85: "Rexy"
    # and "Rex", "Lisbn" and "Lisbon" match, "Mario" and "Maria" (0.8) do not).
    ENTITY_FUZZY_THRESHOLD: float = Field(default=0.85, ge=0.5, le=1)
    # Entities the model is less sure of than this are not kept.
    ENTITY_MIN_CONFIDENCE: float = Field(default=0.6, ge=0, le=1)
    # At most this many entities per user (the most mentioned kept): bounds bytes and matching time.
    ENTITY_MAX_PER_USER: int = Field(default=200, ge=1, le=5000)
    # Facts of entities one RELATED hop from a matched one are picked if the edge weighs this
    # much (one shared fact: 0.75).
    ENTITY_RELATED_WEIGHT: float = Field(default=0.75, ge=0, le=1)
    # With TASK_EXTRACTION=on, the task model checks the matches: a one-word name found as
    # written that it did not name is dropped ("kinako powder": the food, not the dog).
    # false: the task model only adds the entities matching missed.
    ENTITY_TASK_CHECK: bool = True

    @property
    def entity_model(self) -> str:
        """Return the model of pass 2 (entities): ENTITY_MODEL, else the extraction model."""
        return self.ENTITY_MODEL or self.extraction_model  # type: ignore[attr-defined]
