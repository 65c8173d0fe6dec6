"""A user's reminders (docs/reminders.md): their time zone (zones.py), the reminders the
model sets, lists and cancels for them (book.py, tools.py), and sending one when it is due
(delivery.py)."""
