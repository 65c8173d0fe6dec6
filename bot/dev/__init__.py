"""Developer tooling, never run in production: the stand-in model, make run, embedded Redis, eval."""
