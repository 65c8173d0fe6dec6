"""Memory (docs/memory.md): fact rules, extraction, and selection into the prompt."""
