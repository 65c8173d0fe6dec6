"""Background jobs handed to RQ: what each job is called, queued as and identified by."""
