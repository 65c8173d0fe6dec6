"""The conversation: one inbound message in, one reply out, through the steps of pipeline.py."""
