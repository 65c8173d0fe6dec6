"""What can be done to one user's data, by the user's own commands or by operators."""
