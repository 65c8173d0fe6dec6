"""Edges where messages come in and replies go out; one subpackage per channel."""
