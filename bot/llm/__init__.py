"""The model: the client (SDK errors become ours), token counting and prompt files."""
