"""RQ job functions: thin wrappers that build collaborators and call one domain function."""
