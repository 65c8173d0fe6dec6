"""Memory (design notes 2 and 5): fact rules, extraction, and selection into the prompt."""
