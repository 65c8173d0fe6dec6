"""The steps of the message path, one module each, named as the step is named; their order
is bot/conversation/pipeline.py's ORDER."""
